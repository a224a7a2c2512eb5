package log

import (
	"runtime"
	"sort"
	"sync/atomic"

	"github.com/partlog/partlog/internal/segment"
)

// segments is an immutable snapshot of the partition's segment list,
// published through Partition.segs (an atomic.Pointer). See the package
// documentation, "Lock-free reads", for why readers may use it without a
// lock.
//
// A snapshot holds one reference on every segment in it, taken when it is
// built and dropped when its own count reaches zero. The partition holds
// one reference on the current snapshot; a reader holds one only while it
// picks a segment and takes a reference on that segment.
type segments struct {
	// refs counts the partition's reference (while this is the current
	// snapshot) plus readers in flight. Once it reaches zero it never
	// rises again: tryRef refuses.
	refs atomic.Int32
	// list holds the segments in ascending base offset order; never empty.
	// The last one is the active segment. Immutable.
	list []*segment.Segment
}

// newSegments builds a snapshot over list, taking a reference on every
// segment. The partition owns the returned snapshot's first reference.
func newSegments(list []*segment.Segment) *segments {
	s := &segments{list: list}
	s.refs.Store(1)
	for _, seg := range list {
		seg.Ref()
	}
	return s
}

// tryRef takes a reference unless the snapshot is already released.
func (s *segments) tryRef() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquireSnapshot returns the current segment list with a reference the
// caller must drop with releaseSnapshot. It is the one way to take a
// snapshot without holding mu (under mu, p.segs.Load() is enough: the
// partition's own reference keeps the current snapshot alive). A snapshot
// whose count reached zero was replaced before it was released (a writer
// swaps the new one in, then drops its reference on the old one), so a
// failed tryRef means a newer snapshot is already published: load again.
// Every retry follows a publication, so it ends (lock-free). It fails only
// with ErrClosed, once Close released the last snapshot.
func (p *Partition) acquireSnapshot() (*segments, error) {
	for {
		snap := p.segs.Load()
		if hook := testHookSnapshotLoaded.Load(); hook != nil {
			(*hook)()
		}
		if snap.tryRef() {
			return snap, nil
		}
		if p.closed.Load() {
			return nil, ErrClosed
		}
	}
}

// testHookSnapshotLoaded, when set (by tests), runs in acquireSnapshot
// between loading the snapshot pointer and taking the reference: the
// window in which a roll may release the snapshot.
var testHookSnapshotLoaded atomic.Pointer[func()]

// releaseSnapshot drops a reference acquireSnapshot took. The last one (the
// partition replaced the snapshot meanwhile) releases the segments the
// snapshot held; a failure there is logged, not the caller's failure.
func (p *Partition) releaseSnapshot(snap *segments) {
	if err := snap.unref(); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
}

// unref drops a reference; the last one releases the snapshot's references
// on its segments and returns the first error of those releases.
func (s *segments) unref() error {
	if s.refs.Add(-1) != 0 {
		return nil
	}
	var first error
	for _, seg := range s.list {
		if err := seg.Unref(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// find returns the index of the segment that would hold offset: the last
// one whose base is <= offset, or -1 when offset is below the first base.
func (s *segments) find(offset int64) int {
	i := sort.Search(len(s.list), func(i int) bool { return s.list[i].BaseOffset() > offset })
	return i - 1
}

// active returns the last segment.
func (s *segments) active() *segment.Segment { return s.list[len(s.list)-1] }

// position locates an offset in the log: the segment that holds it (by base
// offset) and the byte position in that segment where the batch holding it
// starts (or the segment's end, for the log end offset). Every batch whose
// last offset is below Offset lies in a segment with a smaller base, or in
// segment SegBase at positions below Pos; no byte of a batch at or past
// Offset does.
type position struct {
	Offset  int64
	SegBase int64
	Pos     int64
}

// bounds is the published pair (high watermark, log end), each with its
// position, behind a sequence lock so that a reader sees an offset together
// with the position that belongs to it. One writer (under Partition.mu);
// any number of lock-free readers. Every field is an atomic, so the race
// detector sees no data race, and sequentially consistent atomics make the
// classic seqlock argument hold: a reader that sees the same even sequence
// number before and after its loads read values from one publication.
type bounds struct {
	seq                     atomic.Uint64
	hwOff, hwBase, hwPos    atomic.Int64
	endOff, endBase, endPos atomic.Int64
	// hwChanged wakes Wait (wait.go) when a store moves the high
	// watermark or lowers the log end (a waiter's offset may then be past
	// it); endChanged wakes WaitFollower when a store moves the log end.
	// An append that moves only the log end (DisableAutoHighWatermark, or
	// an acks=all append before the group sync) leaves the high
	// watermark's waiters parked.
	hwChanged, endChanged notifier
}

// wake says which notifiers a store must signal.
type wake uint8

const (
	wakeHW  wake = 1 << iota // the high watermark moved, or the log end went down
	wakeEnd                  // the log end moved
)

// store publishes hw and end and wakes the waiters concerned.
// REQUIRES: Partition.mu held (single writer).
func (b *bounds) store(hw, end position) { b.signal(b.storeQuiet(hw, end)) }

// storeQuiet publishes hw and end and returns the waiters to wake, which
// the caller passes to signal, possibly after releasing Partition.mu (no
// wake-up is lost: see signal). REQUIRES: Partition.mu held (single
// writer).
func (b *bounds) storeQuiet(hw, end position) wake {
	var w wake
	oldHW, oldEnd := b.hwOff.Load(), b.endOff.Load() // the single writer's own values
	if hw.Offset != oldHW || end.Offset < oldEnd {
		w |= wakeHW
	}
	if end.Offset != oldEnd {
		w |= wakeEnd
	}
	b.seq.Add(1) // odd: a write is in progress
	b.hwOff.Store(hw.Offset)
	b.hwBase.Store(hw.SegBase)
	b.hwPos.Store(hw.Pos)
	b.endOff.Store(end.Offset)
	b.endBase.Store(end.SegBase)
	b.endPos.Store(end.Pos)
	b.seq.Add(1) // even: done
	return w
}

// signal wakes the waiters w names. Any goroutine, with or without
// Partition.mu: the bounds are stored before signal runs, and a waiter
// takes its channel before it loads the bounds (Partition.wait), all with
// sequentially consistent atomics. So a waiter either took the channel
// this signal closes, or took a newer one after this signal's swap and
// then loads bounds that include the store: none sleeps through a change
// of its bound. A signal delayed past later stores only wakes waiters
// that recheck and park again.
func (b *bounds) signal(w wake) {
	if w&wakeHW != 0 {
		b.hwChanged.signal()
	}
	if w&wakeEnd != 0 {
		b.endChanged.signal()
	}
}

// load returns a consistent (hw, end) pair.
func (b *bounds) load() (hw, end position) {
	for spins := 0; ; spins++ {
		s := b.seq.Load()
		if s&1 == 0 {
			hw = position{b.hwOff.Load(), b.hwBase.Load(), b.hwPos.Load()}
			end = position{b.endOff.Load(), b.endBase.Load(), b.endPos.Load()}
			if b.seq.Load() == s {
				return hw, end
			}
		}
		if spins > 4 {
			runtime.Gosched()
		}
	}
}
