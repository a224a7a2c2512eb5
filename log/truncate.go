package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/segment"
)

// TruncateTo cuts the log back so that offset is no longer in it, as a Kafka
// follower does after a leader change: it deletes every segment whose base
// offset is above offset, and cuts the segment holding offset at the start
// of the batch holding offset. The log end offset becomes that batch's base
// offset (offset itself when offset is a batch boundary; lower when offset
// lies inside a batch, since a batch is never split; in a log Kafka
// compacted, an offset inside a gap keeps the batches below it and the log
// end becomes the last one's next offset). The high watermark is clamped
// down to the new log end, and so is the compaction cleaner's checkpoint
// (the cleaner-offset-checkpoint file, when it exists and is above the new
// end; Kafka's maybeTruncateCheckpoint), durably before TruncateTo
// returns: offsets appended again after the cut are dirty.
//
// offset >= LogEndOffset cuts no batch, but removes a leader epoch that
// starts at the log end offset (one recorded before any batch of it was
// appended), durably, as Kafka does; a negative offset gives
// ErrOffsetOutOfRange. When the batch holding offset also holds the log
// start offset (DeleteRecordsBefore moved it inside that batch), or, in a
// log with offset gaps, no batch reaching the log start offset would stay,
// the whole log goes and restarts empty at the log start offset, with a new
// segment there (Kafka's truncateFullyAndStartAt). offset < LogStartOffset
// lowers the log start offset to offset, as Kafka's truncateTo does: the
// log restarts empty at offset (TruncateFullyAndStartAt; Kafka keeps the
// records below the old log start in the files when offset is at or above
// the first segment's base, partlog removes them, which no reader could
// see). In a partition its Dir tiers, whose copies hold the offsets below
// LogStartOffset, the whole log restarts at offset then, as Kafka's
// truncateTo below the first local segment does: every copy is recorded
// "deleting", those below offset too (TruncateFullyAndStartAt), so the
// whole log starts at offset, with no hole below the cut.
//
// Readers that hold Records on the segment being cut delay it: TruncateTo
// first waits, before it changes anything, until they close them. Meanwhile new reads of that segment wait
// too (so overlapping readers cannot starve the truncation), reads of other
// segments and SetHighWatermark go on, and every other writer, appends
// included, waits for TruncateTo. The wait is bounded by Config.TruncateWait
// (TruncateToContext also by its context): when it ends first, TruncateTo
// gives up, changes nothing and returns an error wrapping
// ErrTruncationBlocked that names how many readers still hold the segment.
// A goroutine that holds Records of the segment and calls TruncateTo thus
// gets that error after TruncateWait instead of hanging. The wait is logged
// and counted (Stats.TruncationWaiting, TruncationWaits,
// TruncationsBlocked). Records on deleted segments stay valid
// until closed.
//
// An I/O error while cutting leaves the files ahead of the published state;
// the partition then refuses further writes with that error (reopen it to
// recover).
func (p *Partition) TruncateTo(offset int64) error {
	return p.TruncateToContext(context.Background(), offset)
}

// TruncateToContext is TruncateTo with a context that bounds its wait for
// readers (together with Config.TruncateWait, whichever ends first). When
// ctx ends during the wait, nothing has changed and the error wraps both
// ErrTruncationBlocked and ctx's error. A context that ends after the wait
// does not interrupt the cut.
func (p *Partition) TruncateToContext(ctx context.Context, offset int64) error {
	p.lockWriter()
	defer p.mu.Unlock()
	defer p.noteActiveLocked() // awake.go
	// A call that published a cut (the truncation count moved under mu)
	// counts in Stats.Truncations, whatever it returns.
	gen := p.truncations.Load()
	defer func() {
		if p.truncations.Load() != gen {
			p.stats.truncates.Add(1)
		}
	}()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if offset >= p.mu.end.Offset {
		// Nothing to cut, but an epoch entry at the log end (a leader
		// that appended nothing before it lost its leadership) goes, as
		// Kafka's truncateTo removes it.
		return p.truncateEpochsAtEndLocked()
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to negative offset %d", ErrOffsetOutOfRange, offset)
	}
	if offset < p.logStart.Load() {
		// Below the log start: lower it (Kafka's truncateTo), restarting
		// the log there (restart.go); the whole log restarts, copies
		// included (Kafka's truncateTo below the first local segment).
		return p.truncateFullyLocked(offset)
	}
	snap := p.segs.Load()
	i := snap.find(offset)
	if i < 0 {
		return fmt.Errorf("%w: truncate to %d, below the first segment %d", ErrOffsetOutOfRange, offset, snap.list[0].BaseOffset())
	}
	seg := snap.list[i]
	pos, batchBase, found, err := locateBatch(seg, offset)
	if err != nil {
		return fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err)
	}
	// newEnd is the new log end offset: the base of the batch holding
	// offset. In a log Kafka compacted, offset may fall in a gap before
	// that batch; the log then ends at or below offset (the previous
	// batch's next offset, known after the cut).
	newEnd := min(batchBase, offset)
	if !found {
		pos, newEnd = seg.Size(), seg.NextOffset()
	}
	// A cut that would empty a segment after an offset gap (a follower's
	// roll across a gap, follower.go) removes that segment instead: the
	// log ends where the previous one does, as the model says.
	dropped := found && pos == 0 && i > 0 && seg.BaseOffset() > snap.list[i-1].NextOffset()
	if dropped {
		i--
		seg, found = snap.list[i], false
		pos, newEnd = seg.Size(), max(seg.NextOffset(), p.logStart.Load())
	}
	start := p.logStart.Load()
	kept, err := keptEnd(seg, found, pos, start)
	if err != nil {
		return fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err)
	}
	if kept < start {
		// No batch reaching the log start offset stays: the batch holding
		// offset also holds the log start offset and cannot be split, or
		// (in a log with offset gaps) the log start lies in the gap
		// before the first batch cut. The files cannot end at the log
		// start offset then: empty the log and restart it there (Kafka's
		// truncateFullyAndStartAt).
		return p.truncateFullyLocked(start)
	}

	// 0. Wait (bounded, without mu) until no reader holds the segment to
	// cut, and hold its exclusive lease from then on: no read of it runs
	// until the cut is done. Nothing changed yet, so giving up is free.
	// While mu was released only SetHighWatermark and LeaderEpochs ran
	// (every other writer waits for mu.truncating to clear), so what was
	// computed above still holds.
	leased := false
	if found {
		if err := p.lockForTruncateLocked(ctx, seg, offset); err != nil {
			return err
		}
		leased = true
		defer func() {
			if leased {
				seg.UnlockForTruncate() // an error return before the cut
			}
		}()
	}

	// 1. Lower the cleaner checkpoint first (always safe: compaction only
	// cleans more): offsets re-appended after the cut are dirty. A
	// failure changes nothing else.
	if err := p.ckpts.clampCleanerLocked(newEnd); err != nil {
		return fmt.Errorf("partlog/log: truncate %s to %d: cleaner checkpoint: %w", p.dir, offset, err)
	}

	// The roll snapshots not yet written at or below the new end still
	// hold the producer state there: the truncation's counts void every
	// one taken, so they are taken out now and written once the batches
	// below them are durable, before the producer state is reloaded.
	carried := p.snaps.validPendingLocked()

	// 1b. Remove the producer snapshots past the new end, durably, before
	// any file is cut (always safe: the next load replays from an older
	// one). The cut removes .txnindex entries and whole segments in steps
	// a crash can keep in part: the .txnindex of a segment cut before its
	// .log, or a later segment's .log kept while its .txnindex rename to
	// .deleted survived. The replay after a snapshot at or below newEnd
	// rewrites the entries of every marker from there (producerSnapshots.replay);
	// one past the markers left would leave them out of the .txnindex, and
	// read_committed would serve their aborted transactions.
	// A failed removal changes nothing that matters (no file was cut yet);
	// a failed directory sync fails the partition, as every failed sync.
	_, removed, err := p.snaps.remove(func(off int64) bool { return off > newEnd })
	if err != nil {
		return fmt.Errorf("partlog/log: truncate %s to %d: remove producer snapshots: %w", p.dir, offset, err)
	}
	if removed {
		if err := p.dur.syncDir(); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: truncate %s to %d: sync after removing producer snapshots: %w", p.dir, offset, err))
			return p.mu.failed
		}
	}

	// 1c. A tiered partition's copies of offsets at or past newEnd are
	// recorded "deleting", durably, before the cut is visible (tier.go,
	// partTier.dropFrom): no read or local retention uses them from now
	// on, no copy started before is recorded, and the next pass deletes
	// them. A failure changes nothing else that matters (steps 1 and 1b
	// are always safe).
	if err := p.tierPart.Load().dropFrom(newEnd); err != nil {
		return fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err)
	}

	// 2. Publish the lowered bounds, then count the truncation: a reader
	// that loaded older bounds sees the count change and retries. Until
	// the producer state is reloaded (makeTruncationDurableLocked), the
	// last stable offset is held at the log start: a cut marker reopens
	// its transaction (txn.go).
	p.txn.hold(&p.bounds)
	p.setEndLocked(position{Offset: newEnd, SegBase: seg.BaseOffset(), Pos: pos})
	p.countTruncationLocked()

	// 3. Drop the later segments from the list, then delete them (newest
	// first); readers holding them keep them until they let go.
	fail := func(err error) error {
		p.setFailedLocked(failedf(err))
		return p.mu.failed
	}
	if i < len(snap.list)-1 {
		dropped := snap.list[i+1:]
		if err := p.spliceSegmentsLocked(i+1, len(snap.list)); err != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
		}
		err := deleteSegmentFiles(dropped, true, &p.dur)
		p.mu.dirDirty = true
		if err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err))
		}
		// The removals must be durable before the cut: a crash must not
		// bring a later segment back behind a shortened one (a hole).
		if err := p.dur.syncDir(); err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err))
		}
		p.mu.dirDirty = false
		if err := seg.Unseal(); err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: activate segment %d: %w", p.dir, offset, seg.BaseOffset(), err))
		}
		p.mu.rollAfter = p.newRollAfter()
		p.dur.unflushFromLocked(seg.BaseOffset())
	}

	// 4. Cut the segment holding offset (its exclusive lease is held since
	// step 0) and let its readers in again: the bytes below pos are where
	// they were, and a reader granted a lease now sees the new count and
	// the lowered bounds. Then publish where the log really ends.
	if found {
		_, err := seg.TruncateToLocked(batchBase)
		seg.UnlockForTruncate()
		leased = false
		if err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: segment %d: %w", p.dir, offset, seg.BaseOffset(), err))
		}
	}
	if seg.Size() != pos || seg.NextOffset() > newEnd {
		return fail(base.AssertionFailedf("partlog/log: truncate %s to %d: segment %d ends at offset %d byte %d, expected at most %d, byte %d",
			p.dir, offset, seg.BaseOffset(), seg.NextOffset(), seg.Size(), newEnd, pos))
	}
	p.setEndLocked(position{Offset: max(seg.NextOffset(), start), SegBase: seg.BaseOffset(), Pos: pos})
	if p.mu.end.Offset < newEnd {
		// offset fell in a gap of a compacted log: the log ends below
		// newEnd, which step 1 used.
		if err := p.ckpts.clampCleanerLocked(p.mu.end.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: cleaner checkpoint: %w", p.dir, offset, err))
		}
		if err := p.tierPart.Load().dropFrom(p.mu.end.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: truncate %s to %d: %w", p.dir, offset, err))
		}
	}
	p.logger.Info("partlog/log: truncated", "dir", p.dir, "offset", offset, "logEnd", p.mu.end.Offset)
	// A failed raise of the recovery point comes back after the truncation
	// is done, the partition writable (makeTruncationDurableLocked).
	return p.makeTruncationDurableLocked(carried)
}

// defaultTruncateWait is the default of Config.TruncateWait: how long a
// TruncateTo waits for readers holding the segment it cuts before it gives
// up with ErrTruncationBlocked. Kafka's request.timeout.ms default, the
// time a fetch response may reasonably take to send.
const defaultTruncateWait = 30 * time.Second

// truncationStats backs the truncation fields of Stats; its fields are
// atomics, written by TruncateTo and read by anyone.
type truncationStats struct {
	// waitingOn is the segment a TruncateTo waits to cut, nil otherwise.
	waitingOn atomic.Pointer[segment.Segment]
	// waits and blocked back Stats.TruncationWaits and TruncationsBlocked.
	waits, blocked atomic.Uint64
}

// lockForTruncateLocked takes seg's exclusive lease for a cut, waiting for
// its readers with mu released and the partition marked truncating (other
// writers wait for it in lockWriter), for at most Config.TruncateWait or
// until ctx ends. It returns with mu held; on success the caller holds the
// exclusive lease and must release it (UnlockForTruncate). On failure
// nothing changed and the error wraps ErrTruncationBlocked. REQUIRES: mu
// held, mu.truncating nil.
func (p *Partition) lockForTruncateLocked(ctx context.Context, seg *segment.Segment, offset int64) error {
	held, _ := seg.ReadLeases()
	if held > 0 {
		p.truncStats.waits.Add(1)
		p.logger.Info("partlog/log: truncation waits for readers", "dir", p.dir, "offset", offset,
			"segment", seg.BaseOffset(), "readers", held, "maxWait", p.cfg.TruncateWait)
	}
	p.mu.truncating = seg
	p.truncStats.waitingOn.Store(seg)
	p.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, p.cfg.TruncateWait)
	err := seg.LockForTruncate(wctx)
	cancel()
	p.mu.Lock()
	p.truncStats.waitingOn.Store(nil)
	p.mu.truncating = nil
	p.truncated.Broadcast() // the waiters run once the caller releases mu
	if err == nil {
		return nil
	}
	p.truncStats.blocked.Add(1)
	readers := -1
	if lw, ok := errors.AsType[*segment.LeaseWaitError](err); ok {
		readers = lw.Readers
	}
	p.logger.Warn("partlog/log: truncation gave up waiting for readers", "dir", p.dir, "offset", offset,
		"segment", seg.BaseOffset(), "readers", readers, "maxWait", p.cfg.TruncateWait, "err", err)
	return fmt.Errorf("%w: truncate %s to %d: %d readers still hold segment %d (TruncateWait %v): %w",
		ErrTruncationBlocked, p.dir, offset, readers, seg.BaseOffset(), p.cfg.TruncateWait, err)
}

// truncateEpochsAtEndLocked removes the leader epoch entries that start at
// the log end offset, durably. A failed write fails the partition: the
// file would name an epoch the log does not have. REQUIRES: mu held.
func (p *Partition) truncateEpochsAtEndLocked() error {
	p.mu.epochs.TruncateFromEnd(p.mu.end.Offset)
	if !p.mu.epochs.Dirty() {
		return nil
	}
	if err := p.mu.epochs.Persist(); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: truncate %s: %w", p.dir, err))
		return p.mu.failed
	}
	return nil
}

// makeTruncationDurableLocked flushes the log after a truncation and moves
// the recovery point to the new end: a crash must not bring the cut
// batches back under batches appended after them. carried are the roll
// snapshots a TruncateTo took before its counts changed
// (validPendingLocked): those at or below the new end are written once
// the flush made the batches below them durable, so that the reload of the
// producer state finds them, as Kafka's truncateAndReload finds its rolls'
// files. REQUIRES: mu held.
func (p *Partition) makeTruncationDurableLocked(carried []rollSnapshot) error {
	if err := p.flushLocked(); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: truncate %s: %w", p.dir, err))
		return p.mu.failed
	}
	if p.snaps.writeCarriedLocked(carried, p.mu.end.Offset) { // snapshot.go
		p.mu.dirDirty = true
	}
	if p.dur.hwFollowsSync() && p.mu.hw.Offset < p.mu.end.Offset {
		p.mu.hw = p.mu.end
		p.publishLocked()
	}
	// Producer state (snapshot.go): snapshots past the new end removed
	// (durably), state reloaded from the log that remains.
	if _, err := p.loadProducersLocked(p.segs.Load().list, p.mu.end.Offset); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: truncate %s: producer state: %w", p.dir, err))
		return p.mu.failed
	}
	// A failed raise of the recovery point (nothing was flushed since the
	// batches below the new end were appended) keeps the older one, which
	// is safe, and leaves the partition writable: the rest is still done,
	// and the error returned at the end. A failed lowering fails it.
	rpErr := p.dur.setRecoveryPointLocked(p.mu.end.Offset)
	if p.mu.failed != nil {
		return p.mu.failed
	}
	// The high watermark the cut clamped, durably (see
	// durability.lowerHighWatermarkLocked).
	if err := p.dur.lowerHighWatermarkLocked(p.mu.hw.Offset); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: truncate %s: %w", p.dir, err))
		return p.mu.failed
	}
	p.mu.epochs.TruncateFromEnd(p.mu.end.Offset)
	if err := p.mu.epochs.Persist(); err != nil {
		p.failLocked(err) // the file would name epochs of cut batches
		return p.mu.failed
	}
	if p.mu.end.Offset == p.logStart.Load() {
		// Every record below the new end is deleted, as after a
		// DeleteRecordsBefore up to the log end: the next roll leaves
		// every segment wholly below the log start, and an Open after a
		// crash removes them (settleEmptyTail) whether or not the roll's
		// snapshot reached the disk. The snapshots past the new end are
		// gone, so the state must be durable at it now.
		if err := p.producersDurableFromLocked(p.mu.end.Offset); err != nil {
			return fmt.Errorf("partlog/log: truncate %s: producer state: %w", p.dir, err)
		}
	}
	return rpErr
}

// DeleteRecordsBefore moves the log start offset up to offset, as Kafka's
// DeleteRecords does, and deletes the segments that lie wholly below it
// (whose next segment starts at or below offset); the active segment is
// never deleted. Records below the new start are no longer readable, but
// the batch holding offset still is. The new log start offset is persisted
// (log-start-offset-checkpoint, written tmp + fsync + rename) before
// anything is deleted. When offset is the log end offset (every record
// deleted) the leader epoch cache, its first entry moved up to offset, is
// written durably too before DeleteRecordsBefore returns (an error then
// leaves the log start moved and the cache to the next write).
//
// offset <= LogStartOffset is a no-op, except in a partition its Dir
// tiers (docs/tiered-storage.md), whose log starts below LogStartOffset
// when copies hold offsets below it: there DeleteRecordsBefore moves the
// start of the whole log (Stats().Remote.LogStartOffset and the
// OffsetForTimestamp(EarliestTimestamp) answer), as Kafka's DeleteRecords
// moves its log start offset below the local one. In a tiered partition,
// whatever the offset, the whole log's start is recorded durably before
// anything else changes, reads below it get ErrOffsetOutOfRange, the
// copies wholly below it are deleted from the store by the copier's next
// pass, and no copy is made of what lies below it. offset > HighWatermark
// gives ErrOffsetOutOfRange (records not yet committed are never
// deleted). Readers holding Records on deleted segments keep them until
// they close them; the files are removed then.
func (p *Partition) DeleteRecordsBefore(offset int64) error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if offset > p.mu.hw.Offset {
		return fmt.Errorf("%w: delete records before %d, past the high watermark %d", ErrOffsetOutOfRange, offset, p.mu.hw.Offset)
	}
	if offset <= p.logStart.Load() {
		// Below the local log start only copies hold offsets: the tier
		// part moves the whole log's start (a no-op without tiering).
		if err := p.tierPart.Load().moveStart(offset); err != nil {
			return fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err)
		}
		// The leader epoch cache follows the whole log's start (tier.go).
		p.mu.epochs.TruncateFromStart(p.tierPart.Load().epochsStart(p.logStart.Load()))
		return nil
	}
	if p.dur.group.syncedSeq() != p.mu.writeSeq {
		// The checkpoint must not get ahead of the data: a crash could
		// otherwise leave a log start past the log end.
		if err := p.flushLocked(); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err))
			return p.mu.failed
		}
	}
	// The producer snapshots below offset go (dropBelowLocked), the one
	// at the first segment kept included, and so do the segments wholly
	// below it: now, or, when every record is deleted, by an Open after
	// the next roll and a crash (settleEmptyTail), whether or not the
	// roll's snapshot reached the disk. The state they held must be in a
	// durable snapshot at or above offset first.
	if err := p.producersDurableFromLocked(offset); err != nil {
		return fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err)
	}
	// The whole log's start moves first (tier.go; a no-op without
	// tiering): until it does, the copies below offset are served. A crash
	// after it and before the checkpoint leaves the whole log's start
	// ahead of the local one, which the Dir's open finishes moving
	// (dirTier.attach).
	if err := p.tierPart.Load().moveStart(offset); err != nil {
		return fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err)
	}
	if err := p.ckpts.writeLogStart(offset); err != nil {
		return fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err)
	}
	p.logStart.Store(offset)
	p.mu.epochs.TruncateFromStart(offset)
	p.snaps.dropBelowLocked(offset) // snapshot.go
	if offset == p.mu.end.Offset && p.mu.epochs.Dirty() {
		// Every record deleted: the active segment stays, and a roll will
		// leave it wholly below the log start, before an empty segment
		// at it, which is what a restart of the log a crash interrupted
		// leaves too. Open tells them apart by the leader epoch cache
		// (settleEmptyTail): this one starts at or after the log start.
		if err := p.mu.epochs.Persist(); err != nil {
			return fmt.Errorf("partlog/log: delete records before %d in %s: %w", offset, p.dir, err)
		}
	}

	snap := p.segs.Load()
	n := 0
	for n+1 < len(snap.list) && snap.list[n+1].BaseOffset() <= offset {
		n++
	}
	if n == 0 {
		return nil
	}
	return p.dropOldestLocked(n, "delete records")
}

// deleteSegmentFiles renames the files of list, segments no longer in the
// published list, to *.deleted and drops the partition's own reference on
// each: the last reader's release removes the files. It goes through every
// segment even after an error and returns the first. The caller marks the
// directory dirty (whatever the outcome: some renames may have happened).
//
// Order matters when a rename fails: what stays on disk must remain a
// contiguous log. Retention deletes oldest first (a failure leaves a
// suffix, whose start the log start checkpoint already covers); truncation
// deletes newest first (a failure leaves a prefix), each removal synced
// through dirs before the next. newestFirst selects the latter.
// REQUIRES: mu held.
func deleteSegmentFiles(list []*segment.Segment, newestFirst bool, dirs dirSyncer) error {
	if newestFirst {
		list = slices.Clone(list)
		slices.Reverse(list)
	}
	var first error
	for _, seg := range list {
		if err := seg.MarkDeleted(); err != nil && first == nil {
			first = fmt.Errorf("segment %d: %w", seg.BaseOffset(), err)
		}
		if newestFirst && first == nil {
			// Each removal durable before the next: a crash may keep
			// any subset of unsynced renames, and a prefix must remain.
			if err := dirs.syncDir(); err != nil {
				first = err
			}
		}
		if err := seg.Unref(); err != nil && first == nil {
			first = fmt.Errorf("segment %d: %w", seg.BaseOffset(), err)
		}
	}
	return first
}

// truncateFullyLocked deletes every segment and restarts the log, empty,
// at offset at, below the log end offset: at the log start offset (a
// TruncateTo whose batch holds it), below it (TruncateTo below the log
// start lowers it, as Kafka's truncateTo does) or anywhere else
// (TruncateFullyAndStartAt). The old segments go first (the new base lies
// inside their range, and both on disk would overlap), then the leader
// epoch cache and the producer snapshots, then the log start checkpoint
// moves to at, then the new segment is created: a crash leaves a prefix of
// the old log, an empty log at the old log start, or the restarted log.
//
// A tiered partition's whole log restarts at at, its copies below at
// included, as Kafka's truncateFullyAndStartAt sets the log start offset
// to the new offset: every copy is recorded "deleting" first
// (partTier.restartAt). When at is the local log start (the batch holding
// a TruncateTo's offset holds it too) the copies below it are already
// "deleting": only DeleteRecordsBefore moves the local log start inside a
// segment, and it moves the whole log's start there too. REQUIRES: mu
// held.
func (p *Partition) truncateFullyLocked(at int64) error {
	// The copies go first, as in TruncateTo.
	if err := p.tierPart.Load().restartAt(at); err != nil {
		return fmt.Errorf("partlog/log: truncate %s fully to %d: %w", p.dir, at, err)
	}
	if err := p.ckpts.clampCleanerLocked(at); err != nil {
		return fmt.Errorf("partlog/log: truncate %s fully to %d: cleaner checkpoint: %w", p.dir, at, err)
	}
	oldStart := p.logStart.Load()
	end := position{Offset: at, SegBase: at, Pos: 0}
	// Publish the new bounds, count the truncation, and only then move the
	// start. A lock-free read loads the count, the bounds, then the start
	// (read.go): one that finds the start moved loaded it after the count
	// changed, so its truncation check sends it back. A start lowered
	// first could pair with the old bounds before the count changed, and
	// the read returned the old log's records below its start, which
	// DeleteRecordsBefore had removed (TestReadRacesRestartBelowLogStart).
	p.mu.end, p.mu.hw = end, end
	p.publishLocked()
	if hook := testHookRestartVisible.Load(); hook != nil {
		(*hook)()
	}
	p.countTruncationLocked()
	if hook := testHookRestartVisible.Load(); hook != nil {
		(*hook)()
	}
	p.logStart.Store(at)
	fail := func(err error) error {
		p.setFailedLocked(failedf(fmt.Errorf("partlog/log: truncate %s fully to %d: %w", p.dir, at, err)))
		return p.mu.failed
	}
	// Rename the old files away (newest first, so that a failure leaves a
	// prefix) before the new segment exists: the new base lies inside an
	// old segment's range, and both on disk would overlap.
	// Each removal is durable before the next (a crash may keep any subset
	// of unsynced renames; a prefix must remain), and all are before the
	// new segment exists: a crash must not leave it beside the old ones it
	// overlaps.
	old := p.segs.Load().list
	for i := len(old) - 1; i >= 0; i-- {
		if err := old[i].MarkDeleted(); err != nil {
			return fail(fmt.Errorf("segment %d: %w", old[i].BaseOffset(), err))
		}
		if err := p.dur.syncDir(); err != nil {
			return fail(err)
		}
	}
	p.mu.dirDirty = true
	// The epochs and producers of the old batches go before the log start
	// checkpoint moves: Open must not find them under the restarted log.
	p.mu.epochs.Clear()
	if err := p.mu.epochs.Persist(); err != nil {
		return fail(err)
	}
	if err := p.snaps.removeAllLocked(); err != nil { // snapshot.go: every snapshot goes
		return fail(fmt.Errorf("producer state: %w", err))
	}
	p.resetProducersLocked()
	if at != oldStart {
		if err := p.ckpts.writeLogStart(at); err != nil {
			return fail(fmt.Errorf("log start checkpoint: %w", err))
		}
	}
	seg, err := segment.Create(p.cfg.FS, p.dir, at, p.segCfg)
	if err != nil {
		return fail(err)
	}
	if err := p.spliceSegmentsLocked(0, len(p.segs.Load().list), seg); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
	for _, s := range old {
		if err := s.Unref(); err != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
		}
	}
	p.mu.rollAfter = p.newRollAfter()
	p.dur.setFlushedBelowLocked(at)
	p.logger.Info("partlog/log: truncated fully", "dir", p.dir, "logStart", at)
	return p.makeTruncationDurableLocked(nil)
}

// countTruncationLocked counts a truncation whose lowered bounds are
// published, then wakes the goroutines in Wait again. The publication woke
// them already, but one that looked between it and the count saw neither
// the count move nor, when the appends it had not seen were cut (a high
// watermark waiter does not wake for them), the log end go down, and
// parked again: without this second wake it stayed parked until the next
// publication, forever on an idle partition
// (TestWaitSeesTruncationCountedAfterItsLook). REQUIRES: mu held.
func (p *Partition) countTruncationLocked() {
	p.truncations.Add(1)
	p.bounds.wakeAll()
}

// setEndLocked lowers the log end to end, clamps the high watermark to it
// (or sets it there under the automatic high watermark) and publishes both.
// REQUIRES: mu held.
func (p *Partition) setEndLocked(end position) {
	p.mu.end = end
	if p.mu.hw.Offset > end.Offset || p.dur.hwFollowsWrite() {
		p.mu.hw = end
	}
	p.publishLocked()
}

// testHookRestartVisible, when set (by tests), runs in truncateFullyLocked
// between the stores that make the restarted log visible to lock-free
// readers (bounds, truncation count, log start).
var testHookRestartVisible atomic.Pointer[func()]
