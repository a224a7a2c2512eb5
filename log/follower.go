package log

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/segment"
)

// This file holds what a follower's log needs beyond the leader's append
// path: offset gaps (AppendAssigned of a compacted leader's log; what Open
// makes of an empty segment that follows a gap is the opening's
// settleEmptyTail, opening.go). See "Follower logs" in the package
// documentation.

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
	return p.rollToLocked(newBase, segment.RollOffsetOverflow)
}

// rollToLocked rolls to a new segment at newBase, at or past the log end
// offset: past it, across an offset gap, the log end offset moves to
// newBase (the new, empty segment is the log's end until a batch is
// written after the gap) once the gap lies below the recovery point.
// REQUIRES: mu held.
func (p *Partition) rollToLocked(newBase int64, reason segment.RollReason) error {
	end := p.mu.end.Offset
	if err := p.rollLocked(newBase, reason); err != nil {
		return err
	}
	// The gap before the new segment must lie below the recovery point
	// before anything is written after it: Open cuts the log at a
	// segment above the recovery point that ends before the next one
	// begins (durability.go). Rare (2^31 offsets, or the last segment,
	// lastsegment.go), so done now.
	if err := p.flushSealedBelowLocked(newBase); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: roll %s across an offset gap: %w", p.dir, err))
		return p.mu.failed
	}
	if newBase > end {
		// The new, empty segment is the log's end until bt is written.
		p.mu.end = position{Offset: newBase, SegBase: newBase, Pos: 0}
		if p.dur.hwFollowsWrite() {
			p.mu.hw = p.mu.end
		}
	}
	return nil
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
