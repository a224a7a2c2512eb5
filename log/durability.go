package log

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
)

// Durability, in one place (see also the package documentation,
// "Durability"):
//
//   - A full flush (Sync, the FlushInterval flush, the append that crosses
//     FlushMessages > 1 records, Close) runs under flushMu and mu: it
//     fdatasyncs the .log and msyncs the indexes of every segment written
//     since the last full flush, syncs the directory when entries changed,
//     then persists the recovery point (the log end offset), the leader
//     epoch cache when it changed and, under DisableAutoHighWatermark, the
//     high watermark. TruncateTo and DeleteRecordsBefore flush the same way
//     under mu alone (flushLocked) before their changes become durable.
//   - A roll does no fsync, no index trim and writes no checkpoint under
//     mu: it seals the segment (leaving its index files preallocated),
//     creates the next one, notes the new base (rollTarget) and the
//     producer snapshot bytes, and schedules a background flush
//     (Partition.flushRolled; Kafka flushes on roll asynchronously too).
//     That flush runs under flushMu without mu: it cuts the sealed
//     segments' index files to their entries (ordered against the writer's
//     own changes of them by the segment, segment.TrimSealedIndexes),
//     fsyncs their files through handles of its own, syncs the directory,
//     writes the snapshots, then raises the recovery point to the new base,
//     each checkpoint and snapshot write under rolled.ckptMu and only while
//     no truncation happened since the roll (TruncateTo and
//     TruncateFullyAndStartAt count themselves before they cut, and lower
//     the recovery point under ckptMu after it). Until it ran, a crash may
//     leave sealed segments above the recovery point cut short; Open
//     recovers them in order and cuts the log at the first one that ends
//     early (recoverSegments). Compaction, retention and a follower's roll
//     across an offset gap first make the segments they rely on durable
//     (flushSealedBelowLocked).
//   - Under FlushMessages == 1 an append queues its batch under mu (an
//     AppendBatch: groupwrite.go; AppendAssigned writes it), notes its
//     write sequence number, releases mu, and waits in groupCommit.wait for
//     an fdatasync of the .log that started after its batch was written:
//     one syncer at a time (flushMu), which under mu writes the queue with
//     one write, takes the highest write sequence number and the segments
//     written since the last sync, releases mu, fdatasyncs them (and the
//     directory when a roll created a file), and publishes the sequence
//     number as synced (Partition.syncRound). Appenders that came while it
//     ran wait with their batches queued and the first of them syncs for
//     all, after yielding so that the appenders the last sync released
//     queue their next batches first (groupcommit.go). Index files are not
//     synced on this path: recovery rebuilds them.
//
// Any failed fsync makes the partition fail (ErrFailed, sticky): after a
// failed fsync Linux may have dropped the dirty pages and cleared the
// error, so a retry that succeeds proves nothing.
//
// # The part and the core
//
// The state of all this is the durability part's (type durability, field
// Partition.dur): what was synced and flushed, the group commit, the
// roll's pending work, the recovery point, the spare segment, the
// FlushInterval goroutine. The locks stay the core's: the Partition's
// entry points (flush.go: Sync, afterAppend, syncRound, periodicFlush,
// flushRolled...) take flushMu and mu exactly as before and call the
// part's methods, handing them the core state they need as arguments (the
// segment list, the directory's dirty flag, the truncation count). The
// part calls back into the core only through durabilityCore (and its spare
// through spareCore, spare.go), for the work its goroutines start.
// DESIGN.md, "Parts of a Partition: durability", has the contract.

// durabilityCore is the partition core as the durability part sees it:
// what the part's own goroutines (a roll's background flush, the
// FlushInterval flusher, a Dir's flush scheduler) hand back to the core,
// which takes flushMu and mu itself, and the failure of the partition. The
// two facts of the core the part reads lock-free (closed, truncations)
// are pointers it gets at init. *Partition implements it (flush.go).
type durabilityCore interface {
	// syncRound runs one group commit round for the write numbered seq
	// (it takes flushMu, then mu): groupCommit.wait calls it on the
	// goroutine that became the syncer.
	groupSyncer
	// flushRolled runs the background flush the rolls left (it takes
	// flushMu, then mu). A failure fails the partition.
	flushRolled() error
	// periodicFlush runs one FlushInterval flush, if anything is unsynced
	// (it takes flushMu, then mu).
	periodicFlush()
	// failLocked makes err the partition's sticky failure unless it
	// failed already, and returns the failure every later write gets.
	// REQUIRES: mu held.
	failLocked(err error) error
}

// dirSyncer syncs the partition directory once every spare a roll adopted
// carries its base's names. *durability implements it (syncDir); the
// producer snapshot part and deleteSegmentFiles take it so that they can
// be built and tested without a durability part.
type dirSyncer interface {
	syncDir() error
}

// durability is the durability part of a Partition: the flush policies'
// bookkeeping, the group commit, the roll's background flush, the recovery
// point checkpoint, the FlushInterval goroutine and the spare segment. Its
// methods never take the partition's flushMu or mu: the core's entry points
// (flush.go) hold what each method's REQUIRES line names. Fields are
// grouped by the lock that guards them.
type durability struct {
	// core is the partition (durabilityCore). The fields up to ckptMu
	// are set by init and never change.
	core durabilityCore
	// fs, dir and logger are the partition's.
	fs     vfs.FS
	dir    string
	logger *slog.Logger
	// stats counts the syncs (the partition's counters).
	stats *counters
	// closed is the core's closed flag (Partition.closed, set by Close,
	// read lock-free): a Dir's flush scheduler drops a closed partition.
	closed *atomic.Bool
	// truncations is the core's truncation count (Partition.truncations,
	// read lock-free; a truncation counts itself before it cuts): the part
	// compares it, under the checkpoint lock, with the count its
	// background work was taken at.
	truncations *atomic.Uint64
	// ckpt writes the recovery point and high watermark checkpoints.
	ckpt checkpointStore
	// flushMessages is Config.FlushMessages: 0 none, 1 a group sync per
	// append, n > 1 a full flush every n records.
	flushMessages int64
	// flushInterval is Config.FlushInterval (<= 0: no periodic flush).
	flushInterval time.Duration
	// autoHighWatermark is !Config.DisableAutoHighWatermark.
	autoHighWatermark bool
	// manual is Config.manualRollFlush: tests run the roll's flush and make
	// the spare themselves.
	manual bool
	// ckptMu is the core's checkpoint lock (Partition.rolled.ckptMu): it
	// guards recoveryPoint and serializes the checkpoint writes below with
	// the core's snapshot removals. Lock order: flushMu, mu, then ckptMu.
	ckptMu *sync.Mutex

	// group is the group commit of FlushMessages == 1 (groupcommit.go);
	// it has its own mutex and atomics.
	group groupCommit
	// queue is what appenders queued for the group syncer's write
	// (groupwrite.go). Guarded by mu.
	queue writeQueue
	// spare is the next segment made ahead of the roll (spare.go).
	spare spareSegments
	// bg counts the partition's background goroutines: flushes after a
	// roll (of a partition alone), the spare's maker and its idle removal.
	// Close waits for them before it releases the directory lock.
	bg sync.WaitGroup
	// sched is the Dir's flush scheduler, which runs a Dir partition's
	// background flushes on its workers (nil for a partition alone). Set
	// by Open, never changed.
	sched *flushScheduler
	// flusher is the FlushInterval goroutine of a partition alone.
	flusher intervalFlusher

	// syncFile is the group syncer's handle on the active .log. Guarded by
	// flushMu.
	syncFile syncHandle

	// recoveryPoint is the offset last persisted in the recovery point
	// checkpoint (-1 when there is none). Guarded by *ckptMu.
	recoveryPoint int64

	// The rest is guarded by the partition's mu.

	// flushedBelow is a segment base offset: every segment whose base is
	// below it was flushed after it was sealed. A full flush flushes the
	// rest.
	flushedBelow int64
	// dirSyncing is set while the group syncer has taken (and cleared)
	// the core's dirDirty but not yet synced the directory, which it does
	// without mu: a writer that flushes under mu alone meanwhile must
	// sync the directory itself (dirUnsyncedLocked).
	dirSyncing bool
	// unflushedRecords counts records appended since the last full flush
	// (FlushMessages > 1).
	unflushedRecords int64
	// unsynced holds the segments written since the group syncer last
	// took the list, each with a reference (FlushMessages == 1);
	// unsyncedSpare is the other buffer the syncer swaps in.
	unsynced, unsyncedSpare []*segment.Segment
	// hwCheckpoint is the high watermark offset last persisted (-1 when
	// none; DisableAutoHighWatermark only).
	hwCheckpoint int64
	// rollTarget is the base offset of the newest segment a roll created
	// whose predecessors' background flush is pending (0 when none), and
	// rollTruncations the truncation count at that roll; rollQueued is
	// set while a background flush is scheduled and has not yet taken its
	// work.
	rollTarget      int64
	rollTruncations uint64
	rollQueued      bool
}

// durabilityConfig is what init takes from the partition besides its
// interfaces.
type durabilityConfig struct {
	dir         string
	cfg         *Config
	segCfg      segment.Config
	stats       *counters
	ckpt        checkpointStore
	ckptMu      *sync.Mutex
	closed      *atomic.Bool
	truncations *atomic.Uint64
}

// init sets the part up for a partition being opened: core and spareCore
// are the partition. The recovery point starts unknown (-1).
func (d *durability) init(core durabilityCore, sc spareCore, c durabilityConfig) {
	cfg := c.cfg
	d.core = core
	d.fs, d.dir, d.logger = cfg.FS, c.dir, cfg.Logger
	d.stats, d.ckpt, d.ckptMu = c.stats, c.ckpt, c.ckptMu
	d.closed, d.truncations = c.closed, c.truncations
	d.flushMessages, d.flushInterval = cfg.FlushMessages, cfg.FlushInterval
	d.autoHighWatermark = !cfg.DisableAutoHighWatermark
	d.manual = cfg.manualRollFlush
	d.group.init(core)
	d.spare.init(sc, &d.bg, c.dir, cfg, c.segCfg)
	d.recoveryPoint = -1
	d.hwCheckpoint = -1
}

// syncEveryAppend reports the per-append durability policy.
func (d *durability) syncEveryAppend() bool { return d.flushMessages == 1 }

// hwFollowsSync reports whether the automatic high watermark covers only
// synced batches (the per-append policy).
func (d *durability) hwFollowsSync() bool {
	return d.autoHighWatermark && d.syncEveryAppend()
}

// hwFollowsWrite reports whether the automatic high watermark moves with
// every write (every policy but the per-append one).
func (d *durability) hwFollowsWrite() bool {
	return d.autoHighWatermark && !d.syncEveryAppend()
}

// noteWriteLocked accounts for a batch of records records appended to
// active as the core's write number seq: the records not yet flushed and
// the segments the group syncer must fdatasync. REQUIRES: mu held.
func (d *durability) noteWriteLocked(active *segment.Segment, seq uint64, records int64) {
	if d.flushMessages == 0 {
		return
	}
	d.unflushedRecords += records
	if d.syncEveryAppend() {
		d.group.written.Store(seq)
		if n := len(d.unsynced); n == 0 || d.unsynced[n-1] != active {
			active.Ref()
			d.unsynced = append(d.unsynced, active)
		}
	}
}

// flushDueLocked reports whether an append must run a full flush before
// it returns (FlushMessages > 1). REQUIRES: mu held.
func (d *durability) flushDueLocked() bool {
	return d.flushMessages > 1 && d.unflushedRecords >= d.flushMessages
}

// dirUnsyncedLocked reports whether directory entries may not be durable:
// files were created, renamed or removed since the last directory sync
// (the core's dirDirty), or the group syncer took that flag and has not
// synced the directory yet (dirSyncing: it does so without mu, after its
// fdatasyncs). A writer that flushes under mu and then calls what it
// flushed durable (flushSegmentsLocked, flushSealedBelowLocked) must sync
// the directory in either case: the segment a roll made may be one of
// those entries, and in a Dir no checkpoint write syncs the partition
// directory for it. REQUIRES: mu held.
func (d *durability) dirUnsyncedLocked(dirDirty bool) bool { return dirDirty || d.dirSyncing }

// flushSegmentsLocked fsyncs the segments of snap written since the last
// full flush and, when entries may be unsynced (dirDirty, or a group
// sync's directory sync pending), the directory; dirSynced reports that it
// synced the directory (the core clears dirDirty). REQUIRES: mu held.
func (d *durability) flushSegmentsLocked(snap *segments, dirDirty bool) (dirSynced bool, err error) {
	for _, seg := range snap.list {
		if seg.BaseOffset() < d.flushedBelow && seg != snap.active() {
			continue
		}
		if err := d.stats.flushSegment(seg); err != nil {
			return false, fmt.Errorf("partlog/log: sync %s: segment %d: %w", d.dir, seg.BaseOffset(), err)
		}
	}
	d.flushedBelow = snap.active().BaseOffset()
	if !d.dirUnsyncedLocked(dirDirty) {
		return false, nil
	}
	if err := d.syncDir(); err != nil {
		return false, fmt.Errorf("partlog/log: sync %s: %w", d.dir, err)
	}
	return true, nil
}

// flushedAllLocked records that a full flush made every write up to the
// core's write number seq durable: the group commit's synced number, the
// records count of FlushMessages > 1, the group syncer's segment list, and
// the rolls' pending work (every segment is flushed). REQUIRES: flushMu and
// mu held.
func (d *durability) flushedAllLocked(seq uint64) {
	d.group.synced.Store(seq)
	d.unflushedRecords = 0
	_ = d.releaseUnsyncedLocked() // logged
	d.rollTarget = 0
}

// releaseUnsyncedLocked drops the group syncer's segment list and its
// references; a failed release is logged, and the first is returned (for
// Close). REQUIRES: mu held.
func (d *durability) releaseUnsyncedLocked() error {
	var first error
	for _, seg := range d.unsynced {
		if err := seg.Unref(); err != nil {
			d.logger.Warn("partlog/log: releasing a segment failed", "dir", d.dir, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	clear(d.unsynced)
	d.unsynced = d.unsynced[:0]
	return first
}

// writeHighWatermarkLocked persists the high watermark offset hw, fsynced,
// when it differs from the one last persisted (DisableAutoHighWatermark
// only). REQUIRES: flushMu and mu held.
func (d *durability) writeHighWatermarkLocked(hw int64) error {
	if !d.highWatermarkUnpersistedLocked(hw) {
		return nil
	}
	if err := d.ckpt.write(highWatermarkCheckpointFile, hw, true); err != nil {
		return fmt.Errorf("partlog/log: sync %s: high watermark checkpoint: %w", d.dir, err)
	}
	d.hwCheckpoint = hw
	return nil
}

// lowerHighWatermarkLocked persists hw, durably, when the high watermark
// last persisted is above it (DisableAutoHighWatermark only): a truncation,
// or an Open after a crash inside one, clamped the high watermark to the
// log end, and the batches appended after it may become durable without
// a full flush (per-append syncs, a roll's background flush), so a crash
// must not bring the old value back over them. On a failed write the
// caller fails (the file names offsets past the log end). REQUIRES: mu
// held (or Open).
func (d *durability) lowerHighWatermarkLocked(hw int64) error {
	if d.autoHighWatermark || d.hwCheckpoint <= hw {
		return nil
	}
	if err := d.ckpt.write(highWatermarkCheckpointFile, hw, false); err != nil {
		return fmt.Errorf("partlog/log: %s: high watermark checkpoint: %w", d.dir, err)
	}
	d.hwCheckpoint = hw
	return nil
}

// highWatermarkUnpersistedLocked reports whether a full flush would write
// the high watermark checkpoint for hw: it differs from the one last
// persisted (DisableAutoHighWatermark only). REQUIRES: mu held.
func (d *durability) highWatermarkUnpersistedLocked(hw int64) bool {
	return !d.autoHighWatermark && hw != d.hwCheckpoint
}

// loadHighWatermarkCheckpoint records the high watermark Open read from
// its checkpoint. REQUIRES: Open's goroutine.
func (d *durability) loadHighWatermarkCheckpoint(hw int64) { d.hwCheckpoint = hw }

// setFlushedBelowLocked records that every segment below base is flushed
// (Open, a restart of the log: base is the active segment's).
// REQUIRES: mu held.
func (d *durability) setFlushedBelowLocked(base int64) { d.flushedBelow = base }

// unflushFromLocked records that the segment at base (unsealed again by a
// truncation) needs a flush. REQUIRES: mu held.
func (d *durability) unflushFromLocked(base int64) {
	d.flushedBelow = min(d.flushedBelow, base)
}

// unsyncedWork is what one group sync round took under mu.
type unsyncedWork struct {
	// segs are the segments written since the last round, each with a
	// reference.
	segs []*segment.Segment
	// dirDirty is the core's dirDirty the round took (and cleared).
	dirDirty bool
}

// takeUnsyncedLocked takes a group sync round's work: the segments written
// since the last round, and the core's directory flag dirDirty, which the
// core clears (the round syncs the directory without mu; dirSyncing says
// so meanwhile). REQUIRES: flushMu and mu held.
func (d *durability) takeUnsyncedLocked(dirDirty bool) unsyncedWork {
	w := unsyncedWork{segs: d.unsynced, dirDirty: dirDirty}
	d.unsynced = d.unsyncedSpare[:0]
	d.dirSyncing = dirDirty
	return w
}

// syncUnsynced fdatasyncs the .log of each of w's segments and releases
// their references, then syncs the directory when w took its flag.
// REQUIRES: flushMu held, mu not held.
func (d *durability) syncUnsynced(w unsyncedWork) error {
	var err error
	for _, seg := range w.segs {
		if err == nil {
			err = d.syncLogFile(seg)
		}
		if uerr := seg.Unref(); uerr != nil {
			d.logger.Warn("partlog/log: releasing a segment failed", "dir", d.dir, "err", uerr)
		}
	}
	if err == nil && w.dirDirty {
		err = d.syncDir()
	}
	return err
}

// endUnsyncedLocked ends a group sync round: its directory sync is no
// longer pending and its list becomes the spare buffer. REQUIRES: flushMu
// and mu held.
func (d *durability) endUnsyncedLocked(w unsyncedWork) {
	d.dirSyncing = false
	clear(w.segs)
	d.unsyncedSpare = w.segs[:0]
}

// syncLogFile fdatasyncs seg's .log through a handle of the partition's
// own (fdatasync works on the file, whatever descriptor names it), kept
// open for the active segment. A segment whose files were deleted
// meanwhile needs no sync. REQUIRES: flushMu held.
func (d *durability) syncLogFile(seg *segment.Segment) error {
	if d.syncFile.seg != seg {
		// A segment a roll adopted changes its .log's name once (spare.go):
		// settle that first, or the open below could miss the file and
		// take the segment for deleted.
		if err := seg.SettleAdoption(); err != nil {
			return err
		}
		f, err := d.fs.Open(seg.LogPath())
		if errors.Is(err, errNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		d.closeSyncFile()
		d.syncFile.seg, d.syncFile.f = seg, f
	}
	return d.stats.syncFile(d.syncFile.f)
}

// closeSyncFile closes the cached sync handle. REQUIRES: flushMu held.
func (d *durability) closeSyncFile() {
	if d.syncFile.f != nil {
		if err := d.syncFile.f.Close(); err != nil {
			d.logger.Warn("partlog/log: closing a sync handle failed", "dir", d.dir, "err", err)
		}
	}
	d.syncFile.seg, d.syncFile.f = nil, nil
}

// syncHandle is the group syncer's open handle on the active .log.
type syncHandle struct {
	seg *segment.Segment
	f   vfs.File
}

// syncDir syncs the partition directory after settling every pending
// adoption of a spare (spare.go), so that the renames of the segments
// rolls adopted are in every directory sync that clears the core's
// dirDirty: a roll sets dirDirty, and until a sync of the directory that
// followed the renames, nothing in the new segment is called durable (no
// synced sequence number, recovery point or checkpoint covers it).
func (d *durability) syncDir() error {
	if err := d.spare.settleAdoptions(); err != nil {
		return err
	}
	return syncDir(d.fs, d.dir)
}

// The recovery point.

// loadRecoveryPoint records the recovery point Open read from its
// checkpoint (-1: none). REQUIRES: Open's goroutine.
func (d *durability) loadRecoveryPoint(offset int64) { d.recoveryPoint = offset }

// currentRecoveryPoint returns the recovery point last persisted (-1:
// none). REQUIRES: ckptMu not held.
func (d *durability) currentRecoveryPoint() int64 {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	return d.recoveryPoint
}

// setRecoveryPointLocked persists the recovery point: every byte below
// offset is durable (or, when lowering it, may be rewritten). A failed
// write keeps the older value, which is still safe when raising it; a
// failed lowering fails the partition. REQUIRES: mu held, ckptMu not held.
func (d *durability) setRecoveryPointLocked(offset int64) error {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	if offset == d.recoveryPoint {
		return nil
	}
	// Raising it is lazy: a crash that loses the new value leaves the
	// older one, which only makes recovery read more.
	if err := d.ckpt.write(recoveryPointCheckpointFile, offset, offset > d.recoveryPoint); err != nil {
		err = fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", d.dir, err)
		if offset < d.recoveryPoint {
			return d.core.failLocked(err)
		}
		return err
	}
	d.recoveryPoint = offset
	return nil
}

// raiseRecoveryPoint persists offset as the recovery point, under ckptMu,
// when it raises it and no truncation happened since the work was taken
// (truncations). A failed write is logged and keeps the older value (safe:
// recovery reads more). REQUIRES: flushMu held, mu not held; every segment
// below offset and the directory are durable.
func (d *durability) raiseRecoveryPoint(offset int64, truncations uint64) {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	if d.truncations.Load() != truncations || offset <= d.recoveryPoint {
		return
	}
	if err := d.ckpt.write(recoveryPointCheckpointFile, offset, true); err != nil {
		d.logger.Warn("partlog/log: roll: recovery point not persisted", "dir", d.dir, "offset", offset, "err", err)
		return
	}
	d.recoveryPoint = offset
}

// syncBeforeEpochLocked, under per-append durability (FlushMessages 1),
// flushes the segments of snap written since the last full flush
// (flushSegmentsLocked, with the core's directory flag dirDirty; dirSynced
// as there) and raises the recovery point, durably, to end, the log end,
// before a leader epoch entry is written there (or past it, after a
// follower's offset gap): the entry then never outlives the batches below
// it unnoticed (a lost log end, lostend.go). Under the other policies it does nothing. A failed
// fsync fails the partition; a failed checkpoint write is returned, and
// the entry is not written. REQUIRES: mu held, ckptMu not held.
func (d *durability) syncBeforeEpochLocked(snap *segments, end int64, dirDirty bool) (dirSynced bool, err error) {
	if !d.syncEveryAppend() {
		return false, nil
	}
	dirSynced, err = d.flushSegmentsLocked(snap, dirDirty)
	if err != nil {
		return dirSynced, d.core.failLocked(fmt.Errorf("partlog/log: sync %s before a leader epoch entry at the log end %d: %w", d.dir, end, err))
	}
	return dirSynced, d.raiseRecoveryPointNowLocked(end)
}

// raiseRecoveryPointNowLocked persists offset as the recovery point when
// it raises it, durably before it returns (never deferred, as a Dir's
// store may defer a lazy write), for a writer about to write a file whose
// meaning depends on it. REQUIRES: mu held, ckptMu not held; every batch
// below offset and the directory are durable.
func (d *durability) raiseRecoveryPointNowLocked(offset int64) error {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	if offset <= d.recoveryPoint {
		return nil
	}
	if err := d.ckpt.write(recoveryPointCheckpointFile, offset, false); err != nil {
		return fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", d.dir, err)
	}
	d.recoveryPoint = offset
	return nil
}

// flushSealedBelowLocked makes every segment of snap below off durable and
// moves the recovery point up to off, when it is below: for the writers
// that must not leave sealed segments above the recovery point
// (compaction, whose output may end below the next segment's base;
// retention, which raises the log start past them; a follower's roll
// across an offset gap), since Open cuts the log at the first segment
// above the recovery point that ends before the next one begins. off is a
// segment base at or below the active segment's; dirDirty is the core's
// flag, and dirSynced reports that the directory was synced (the core
// clears the flag). A failed fsync fails the partition; a failed
// checkpoint write is returned and changes nothing else. REQUIRES: mu
// held, ckptMu not held.
func (d *durability) flushSealedBelowLocked(snap *segments, off int64, dirDirty bool) (dirSynced bool, err error) {
	if d.currentRecoveryPoint() >= off {
		return false, nil
	}
	for _, seg := range snap.list {
		if seg == snap.active() || seg.BaseOffset() < d.flushedBelow || seg.BaseOffset() >= off {
			continue
		}
		if err := d.stats.flushSegment(seg); err != nil {
			return false, d.core.failLocked(fmt.Errorf("partlog/log: sync %s: segment %d: %w", d.dir, seg.BaseOffset(), err))
		}
	}
	d.flushedBelow = max(d.flushedBelow, off)
	if d.dirUnsyncedLocked(dirDirty) {
		if err := d.syncDir(); err != nil {
			return false, d.core.failLocked(fmt.Errorf("partlog/log: sync %s: %w", d.dir, err))
		}
		dirSynced = true
	}
	// Raised only (the background flush may have moved it past off since
	// it was read above), and durably, never deferred: what the caller
	// writes next depends on it.
	return dirSynced, d.raiseRecoveryPointNowLocked(off)
}

// The roll's background flush.

// noteRolledLocked records that a roll created the segment at newBase
// when the truncation count was truncations, and schedules the background
// flush of the segments below it (durabilityCore.flushRolled): a goroutine
// for a partition alone, the Dir's flush scheduler for a partition of a
// Dir; none under Config's manual mode (tests run it themselves).
// REQUIRES: mu held.
func (d *durability) noteRolledLocked(newBase int64, truncations uint64) {
	d.rollTarget = newBase
	d.rollTruncations = truncations
	if d.rollQueued || d.manual {
		return
	}
	d.rollQueued = true
	if s := d.sched; s != nil {
		s.flushNow(d)
		return
	}
	d.bg.Go(func() {
		_ = d.core.flushRolled() // a failure fails the partition (logged)
	})
}

// rollFlushStartedLocked records that the scheduled background flush
// runs: the next roll schedules another. REQUIRES: flushMu and mu held.
func (d *durability) rollFlushStartedLocked() { d.rollQueued = false }

// rolledWork is one background flush's segment work, taken under mu.
type rolledWork struct {
	// segs are the sealed segments to flush, each with a reference.
	segs []*segment.Segment
	// target is the recovery point to raise to (0: none).
	target int64
	// dirDirty is the core's dirDirty when the work was taken.
	dirDirty bool
}

// takeRolledLocked takes the segment work the rolls left, when no
// truncation happened since the newest roll (truncations is the count now)
// and no full flush did it meanwhile: the segments of snap below its base
// not yet flushed (flushedBelow), the core's directory flag dirDirty and
// the recovery point target. REQUIRES: flushMu and mu held.
func (d *durability) takeRolledLocked(snap *segments, truncations uint64, dirDirty bool) rolledWork {
	var w rolledWork
	if t := d.rollTarget; t > d.flushedBelow && d.rollTruncations == truncations {
		w.target = t
		for _, seg := range snap.list {
			if seg != snap.active() && seg.BaseOffset() >= d.flushedBelow && seg.BaseOffset() < t {
				seg.Ref()
				w.segs = append(w.segs, seg)
			}
		}
		// Read, not cleared: writers under mu alone (TruncateTo, for
		// one) sync the directory themselves when it is dirty, and must
		// not skip that while this sync is still to come. The next
		// flush syncs it once more.
		w.dirDirty = dirDirty
	}
	d.rollTarget = 0
	return w
}

// syncRolled trims the index files of w's sealed segments to their
// entries and fsyncs their files (through handles of its own, without mu:
// appends go on), releases their references, and syncs the directory when
// entries changed. err is an error the flush met before (a failed
// settlement of adoptions): then it only releases the references and
// returns err. REQUIRES: flushMu held, mu not held.
func (d *durability) syncRolled(w rolledWork, err error) error {
	for _, seg := range w.segs {
		if err == nil {
			err = trimSealed(seg)
		}
		if err == nil {
			err = d.syncSegmentFiles(seg)
		}
		if uerr := seg.Unref(); uerr != nil {
			d.logger.Warn("partlog/log: releasing a segment failed", "dir", d.dir, "err", uerr)
		}
	}
	if err == nil && w.dirDirty {
		err = d.syncDir()
	}
	return err
}

// rolledFlushedLocked records that the segments below target are flushed,
// after a background flush during which no truncation happened.
// REQUIRES: mu held.
func (d *durability) rolledFlushedLocked(target int64) {
	if target > d.flushedBelow {
		d.flushedBelow = target
	}
}

// trimSealed cuts the index files of the sealed segment seg to their
// entries: the part of the roll's seal that frees each index's
// preallocated segment.index.bytes, left to the background so that the
// roll does not truncate two files under mu. It runs before the fsync of
// the segment's files, so the recovery point is raised only over
// trimmed indexes. The segment orders the trim against the writer's own
// changes of its index files (segment.TrimSealedIndexes); a segment
// already closed needs none (its indexes were trimmed when closed), nor
// one deleted meanwhile. Any other failed trim is an I/O error of the
// flush. REQUIRES: flushMu held, a reference on seg.
func trimSealed(seg *segment.Segment) error {
	if err := seg.TrimSealedIndexes(); err != nil {
		if errors.Is(err, segment.ErrDeleted) {
			// Deleted after the flush took it (retention's
			// DeleteSegments does not wait for flushMu): its files
			// go, and syncSegmentFiles finds nothing to sync.
			return nil
		}
		return fmt.Errorf("segment %d: trim indexes: %w", seg.BaseOffset(), err)
	}
	return nil
}

// syncSegmentFiles fsyncs the files of the sealed segment seg (.log,
// .index, .timeindex, .txnindex when it exists) through handles of its
// own, without touching the segment's writer state, so that it can run
// without mu (fdatasync of any descriptor covers the file, pages written
// through a mapping included: docs/crash-safety.md, system assumptions 1
// and 6). A segment whose .log is gone was deleted meanwhile and needs
// nothing. Counted as one sync. REQUIRES: flushMu held.
func (d *durability) syncSegmentFiles(seg *segment.Segment) error {
	start := time.Now()
	defer d.stats.noteSync(start)
	for _, suffix := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
		path := filepath.Join(d.dir, segment.FileName(seg.BaseOffset(), suffix))
		f, err := d.fs.Open(path)
		if errors.Is(err, errNotExist) {
			if suffix == segment.LogSuffix {
				return nil
			}
			continue
		}
		if err == nil {
			err = f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("segment %d: %s: %w", seg.BaseOffset(), filepath.Base(path), err)
		}
	}
	return nil
}

// The FlushInterval flush.

// startFlusher starts the flushes every FlushInterval of a partition
// alone: the partition's own goroutine (a Dir's scheduler runs its
// partitions' instead: sched).
func (d *durability) startFlusher() {
	if d.flushInterval > 0 {
		d.flusher.start(d.flushInterval, d.core.periodicFlush)
	}
}

// intervalFlusher is the goroutine that runs a partition's FlushInterval
// flushes.
type intervalFlusher struct {
	// quit is closed to end the goroutine, done by the goroutine when it
	// ended; both nil when it never started. Set by start.
	quit, done chan struct{}
	// once makes stop idempotent.
	once sync.Once
}

// start runs flush on a goroutine of its own every interval until stop.
func (f *intervalFlusher) start(interval time.Duration, flush func()) {
	f.quit = make(chan struct{})
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-f.quit:
				return
			case <-t.C:
			}
			flush()
		}
	}()
}

// stop ends the FlushInterval goroutine and waits for it. Safe to call
// more than once, and when it never started. REQUIRES: flushMu and mu not
// held (the goroutine's flush takes them).
func (f *intervalFlusher) stop() {
	f.once.Do(func() {
		if f.quit != nil {
			close(f.quit)
			<-f.done
		}
	})
}
