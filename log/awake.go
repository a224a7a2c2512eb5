package log

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/segment"
)

// Active segments under a Dir's segment budget (DirConfig.MaxOpenSegments).
// A partition's active segment opens idle: in the sealed form, closable
// by the budget like any sealed segment (segment.UnsealOnWrite). Once
// written (or created) it holds its three files open for writing, outside
// what the budget may close. So that a Dir written over more partitions
// than the budget holds keeps its descriptors and mappings within it, such
// a partition joins the Dir's awake set, which counts it against the
// budget (segment.Budget.AddActive: the budget closes unused sealed
// segments to make room), and when more partitions are awake than the
// budget holds, the set returns the coldest to rest: its active segment
// goes back to the sealed form (segment.Segment.Rest), which the budget
// may then close; its next append reopens it. Coldest is a CLOCK
// approximation of least recently written: every write marks the
// partition, the sweep clears a mark before it rests a partition.
//
// Resting writes nothing that must be durable and syncs nothing: what the
// partition wrote and did not flush stays unflushed, and its next flush
// (Sync, the flush policy, Close) reopens the segment and syncs it, as
// it syncs any segment written since the last flush.

// awakeSet is a Dir's CLOCK of its partitions whose active segment holds
// its files open for writing. Lock order: a partition's mu, then mu; the
// sweep only tries a partition's flushMu and mu (awakeCore.tryRest).
type awakeSet struct {
	budget *segment.Budget
	// maxAwake is the budget's Max: how many may be awake.
	maxAwake int

	mu sync.Mutex
	// ring holds the awake partitions' states; each knows its slot
	// (awakeState.slot). hand is the CLOCK hand. Guarded by mu.
	ring []*awakeState
	hand int
}

// newAwakeSet returns the awake set of a Dir with segment budget b.
func newAwakeSet(b *segment.Budget) *awakeSet {
	return &awakeSet{budget: b, maxAwake: b.Stats().Max}
}

// awakeCore is the partition core as the awake set sees it. *Partition
// implements it.
type awakeCore interface {
	// tryRest returns the partition's active segment to rest unless the
	// partition is busy, and reports whether it left the set (rested, or
	// closed or failed). It only tries the partition's locks: the sweep
	// calls it holding the set's mu and the writing partition's mu.
	tryRest() bool
}

// awakeState is a partition's part in its Dir's awake set
// (Partition.awake).
type awakeState struct {
	// set is the Dir's awake set, nil for a partition alone or a Dir
	// without a segment budget; core is the partition. Set by init, never
	// changed.
	set  *awakeSet
	core awakeCore
	// slot is the partition's index in set.ring, -1 when not there.
	// Guarded by set.mu.
	slot int
	// referenced is set by every write, cleared by the sweep.
	referenced atomic.Bool
	// left is set when the partition left the set for good (Close): it
	// never joins again. Guarded by the core's mu.
	left bool
}

// init sets the state up for a partition of set (nil: none).
func (a *awakeState) init(set *awakeSet, core awakeCore) {
	a.set, a.core, a.slot = set, core, -1
}

// noteWrittenLocked marks the partition written and, when its active
// segment active holds its files open for writing, makes sure it is in
// its Dir's awake set (which may return other partitions to rest).
// REQUIRES: the core's mu held.
func (a *awakeState) noteWrittenLocked(active *segment.Segment) {
	set := a.set
	if set == nil || a.left {
		return
	}
	if !a.referenced.Load() {
		a.referenced.Store(true)
	}
	if active.Sealed() {
		return // at rest (queued writes wake it, and note it again)
	}
	set.add(a)
}

// noteActiveLocked puts the partition in its Dir's awake set when a call
// that is not a write left its active segment holding its files open for
// writing: a truncation unseals the segment it cuts, or creates one, and
// a rested partition would otherwise hold them outside the budget until
// its next append. REQUIRES: mu held.
func (p *Partition) noteActiveLocked() {
	if p.mu.closed || p.mu.failed != nil {
		return
	}
	if active := p.segs.Load().active(); !active.Sealed() {
		p.awake.noteWrittenLocked(active)
	}
}

// leaveLocked takes the closing partition out of its Dir's awake set for
// good. REQUIRES: the core's mu held.
func (a *awakeState) leaveLocked() {
	a.left = true
	if a.set != nil {
		a.set.remove(a)
	}
}

// add puts a in the ring, if not there, and rests the coldest other
// partitions while more are awake than the budget holds.
func (s *awakeSet) add(a *awakeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.slot >= 0 {
		return
	}
	a.slot = len(s.ring)
	s.ring = append(s.ring, a)
	s.budget.AddActive(1)
	for steps := 2 * len(s.ring); len(s.ring) > s.maxAwake && steps > 0; steps-- {
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
		v := s.ring[s.hand]
		if v == a || v.referenced.Swap(false) {
			s.hand++
			continue
		}
		if v.core.tryRest() {
			s.removeLocked(v) // the last partition moved to the hand
			continue
		}
		s.hand++
	}
}

// remove takes a out of the ring (if there).
func (s *awakeSet) remove(a *awakeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(a)
}

// removeLocked takes a out of the ring, moving the last partition into
// its slot. REQUIRES: mu held.
func (s *awakeSet) removeLocked(a *awakeState) {
	i := a.slot
	if i < 0 {
		return
	}
	last := len(s.ring) - 1
	s.ring[i] = s.ring[last]
	s.ring[i].slot = i
	s.ring[last] = nil
	s.ring = s.ring[:last]
	a.slot = -1
	if s.hand >= len(s.ring) {
		s.hand = 0
	}
	s.budget.AddActive(-1)
}

// tryRest returns the partition's active segment to rest unless the
// partition is busy (awakeCore) (its flushMu or mu taken, a truncation waiting,
// batches queued for the group syncer; write-behind batches it writes
// first), and reports whether it left the
// awake set: rested, or closed or failed (nothing to rest; Close releases
// the files). It closes the group syncer's handle on the .log as well. A
// failed rest fails the partition (an I/O error on its files, as a failed
// roll). Called by the sweep holding the set's mu (and the writing
// partition's mu): it only tries the locks.
func (p *Partition) tryRest() bool {
	if !p.flushMu.TryLock() {
		return false
	}
	defer p.flushMu.Unlock()
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	if p.mu.closed || p.mu.failed != nil {
		return true
	}
	if p.wb.buffered.Load() {
		// Write-behind batches may wait for their timer: write them now
		// rather than keep the segment awake past the budget (without
		// noting the partition written: the sweep holds the set).
		p.writeQueueLocked()
		if p.mu.failed != nil {
			return true
		}
	}
	if p.mu.truncating != nil || p.dur.queue.n > 0 {
		return false
	}
	active := p.segs.Load().active()
	if err := active.Rest(); err != nil {
		_ = p.failLocked(fmt.Errorf("partlog/log: rest segment %d of %s: %w", active.BaseOffset(), p.dir, err))
		return true
	}
	p.dur.closeSyncFile()
	// The spare made for the next roll holds three descriptors and
	// mappings outside the budget; a partition at rest holds only its
	// active segment's (the next roll creates its segment, or a spare
	// once the partition writes again).
	p.dur.spare.discardLocked() // spare.go
	return true
}
