package log

import (
	"fmt"
	"time"

	"github.com/partlog/partlog/internal/segment"
)

// The spare segment: creating a segment's files (.log, .index, .timeindex:
// create, preallocate, write the index's first page, map) took 0.3-1.5 ms,
// and 2-15 ms while the background flush of the previous roll was
// fsyncing (ext4 file creation waits for the journal), all under the
// partition lock, stalling every append. So once the active segment is
// half full, a goroutine creates the next segment ahead under temporary
// names (segment.CreateSpare, *.spare.deleted), and the roll only renames
// it to its base offset (segment.AdoptAs). Only a partition that appends
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

// prepareSpare creates the spare (without mu: the files are nobody
// else's) and hands it to the partition, or discards it when the
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
	seg, err := segment.CreateSpare(p.cfg.FS, p.dir, p.segCfg)
	if err == nil {
		p.spareMade, p.spareLive = seg, true
	}
	p.spareFiles.Unlock()
	p.lockWriter()
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
// renamed (AdoptAs) when there is one, else a new segment. The caller
// starts the next spare once the roll succeeded (startSpareLocked): a
// partition that rolls is appending, and the spare needs the time (its
// creation took 2-47 ms on a loaded machine, while the previous roll's
// flush fsyncs). REQUIRES: mu held.
func (p *Partition) createNextLocked(newBase int64) (*segment.Segment, error) {
	if spare := p.takeSpareLocked(); spare != nil {
		err := spare.AdoptAs(newBase)
		if err == nil {
			p.spareFiles.Lock()
			p.spareLive = false // the names are free for the next one
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
