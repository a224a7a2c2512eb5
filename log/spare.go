package log

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/partlog/partlog/index/vfs"
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
// while its files carry names a start-up removes (see durability.syncDir). Only a partition that appends
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
	// spareReady: spareSegments.next.seg holds it.
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

// spareCore is the partition core as the spare sees it: the partition
// lock, taken by the goroutine that installs a spare and by the idle
// check's timer, and two facts read under it. *Partition implements it
// (flush.go).
type spareCore interface {
	// lockAppender takes mu as AppendBatch does: waiting while a
	// TruncateTo waits for read leases, leaving the group-write queue
	// (groupwrite.go).
	lockAppender()
	// lockReader takes mu without waiting and without writing the queue.
	lockReader()
	// unlock releases mu.
	unlock()
	// writesLocked returns the core's count of batch writes and whether
	// the partition takes a spare (neither closed nor failed, and its
	// active segment not at rest under a Dir's budget).
	// REQUIRES: mu held.
	writesLocked() (seq uint64, open bool)
}

// spareSegments is the spare part of the durability part: the next
// segment made ahead of the roll and the adoptions rolls left to settle.
type spareSegments struct {
	// core is the partition; the fields up to segmentBytes are set by
	// init and never change.
	core spareCore
	// bg is the partition's count of background goroutines
	// (durability.bg): the spare's maker and its removal join it, so that
	// Close waits for them.
	bg *sync.WaitGroup
	// fs, dir, segCfg and logger are the partition's.
	fs     vfs.FS
	dir    string
	segCfg segment.Config
	logger *slog.Logger
	// segmentBytes is Config.SegmentBytes: a spare is started once the
	// active segment holds half of it.
	segmentBytes int64
	// manual is Config.manualRollFlush: tests make the spare
	// (PrepareSpare) and run the idle check themselves.
	manual bool

	// files is held while a spare segment's files are created or removed;
	// taken after mu when both are held (a roll waiting for a spare being
	// created). made is the spare just created, until the goroutine that
	// made it (or a roll that waited for it) takes it; live is set while a
	// spare's files exist under the spare names (made, until adopted or
	// discarded), so that no second one is created over them. Both are
	// guarded by files.
	files sync.Mutex
	made  *segment.Segment
	live  bool
	// adopting lists the segments a roll adopted whose files still carry
	// the spare's names; its own mutex is a leaf.
	adopting adoptions
	// next is the active segment's spare. Guarded by the partition's mu.
	next nextSegment
}

// init sets the spare up for a partition being opened.
func (s *spareSegments) init(core spareCore, bg *sync.WaitGroup, dir string, cfg *Config, segCfg segment.Config) {
	s.core, s.bg = core, bg
	s.fs, s.dir, s.segCfg, s.logger = cfg.FS, dir, segCfg, cfg.Logger
	s.segmentBytes, s.manual = cfg.SegmentBytes, cfg.manualRollFlush
}

// nextSegment is the state of the active segment's spare.
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

// maybePrepareLocked starts making the next segment's spare once the
// active segment is half full (a partition that has not rolled since it
// was opened; after a roll the roll starts it). REQUIRES: mu held.
func (s *spareSegments) maybePrepareLocked(active *segment.Segment) {
	if s.next.state == spareNone && active.Size() >= s.segmentBytes/2 {
		s.startLocked()
	}
}

// startLocked starts the goroutine that makes the spare, unless one
// exists or is being made. REQUIRES: mu held.
func (s *spareSegments) startLocked() {
	if s.next.state != spareNone {
		return
	}
	if s.manual {
		s.next.state = spareSkipped // tests call PrepareSpare
		return
	}
	s.next.state = sparePreparing
	s.bg.Go(s.prepare)
}

// prepare settles the adoption the last roll left (its files still
// carry the spare's names, which the new spare takes), creates the spare
// (without mu: the files are nobody else's) and hands it to the partition, or discards it when the
// partition closed, failed or has one meanwhile. A roll that comes while
// the files are being created waits for them (takeLocked) rather
// than create its own beside them. A failure only costs the next roll the
// creation (logged). REQUIRES: mu not held.
func (s *spareSegments) prepare() {
	s.files.Lock()
	if s.live {
		// Another goroutine's spare (one a roll started before this
		// one's predecessor had installed its own): it is installed or
		// about to be.
		s.files.Unlock()
		return
	}
	// The segment the last roll adopted may still hold the spare's
	// names: rename it first (a failure leaves the names taken; the
	// syncs of that segment fail the partition).
	err := s.settleAdoptions()
	var seg *segment.Segment
	if err == nil {
		seg, err = segment.CreateSpare(s.fs, s.dir, s.segCfg)
	}
	if err == nil {
		s.made, s.live = seg, true
	}
	s.files.Unlock()
	// lockAppender, not lockWriter: installing the spare touches only
	// next (and reads closed, failed, writeSeq), none of which the
	// group-write queue changes (the spare gets its base when a roll
	// adopts it, and the roll writes the queue), so writing the queue here
	// would only put a write of the .log beside the group syncer's
	// fdatasync. It waits for a TruncateTo as every other writer does.
	s.core.lockAppender() // groupwrite.go
	defer s.core.unlock()
	if err != nil {
		if s.next.state == sparePreparing {
			s.next.state = spareSkipped
		}
		s.logger.Warn("partlog/log: creating the next segment ahead failed; the roll creates it", "dir", s.dir, "err", err)
		return
	}
	s.files.Lock()
	seg, s.made = s.made, nil
	s.files.Unlock()
	if seg == nil {
		return // a roll took it
	}
	seq, open := s.core.writesLocked()
	if !open || s.next.seg != nil {
		s.discard(seg)
		return
	}
	s.next = nextSegment{state: spareReady, seg: seg, idleSeq: seq}
	if !s.manual {
		s.next.idle = time.AfterFunc(spareIdleAfter, s.idleCheck)
	}
}

// idleCheck removes the spare when no append came since the last check
// (the partition is at rest), and otherwise checks again after
// spareIdleAfter. The files are removed without mu.
func (s *spareSegments) idleCheck() {
	s.core.lockReader()
	seg := s.next.seg
	if seg == nil {
		s.core.unlock()
		return
	}
	if seq, _ := s.core.writesLocked(); seq != s.next.idleSeq {
		s.next.idleSeq = seq
		if t := s.next.idle; t != nil {
			t.Reset(spareIdleAfter)
		}
		s.core.unlock()
		return
	}
	s.stopTimerLocked()
	// The next roll creates its segment and starts a new spare, whose
	// files (the same names) are created only after these are removed;
	// Close waits for the removal (mu.closed is not set: Close sets it
	// under mu before it waits for the background goroutines, bg).
	s.next = nextSegment{state: spareSkipped}
	s.bg.Add(1)
	defer s.bg.Done()
	s.files.Lock()
	s.core.unlock()
	s.discardFiles(seg)
	s.files.Unlock()
}

// stopTimerLocked stops the spare's idle check. REQUIRES: mu held.
func (s *spareSegments) stopTimerLocked() {
	if t := s.next.idle; t != nil {
		t.Stop()
		s.next.idle = nil
	}
}

// readyLocked reports whether the partition holds a spare.
// REQUIRES: mu held.
func (s *spareSegments) readyLocked() bool { return s.next.seg != nil }

// takeLocked returns the spare (nil when there is none), waiting for one
// being created, and resets the state for the next active segment (the
// roll starts its spare). REQUIRES: mu held.
func (s *spareSegments) takeLocked() *segment.Segment {
	seg := s.next.seg
	if seg == nil && s.next.state == sparePreparing {
		s.files.Lock() // held while the files are created
		seg, s.made = s.made, nil
		s.files.Unlock()
	}
	s.stopTimerLocked()
	s.next = nextSegment{}
	return seg
}

// createNextLocked makes the segment a roll starts at newBase: the spare
// adopted in memory (BeginAdoptAs, its renames left to settleAdoptions)
// when there is one, else a new segment. The caller
// starts the next spare once the roll succeeded (startLocked): a
// partition that rolls is appending, and the spare needs the time (its
// creation took 2-47 ms on a loaded machine, while the previous roll's
// flush fsyncs). REQUIRES: mu held.
func (s *spareSegments) createNextLocked(newBase int64) (*segment.Segment, error) {
	if spare := s.takeLocked(); spare != nil {
		err := spare.BeginAdoptAs(newBase)
		if err == nil {
			s.adopting.add(spare)
			s.files.Lock()
			// No spare left: the next one settles the adoption before
			// it takes the names (prepare).
			s.live = false
			s.files.Unlock()
			return spare, nil
		}
		s.logger.Warn("partlog/log: adopting the spare segment failed; creating the segment", "dir", s.dir, "base", newBase, "err", err)
		s.discard(spare)
	}
	return segment.Create(s.fs, s.dir, newBase, s.segCfg)
}

// discardLocked removes the spare, if any (Close). REQUIRES: mu held.
func (s *spareSegments) discardLocked() {
	s.stopTimerLocked()
	if seg := s.next.seg; seg != nil {
		s.next.seg = nil
		s.discard(seg)
	}
	if s.next.state != sparePreparing {
		s.next.state = spareNone
	}
}

// discard closes a spare and removes its files, holding files so that a
// new spare's files (the same names) are not created meanwhile; a failure
// is logged (the next start-up removes what is left).
func (s *spareSegments) discard(seg *segment.Segment) {
	s.files.Lock()
	defer s.files.Unlock()
	s.discardFiles(seg)
}

// discardFiles is discard with files held.
func (s *spareSegments) discardFiles(seg *segment.Segment) {
	s.live = false // a new spare replaces what is left of the names
	if err := seg.Discard(); err != nil {
		s.logger.Warn("partlog/log: removing the spare segment failed", "dir", s.dir, "err", fmt.Errorf("%s: %w", seg.LogPath(), err))
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
func (s *spareSegments) settleAdoptions() error {
	s.adopting.mu.Lock()
	if len(s.adopting.segs) == 0 {
		s.adopting.mu.Unlock()
		return nil
	}
	segs := slices.Clone(s.adopting.segs)
	s.adopting.mu.Unlock()
	var first error
	for _, seg := range segs {
		if err := seg.SettleAdoption(); err != nil && first == nil {
			first = fmt.Errorf("partlog/log: %s: %w", s.dir, err)
		}
	}
	s.adopting.mu.Lock()
	s.adopting.segs = slices.DeleteFunc(s.adopting.segs, func(seg *segment.Segment) bool { return !seg.AdoptionPending() })
	s.adopting.mu.Unlock()
	return first
}
