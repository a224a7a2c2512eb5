package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/internal/segment"
	"github.com/partlog/partlog/internal/vfs"
)

// Durability, in one place (see also the package documentation,
// "Durability"):
//
//   - A full flush (Sync, the FlushInterval goroutine, the append that
//     crosses FlushMessages > 1 records, Close) runs under flushMu and mu:
//     it fdatasyncs the .log and msyncs the indexes of every segment
//     written since the last full flush, syncs the directory when entries
//     changed, then persists the recovery point (the log end offset), the
//     leader epoch cache when it changed and, under
//     DisableAutoHighWatermark, the high watermark. TruncateTo and
//     DeleteRecordsBefore flush the same way under mu alone (flushLocked)
//     before their changes become durable.
//   - A roll does no fsync, no index trim and writes no checkpoint under
//     mu: it seals the segment (leaving its index files preallocated),
//     creates the next one, notes the new base (rollTarget) and the
//     producer snapshot bytes, and schedules a background flush
//     (flushRolled; Kafka flushes on roll asynchronously too). That flush
//     runs under flushMu without mu: it cuts the sealed segments' index
//     files to their entries (ordered against the writer's own changes of
//     them by the segment, segment.TrimSealedIndexes), fsyncs their files
//     through handles of its own, syncs the directory, writes the
//     snapshots, then raises the recovery point to the new base, each
//     checkpoint and snapshot write under rolled.ckptMu and only while
//     no truncation happened since the roll (TruncateTo and
//     TruncateFullyAndStartAt count themselves before they cut, and
//     lower the recovery point under ckptMu after it). Until it ran, a
//     crash may leave sealed segments above the recovery point cut
//     short; Open recovers them in order and cuts the log at the first
//     one that ends early (recoverSegments). Compaction, retention and a
//     follower's roll across an offset gap first make the segments they
//     rely on durable (flushSealedBelowLocked).
//   - Under FlushMessages == 1 an append queues its batch under mu (an
//     AppendBatch: groupwrite.go; AppendAssigned writes it), notes its
//     write sequence number, releases mu, and waits in waitSynced for an
//     fdatasync of the .log that started after its batch was written: one
//     syncer at a time (flushMu), which under mu writes the queue with one
//     write, takes the highest write sequence number and the segments
//     written since the last sync, releases mu,
//     fdatasyncs them (and the directory when a roll created a file), and
//     publishes the sequence number as synced. Appenders that came while
//     it ran wait with their batches queued and the first of them syncs
//     for all, after yielding so that the appenders the last sync
//     released queue their next batches first (gatherAppenders). Index
//     files are not synced on this path: recovery rebuilds them.
//
// Any failed fsync makes the partition fail (ErrFailed, sticky): after a
// failed fsync Linux may have dropped the dirty pages and cleared the
// error, so a retry that succeeds proves nothing.

// syncEveryAppend reports the per-append durability policy.
func (p *Partition) syncEveryAppend() bool { return p.cfg.FlushMessages == 1 }

// hwFollowsSync reports whether the automatic high watermark covers only
// synced batches (the per-append policy).
func (p *Partition) hwFollowsSync() bool {
	return !p.cfg.DisableAutoHighWatermark && p.syncEveryAppend()
}

// noteWriteLocked accounts for a batch appended to active: the write
// sequence number, the records not yet flushed, and the segments the group
// syncer must fdatasync. REQUIRES: mu held.
func (p *Partition) noteWriteLocked(active *segment.Segment, records int64) {
	p.mu.writeSeq++
	if p.cfg.FlushMessages == 0 {
		return
	}
	p.mu.unflushedRecords += records
	if p.syncEveryAppend() {
		p.group.written.Store(p.mu.writeSeq)
		if n := len(p.mu.unsynced); n == 0 || p.mu.unsynced[n-1] != active {
			active.Ref()
			p.mu.unsynced = append(p.mu.unsynced, active)
		}
	}
}

// flushDueLocked reports whether an append must run a full flush before
// it returns (FlushMessages > 1). REQUIRES: mu held.
func (p *Partition) flushDueLocked() bool {
	return p.cfg.FlushMessages > 1 && p.mu.unflushedRecords >= p.cfg.FlushMessages
}

// afterAppend makes an append as durable as the policy promises; it runs
// after mu was released. seq is the append's write sequence number.
func (p *Partition) afterAppend(seq uint64, flushDue bool) error {
	switch {
	case p.syncEveryAppend():
		return p.waitSynced(seq)
	case flushDue:
		p.flushMu.Lock()
		defer p.flushMu.Unlock()
		p.lockWriter()
		defer p.mu.Unlock()
		if err := p.checkWritableLocked(); err != nil {
			return err
		}
		if !p.flushDueLocked() {
			return nil // another append flushed meanwhile
		}
		return p.fullFlushLocked()
	}
	return nil
}

// waitSynced returns once an fdatasync that started after write seq
// succeeded (group commit): when no sync is running it becomes the
// syncer; otherwise it waits for the running one, which covers seq if it
// started after the write, and else tries again.
func (p *Partition) waitSynced(seq uint64) error {
	if p.syncedSeq.Load() >= seq {
		return nil
	}
	p.group.mu.Lock()
	defer p.group.mu.Unlock()
	for p.syncedSeq.Load() < seq {
		if p.group.syncing {
			p.group.cond.Wait()
			continue
		}
		p.group.syncing = true
		want := p.group.last
		p.group.mu.Unlock()
		p.gatherAppenders(want)
		p.flushMu.Lock()
		var err error
		from := p.syncedSeq.Load()
		if from < seq { // a full flush may have covered it
			err = p.groupSyncFlushLocked()
		}
		covered := p.syncedSeq.Load() - from
		p.flushMu.Unlock()
		p.group.mu.Lock()
		if err == nil {
			p.group.last = covered
		}
		p.group.syncing = false
		p.group.cond.Broadcast()
		if err != nil {
			return err
		}
	}
	return nil
}

// gatherRounds is how many times a new group syncer yields before it takes
// the write sequence number its fdatasync covers.
const gatherRounds = 2

// gatherIdleRounds and gatherMaxRounds bound the yields a syncer adds
// while the appenders it expects have not all queued: it stops after
// gatherIdleRounds yields in a row that saw no new append, and after
// gatherMaxRounds in all.
const (
	gatherIdleRounds = 16
	gatherMaxRounds  = 256
)

// gatherAppenders lets the appenders that are ready to run queue their
// batches before a new group syncer takes its snapshot: the waiters the
// previous sync released (now appending their next batch) and appenders
// queued on mu. Without it the syncer, woken first, snapshots before they
// write, and each sync covers about half of the waiting appenders. It
// yields gatherRounds times, and then on, while fewer than want appends
// (as many as the previous group sync covered) came since the last sync
// and the last gatherIdleRounds yields saw a new one: on one P a yield
// runs every ready appender, while on several the syncer may run beside
// them and must wait for the ones still on their way (a released
// appender validates its next batch before it queues it). A yield costs
// well under a microsecond when nothing else is runnable, against an
// fdatasync of a hundred microseconds or more; when the appenders do not
// come back (the previous group was a burst) the syncer gives up after
// gatherIdleRounds idle yields.
func (p *Partition) gatherAppenders(want uint64) {
	for range gatherRounds {
		runtime.Gosched()
	}
	from := p.syncedSeq.Load()
	last := p.group.written.Load()
	for i, idle := 0, 0; i < gatherMaxRounds && idle < gatherIdleRounds && last-from < want; i++ {
		runtime.Gosched()
		if w := p.group.written.Load(); w != last {
			last, idle = w, 0
		} else {
			idle++
		}
	}
}

// groupSyncFlushLocked fdatasyncs every .log written up to now, outside
// mu, and publishes what it covered. REQUIRES: flushMu held, mu not held.
func (p *Partition) groupSyncFlushLocked() error {
	p.lockWriter()
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	seq := p.mu.writeSeq
	segs := p.mu.unsynced
	p.mu.unsynced = p.mu.spare[:0]
	end, truncations := p.mu.end, p.truncations.Load()
	dirDirty := p.mu.dirDirty
	p.mu.dirDirty = false
	p.mu.dirSyncing = dirDirty
	p.mu.Unlock()

	var err error
	for _, seg := range segs {
		if err == nil {
			err = p.syncLogFile(seg)
		}
		if uerr := seg.Unref(); uerr != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", uerr)
		}
	}
	if err == nil && dirDirty {
		err = p.syncDirSettled()
	}

	p.lockWriter()
	defer p.mu.Unlock()
	p.mu.dirSyncing = false
	clear(segs)
	p.mu.spare = segs[:0]
	if err != nil {
		p.mu.dirDirty = p.mu.dirDirty || dirDirty
		p.failLocked(fmt.Errorf("partlog/log: sync %s: %w", p.dir, err))
		return p.mu.failed
	}
	p.syncedSeq.Store(seq)
	if p.hwFollowsSync() && p.truncations.Load() == truncations &&
		end.Offset > p.mu.hw.Offset && end.Offset <= p.mu.end.Offset {
		p.mu.hw = end
		p.publishLocked()
	}
	return nil
}

// syncLogFile fdatasyncs seg's .log through a handle of the partition's
// own (fdatasync works on the file, whatever descriptor names it), kept
// open for the active segment. A segment whose files were deleted
// meanwhile needs no sync. REQUIRES: flushMu held.
func (p *Partition) syncLogFile(seg *segment.Segment) error {
	if p.syncFile.seg != seg {
		// A segment a roll adopted changes its .log's name once (spare.go):
		// settle that first, or the open below could miss the file and
		// take the segment for deleted.
		if err := seg.SettleAdoption(); err != nil {
			return err
		}
		f, err := p.cfg.FS.Open(seg.LogPath())
		if errors.Is(err, errNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		p.closeSyncFile()
		p.syncFile.seg, p.syncFile.f = seg, f
	}
	return p.syncFileTimed(p.syncFile.f)
}

// closeSyncFile closes the cached sync handle. REQUIRES: flushMu held.
func (p *Partition) closeSyncFile() {
	if p.syncFile.f != nil {
		if err := p.syncFile.f.Close(); err != nil {
			p.logger.Warn("partlog/log: closing a sync handle failed", "dir", p.dir, "err", err)
		}
	}
	p.syncFile.seg, p.syncFile.f = nil, nil
}

// syncHandle is the group syncer's open handle on the active .log.
type syncHandle struct {
	seg *segment.Segment
	f   vfs.File
}

// failLocked makes err the partition's sticky failure (wrapping
// ErrFailed) unless it already failed. REQUIRES: mu held.
func (p *Partition) failLocked(err error) {
	if p.mu.failed == nil {
		p.setFailedLocked(failedf(err))
		p.logger.Error("partlog/log: partition failed; reopen it to recover", "dir", p.dir, "err", err)
	}
}

// Sync makes every appended batch durable: it flushes the segments
// written since the last flush (fdatasync of each .log, msync of its
// indexes), syncs the directory when segment files were created or
// removed, and persists the recovery point (the log end offset) and, under
// DisableAutoHighWatermark, the high watermark. It blocks appends while it
// runs. A failed fsync fails the partition (ErrFailed): every later write
// returns that error.
func (p *Partition) Sync() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	return p.fullFlushLocked()
}

// fullFlushLocked flushes what Sync promises. REQUIRES: flushMu and mu
// held.
func (p *Partition) fullFlushLocked() error {
	if err := p.flushLocked(); err != nil {
		p.failLocked(err)
		return p.mu.failed
	}
	p.syncedSeq.Store(p.mu.writeSeq)
	p.mu.unflushedRecords = 0
	for _, seg := range p.mu.unsynced {
		if err := seg.Unref(); err != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
		}
	}
	clear(p.mu.unsynced)
	p.mu.unsynced = p.mu.unsynced[:0]
	if p.hwFollowsSync() && p.mu.hw.Offset < p.mu.end.Offset {
		p.mu.hw = p.mu.end
		p.publishLocked()
	}
	// What a roll left to the background is done now: every segment is
	// flushed, so its snapshots may be written.
	p.mu.rollTarget = 0
	if err := p.writeRollSnapshotsLocked(); err != nil {
		return err
	}
	if err := p.setRecoveryPointLocked(p.mu.end.Offset); err != nil {
		return err
	}
	if err := p.mu.epochs.Persist(); err != nil {
		return err
	}
	if p.cfg.DisableAutoHighWatermark && p.mu.hw.Offset != p.mu.hwCheckpoint {
		if err := p.ckpt.write(highWatermarkCheckpointFile, p.mu.hw.Offset, true); err != nil {
			return fmt.Errorf("partlog/log: sync %s: high watermark checkpoint: %w", p.dir, err)
		}
		p.mu.hwCheckpoint = p.mu.hw.Offset
	}
	return nil
}

// setRecoveryPointLocked persists the recovery point: every byte below
// offset is durable (or, when lowering it, may be rewritten). A failed
// write keeps the older value, which is still safe when raising it; a
// failed lowering fails the partition. REQUIRES: mu held, rolled.ckptMu
// not held.
func (p *Partition) setRecoveryPointLocked(offset int64) error {
	p.rolled.ckptMu.Lock()
	defer p.rolled.ckptMu.Unlock()
	if offset == p.rolled.recoveryPoint {
		return nil
	}
	// Raising it is lazy: a crash that loses the new value leaves the
	// older one, which only makes recovery read more.
	if err := p.ckpt.write(recoveryPointCheckpointFile, offset, offset > p.rolled.recoveryPoint); err != nil {
		err = fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", p.dir, err)
		if offset < p.rolled.recoveryPoint {
			p.failLocked(err)
			return p.mu.failed
		}
		return err
	}
	p.rolled.recoveryPoint = offset
	return nil
}

// dirUnsyncedLocked reports whether directory entries may not be durable:
// files were created, renamed or removed since the last directory sync
// (dirDirty), or the group syncer took that flag and has not synced the
// directory yet (dirSyncing: it does so without mu, after its fdatasyncs).
// A writer that flushes under mu and then calls what it flushed durable
// (flushLocked, flushSealedBelowLocked) must sync the directory in either
// case: the segment a roll made may be one of those entries, and in a Dir
// no checkpoint write syncs the partition directory for it.
// REQUIRES: mu held.
func (p *Partition) dirUnsyncedLocked() bool { return p.mu.dirDirty || p.mu.dirSyncing }

// flushLocked fsyncs the segments written since the last full flush and
// the directory. REQUIRES: mu held.
func (p *Partition) flushLocked() error {
	snap := p.segs.Load()
	for _, seg := range snap.list {
		if seg.BaseOffset() < p.mu.flushedBelow && seg != snap.active() {
			continue
		}
		if err := p.flushSegment(seg); err != nil {
			return fmt.Errorf("partlog/log: sync %s: segment %d: %w", p.dir, seg.BaseOffset(), err)
		}
	}
	p.mu.flushedBelow = snap.active().BaseOffset()
	if p.dirUnsyncedLocked() {
		if err := p.syncDirSettled(); err != nil {
			return fmt.Errorf("partlog/log: sync %s: %w", p.dir, err)
		}
		p.mu.dirDirty = false
	}
	return nil
}

// startFlusher starts the FlushInterval goroutine.
func (p *Partition) startFlusher() {
	if p.cfg.FlushInterval <= 0 {
		return
	}
	p.flusher.stop = make(chan struct{})
	p.flusher.done = make(chan struct{})
	go p.runFlusher(p.cfg.FlushInterval)
}

// runFlusher flushes every interval until stopFlusher.
func (p *Partition) runFlusher(interval time.Duration) {
	defer close(p.flusher.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.flusher.stop:
			return
		case <-t.C:
		}
		p.periodicFlush()
	}
}

// periodicFlush is one FlushInterval flush (of the partition's goroutine,
// or of its Dir's flush scheduler): everything not yet synced, if
// anything.
func (p *Partition) periodicFlush() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	defer p.mu.Unlock()
	if p.checkWritableLocked() == nil && (p.syncedSeq.Load() != p.mu.writeSeq || p.mu.dirDirty) {
		if err := p.fullFlushLocked(); err != nil {
			p.logger.Warn("partlog/log: periodic flush failed", "dir", p.dir, "err", err)
		}
	}
}

// stopFlusher stops the FlushInterval goroutine and waits for it. Safe to
// call more than once. REQUIRES: flushMu and mu not held.
func (p *Partition) stopFlusher() {
	p.flusher.once.Do(func() {
		if p.flusher.stop != nil {
			close(p.flusher.stop)
			<-p.flusher.done
		}
	})
}

// rolledWork is what rolls leave to the background: the flush of the
// segments they sealed, the producer snapshots they took and the recovery
// point at the newest segment's base (flushRolled).
type rolledWork struct {
	// ckptMu serializes the writes of the recovery point checkpoint and
	// of the roll snapshots with everything that lowers the recovery
	// point or removes snapshots (setRecoveryPointLocked,
	// removeSnapshots). Lock order: flushMu, mu, then ckptMu; the
	// background flush takes it holding flushMu but not mu.
	ckptMu sync.Mutex
	// recoveryPoint is the offset last persisted in the recovery point
	// checkpoint (-1 when there is none). Guarded by ckptMu.
	recoveryPoint int64
	// snapshotRemovals counts removeSnapshots calls and producer state
	// replacements (discardRollSnapshotsLocked); written under ckptMu. A
	// roll snapshot taken before either is never written.
	snapshotRemovals atomic.Uint64
	// wg counts the background flush goroutines of a partition alone;
	// Close waits for them.
	wg sync.WaitGroup
	// sched is the Dir's flush scheduler, which runs a Dir partition's
	// background flushes on its workers (nil for a partition alone).
	sched *flushScheduler
}

// rollSnapshot is a producer state snapshot a roll took (snapshot.go),
// waiting to be written once the segments below offset are durable. It is
// written only while the truncation count and the snapshot removal count
// are still those of the roll.
type rollSnapshot struct {
	offset      int64
	data        []byte
	truncations uint64
	removals    uint64
}

// noteRolledLocked records that a roll created the segment at newBase and
// schedules the background flush of the segments below it (flushRolled):
// a goroutine for a partition alone, the Dir's flush scheduler for a
// partition of a Dir; none under Config's manual mode (tests run
// flushRolled themselves). REQUIRES: mu held.
func (p *Partition) noteRolledLocked(newBase int64) {
	p.mu.rollTarget = newBase
	p.mu.rollTruncations = p.truncations.Load()
	if p.mu.rollQueued || p.cfg.manualRollFlush {
		return
	}
	p.mu.rollQueued = true
	if s := p.rolled.sched; s != nil {
		s.flushNow(p)
		return
	}
	p.rolled.wg.Add(1)
	go func() {
		defer p.rolled.wg.Done()
		_ = p.flushRolled() // a failure fails the partition (logged)
	}()
}

// flushRolled is the background half of the rolls since the last one: it
// trims the index files of the sealed segments below the newest roll's
// base to their entries and fsyncs those segments (their .log,
// indexes and .txnindex, through handles of its own, without mu: appends
// go on), syncs the directory when entries changed, writes the roll
// snapshots, and raises the recovery point to that base. A failed fsync
// fails the partition (sticky, as any failed flush). The checkpoint and
// snapshot writes happen under rolled.ckptMu, and only while no
// truncation happened since the rolls: a TruncateTo that cut below the
// base has flushed everything itself and moves the recovery point back
// under ckptMu, so the lower value is never overwritten by an older
// higher one. It returns nil when there is nothing to do or the
// partition is closed. REQUIRES: flushMu and mu not held.
func (p *Partition) flushRolled() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	p.mu.rollQueued = false
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	w := p.takeRolledLocked()
	p.mu.Unlock()
	// First the renames of the segments the rolls adopted (their files
	// are found by name below, and the directory sync must cover them).
	err := p.settleAdoptions()
	if w.target == 0 && len(w.snapshots) == 0 && err == nil {
		return nil
	}

	for _, seg := range w.segs {
		if err == nil {
			err = p.trimSealed(seg)
		}
		if err == nil {
			err = p.syncSegmentFiles(seg)
		}
		if uerr := seg.Unref(); uerr != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", uerr)
		}
	}
	if err == nil && w.dirDirty {
		err = p.syncDirSettled()
	}
	wrote := false
	if err == nil {
		wrote = p.writeRollSnapshots(w.snapshots, w.truncations)
		if w.target > 0 {
			p.raiseRecoveryPoint(w.target, w.truncations)
		}
	}

	p.lockWriter()
	defer p.mu.Unlock()
	if err != nil {
		p.failLocked(fmt.Errorf("partlog/log: flush after a roll %s: %w", p.dir, err))
		return p.mu.failed
	}
	if wrote {
		p.mu.dirDirty = true // the snapshots' entries, at the next flush
	}
	if p.truncations.Load() == w.truncations && w.target > p.mu.flushedBelow {
		p.mu.flushedBelow = w.target
	}
	return nil
}

// rolled is one flushRolled run's work, taken under mu.
type rolled struct {
	// segs are the sealed segments to flush, each with a reference.
	segs []*segment.Segment
	// target is the recovery point to raise to (0: none).
	target      int64
	truncations uint64
	dirDirty    bool
	snapshots   []rollSnapshot
}

// takeRolledLocked takes the work the rolls left: when no truncation
// happened since the newest roll and no full flush did it meanwhile, the
// segments below its base not yet flushed (flushedBelow), the
// directory's dirty flag and the recovery point target; and the snapshots
// of rolls since the last truncation. REQUIRES: mu held.
func (p *Partition) takeRolledLocked() rolled {
	w := rolled{truncations: p.truncations.Load()}
	if t := p.mu.rollTarget; t > p.mu.flushedBelow && p.mu.rollTruncations == w.truncations {
		w.target = t
		snap := p.segs.Load()
		for _, seg := range snap.list {
			if seg != snap.active() && seg.BaseOffset() >= p.mu.flushedBelow && seg.BaseOffset() < t {
				seg.Ref()
				w.segs = append(w.segs, seg)
			}
		}
		// Read, not cleared: writers under mu alone (TruncateTo, for
		// one) sync the directory themselves when it is dirty, and must
		// not skip that while this sync is still to come. The next
		// flush syncs it once more.
		w.dirDirty = p.mu.dirDirty
	}
	p.mu.rollTarget = 0
	for _, s := range p.mu.rollSnapshots {
		if s.truncations == w.truncations {
			w.snapshots = append(w.snapshots, s)
		}
	}
	p.mu.rollSnapshots = nil
	return w
}

// trimSealed cuts the index files of the sealed segment seg to their
// entries: the part of the roll's seal that frees each index's
// preallocated segment.index.bytes, left to the background so that the
// roll does not truncate two files under mu. It runs before the fsync of
// the segment's files, so the recovery point is raised only over
// trimmed indexes. The segment orders the trim against the writer's own
// changes of its index files (segment.TrimSealedIndexes); a segment
// already closed needs none (its indexes were trimmed when closed). A
// failed trim is an I/O error of the flush. REQUIRES: flushMu held, a
// reference on seg.
func (p *Partition) trimSealed(seg *segment.Segment) error {
	if err := seg.TrimSealedIndexes(); err != nil {
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
func (p *Partition) syncSegmentFiles(seg *segment.Segment) error {
	start := time.Now()
	defer p.stats.noteSync(start)
	for _, suffix := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
		path := filepath.Join(p.dir, segment.FileName(seg.BaseOffset(), suffix))
		f, err := p.cfg.FS.Open(path)
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

// writeRollSnapshots writes the roll snapshots snaps, fsynced, under
// rolled.ckptMu, while the truncation count is still truncations and no
// snapshot was removed since each was taken; it reports whether it wrote
// any. Failures are logged: a snapshot only shortens a replay. REQUIRES:
// flushMu held, mu not held; the segments below each offset are durable.
func (p *Partition) writeRollSnapshots(snaps []rollSnapshot, truncations uint64) bool {
	if len(snaps) == 0 {
		return false
	}
	p.rolled.ckptMu.Lock()
	defer p.rolled.ckptMu.Unlock()
	wrote := false
	for _, s := range snaps {
		if p.truncations.Load() != truncations || p.rolled.snapshotRemovals.Load() != s.removals {
			continue
		}
		if err := p.writeSnapshotBytes(s.offset, s.data, true); err != nil {
			p.logger.Warn("partlog/log: producer snapshot not written", "dir", p.dir, "offset", s.offset, "err", err)
			continue
		}
		wrote = true
	}
	return wrote
}

// writeRollSnapshotsLocked writes the pending roll snapshots, fsynced, and
// syncs the directory: a full flush's part of the rolls' work, after every
// segment was flushed. A snapshot write failure is logged; a failed
// directory sync is returned. REQUIRES: flushMu and mu held.
func (p *Partition) writeRollSnapshotsLocked() error {
	snaps := p.mu.rollSnapshots
	p.mu.rollSnapshots = nil
	wrote := false
	for _, s := range snaps {
		if s.truncations != p.truncations.Load() || s.removals != p.rolled.snapshotRemovals.Load() {
			continue
		}
		if err := p.writeSnapshotBytes(s.offset, s.data, true); err != nil {
			p.logger.Warn("partlog/log: producer snapshot not written", "dir", p.dir, "offset", s.offset, "err", err)
			continue
		}
		wrote = true
	}
	if wrote {
		if err := p.syncDirSettled(); err != nil {
			p.mu.dirDirty = true
			return fmt.Errorf("partlog/log: sync %s: %w", p.dir, err)
		}
	}
	return nil
}

// raiseRecoveryPoint persists offset as the recovery point, under
// rolled.ckptMu, when it raises it and no truncation happened since the
// work was taken (truncations). A failed write is logged and keeps the
// older value (safe: recovery reads more). REQUIRES: flushMu held, mu not
// held; every segment below offset and the directory are durable.
func (p *Partition) raiseRecoveryPoint(offset int64, truncations uint64) {
	p.rolled.ckptMu.Lock()
	defer p.rolled.ckptMu.Unlock()
	if p.truncations.Load() != truncations || offset <= p.rolled.recoveryPoint {
		return
	}
	if err := p.ckpt.write(recoveryPointCheckpointFile, offset, true); err != nil {
		p.logger.Warn("partlog/log: roll: recovery point not persisted", "dir", p.dir, "offset", offset, "err", err)
		return
	}
	p.rolled.recoveryPoint = offset
}

// flushSealedBelowLocked makes every segment below off durable and moves
// the recovery point up to off, under mu, when it is below: for the
// writers that must not leave sealed segments above the recovery point
// (compaction, whose output may end below the next segment's base;
// retention, which raises the log start past them; a follower's roll
// across an offset gap), since Open cuts the log at the first segment
// above the recovery point that ends before the next one begins. off is a
// segment base at or below the active segment's. A failed fsync fails the
// partition; a failed checkpoint write is returned and changes nothing
// else. REQUIRES: mu held.
func (p *Partition) flushSealedBelowLocked(off int64) error {
	p.rolled.ckptMu.Lock()
	rp := p.rolled.recoveryPoint
	p.rolled.ckptMu.Unlock()
	if rp >= off {
		return nil
	}
	snap := p.segs.Load()
	for _, seg := range snap.list {
		if seg == snap.active() || seg.BaseOffset() < p.mu.flushedBelow || seg.BaseOffset() >= off {
			continue
		}
		if err := p.flushSegment(seg); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: sync %s: segment %d: %w", p.dir, seg.BaseOffset(), err))
			return p.mu.failed
		}
	}
	p.mu.flushedBelow = max(p.mu.flushedBelow, off)
	if p.dirUnsyncedLocked() {
		if err := p.syncDirSettled(); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: sync %s: %w", p.dir, err))
			return p.mu.failed
		}
		p.mu.dirDirty = false
	}
	// Raise only: the background flush may have moved it past off since
	// it was read above.
	p.rolled.ckptMu.Lock()
	defer p.rolled.ckptMu.Unlock()
	if off <= p.rolled.recoveryPoint {
		return nil
	}
	if err := p.ckpt.write(recoveryPointCheckpointFile, off, true); err != nil {
		return fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", p.dir, err)
	}
	p.rolled.recoveryPoint = off
	return nil
}
