package log

import (
	"runtime"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/invariants"
	"github.com/partlog/partlog/segment"
)

// segments is an immutable snapshot of the partition's segment list,
// published through Partition.segs (an atomic.Pointer). See the package
// documentation, "Lock-free reads", for why readers may use it without a
// lock.
//
// The partition holds one reference on the current snapshot; a reader
// holds one only while it picks a segment and takes a reference on that
// segment. The segments' references are not per snapshot: the snapshots
// form a chain in publication order (one snapLink each), and a segment
// carries one reference for the whole chain, taken when it enters a
// snapshot and dropped when the last snapshot that holds it finalizes. A
// publication therefore costs references on what it adds and removes,
// not on every segment (see snapLink).
type segments struct {
	// refs counts the partition's reference (while this is the current
	// snapshot) plus readers in flight. Once it reaches zero it never
	// rises again: tryRef refuses.
	refs atomic.Int32
	// list holds the segments in ascending base offset order; never empty.
	// The last one is the active segment. Immutable.
	list []*segment.Segment
	// link is this snapshot's place in the chain. The chain refers to
	// links only, never to snapshots, so a released snapshot's list is
	// garbage even while an older snapshot is still held.
	link *snapLink
}

// snapLink is one snapshot's link in the chain of published snapshots.
// Links finalize strictly in publication order: a link finalizes once its
// snapshot is released (refs reached zero) and its predecessor finalized.
// Finalizing drops the chain's reference on every segment of the snapshot
// that its successor does not hold (drop), then counts as the
// predecessor's finalization of the successor.
//
// Why that is enough: a segment in snapshots S_j..S_k (and not in S_k+1)
// takes its chain reference when S_j is published and loses it when S_k
// finalizes, which is after S_j..S_k-1 finalized: while any snapshot that
// holds the segment can still be used, the segment stays open. And a
// segment dropped at S_k is released as soon as S_0..S_k are, whatever
// newer snapshots readers hold.
type snapLink struct {
	// pending counts what must happen before the link finalizes: its
	// snapshot's release, and its predecessor's finalization (none for
	// the first snapshot of a partition).
	pending atomic.Int32
	// next and drop are set under Partition.mu when the successor is
	// published (or, for the last snapshot, by Close: next nil, drop the
	// whole list), before the partition's reference on the snapshot is
	// dropped, so before the link can finalize: the atomics that lead to
	// finalization order these writes before its reads.
	next *snapLink
	// drop holds the segments of this snapshot that next's snapshot does
	// not hold: their chain reference goes when this link finalizes. A
	// copy, so that the chain keeps no snapshot's list alive.
	drop []*segment.Segment
}

// newSegments builds the first snapshot of a partition over list, taking
// the chain's reference on every segment. The partition owns the returned
// snapshot's first reference.
func newSegments(list []*segment.Segment) *segments {
	s := &segments{list: list, link: &snapLink{}}
	s.refs.Store(1)
	s.link.pending.Store(1) // no predecessor
	for _, seg := range list {
		seg.Ref()
	}
	return s
}

// splice builds the successor of s: s's list with list[lo:hi] replaced by
// mid. It takes the chain's reference on each segment of mid and records
// list[lo:hi] as what s's link drops when it finalizes; references cost
// O(len(mid) + hi - lo), the new list is one copy. The caller publishes
// the result, then drops the partition's reference on s. REQUIRES:
// Partition.mu held, s the current snapshot, 0 <= lo <= hi <= len(s.list),
// no segment of mid in s.list outside [lo, hi), the result non-empty and
// in ascending base offset order.
func (s *segments) splice(lo, hi int, mid []*segment.Segment) *segments {
	list := make([]*segment.Segment, 0, len(s.list)-(hi-lo)+len(mid))
	list = append(append(append(list, s.list[:lo]...), mid...), s.list[hi:]...)
	if invariants.Enabled {
		checkSplice(s.list, list, lo, hi, mid)
	}
	for _, seg := range mid {
		seg.Ref()
	}
	n := &segments{list: list, link: &snapLink{}}
	n.refs.Store(1)
	n.link.pending.Store(2) // its own release, s's finalization
	if hi > lo {
		s.link.drop = slices.Clone(s.list[lo:hi])
	}
	s.link.next = n.link
	return n
}

// checkSplice panics unless the new list ascends by base offset (so holds
// no segment twice) and no segment of mid was in the old list: then mid is
// exactly what the new list adds and old[lo:hi] exactly what it removes. A
// segment counted as added while already held would leak a reference; one
// counted as removed while still held would lose one. Invariants builds
// only: O(n).
func checkSplice(old, list []*segment.Segment, lo, hi int, mid []*segment.Segment) {
	if len(list) == 0 {
		panic(base.AssertionFailedf("partlog/log: splice [%d, %d) of %d segments leaves none", lo, hi, len(old)))
	}
	in := make(map[*segment.Segment]bool, len(old))
	for _, seg := range old {
		in[seg] = true
	}
	for _, seg := range mid {
		if in[seg] {
			panic(base.AssertionFailedf("partlog/log: splice adds segment %d, already in the list", seg.BaseOffset()))
		}
	}
	for i := 1; i < len(list); i++ {
		if list[i].BaseOffset() <= list[i-1].BaseOffset() {
			panic(base.AssertionFailedf("partlog/log: splice leaves segment %d after %d", list[i].BaseOffset(), list[i-1].BaseOffset()))
		}
	}
}

// retire ends the chain at s, the last snapshot, at Close: with no
// successor, every segment of s loses its chain reference when s's link
// finalizes. REQUIRES: Partition.mu held, s the current snapshot.
func (s *segments) retire() { s.link.drop = s.list }

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

// unref drops a reference; the last one releases the snapshot, which
// finalizes its link and every following link that waited only for it (see
// snapLink), and returns the first error of the segment releases.
func (s *segments) unref() error {
	if s.refs.Add(-1) != 0 {
		return nil
	}
	return s.link.release()
}

// release counts one of l's pending events and finalizes the links whose
// count reaches zero, walking the chain iteratively: releasing the oldest
// of many snapshots readers held finalizes them all in one loop. It
// returns the first error of the segment releases and goes on after one.
func (l *snapLink) release() error {
	var first error
	for ; l != nil && l.pending.Add(-1) == 0; l = l.next {
		for _, seg := range l.drop {
			if err := seg.Unref(); err != nil && first == nil {
				first = err
			}
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
// position, and the first unstable offset that goes with that high
// watermark, behind a sequence lock so that a reader sees an offset
// together with the position that belongs to it, and a last stable
// offset computed from one publication's high watermark and unstable
// offset. One writer (under Partition.mu); any number of lock-free readers. Every field is an atomic, so the race
// detector sees no data race, and sequentially consistent atomics make the
// classic seqlock argument hold: a reader that sees the same even sequence
// number before and after its loads read values from one publication.
type bounds struct {
	seq                     atomic.Uint64
	hwOff, hwBase, hwPos    atomic.Int64
	endOff, endBase, endPos atomic.Int64
	// unstable is the first offset of the oldest transaction that is open
	// or whose marker the high watermark has not passed, plus one; 0 when
	// there is none (txn.go).
	unstable atomic.Int64
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

// storeQuiet publishes hw, end and unstable (see the field) and returns
// the waiters to wake, which the caller passes to signal, possibly after
// releasing Partition.mu (no wake-up is lost: see signal). REQUIRES:
// Partition.mu held (single writer).
func (b *bounds) storeQuiet(hw, end position, unstable int64) wake {
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
	b.unstable.Store(unstable)
	b.seq.Add(1) // even: done
	return w
}

// storeUnstable publishes unstable with the bounds already published.
// REQUIRES: Partition.mu held (single writer).
func (b *bounds) storeUnstable(unstable int64) {
	b.seq.Add(1)
	b.unstable.Store(unstable)
	b.seq.Add(1)
}

// signal wakes the waiters w names. Any goroutine, with or without
// Partition.mu: the bounds are stored before signal runs, and a waiter
// takes its channel before it loads the bounds (bounds.wait), all with
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

// loadStable returns the high watermark offset and the unstable value of
// one publication.
func (b *bounds) loadStable() (hw, unstable int64) {
	for spins := 0; ; spins++ {
		s := b.seq.Load()
		if s&1 == 0 {
			hw, unstable = b.hwOff.Load(), b.unstable.Load()
			if b.seq.Load() == s {
				return hw, unstable
			}
		}
		if spins > 4 {
			runtime.Gosched()
		}
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
