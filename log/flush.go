package log

import (
	"errors"
	"fmt"
	"sync"

	"github.com/partlog/partlog/segment"
)

// The core's side of durability (durability.go has the part and the
// rules): the entry points that take flushMu and mu and hand the parts the
// core state they work on, what is persisted once the log is durable (the
// roll snapshots, through the snapshot part, snapshot.go; the leader
// epochs), and the core's implementations of durabilityCore and
// spareCore.

// checkpointLock is the core's lock of the checkpoint and snapshot files
// the roll's background flush writes without mu (Partition.rolled).
type checkpointLock struct {
	// ckptMu serializes the writes of the recovery point checkpoint
	// (durability.recoveryPoint, which it guards) and of the roll
	// snapshots with everything that lowers the recovery point or removes
	// snapshots (durability.setRecoveryPointLocked,
	// producerSnapshots.remove). Lock order: flushMu, mu, then ckptMu; the
	// background flush takes it holding flushMu but not mu.
	ckptMu sync.Mutex
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

// noteWriteLocked counts a batch of records records written (or queued)
// to active, for the durability part and the Dir's awake set. REQUIRES:
// mu held.
func (p *Partition) noteWriteLocked(active *segment.Segment, records int64) {
	p.mu.writeSeq++
	p.dur.noteWriteLocked(active, p.mu.writeSeq, records)
	p.awake.noteWrittenLocked(active) // awake.go
}

// flushDueLocked reports whether an append must run a full flush before
// it returns (FlushMessages > 1). REQUIRES: mu held.
func (p *Partition) flushDueLocked() bool { return p.dur.flushDueLocked() }

// afterAppend makes an append as durable as the policy promises; it runs
// after mu was released. seq is the append's write sequence number.
func (p *Partition) afterAppend(seq uint64, flushDue bool) error {
	switch {
	case p.dur.syncEveryAppend():
		return p.dur.group.wait(seq)
	case flushDue:
		p.flushMu.Lock()
		defer p.flushMu.Unlock()
		p.lockWriter()
		defer p.mu.Unlock()
		if p.dur.group.syncedSeq() >= seq {
			// A full flush covered the batch meanwhile: another
			// append's, a Sync's, or the Close that closed the
			// partition (which then must not make a durable batch
			// look failed).
			return nil
		}
		if err := p.checkWritableLocked(); err != nil {
			return err
		}
		if !p.dur.flushDueLocked() {
			return nil // another append flushed meanwhile
		}
		return p.fullFlushLocked()
	}
	return nil
}

// syncRound is one round of the group commit (groupSyncer; groupCommit.wait
// runs it on the appender that became the syncer): under flushMu, unless a
// flush covered seq meanwhile, it takes under mu the write count, the
// segments written since the last round and the directory's dirty flag,
// releases mu, fdatasyncs them (durability.syncUnsynced), and under mu
// again publishes the count as synced and, when the high watermark
// follows syncs, moves it to the log end it took. covered is by how much
// the synced count rose. REQUIRES: flushMu and mu not held.
func (p *Partition) syncRound(seq uint64) (covered uint64, err error) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	from := p.dur.group.syncedSeq()
	if from < seq { // a full flush may have covered it
		err = p.groupSyncLocked()
	}
	return p.dur.group.syncedSeq() - from, err
}

// groupSyncLocked fdatasyncs every .log written up to now, outside mu, and
// publishes what it covered. REQUIRES: flushMu held, mu not held.
func (p *Partition) groupSyncLocked() error {
	p.lockWriter()
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	seq := p.mu.writeSeq
	w := p.dur.takeUnsyncedLocked(p.mu.dirDirty)
	p.mu.dirDirty = false
	end, truncations := p.mu.end, p.truncations.Load()
	p.mu.Unlock()

	err := p.dur.syncUnsynced(w)

	p.lockWriter()
	defer p.mu.Unlock()
	p.dur.endUnsyncedLocked(w)
	if err != nil {
		p.mu.dirDirty = p.mu.dirDirty || w.dirDirty
		return p.failLocked(fmt.Errorf("partlog/log: sync %s: %w", p.dir, err))
	}
	p.dur.group.synced.Store(seq)
	if p.dur.hwFollowsSync() && p.truncations.Load() == truncations &&
		end.Offset > p.mu.hw.Offset && end.Offset <= p.mu.end.Offset {
		p.mu.hw = end
		p.publishLocked()
	}
	return nil
}

// fullFlushLocked flushes what Sync promises. REQUIRES: flushMu and mu
// held.
func (p *Partition) fullFlushLocked() error {
	if err := p.flushLocked(); err != nil {
		return p.failLocked(err)
	}
	// What a roll left to the background is done now too: every segment
	// is flushed, so its snapshots may be written.
	p.dur.flushedAllLocked(p.mu.writeSeq)
	if p.dur.hwFollowsSync() && p.mu.hw.Offset < p.mu.end.Offset {
		p.mu.hw = p.mu.end
		p.publishLocked()
	}
	// The roll snapshots still pending (producerSnapshots), then the
	// directory entries of those it wrote.
	if p.snaps.writePendingLocked() {
		if err := p.dur.syncDir(); err != nil {
			p.mu.dirDirty = true
			return fmt.Errorf("partlog/log: sync %s: %w", p.dir, err)
		}
	}
	return p.recordFlushedLocked()
}

// recordFlushedLocked records what a full flush made durable: the
// recovery point at the log end, the leader epochs, the high watermark.
// REQUIRES: flushMu and mu held.
func (p *Partition) recordFlushedLocked() error {
	if err := p.dur.setRecoveryPointLocked(p.mu.end.Offset); err != nil {
		return err
	}
	if err := p.mu.epochs.Persist(); err != nil {
		return err
	}
	return p.dur.writeHighWatermarkLocked(p.mu.hw.Offset)
}

// closeFlushLocked is fullFlushLocked for a Close whose Dir syncs the
// whole filesystem afterwards (Dir.Close). It syncs neither the segments
// nor the directory, and leaves the rolls' pending producer snapshots to
// snapshotsAfterSyncLocked; the recovery point and high watermark it
// records wait in the held root files until the Dir's sync is done. It
// counts nothing as synced (groupCommit.synced stays). unsynced reports
// whether anything may need the Dir's sync: an unsynced directory entry,
// or a segment not as a clean open found it (segment.SyncedSinceOpen). An
// idle partition after a clean open has nothing, and a Dir of only those
// syncs nothing. REQUIRES: flushMu and mu held; the Dir's root files held.
func (p *Partition) closeFlushLocked() (unsynced bool, err error) {
	// The index trims a sealed segment's flush makes before its syncs
	// (the active one's, sealed by Close, among them), so that the Dir's
	// sync covers them even when a reader holds a segment open past the
	// Close (its index files are closed, and trimmed, only then): a clean
	// open trusts an index only when its file ends with its entries.
	unsynced = p.mu.dirDirty
	for _, seg := range p.segs.Load().list {
		if err := seg.TrimSealedIndexes(); err != nil {
			return true, fmt.Errorf("partlog/log: close %s: trim the indexes of segment %d: %w", p.dir, seg.BaseOffset(), err)
		}
		// Conservative: a segment flushed since it was written counts.
		unsynced = unsynced || !seg.SyncedSinceOpen()
	}
	return unsynced, p.recordFlushedLocked()
}

// flushLocked fsyncs the segments written since the last full flush and
// the directory (durability.flushSegmentsLocked). REQUIRES: mu held.
func (p *Partition) flushLocked() error {
	dirSynced, err := p.dur.flushSegmentsLocked(p.segs.Load(), p.mu.dirDirty)
	if dirSynced {
		p.mu.dirDirty = false
	}
	return err
}

// flushSealedBelowLocked makes every segment below off durable and moves
// the recovery point up to off (durability.flushSealedBelowLocked says
// for whom and why). A failed fsync fails the partition; a failed
// checkpoint write is returned and changes nothing else. REQUIRES: mu
// held.
func (p *Partition) flushSealedBelowLocked(off int64) error {
	dirSynced, err := p.dur.flushSealedBelowLocked(p.segs.Load(), off, p.mu.dirDirty)
	if dirSynced {
		p.mu.dirDirty = false
	}
	return err
}

// periodicFlush is one FlushInterval flush (of the partition's goroutine,
// or of its Dir's flush scheduler): everything not yet synced, if
// anything, and under DisableAutoHighWatermark a high watermark moved
// since it was last persisted, also when no batch was written since.
// Part of durabilityCore.
func (p *Partition) periodicFlush() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	defer p.mu.Unlock()
	if p.checkWritableLocked() == nil && (p.dur.group.syncedSeq() != p.mu.writeSeq || p.mu.dirDirty ||
		p.dur.highWatermarkUnpersistedLocked(p.mu.hw.Offset)) {
		if err := p.fullFlushLocked(); err != nil {
			p.logger.Warn("partlog/log: periodic flush failed", "dir", p.dir, "err", err)
		}
	}
}

// flushRolled is the background half of the rolls since the last one
// (part of durabilityCore): it trims the index files of the sealed
// segments below the newest roll's base to their entries and fsyncs those
// segments (their .log, indexes and .txnindex, through handles of its own,
// without mu: appends go on), syncs the directory when entries changed,
// writes the roll snapshots, and raises the recovery point to that base. A
// failed fsync fails the partition (sticky, as any failed flush). The
// checkpoint and snapshot writes happen under rolled.ckptMu, and only
// while no truncation happened since the rolls: a TruncateTo that cut
// below the base has flushed everything itself and moves the recovery
// point back under ckptMu, so the lower value is never overwritten by an
// older higher one. It returns nil when there is nothing to do or the
// partition is closed. REQUIRES: flushMu and mu not held.
func (p *Partition) flushRolled() error {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	p.dur.rollFlushStartedLocked()
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	truncations := p.truncations.Load()
	w := p.dur.takeRolledLocked(p.segs.Load(), truncations, p.mu.dirDirty)
	snaps := p.snaps.takePendingLocked(truncations)
	p.mu.Unlock()
	// First the renames of the segments the rolls adopted (their files
	// are found by name below, and the directory sync must cover them).
	err := p.dur.spare.settleAdoptions()
	if w.target == 0 && len(snaps) == 0 && err == nil {
		return nil
	}
	err = p.dur.syncRolled(w, err)
	wrote := false
	if err == nil {
		wrote = p.snaps.writeRolled(snaps, truncations)
		if w.target > 0 {
			p.dur.raiseRecoveryPoint(w.target, truncations)
		}
	} else {
		p.snaps.dropTaken() // the partition fails below
	}

	p.lockWriter()
	defer p.mu.Unlock()
	if err != nil {
		return p.failLocked(fmt.Errorf("partlog/log: flush after a roll %s: %w", p.dir, err))
	}
	if wrote {
		p.mu.dirDirty = true // the snapshots' entries, at the next flush
	}
	if p.truncations.Load() == truncations {
		p.dur.rolledFlushedLocked(w.target)
	}
	return nil
}

// failLocked makes err the partition's sticky failure (wrapping
// ErrFailed) unless it already failed, and returns the sticky failure
// (part of durabilityCore). REQUIRES: mu held.
func (p *Partition) failLocked(err error) error {
	if p.mu.failed == nil {
		p.setFailedLocked(failedf(err))
		p.logger.Error("partlog/log: partition failed; reopen it to recover", "dir", p.dir, "err", err)
	}
	return p.mu.failed
}

// unlock releases mu (spareCore).
func (p *Partition) unlock() { p.mu.Unlock() }

// writesLocked returns the count of batch writes and whether the partition
// takes a spare: open, not failed, and its active segment not at rest
// (a Dir's awake set rested it, and dropped its spare: awake.go)
// (spareCore). REQUIRES: mu held.
func (p *Partition) writesLocked() (seq uint64, open bool) {
	return p.mu.writeSeq, !p.mu.closed && p.mu.failed == nil && !p.segs.Load().active().Sealed()
}
