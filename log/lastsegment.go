package log

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/segment"
)

// The last segment (DESIGN law 1, ErrLogFull). A segment's base offset is
// at most index.MaxBaseOffset (math.MaxInt64 - math.MaxInt32), so that the
// base plus any 32-bit relative offset an index holds fits an int64. Once
// the log end offset passes that bound no roll can start a segment at it:
// the active segment is the log's last and must hold every batch that
// follows. So:
//
//   - The batch that takes the log end past the bound (the log end lies
//     at or below it, the batch's next offset past it) is the last one a
//     roll may precede.
//     The segment it goes into starts as high as it can: at the log end,
//     or, after an offset gap, just below the batch's base (never above
//     the bound), moving the log end there as a roll across a gap does
//     (follower.go). The partition rolls there first unless the active
//     segment starts there already (then it is empty).
//   - A batch after it gets no roll (size, time, full index, relative
//     offsets): the active segment takes it when the batch's last offset
//     lies within math.MaxInt32 of the segment's base, its .log stays
//     within segment.MaxSegmentBytesLimit (Segment.Grow lets it pass
//     segment.bytes) and its indexes have room for one more entry. Else
//     the batch is refused with ErrLogFull before anything changes.
//   - Roll past the bound returns ErrLogFull and changes nothing.
//
// A record set of AppendAssigned is checked as a whole first
// (checkLastSegmentLocked), so that no batch of it is written when one
// would be refused.

// lastSegmentBase returns the base offset of the segment that holds bt and
// every later batch, bt being the batch that takes the log end end past
// index.MaxBaseOffset (end <= index.MaxBaseOffset < bt.NextOffset()): end,
// or after an offset gap the highest base below bt's (the segment's first
// batch then shows the gap before it, as Open requires of a gap between
// segments), never above index.MaxBaseOffset. The segment holds bt's
// offsets: bt's last offset is at most math.MaxInt64 - 1
// (checkNextOffsetFits), and a batch of 2^31 offsets never follows a gap
// (errGapBeforeHugeBatch).
func lastSegmentBase(end int64, bt batch.Batch) int64 {
	if bt.BaseOffset() <= end {
		return end
	}
	return max(end, min(bt.BaseOffset()-1, index.MaxBaseOffset))
}

// lastSegmentLocked prepares the active segment for bt, a batch whose next
// offset lies past index.MaxBaseOffset, before anything else of its append
// changes: it rolls to lastSegmentBase when bt takes the log end past the
// bound, or, when the log end is past it already, checks that the active
// segment can hold bt (holdLocked). REQUIRES: mu held.
func (p *Partition) lastSegmentLocked(bt batch.Batch) error {
	end := p.mu.end.Offset
	active := p.segs.Load().active()
	if end > index.MaxBaseOffset {
		return p.holdLocked(active, bt)
	}
	switch b := lastSegmentBase(end, bt); {
	case active.BaseOffset() >= b:
		return nil // the active segment starts there: it is empty
	case b > end:
		return p.rollToLocked(b, segment.RollOffsetOverflow) // across the gap before bt
	default:
		return p.rollLocked(b, segment.RollOffsetOverflow)
	}
}

// holdLocked checks, the log end being past index.MaxBaseOffset, that the
// active segment can hold bt without a roll (fitsLastSegment), and lets its
// .log grow past segment.bytes when bt needs it. Refused, nothing changed:
// an error wrapping ErrLogFull. REQUIRES: mu held.
func (p *Partition) holdLocked(active *segment.Segment, bt batch.Batch) error {
	if err := fitsLastSegment(active.BaseOffset(), active.Size(), active.FreeIndexEntries(), bt); err != nil {
		return fmt.Errorf("partlog/log: append to %s at offset %d: %w", p.dir, bt.BaseOffset(), err)
	}
	if err := active.Grow(active.Size() + int64(bt.Size())); err != nil {
		return p.noteFault(fmt.Errorf("partlog/log: append to %s at offset %d: the last segment %d: %w", p.dir, bt.BaseOffset(), active.BaseOffset(), err))
	}
	return nil
}

// fitsLastSegment reports whether the last segment, starting at base with
// size bytes and room for entries more index entries, can take bt: nil, or
// an error wrapping ErrLogFull that says why not.
func fitsLastSegment(base, size int64, entries int, bt batch.Batch) error {
	switch {
	case bt.LastOffset()-base > math.MaxInt32:
		return fmt.Errorf("%w: the batch's last offset %d lies more than 2^31-1 past the base offset %d of the last segment",
			ErrLogFull, bt.LastOffset(), base)
	case size+int64(bt.Size()) > segment.MaxSegmentBytesLimit:
		return fmt.Errorf("%w: %d bytes after the %d of the last segment (base offset %d) pass its limit of %d",
			ErrLogFull, bt.Size(), size, base, int64(segment.MaxSegmentBytesLimit))
	case entries < 1:
		return fmt.Errorf("%w: the indexes of the last segment (base offset %d) are full", ErrLogFull, base)
	}
	return nil
}

// checkLastSegmentLocked refuses, before any batch of it is written, the
// record set records (checked by checkAssigned) when the last segment
// could not hold one of its batches: it follows the record set as the
// writes will, from the batch that takes the log end past
// index.MaxBaseOffset on (before it rolls may come, and none matters: that
// batch's segment starts at lastSegmentBase, empty, unless the active
// segment starts there already). It counts an index entry for every
// batch, at least what the writes take. REQUIRES: mu held.
func (p *Partition) checkLastSegmentLocked(records []byte) error {
	end := p.mu.end.Offset
	active := p.segs.Load().active()
	base, size, entries := active.BaseOffset(), active.Size(), active.FreeIndexEntries()
	for i, rest := 0, records; len(rest) > 0; i++ {
		var bt batch.Batch
		bt, rest, _ = batch.Parse(rest) // checked by appendRules.checkAssigned
		if bt.NextOffset() <= index.MaxBaseOffset {
			end = bt.NextOffset()
			continue
		}
		if end <= index.MaxBaseOffset {
			if b := lastSegmentBase(end, bt); base < b {
				base, size, entries = b, 0, p.segCfg.NewIndexEntries()
			}
		}
		if err := fitsLastSegment(base, size, entries, bt); err != nil {
			return fmt.Errorf("partlog/log: append to %s: batch %d at offset %d: %w", p.dir, i, bt.BaseOffset(), err)
		}
		size += int64(bt.Size())
		entries--
		end = bt.NextOffset()
	}
	return nil
}
