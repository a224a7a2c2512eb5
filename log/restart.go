package log

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/segment"
)

// TruncateFullyAndStartAt empties the log and restarts it at offset, as
// Kafka's truncateFullyAndStartAt: every segment goes, a new empty segment
// starts at offset, and the log start offset, the log end offset and the
// high watermark all become offset. The leader epoch cache is emptied and
// the producer state forgotten (their files too); the cleaner checkpoint
// is lowered to offset when it is above it. A follower calls it when its
// leader's log start offset is past its own log end (the leader deleted
// what the follower would fetch next), or to lower the log start offset
// (TruncateTo below the log start does). An offset outside [0,
// math.MaxInt64 - math.MaxInt32] (a segment's offsets are 32 bits relative
// to its base) gives ErrOffsetOutOfRange and changes nothing. A log
// restarted near that bound rolls no more once its log end passes it: its
// last segment takes the batches it can hold (ErrLogFull).
//
// In a partition its Dir tiers, the whole log restarts, as Kafka's
// truncateFullyAndStartAt with remote storage: every copy is recorded
// "deleting" before the log restarts (reads and OffsetForTimestamp never
// answer from them again, Stats().Remote.LogStartOffset is -1 until the
// restarted log is copied) and the copier's next pass deletes them from
// the store.
//
// Above the log end offset (offset >= LogEndOffset) the restart is atomic
// across a crash: the new segment is created and made durable first, the
// log start offset checkpoint at offset commits the restart, and only then
// are the old segments removed. A crash before the commit reopens the old
// log (Open removes the empty segment after the gap, which no checkpoint
// covers); a crash after it reopens the restarted log (the leader epoch
// cache is emptied next, durably, then the old segments go; Open finishes
// what a crash interrupted: it removes the old segments, all below the log
// start, and empties the leader epoch cache). The producer snapshots are removed
// before the commit, so the old log rebuilds its producer state from its
// batches should a crash keep it; so are a tiered partition's copies,
// so the old log a crash keeps starts at its local log start.
//
// Below the log end offset the new segment would overlap the old ones, so
// they are removed first (newest first), then the leader epoch cache and
// the producer snapshots, then the log start offset checkpoint is written
// and the new segment created. A crash in between reopens a prefix of the
// old log (in a tiered partition, of its local part: the copies go
// first), or an empty log at the old log start offset, or the restarted
// log; never batches from both.
//
// Readers holding Records of the old segments keep them until they close
// them. An I/O error after the first change fails the partition (reopen
// it to recover); Open then finds one of the states above.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	p.lockWriter()
	defer p.mu.Unlock()
	defer p.noteActiveLocked() // awake.go
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if offset < 0 || offset > maxSegmentBase {
		return fmt.Errorf("%w: restart the log at offset %d, outside [0, %d]", ErrOffsetOutOfRange, offset, int64(maxSegmentBase))
	}
	if offset < p.mu.end.Offset {
		return p.truncateFullyLocked(offset)
	}
	return p.restartAboveEndLocked(offset)
}

// maxSegmentBase is the largest base offset a segment can have: its
// indexes hold offsets relative to the base in 32 bits, and every offset
// of the segment must fit an int64.
const maxSegmentBase = math.MaxInt64 - math.MaxInt32

// restartAboveEndLocked is TruncateFullyAndStartAt at an offset at or
// above the log end: create, commit (log start checkpoint), remove.
// REQUIRES: mu held, at >= mu.end.Offset.
func (p *Partition) restartAboveEndLocked(at int64) error {
	snap := p.segs.Load()
	old := snap.list
	active := snap.active()
	// An empty active segment already at the new base is the new one.
	reuse := active.Size() == 0 && active.BaseOffset() == at
	wrap := func(err error) error {
		return fmt.Errorf("partlog/log: restart %s at %d: %w", p.dir, at, err)
	}
	fail := func(err error) error {
		p.failLocked(wrap(err))
		return p.mu.failed
	}
	// 1. Before the commit, nothing the old log needs changes: its
	// producer snapshots go (Open rebuilds the state from the batches),
	// and the new segment is created beside it, above its end.
	if _, _, err := p.snaps.remove(func(int64) bool { return true }); err != nil {
		return wrap(err)
	}
	seg := active
	if !reuse {
		var err error
		if seg, err = segment.Create(p.cfg.FS, p.dir, at, p.segCfg); err != nil {
			return wrap(fmt.Errorf("create segment %d: %w", at, err))
		}
	}
	undo := func(err error) error {
		if !reuse {
			if derr := seg.MarkDeleted(); derr != nil {
				p.logger.Warn("partlog/log: removing the restart's segment failed; Open removes it", "dir", p.dir, "err", derr)
			}
			_ = seg.Unref()
		}
		return wrap(err)
	}
	if err := p.dur.syncDir(); err != nil {
		return undo(err)
	}
	// 1b. A tiered partition's copies, all below the new start, are
	// recorded "deleting", durably, before the commit (tier.go,
	// partTier.restartAt): after it the restarted log must not read
	// them, and Open could not tell them from the copies local retention
	// left. A crash before the commit then reopens the old log without
	// its remote part: a suffix of it.
	if err := p.tierPart.Load().restartAt(at); err != nil {
		return undo(err)
	}
	// 2. Commit. Whether a failed write reached the disk is unknown:
	// the partition fails and Open decides from what is there.
	if err := p.ckpts.writeLogStart(at); err != nil {
		if !reuse {
			_ = seg.Unref() // its files stay for Open to judge
		}
		return fail(err)
	}
	// 3. Publish the restarted log; readers of the old one retry.
	end := position{Offset: at, SegBase: at, Pos: 0}
	p.mu.end, p.mu.hw = end, end
	p.logStart.Store(at)
	p.publishLocked()
	p.countTruncationLocked()
	if reuse {
		old = old[:len(old)-1] // the list is [seg]: drop all but it
		err := p.spliceSegmentsLocked(0, len(old))
		if err != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
		}
	} else if err := p.spliceSegmentsLocked(0, len(old), seg); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
	// 4. The epochs of the old batches go, durably, before the old
	// segments (all below the log start now): once none is left, Open
	// cannot tell the restart was interrupted.
	p.mu.epochs.Clear()
	if err := p.mu.epochs.Persist(); err != nil {
		return fail(err)
	}
	var first error
	for i := len(old) - 1; i >= 0; i-- {
		if err := old[i].MarkDeleted(); err != nil && first == nil {
			first = fmt.Errorf("segment %d: %w", old[i].BaseOffset(), err)
		}
		if err := old[i].Unref(); err != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
		}
	}
	p.mu.dirDirty = true
	if first != nil {
		return fail(first)
	}
	if err := p.dur.syncDir(); err != nil {
		return fail(err)
	}
	p.mu.dirDirty = false
	p.resetProducersLocked() // the open transactions end: the LSO follows the HW
	p.mu.rollAfter = p.newRollAfter()
	p.dur.setFlushedBelowLocked(at)
	if err := p.ckpts.clampCleanerLocked(at); err != nil {
		return fail(fmt.Errorf("cleaner checkpoint: %w", err))
	}
	if err := p.dur.setRecoveryPointLocked(at); err != nil {
		p.logger.Warn("partlog/log: restart: recovery point not persisted", "dir", p.dir, "err", err)
	}
	p.logger.Info("partlog/log: restarted the log", "dir", p.dir, "logStart", at, "segmentsRemoved", len(old))
	return nil
}
