package log

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/partlog/partlog/segment"
)

// The spare segment: creating a segment's files (.log, .index, .timeindex:
// create, preallocate, write the index's first page, map) took 0.3-1.5 ms,
// and 2-15 ms while the background flush of the previous roll was
// fsyncing (ext4 file creation waits for the journal), all under the
// partition lock, stalling every append. So once the active segment is
// half full, a goroutine creates the next segment ahead under temporary
// names (segment.CreateSpare, *.spare.deleted; it also reserves the
// .log's first blocks, so that the appends into it write into allocated
// blocks), and the roll makes it the
// active segment at its base offset in memory (segment.BeginAdoptAs): no
// filesystem operation under the lock. The renames to the base's names
// (one remove of a stale .txnindex and three renames, ~30 us each) run
// after the lock is released (settleAdoptions): first thing in the roll's
// background flush and in the goroutine making the next spare (whose
// files take the same names), and before anything syncs the directory,
// so that no sync, checkpoint or recovery point covers the new segment
// while its files carry names a start-up removes (see syncDirSettled). Only a partition that appends
// gets a spare: the roll starts the next one (a partition that rolls is
// appending), and so does an append past half of a segment no roll
// started. A spare no append used for spareIdleAfter is removed, so a
// partition at rest holds only its active segment's descriptors and
// mappings; Close removes it too.
// A crash leaves the spare's files under names every start-up removes
// (docs/crash-safety.md, "Rolls").

// spareState says where the active segment's spare is.
type spareState uint8

const (
	// spareNone: none yet; an append past the threshold starts one.
	spareNone spareState = iota
	// sparePreparing: a goroutine is creating it.
	sparePreparing
	// spareReady: mu.nextSeg.seg holds it.
	spareReady
	// spareSkipped: making it failed (or the partition's configuration
	// leaves it to the test); the next roll creates its segment itself
	// and resets the state.
	spareSkipped
)

// spareIdleAfter is how long a spare waits without an append before it is
// removed (the partition is at rest; the next roll creates its segment
// itself and starts a new spare).
const spareIdleAfter = 10 * time.Second

// nextSegment is the spare's part of the partition state (in mu).
type nextSegment struct {
	state spareState
	// seg is the spare when state is spareReady, nil otherwise.
	seg *segment.Segment
	// idle checks every spareIdleAfter whether an append came since the
	// last check (writeSeq moved past idleSeq); nil without a spare and
	// under the manual mode of tests.
	idle    *time.Timer
	idleSeq uint64
}

// maybePrepareSpareLocked starts making the next segment's spare once the
// active segment is half full (a partition that has not rolled since it
// was opened; after a roll the roll starts it). REQUIRES: mu held.
func (p *Partition) maybePrepareSpareLocked(active *segment.Segment) {
	if p.mu.nextSeg.state == spareNone && active.Size() >= p.cfg.SegmentBytes/2 {
		p.startSpareLocked()
	}
}

// startSpareLocked starts the goroutine that makes the spare, unless one
// exists or is being made. REQUIRES: mu held.
func (p *Partition) startSpareLocked() {
	if p.mu.nextSeg.state != spareNone {
		return
	}
	if p.cfg.manualRollFlush {
		p.mu.nextSeg.state = spareSkipped // tests call PrepareSpare
		return
	}
	p.mu.nextSeg.state = sparePreparing
	p.rolled.wg.Add(1)
	go func() {
		defer p.rolled.wg.Done()
		p.prepareSpare()
	}()
}

// prepareSpare settles the adoption the last roll left (its files still
// carry the spare's names, which the new spare takes), creates the spare
// (without mu: the files are nobody else's) and hands it to the partition, or discards it when the
// partition closed, failed or has one meanwhile. A roll that comes while
// the files are being created waits for them (takeSpareLocked) rather
// than create its own beside them. A failure only costs the next roll the
// creation (logged). REQUIRES: mu not held.
func (p *Partition) prepareSpare() {
	p.spareFiles.Lock()
	if p.spareLive {
		// Another goroutine's spare (one a roll started before this
		// one's predecessor had installed its own): it is installed or
		// about to be.
		p.spareFiles.Unlock()
		return
	}
	// The segment the last roll adopted may still hold the spare's
	// names: rename it first (a failure leaves the names taken; the
	// syncs of that segment fail the partition).
	err := p.settleAdoptions()
	var seg *segment.Segment
	if err == nil {
		seg, err = segment.CreateSpare(p.cfg.FS, p.dir, p.segCfg)
	}
	if err == nil {
		p.spareMade, p.spareLive = seg, true
	}
	p.spareFiles.Unlock()
	// lockAppender, not lockWriter: installing the spare touches only
	// mu.nextSeg (and reads closed, failed, writeSeq), none of which the
	// group-write queue changes (the spare gets its base when a roll
	// adopts it, and the roll writes the queue), so writing the queue here
	// would only put a write of the .log beside the group syncer's
	// fdatasync. It waits for a TruncateTo as every other writer does.
	p.lockAppender() // groupwrite.go
	defer p.mu.Unlock()
	if err != nil {
		if p.mu.nextSeg.state == sparePreparing {
			p.mu.nextSeg.state = spareSkipped
		}
		p.logger.Warn("partlog/log: creating the next segment ahead failed; the roll creates it", "dir", p.dir, "err", err)
		return
	}
	p.spareFiles.Lock()
	seg, p.spareMade = p.spareMade, nil
	p.spareFiles.Unlock()
	if seg == nil {
		return // a roll took it
	}
	if p.mu.closed || p.mu.failed != nil || p.mu.nextSeg.seg != nil {
		p.discardSpare(seg)
		return
	}
	p.mu.nextSeg = nextSegment{state: spareReady, seg: seg, idleSeq: p.mu.writeSeq}
	if !p.cfg.manualRollFlush {
		p.mu.nextSeg.idle = time.AfterFunc(spareIdleAfter, p.spareIdleCheck)
	}
}

// spareIdleCheck removes the spare when no append came since the last
// check (the partition is at rest), and otherwise checks again after
// spareIdleAfter. The files are removed without mu.
func (p *Partition) spareIdleCheck() {
	p.mu.Lock()
	seg := p.mu.nextSeg.seg
	if seg == nil {
		p.mu.Unlock()
		return
	}
	if p.mu.writeSeq != p.mu.nextSeg.idleSeq {
		p.mu.nextSeg.idleSeq = p.mu.writeSeq
		if t := p.mu.nextSeg.idle; t != nil {
			t.Reset(spareIdleAfter)
		}
		p.mu.Unlock()
		return
	}
	p.stopSpareTimerLocked()
	// The next roll creates its segment and starts a new spare, whose
	// files (the same names) are created only after these are removed;
	// Close waits for the removal (mu.closed is not set: Close sets it
	// under mu before it waits for rolled.wg).
	p.mu.nextSeg = nextSegment{state: spareSkipped}
	p.rolled.wg.Add(1)
	defer p.rolled.wg.Done()
	p.spareFiles.Lock()
	p.mu.Unlock()
	p.discardSpareFiles(seg)
	p.spareFiles.Unlock()
}

// stopSpareTimerLocked stops the spare's idle check. REQUIRES: mu held.
func (p *Partition) stopSpareTimerLocked() {
	if t := p.mu.nextSeg.idle; t != nil {
		t.Stop()
		p.mu.nextSeg.idle = nil
	}
}

// takeSpareLocked returns the spare (nil when there is none), waiting
// for one being created, and resets the state for the next active
// segment (the roll starts its spare). REQUIRES: mu held.
func (p *Partition) takeSpareLocked() *segment.Segment {
	seg := p.mu.nextSeg.seg
	if seg == nil && p.mu.nextSeg.state == sparePreparing {
		p.spareFiles.Lock() // held while the files are created
		seg, p.spareMade = p.spareMade, nil
		p.spareFiles.Unlock()
	}
	p.stopSpareTimerLocked()
	p.mu.nextSeg = nextSegment{}
	return seg
}

// createNextLocked makes the segment a roll starts at newBase: the spare
// adopted in memory (BeginAdoptAs, its renames left to settleAdoptions)
// when there is one, else a new segment. The caller
// starts the next spare once the roll succeeded (startSpareLocked): a
// partition that rolls is appending, and the spare needs the time (its
// creation took 2-47 ms on a loaded machine, while the previous roll's
// flush fsyncs). REQUIRES: mu held.
func (p *Partition) createNextLocked(newBase int64) (*segment.Segment, error) {
	if spare := p.takeSpareLocked(); spare != nil {
		err := spare.BeginAdoptAs(newBase)
		if err == nil {
			p.adopting.add(spare)
			p.spareFiles.Lock()
			// No spare left: the next one settles the adoption before
			// it takes the names (prepareSpare).
			p.spareLive = false
			p.spareFiles.Unlock()
			return spare, nil
		}
		p.logger.Warn("partlog/log: adopting the spare segment failed; creating the segment", "dir", p.dir, "base", newBase, "err", err)
		p.discardSpare(spare)
	}
	return segment.Create(p.cfg.FS, p.dir, newBase, p.segCfg)
}

// discardSpareLocked removes the spare, if any (Close). REQUIRES: mu
// held.
func (p *Partition) discardSpareLocked() {
	p.stopSpareTimerLocked()
	if seg := p.mu.nextSeg.seg; seg != nil {
		p.mu.nextSeg.seg = nil
		p.discardSpare(seg)
	}
	if p.mu.nextSeg.state != sparePreparing {
		p.mu.nextSeg.state = spareNone
	}
}

// discardSpare closes a spare and removes its files, holding spareFiles so
// that a new spare's files (the same names) are not created meanwhile; a
// failure is logged (the next start-up removes what is left).
func (p *Partition) discardSpare(seg *segment.Segment) {
	p.spareFiles.Lock()
	defer p.spareFiles.Unlock()
	p.discardSpareFiles(seg)
}

// discardSpareFiles is discardSpare with spareFiles held.
func (p *Partition) discardSpareFiles(seg *segment.Segment) {
	p.spareLive = false // a new spare replaces what is left of the names
	if err := seg.Discard(); err != nil {
		p.logger.Warn("partlog/log: removing the spare segment failed", "dir", p.dir, "err", fmt.Errorf("%s: %w", seg.LogPath(), err))
	}
}

// adoptions are the segments rolls adopted (segment.BeginAdoptAs) whose
// renames may not have run yet. Its mutex is a leaf, never held across a
// filesystem operation: a roll adds under mu without waiting for a
// settlement in progress.
type adoptions struct {
	mu   sync.Mutex
	segs []*segment.Segment
}

// add records seg, just adopted.
func (a *adoptions) add(seg *segment.Segment) {
	a.mu.Lock()
	a.segs = append(a.segs, seg)
	a.mu.Unlock()
}

// settleAdoptions renames the files of every segment a roll adopted to
// their base's names (segment.SettleAdoption), oldest first, waiting for a
// settlement another goroutine runs, and returns the first error (the
// segment's data can then never be made durable: the caller's sync fails
// the partition). Without mu or with it: the renames run outside the
// roll's path, never under the roll itself.
func (p *Partition) settleAdoptions() error {
	p.adopting.mu.Lock()
	if len(p.adopting.segs) == 0 {
		p.adopting.mu.Unlock()
		return nil
	}
	segs := slices.Clone(p.adopting.segs)
	p.adopting.mu.Unlock()
	var first error
	for _, seg := range segs {
		if err := seg.SettleAdoption(); err != nil && first == nil {
			first = fmt.Errorf("partlog/log: %s: %w", p.dir, err)
		}
	}
	p.adopting.mu.Lock()
	p.adopting.segs = slices.DeleteFunc(p.adopting.segs, func(s *segment.Segment) bool { return !s.AdoptionPending() })
	p.adopting.mu.Unlock()
	return first
}

// syncDirSettled syncs the partition directory after settling every
// pending adoption, so that the renames of the segments rolls adopted are
// in every directory sync that clears mu.dirDirty: a roll sets dirDirty,
// and until a sync of the directory that followed the renames, nothing in
// the new segment is called durable (no synced sequence number, recovery
// point or checkpoint covers it).
func (p *Partition) syncDirSettled() error {
	if err := p.settleAdoptions(); err != nil {
		return err
	}
	return syncDir(p.cfg.FS, p.dir)
}
