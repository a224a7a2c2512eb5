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
// sweep only tries a partition's flushMu and mu.
type awakeSet struct {
	budget *segment.Budget
	// maxAwake is the budget's Max: how many may be awake.
	maxAwake int

	mu sync.Mutex
	// ring holds the awake partitions; each knows its slot
	// (awake.slot). hand is the CLOCK hand. Guarded by mu.
	ring []*Partition
	hand int
}

// newAwakeSet returns the awake set of a Dir with segment budget b.
func newAwakeSet(b *segment.Budget) *awakeSet {
	return &awakeSet{budget: b, maxAwake: b.Stats().Max}
}

// awakeState is a partition's part in its Dir's awake set.
type awakeState struct {
	// set is the Dir's awake set; nil for a partition alone or a Dir
	// without a segment budget.
	set *awakeSet
	// slot is the partition's index in set.ring, -1 when not there.
	// Guarded by set.mu.
	slot int
	// referenced is set by every write, cleared by the sweep.
	referenced atomic.Bool
}

// noteAwakeLocked marks the partition written and, when its active
// segment holds its files open for writing, makes sure it is in its
// Dir's awake set (which may return other partitions to rest).
// REQUIRES: mu held.
func (p *Partition) noteAwakeLocked() {
	set := p.awake.set
	if set == nil || p.mu.closed {
		return
	}
	if !p.awake.referenced.Load() {
		p.awake.referenced.Store(true)
	}
	if p.segs.Load().active().Sealed() {
		return // at rest (queued writes wake it, and note it again)
	}
	set.add(p)
}

// add puts p in the ring, if not there, and rests the coldest other
// partitions while more are awake than the budget holds.
func (a *awakeSet) add(p *Partition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.awake.slot >= 0 {
		return
	}
	p.awake.slot = len(a.ring)
	a.ring = append(a.ring, p)
	a.budget.AddActive(1)
	for steps := 2 * len(a.ring); len(a.ring) > a.maxAwake && steps > 0; steps-- {
		if a.hand >= len(a.ring) {
			a.hand = 0
		}
		v := a.ring[a.hand]
		if v == p || v.awake.referenced.Swap(false) {
			a.hand++
			continue
		}
		if v.tryRest() {
			a.removeLocked(v) // the last partition moved to the hand
			continue
		}
		a.hand++
	}
}

// remove takes p out of the ring (if there).
func (a *awakeSet) remove(p *Partition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.removeLocked(p)
}

// removeLocked takes p out of the ring, moving the last partition into
// its slot. REQUIRES: mu held.
func (a *awakeSet) removeLocked(p *Partition) {
	i := p.awake.slot
	if i < 0 {
		return
	}
	last := len(a.ring) - 1
	a.ring[i] = a.ring[last]
	a.ring[i].awake.slot = i
	a.ring[last] = nil
	a.ring = a.ring[:last]
	p.awake.slot = -1
	if a.hand >= len(a.ring) {
		a.hand = 0
	}
	a.budget.AddActive(-1)
}

// tryRest returns the partition's active segment to rest unless the
// partition is busy (its flushMu or mu taken, a truncation waiting,
// batches queued for the group syncer), and reports whether it left the
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
	if p.mu.truncating != nil || p.dur.queue.n > 0 {
		return false
	}
	active := p.segs.Load().active()
	if err := active.Rest(); err != nil {
		_ = p.failLocked(fmt.Errorf("partlog/log: rest segment %d of %s: %w", active.BaseOffset(), p.dir, err))
		return true
	}
	p.dur.closeSyncFile()
	return true
}

// leaveAwakeLocked takes the closing partition out of its Dir's awake
// set. REQUIRES: mu held, mu.closed set.
func (p *Partition) leaveAwakeLocked() {
	if p.awake.set != nil {
		p.awake.set.remove(p)
	}
}
