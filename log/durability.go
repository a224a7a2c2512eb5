package log

import (
	"errors"
	"fmt"
	"runtime"
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
//   - A roll flushes the segment it seals and persists the recovery point
//     at the new segment's base before the new segment takes appends
//     (Kafka flushes on roll too, asynchronously).
//   - Under FlushMessages == 1 an append writes under mu, notes its write
//     sequence number, releases mu, and waits in groupSync for an
//     fdatasync of the .log that started after its write: one syncer at a
//     time (flushMu), which takes under mu the highest write sequence
//     number and the segments written since the last sync, releases mu,
//     fdatasyncs them (and the directory when a roll created a file), and
//     publishes the sequence number as synced. Appenders that wrote while
//     it ran queue on flushMu and the first of them syncs for all, after
//     yielding so that the appenders the last sync released write their
//     next batches first (gatherAppenders). Index
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
		p.group.mu.Unlock()
		gatherAppenders()
		p.flushMu.Lock()
		var err error
		if p.syncedSeq.Load() < seq { // a full flush may have covered it
			err = p.groupSyncFlushLocked()
		}
		p.flushMu.Unlock()
		p.group.mu.Lock()
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

// gatherAppenders lets the appenders that are ready to run write before a
// new group syncer takes its snapshot: the waiters the previous sync
// released (now appending their next batch) and appenders queued on mu.
// Without it the syncer, woken first, snapshots before they write, and
// each sync covers about half of the waiting appenders. Yielding costs
// well under a microsecond when nothing else is runnable, against an
// fdatasync of a millisecond or more.
func gatherAppenders() {
	for range gatherRounds {
		runtime.Gosched()
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
		err = syncDir(p.cfg.FS, p.dir)
	}

	p.lockWriter()
	defer p.mu.Unlock()
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
	p.syncPendingSnapshots() // snapshot.go, without mu
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
	if err := p.setRecoveryPointLocked(p.mu.end.Offset); err != nil {
		return err
	}
	if err := p.writeEpochsLocked(); err != nil {
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
// failed lowering fails the partition. REQUIRES: mu held.
func (p *Partition) setRecoveryPointLocked(offset int64) error {
	if offset == p.mu.recoveryPoint {
		return nil
	}
	// Raising it is lazy: a crash that loses the new value leaves the
	// older one, which only makes recovery read more.
	if err := p.ckpt.write(recoveryPointCheckpointFile, offset, offset > p.mu.recoveryPoint); err != nil {
		err = fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", p.dir, err)
		if offset < p.mu.recoveryPoint {
			p.failLocked(err)
			return p.mu.failed
		}
		return err
	}
	p.mu.recoveryPoint = offset
	return nil
}

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
	if p.mu.dirDirty {
		if err := syncDir(p.cfg.FS, p.dir); err != nil {
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
	p.syncPendingSnapshots() // snapshot.go, without mu
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
