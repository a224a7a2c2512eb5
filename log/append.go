package log

import (
	"context"
	"fmt"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/segment"
)

// AppendBatch appends one producer batch and returns the offset assigned to
// its first record. The records get base, base+1, ..., base+lastOffsetDelta;
// the next append starts at base+lastOffsetDelta+1.
//
// b must hold exactly one RecordBatch v2 that a Kafka leader would accept
// from a producer: framing and CRC-32C valid, magic 2, at least one record,
// recordsCount == lastOffsetDelta+1, not a control batch, at most
// Config.MaxMessageBytes and Config.SegmentBytes long, timestamps a Kafka
// leader accepts (see below). These checks run before the partition's lock
// is taken; a batch that fails them gets an error wrapping ErrInvalidBatch
// (and batch.ErrCorrupt for bad framing or CRC), ErrBatchTooLarge,
// ErrControlBatch or ErrInvalidBatchTimestamp, and nothing is written.
//
// Timestamps follow Kafka's LogValidator. The LogAppendTime bit from a
// producer is refused. On a CreateTime partition (the default) every
// record timestamp other than -1 must lie within
// [Now - Config.MessageTimestampBeforeMax, Now + Config.MessageTimestampAfterMax],
// and the stored maxTimestamp is the largest record timestamp (found while
// the records are validated, decompressed if need be), whatever the
// producer put there: a wrong one is replaced and the CRC recomputed, so
// that time lookups, time-based rolls and retention see the records' real
// times. Under Config.LogAppendTime the stored batch gets the
// LogAppendTime bit and maxTimestamp = Now instead.
//
// Under the lock AppendBatch reserves [logEnd, logEnd+lastOffsetDelta],
// sets the stored header's baseOffset and partitionLeaderEpoch (the leader
// epoch under Config.StampLeaderEpoch, else -1, batch.NoPartitionLeaderEpoch:
// what the producer sent there is never stored), records a new leader epoch
// durably in the leader epoch cache before its first batch is written (see
// LeaderEpochs), rolls the active segment when it is full or old, writes and
// indexes the batch, and only then publishes the new log end offset (and,
// by default, the high watermark). On any error nothing is published: the
// log end offset is unchanged and the next append gets the same base.
//
// Near the end of the offsets: a batch whose next offset would pass
// math.MaxInt64 gets ErrInvalidBatch. Once the log end offset lies past
// math.MaxInt64 - math.MaxInt32, the largest base offset a segment may
// have, the log rolls no more: its last segment takes the batch while it
// can (see ErrLogFull), and a batch it cannot hold gets an error wrapping
// ErrLogFull, with nothing changed; the partition stays usable.
//
// AppendBatch never writes into b: the header it stores (assigned offsets,
// leader epoch, timestamps, CRC) is a copy, patched in the partition's own
// memory and written ahead of b's records. b may therefore be read-only
// memory, such as the Records.Bytes of a ReadFrom on this or another
// partition, and is unchanged when AppendBatch returns; the stored batch
// can be read back with ReadFrom(base, ...). b is not retained. When b
// aliases a mapped file that cannot be read (a media error, or a file cut
// behind its partition's back), the checks stop with an error wrapping
// index.ErrFault (a *segment.FaultError naming the file) and nothing is
// written; the bytes are the caller's, so this partition stays online.
//
// A batch with a producer id (>= 0) is checked against the producer's
// state under the lock, before anything is written (see "Idempotent
// producers" in the package documentation): a retry of one of its last
// five batches returns the original base offset and a nil error and writes
// nothing (AppendBatchInfo tells it apart), under FlushMessages == 1 once
// the original is durable, as the original's own append would; a gap, a stale sequence or a
// new epoch not starting at 0 gives ErrOutOfOrderSequence, an older epoch
// ErrInvalidProducerEpoch.
//
// A program that encodes its batches with a batch.Builder appends them
// faster with AppendBuilder, which takes the Builder itself.
func (p *Partition) AppendBatch(b []byte) (base int64, err error) {
	return p.appendBatch(context.Background(), b, nil)
}

// appendBatch implements AppendBatch, AppendBatchContext and
// AppendBatchInfo; info, when not nil, receives a duplicate's AppendInfo.
func (p *Partition) appendBatch(ctx context.Context, b []byte, info *AppendInfo) (base int64, err error) {
	bt, hdr, err := p.batchRules.checkProducer(b) // appendrules.go
	if err != nil {
		return -1, err
	}
	return p.appendChecked(ctx, &hdr, bt[batch.HeaderSize:], info)
}

// appendChecked appends the checked producer batch made of the header
// hdr (timestamps patched, CRC set; offset and epoch are set here) and
// body, the records: the rest of appendBatch and AppendBuilder, from the
// lock on.
func (p *Partition) appendChecked(ctx context.Context, hdr *[batch.HeaderSize]byte, body []byte, info *AppendInfo) (base int64, err error) {
	p.lockAppender() // the queue of group writes stays (groupwrite.go)
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		return -1, err
	}
	// Producer state (producer.go): refused, or a retry answered with
	// its original offsets; nothing written either way. It reads the
	// header copy, not b: b may be mapped memory, read only under the
	// fault guard (appendRules.checkProducer).
	if d, done, err := checkProducer(p.mu.producers, batch.Batch(hdr[:])); done {
		// A retry is acknowledged as its original would be: under
		// FlushMessages == 1 once the original is durable. It was
		// written (or queued) before now, so the sync of every write so
		// far covers it; when that sync ran already this costs nothing.
		seq := p.mu.writeSeq
		p.mu.Unlock()
		if info != nil {
			*info = d
		}
		if err == nil && p.dur.syncEveryAppend() {
			if abandoned, err := p.afterAppendContext(ctx, seq, false); err != nil {
				if abandoned {
					return d.Base, err // stored; its sync goes on (context.go)
				}
				return -1, err
			}
		}
		return d.Base, err
	}
	// Checked after a retry's answer, which writes nothing.
	leader := p.leaderEpoch.Load()
	if err := p.checkStampedEpochLocked(leader); err != nil { // epochend.go
		p.mu.Unlock()
		return -1, err
	}
	base = p.dur.queue.appendEnd(p.mu.end.Offset) // after the queued batches
	h := p.batchRules.assignLocked(hdr, base, leader)
	queued, err := p.queueAppendLocked(h, body)
	if err != nil {
		p.mu.Unlock()
		return -1, err
	}
	if queued && p.wb.delay > 0 {
		// Write-behind: acknowledged now, written later (writebehind.go).
		if err := p.bufferedLocked(); err != nil {
			p.mu.Unlock()
			return -1, err
		}
	}
	var w wake
	if !queued {
		// Written here, after what is queued (which may fail the
		// partition).
		p.writeQueuedLocked()
		if err := p.checkWritableLocked(); err != nil {
			p.mu.Unlock()
			return -1, err
		}
		if err := p.appendLocked(h, body); err != nil {
			p.mu.Unlock()
			return -1, err
		}
		// Publish, and wake the waiters after unlocking (bounds.signal
		// says why no wake-up is lost): closing the channel of many
		// parked goroutines must not hold up other writers.
		w = p.publishQuietLocked()
	}
	if info != nil {
		*info = AppendInfo{Base: base, LastOffset: base + int64(h.LastOffsetDelta())}
	}
	if p.cfg.FlushMessages == 0 {
		p.mu.Unlock()
		p.bounds.signal(w)
		return base, nil
	}
	seq, due := p.mu.writeSeq, p.flushDueLocked()
	p.mu.Unlock()
	p.bounds.signal(w)
	if abandoned, err := p.afterAppendContext(ctx, seq, due); err != nil {
		if abandoned {
			return base, err // appended; its sync goes on (context.go)
		}
		return -1, err
	}
	return base, nil
}

// AppendAssigned appends a record set whose offsets are already assigned:
// a follower copying its leader, a restore from a backup, a transaction
// coordinator writing markers. It returns the log end offset after the
// append.
//
// records holds one or more whole batches. The first batch's base offset
// must be at or above LogEndOffset and each following one must start
// after the previous one's last offset (else ErrUnexpectedOffset): offsets
// strictly increase, and gaps are allowed, as in a compacted leader's log
// (Kafka's follower append). A gap lies inside a segment whenever the
// active segment can hold the batch; when a roll is due the new segment
// starts at the log end offset, so segments stay contiguous, unless the
// batch lies more than 2^31-1 offsets past it (a segment's relative
// offsets are 32 bits): then the new segment starts at the batch's last
// offset - (2^31-1) and the log end offset moves there at once (see
// "Follower logs" in the package documentation for what Open makes of a
// crash at that moment); a batch spanning 2^31 offsets (lastOffsetDelta
// 2^31-1) cannot follow a gap and is refused with ErrUnexpectedOffset
// before any batch of the set is written. A batch whose next offset would
// pass math.MaxInt64 (last offset math.MaxInt64 or above) is refused with
// ErrInvalidBatch, as Kafka refuses it. Past math.MaxInt64 -
// math.MaxInt32, the largest base offset a segment may have, the log rolls
// no more (the roll before the batch that takes the log end past it starts
// the last segment as high as it can, just below the batch's base after a
// gap): a record set with a batch the last segment cannot hold is refused
// with an error wrapping ErrLogFull before any batch of it is written.
// Control batches and batches with fewer records than offsets (compacted)
// are allowed; the header, including partitionLeaderEpoch, is stored as
// given.
// Every batch gets what a Kafka follower checks (batch.Batch.ValidateHeader:
// framing, magic 2, CRC-32C, header fields; strictly increasing
// offsets) and must fit in a segment (ErrBatchTooLarge); max.message.bytes
// does not apply, as on a Kafka follower. The records are not decompressed
// or walked: the CRC covers them, the leader validated them, and a highly
// compressible batch the leader accepted must not stall the follower (a
// compressed payload under a valid CRC is stored as given, as Kafka's
// follower stores it). Validation runs before the lock and before anything
// is written.
//
// An I/O error while writing leaves the batches before the failing one
// appended and published, and returns the error; LogEndOffset says where
// the log stops. records is not modified or retained.
func (p *Partition) AppendAssigned(records []byte) (logEnd int64, err error) {
	return p.appendAssigned(context.Background(), records)
}

// appendAssigned implements AppendAssigned and AppendAssignedContext.
func (p *Partition) appendAssigned(ctx context.Context, records []byte) (logEnd int64, err error) {
	if err := p.batchRules.checkAssigned(records); err != nil {
		return p.LogEndOffset(), err
	}
	logEnd, seq, due, err := p.appendAssignedLocked(records)
	if err != nil || p.cfg.FlushMessages == 0 {
		return logEnd, err
	}
	if _, err := p.afterAppendContext(ctx, seq, due); err != nil {
		return logEnd, err
	}
	return logEnd, nil
}

// appendAssignedLocked takes mu and writes the checked record set.
func (p *Partition) appendAssignedLocked(records []byte) (logEnd int64, seq uint64, flushDue bool, err error) {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return p.mu.end.Offset, 0, false, err
	}
	if err := checkAssignedStart(records, p.mu.end.Offset); err != nil {
		return p.mu.end.Offset, 0, false, err
	}
	if err := p.checkLastSegmentLocked(records); err != nil { // lastsegment.go
		return p.mu.end.Offset, 0, false, err
	}
	defer p.publishLocked()
	for rest := records; len(rest) > 0; {
		var bt batch.Batch
		bt, rest, _ = batch.Parse(rest) // checked by appendRules.checkAssigned
		if err := p.appendLocked(bt, nil); err != nil {
			return p.mu.end.Offset, 0, false, err
		}
	}
	return p.mu.end.Offset, p.mu.writeSeq, p.flushDueLocked(), nil
}

// appendLocked writes a batch whose base offset is the log end offset into
// the active segment, rolling first when needed: bt is the whole batch
// (body nil), or its header copy with body the rest of it (AppendBatch,
// which must not write into the caller's bytes). A leader epoch the batch
// starts is first recorded durably (epochs.Cache.Assign). On success it
// advances mu.end (and mu.hw by default) but does not publish them.
// REQUIRES: mu held.
func (p *Partition) appendLocked(bt batch.Batch, body []byte) (err error) {
	defer func() {
		if err != nil {
			// The write may have failed after it woke a rested active
			// segment (or a failed roll unsealed the old one): its files
			// are open for writing, counted against a Dir's budget as a
			// written segment's are (awake.go).
			p.noteActiveLocked()
		}
	}()
	if err := checkNextOffsetFits(bt); err != nil {
		return err
	}
	// last: no roll may follow bt, near the end of the offsets
	// (lastsegment.go).
	last := bt.NextOffset() > index.MaxBaseOffset
	switch {
	case last:
		if err := p.lastSegmentLocked(bt); err != nil {
			return err
		}
	case bt.BaseOffset() != p.mu.end.Offset:
		// A follower's batch after an offset gap (follower.go).
		if err := p.rollAcrossGapLocked(bt); err != nil {
			return err
		}
	}
	if p.mu.epochs.Changes(bt.PartitionLeaderEpoch(), bt.BaseOffset()) {
		before := p.mu.epochs.Entries()
		if err := p.assignEpochLocked(bt.PartitionLeaderEpoch(), bt.BaseOffset()); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				p.restoreEpochsLocked(before) // lostend.go
			}
		}()
	}
	snap := p.segs.Load()
	active := snap.active()
	if !last && active.Size() > 0 {
		reason := active.ShouldRoll(bt, p.cfg.SegmentBytes, p.mu.rollAfter, p.rollNowLocked(active))
		if reason != segment.RollNone {
			// At the log end, not at bt's base: after a follower's gap
			// the new segment holds the gap (segments stay contiguous).
			if err := p.rollLocked(p.mu.end.Offset, reason); err != nil {
				return err
			}
			active = p.segs.Load().active()
		}
	}
	if body == nil {
		_, err = active.Append(bt)
	} else {
		_, err = active.AppendWithHeader(bt, body)
	}
	if err != nil {
		return p.noteFault(fmt.Errorf("partlog/log: append at offset %d to segment %d of %s: %w", bt.BaseOffset(), active.BaseOffset(), p.dir, err))
	}
	p.mu.end = position{Offset: bt.NextOffset(), SegBase: active.BaseOffset(), Pos: active.Size()}
	if p.dur.hwFollowsWrite() {
		p.mu.hw = p.mu.end
	}
	p.noteWriteLocked(active, bt.NextOffset()-bt.BaseOffset())
	p.stats.noteAppend(bt)
	p.dur.spare.maybePrepareLocked(active)
	p.observeProducerLocked(bt) // producer.go; the header is enough
	return nil
}

// rollNowLocked returns the time ShouldRoll judges a time roll of active
// by: Config.Now only when it reads it (segment.ms set and the first batch
// without a timestamp, so the segment's age counts from its creation),
// else the zero time, which it ignores. Reading the clock is about a
// tenth of what a one-record append costs beyond its write call.
// REQUIRES: mu held.
func (p *Partition) rollNowLocked(active *segment.Segment) time.Time {
	if p.mu.rollAfter <= 0 || active.FirstBatchMaxTimestamp() >= 0 {
		return time.Time{}
	}
	return p.cfg.Now()
}

// publishLocked makes mu.hw and mu.end visible to readers, with the last
// stable offset they give (publishQuietLocked), and wakes the waiters
// concerned. REQUIRES: mu held.
func (p *Partition) publishLocked() { p.bounds.signal(p.publishQuietLocked()) }

// Roll seals the active segment and starts a new one at the log end
// offset, as Kafka does when a segment is full or old. It does nothing when
// the active segment is empty. Past math.MaxInt64 - math.MaxInt32, the
// largest base offset a segment may have, no segment can start at the log
// end offset: Roll then returns an error wrapping ErrLogFull and changes
// nothing (the active segment is the log's last, see ErrLogFull).
func (p *Partition) Roll() error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	// The new active segment holds its files open for writing: a rested
	// partition joins its Dir's awake set (awake.go).
	defer p.noteActiveLocked()
	if p.segs.Load().active().Size() == 0 {
		return nil
	}
	return p.rollLocked(p.mu.end.Offset, rollForced)
}

// rollForced is the reason rollLocked logs for Roll (RollNone would
// never roll otherwise).
const rollForced = segment.RollNone

// rollLocked seals the active segment and makes a new segment at newBase
// (the log end offset) the active one. It does no fsync and writes no
// checkpoint: the flush of the sealed segment, its producer snapshot and
// the recovery point at newBase are left to the background
// (durability.noteRolledLocked). On failure the old segment stays
// active. REQUIRES: mu held.
func (p *Partition) rollLocked(newBase int64, reason segment.RollReason) error {
	snap := p.segs.Load()
	old := snap.active()
	if newBase > index.MaxBaseOffset {
		// Only Roll asks (appends never roll there, lastsegment.go).
		return fmt.Errorf("partlog/log: roll %s: %w: the log end offset %d lies past %d", p.dir, ErrLogFull, newBase, int64(index.MaxBaseOffset))
	}
	if err := old.Seal(); err != nil {
		return fmt.Errorf("partlog/log: roll %s: seal segment %d: %w", p.dir, old.BaseOffset(), err)
	}
	seg, err := p.dur.spare.createNextLocked(newBase) // the spare renamed, spare.go
	if err != nil {
		if uerr := old.Unseal(); uerr != nil {
			p.setFailedLocked(failedf(fmt.Errorf("partlog/log: roll %s: reactivate segment %d: %w", p.dir, old.BaseOffset(), uerr)))
		}
		return fmt.Errorf("partlog/log: roll %s: create segment %d: %w", p.dir, newBase, err)
	}
	p.mu.dirDirty = true
	p.mu.rollAfter = p.newRollAfter()
	p.stats.rolls.Add(1)
	if err := p.spliceSegmentsLocked(len(snap.list), len(snap.list), seg); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
	p.snaps.takeOnRollLocked(p.mu.producers, newBase) // producer state, snapshot.go
	// The flush, in the background; the next roll's segment (spare.go).
	p.dur.noteRolledLocked(newBase, p.truncations.Load())
	p.dur.spare.startLocked()
	p.logger.Info("partlog/log: rolled segment", "dir", p.dir, "old", old.BaseOffset(),
		"new", newBase, "reason", rollReasonString(reason), "oldBytes", old.Size())
	return nil
}

// rollReasonString names why a segment was rolled, for the log.
func rollReasonString(r segment.RollReason) string {
	if r == rollForced {
		return "forced"
	}
	return fmt.Sprint(r)
}
