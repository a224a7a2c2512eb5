package log

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/segment"
)

// This file holds what a follower's log needs beyond the leader's append
// path: offset gaps (AppendAssigned of a compacted leader's log), and what
// Open makes of an empty segment that follows a gap (see "Follower logs"
// in the package documentation).

// rollAcrossGapLocked prepares the active segment for bt, a batch that
// starts above the log end offset (a follower copying a compacted log).
// When the active segment can hold bt's offsets (32-bit relative offsets)
// nothing changes: the gap lies inside the segment, and a roll appendLocked
// then finds due starts the new segment at the log end offset. Otherwise
// it rolls to a segment at bt's last offset - (2^31-1) (Kafka rolls at the
// batch's base offset; the lowest base that holds bt keeps the most room)
// and, when that lies past the log end offset, moves the log end offset
// there: the offsets between hold nothing. Such a segment starts below
// bt's base, so its first batch shows the gap before it (Open accepts a
// gap between segments that a segment's own gaps explain); a batch of
// 2^31 offsets cannot, and is refused with ErrUnexpectedOffset before
// anything changes. REQUIRES: mu held.
func (p *Partition) rollAcrossGapLocked(bt batch.Batch) error {
	active := p.segs.Load().active()
	if bt.LastOffset()-active.BaseOffset() <= math.MaxInt32 {
		return nil // a roll appendLocked finds due (at the log end) holds bt too
	}
	end := p.mu.end.Offset
	newBase := max(end, bt.LastOffset()-math.MaxInt32)
	if newBase > end && newBase == bt.BaseOffset() {
		return errGapBeforeHugeBatch(0, bt.BaseOffset(), end) // checked before anything was written
	}
	if err := p.rollLocked(newBase, segment.RollOffsetOverflow); err != nil {
		return err
	}
	// The gap before the new segment must lie below the recovery point
	// before anything is written after it: Open cuts the log at a
	// segment above the recovery point that ends before the next one
	// begins (durability.go). Rare (2^31 offsets), so done now.
	if err := p.flushSealedBelowLocked(newBase); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: roll %s across an offset gap: %w", p.dir, err))
		return p.mu.failed
	}
	if newBase > end {
		// The new, empty segment is the log's end until bt is written.
		p.mu.end = position{Offset: newBase, SegBase: newBase, Pos: 0}
		if !p.cfg.DisableAutoHighWatermark && !p.dur.syncEveryAppend() {
			p.mu.hw = p.mu.end
		}
	}
	return nil
}

// settleEmptyTail decides, at Open, about a last segment that holds no
// batch and starts above the previous segment's next offset (an offset
// gap before an empty segment) or at or below the log start offset, and
// returns the segments that remain. Four things leave one:
//
//   - a follower's roll across a gap (rollAcrossGapLocked) whose first
//     batch a crash lost: the roll persisted the recovery point at the new
//     segment's base once the segment existed;
//   - a TruncateFullyAndStartAt that a crash interrupted before its commit
//     (the log start offset checkpoint at the new segment's base): the
//     recovery point and log start are still the old log's;
//   - a TruncateFullyAndStartAt that a crash interrupted after its commit:
//     the log start offset checkpoint is at the new segment's base (with
//     or without a gap before it: a restart at the log end has none);
//   - a DeleteRecordsBefore up to the log end, which cannot remove the
//     active segment, then a roll: the log start offset checkpoint is at
//     the new segment's base and the segments before it lie wholly below.
//
// The first two remove the empty segment (and then an empty segment
// before it that is one of these, as the next Open would): the log ends
// where the previous segment does (as TruncateTo ends it when it would empty a segment after
// a gap), so that no segment follows an offset gap its own batches do not
// show (a batch appended at the empty segment's base would otherwise
// leave one, which checkDir refuses). A segment that holds nothing loses
// nothing when removed; the offsets of the gap held nothing either. The
// last two remove every earlier segment, all below the log start offset.
// The restart also empties the leader epoch cache: Open finishes that when
// the cache still holds an entry below the log start offset (the restart
// empties the cache durably before it removes any old segment, and
// DeleteRecordsBefore up to the log end writes the cache, moved up to the
// log start, durably before it returns, so its entries all start at or
// after the new segment's base). A DeleteRecordsBefore that a crash
// interrupted before that write looks like the restart and is finished the
// same way, its cache emptied: the next batch's epoch starts it again.
// REQUIRES: Open's single goroutine; list holds at least one segment.
func (p *Partition) settleEmptyTail(list []*segment.Segment, logStart int64, haveLogStart bool) ([]*segment.Segment, error) {
	n := len(list)
	if n < 2 {
		return list, nil
	}
	last, prev := list[n-1], list[n-2]
	b := last.BaseOffset()
	if last.Size() != 0 || (prev.NextOffset() >= b && !(haveLogStart && logStart >= b)) {
		return list, nil
	}
	remove := func(segs []*segment.Segment) error {
		for i := len(segs) - 1; i >= 0; i-- {
			if err := segs[i].MarkDeleted(); err != nil {
				return fmt.Errorf("remove segment %d: %w", segs[i].BaseOffset(), err)
			}
			if err := segs[i].Close(); err != nil {
				p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
			}
		}
		p.mu.dirDirty = true
		return nil
	}
	switch {
	case haveLogStart && logStart >= b:
		p.logger.Warn("partlog/log: removing the segments wholly below the log start offset (a restart of the log or a DeleteRecordsBefore that a crash interrupted, or a roll after a DeleteRecordsBefore up to the log end)",
			"dir", p.dir, "logStart", b, "segmentsRemoved", n-1)
		if err := remove(list[:n-1]); err != nil {
			return list, err
		}
		if first, ok := p.mu.epochs.First(); ok && first.StartOffset < b {
			p.mu.epochs.Clear()
		}
		return list[n-1:], nil
	case haveLogStart && logStart > prev.NextOffset():
		// The log start offset inside the gap: only a DeleteRecordsBefore
		// after the gap's first batch moves it there, and that batch was
		// synced first. Keep the log ending at b rather than move the log
		// start back.
		return list, nil
	default:
		p.logger.Warn("partlog/log: removing an empty segment after an offset gap (a follower's roll across the gap whose first batch a crash lost, or a restart a crash interrupted)",
			"dir", p.dir, "segment", b, "previousEnd", prev.NextOffset())
		if err := remove(list[n-1:]); err != nil {
			return list, err
		}
		// The segment before may be such a one too (a crash lost the
		// batches of a roll across a gap and of the roll after it, and
		// recovery cut the log there): settle it as the next Open would.
		return p.settleEmptyTail(list[:n-1], logStart, haveLogStart)
	}
}

// emptyTailExplained is checkDir's answer for an empty last segment (file
// path, base b) after an offset gap down to prevNext: true when the
// recovery point reaches b (a follower's roll across a gap persisted it
// once the segment existed), or, after a crash, when the policy accepts it
// as a torn tail; settleEmptyTail then removes it, or finishes the restart
// the log start checkpoint committed. After a
// clean shutdown without that recovery point the gap is unexplained:
// a stray file or a missing segment.
func (p *Partition) emptyTailExplained(path string, b, prevNext int64, clean bool, rp int64, haveRP bool) (bool, error) {
	if haveRP && rp >= b {
		return true, nil
	}
	if clean {
		return false, nil
	}
	cause := base.TornTailErrorf(path, 0, "baseOffset",
		"an empty segment at offset %d after the previous segment ended at %d: a follower's roll or a restart of the log that a crash interrupted", b, prevNext)
	if err := p.askPolicy(path, false, true, cause); err != nil {
		return false, err
	}
	return true, nil
}

// keptEnd returns where the batches of seg end after TruncateTo cuts it at
// byte pos (found) or keeps it whole (!found): the next offset of the last
// batch kept, or seg's base offset when none is. It reads batch headers
// only when the log start offset lies inside seg (else any batch kept ends
// past it, and the answer only needs to be at least start). REQUIRES: mu
// held.
func keptEnd(seg *segment.Segment, found bool, pos, start int64) (int64, error) {
	switch {
	case !found:
		return seg.NextOffset(), nil
	case pos == 0:
		return seg.BaseOffset(), nil
	case start <= seg.BaseOffset():
		return seg.BaseOffset() + 1, nil // a batch at or past the base stays
	}
	next := seg.BaseOffset()
	err := walkHeaders(seg, func(at int64, h []byte, isLegacy bool) (bool, error) {
		if at >= pos {
			return false, nil
		}
		if isLegacy {
			next = max(next, legacy.Entry(h).Offset()+1)
		} else {
			next = batch.Batch(h).NextOffset()
		}
		return true, nil
	})
	return next, err
}

// errGapBeforeHugeBatch refuses batch i of a record set, at base, after an
// offset gap from prevEnd, whose lastOffsetDelta is 2^31-1: a segment
// holding it must start at its base, and the gap before that segment
// would be one no batch of it explains (rollAcrossGapLocked). AppendAssigned
// refuses it before writing any batch of the set (DESIGN law 8).
func errGapBeforeHugeBatch(i int, base, prevEnd int64) error {
	return fmt.Errorf("%w: batch %d at offset %d spans 2^31 offsets after a gap from %d: no segment can hold it without a gap before its first batch",
		ErrUnexpectedOffset, i, base, prevEnd)
}
