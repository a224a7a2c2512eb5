package log

import (
	"fmt"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/segment"
)

// Timestamp sentinels of Kafka's ListOffsets request, accepted by
// OffsetForTimestamp.
const (
	// LatestTimestamp asks for the offset after the last visible record:
	// the high watermark.
	LatestTimestamp int64 = -1
	// EarliestTimestamp asks for the log start offset.
	EarliestTimestamp int64 = -2
	// MaxTimestamp asks for the record with the largest timestamp.
	MaxTimestamp int64 = -3
	// EarliestLocalTimestamp asks for the local log start offset (Kafka's
	// EARLIEST_LOCAL_TIMESTAMP, KIP-405, ListOffsets v8): with tiered
	// storage the first offset on local disk, where EarliestTimestamp
	// answers the first copy's; without it the log start offset.
	EarliestLocalTimestamp int64 = -4
)

// TimestampOffset is an answer of OffsetForTimestamp: a record's offset and
// timestamp (milliseconds since the Unix epoch). Timestamp is -1 (no
// timestamp) for the Latest and Earliest sentinels, as in Kafka's
// ListOffsets response.
type TimestampOffset struct {
	Timestamp int64
	Offset    int64
	// LeaderEpoch is the leader epoch of the answer, as in Kafka's
	// ListOffsets response (-1, UndefinedEpoch, when unknown): for a
	// record, its batch's partitionLeaderEpoch; for Latest, the latest
	// epoch in the leader epoch cache; for Earliest, the cache's first
	// epoch when it starts at or below the log start offset.
	LeaderEpoch int32
}

// OffsetForTimestamp answers Kafka's ListOffsets for a consumer (isolation
// READ_UNCOMMITTED):
//
//   - ts >= 0: the first record, in offset order, at or above the log start
//     offset whose timestamp is >= ts; found is false when there is none or
//     when it is at or past the high watermark.
//   - LatestTimestamp (-1): the high watermark, timestamp -1.
//   - EarliestTimestamp (-2): the log start offset, timestamp -1.
//   - EarliestLocalTimestamp (-4): the local log start offset
//     (LogStartOffset), timestamp -1.
//   - MaxTimestamp (-3): the record with the largest timestamp, taken from
//     the segment with the largest one (the earliest such segment on ties),
//     as Kafka 3.x does; found is false when the log has no timestamp or
//     that record is at or past the high watermark. Like Kafka it considers
//     every stored segment, so the record may lie below the log start
//     offset when DeleteRecordsBefore moved it into the first segment.
//
// Under LogAppendTime every record of a batch has the batch's
// maxTimestamp. Other negative timestamps give ErrInvalidTimestamp.
//
// With tiered storage (DirConfig.Remote) the log is the whole log: the
// copies of the offsets below the local log start come first, in offset
// order, then the local segments. The log start offset is then the first
// copy's base offset (Stats().Remote.LogStartOffset), the lowest offset a
// read serves, and Earliest answers it with the leader epoch recorded
// for it. A copy is searched as a local segment is (its time and offset
// indexes, then its batches), through the Dir's cache; copies whose
// largest timestamp is below ts are not fetched. An answer that needs a
// copy the store cannot give is an error wrapping ErrRemoteUnavailable.
//
// Every answer carries a leader epoch (TimestampOffset.LeaderEpoch). For
// Latest and Earliest it comes from the leader epoch cache, read under the
// partition's mutex as LeaderEpochs does (a writer holds it briefly, a
// roll for its flush); the other answers take no lock.
func (p *Partition) OffsetForTimestamp(ts int64) (to TimestampOffset, found bool, err error) {
	return p.offsetForTimestamp(ts, false)
}

// OffsetForTimestampCommitted is OffsetForTimestamp for isolation
// READ_COMMITTED, as Kafka's ListOffsets answers it: the bound is the last
// stable offset instead of the high watermark. LatestTimestamp gives the
// last stable offset, and a record found at or past it is not found.
func (p *Partition) OffsetForTimestampCommitted(ts int64) (to TimestampOffset, found bool, err error) {
	return p.offsetForTimestamp(ts, true)
}

// offsetForTimestamp implements both; committed bounds by the last stable
// offset.
func (p *Partition) offsetForTimestamp(ts int64, committed bool) (to TimestampOffset, found bool, err error) {
	bound := p.HighWatermark
	if committed {
		bound = p.LastStableOffset
	}
	if p.closed.Load() {
		return TimestampOffset{}, false, ErrClosed
	}
	if err := p.offlineErr(); err != nil {
		return TimestampOffset{}, false, err
	}
	defer func() { err = p.noteFault(err) }()
	switch {
	case ts == LatestTimestamp:
		for {
			// A truncation between the epoch and the bound would pair
			// an epoch it removed with the bound it lowered.
			gen := p.truncations.Load()
			latest, _, _ := p.listOffsetsEpochs() // epochend.go
			if off := bound(); p.truncations.Load() == gen {
				return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: off, LeaderEpoch: latest}, true, nil
			}
		}
	case ts == EarliestTimestamp:
		_, earliest, start := p.listOffsetsEpochs()
		if t := p.tierPart.Load(); t != nil {
			if whole, first, ok := t.wholeStart(start); ok {
				return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: whole, LeaderEpoch: copyEpochAt(first, whole)}, true, nil
			}
		}
		return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: start, LeaderEpoch: earliest}, true, nil
	case ts == EarliestLocalTimestamp:
		_, earliest, start := p.listOffsetsEpochs()
		return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: start, LeaderEpoch: earliest}, true, nil
	case ts < MaxTimestamp:
		return TimestampOffset{}, false, fmt.Errorf("%w: %d", ErrInvalidTimestamp, ts)
	}
	for {
		// The bound and the records must come from one log: a truncation
		// (or a restart) after the bound was loaded lowers it and may
		// cut, and then refill, what the lookup reads. The count is
		// loaded before the bound and checked after the lookup, as a read
		// does (see "Lock-free reads" in the package documentation).
		gen := p.truncations.Load()
		to, found, retry, err := p.offsetForTimestampOnce(ts, bound())
		if retry || err == nil && p.truncations.Load() != gen {
			continue
		}
		return to, found, err
	}
}

// offsetForTimestampOnce is one attempt of offsetForTimestamp for ts >= 0
// and MaxTimestamp, bounded by hw. It reports retry when the log start
// moved past the answer it found in the local segments.
func (p *Partition) offsetForTimestampOnce(ts, hw int64) (_ TimestampOffset, _, retry bool, _ error) {
	start := p.LogStartOffset()
	t := p.tierPart.Load()
	if ts == MaxTimestamp {
		to, found, err := maxTimestampOffset(p, t, p.dir, hw)
		return to, found, false, err
	}
	if t != nil {
		// The copies of the offsets below the local log start first
		// (read before taking the snapshot: the fetches may be slow).
		to, found, done, err := t.remoteOffsetForTimestamp(ts, start, hw)
		if done || err != nil {
			return to, found, false, err
		}
	}
	to, found, err := localOffsetForTimestamp(p, p.dir, ts, start, hw)
	// A removal from the front after start was loaded (retention,
	// DeleteRecordsBefore) leaves the search starting at the first
	// segment left, which may hold offsets below the log start it moved
	// to: an answer from neither log. Every such removal raises the log
	// start before it publishes the shorter list, so the start loaded now
	// is past that answer.
	if err == nil && found && to.Offset < p.LogStartOffset() {
		return to, found, true, nil
	}
	return to, found, false, err
}

// segmentSnapshots gives the lookups over the local segments (the
// timestamp searches here, collectAborted) the segment list: a snapshot
// held from acquireSnapshot to releaseSnapshot, whose segments stay open
// meanwhile. Implemented by *Partition (state.go, "Lock-free reads"); a
// test's fake builds the lookups without a partition.
type segmentSnapshots interface {
	acquireSnapshot() (*segments, error)
	releaseSnapshot(*segments)
}

// localOffsetForTimestamp answers OffsetForTimestamp for ts >= 0 from the
// local segments of a snapshot of snaps: the first record, in offset
// order, at or above start whose timestamp is >= ts, not found when there
// is none or it is at or past hw. A segment whose largest timestamp is
// below ts is skipped without a read; each one searched is read under its
// read lease. dir names the partition in errors.
func localOffsetForTimestamp(snaps segmentSnapshots, dir string, ts, start, hw int64) (TimestampOffset, bool, error) {
	snap, err := snaps.acquireSnapshot()
	if err != nil {
		return TimestampOffset{}, false, err
	}
	defer snaps.releaseSnapshot(snap)

	i := max(snap.find(start), 0)
	for ; i < len(snap.list); i++ {
		seg := snap.list[i]
		if seg.NextOffset() <= start {
			continue
		}
		if t, _ := seg.MaxTimestamp(); t < ts {
			continue
		}
		seg.AcquireRead()
		off, t, ok, err := seg.FindOffsetByTimestamp(ts, start)
		epoch := UndefinedEpoch
		if err == nil && ok && off < hw {
			epoch, err = batchEpochAt(seg, off)
		}
		seg.ReleaseRead()
		if err != nil {
			return TimestampOffset{}, false, fmt.Errorf("partlog/log: offset for timestamp %d in segment %d of %s: %w", ts, seg.BaseOffset(), dir, err)
		}
		if !ok {
			continue // every match lies below the log start offset
		}
		if off >= hw {
			break
		}
		return TimestampOffset{Timestamp: t, Offset: off, LeaderEpoch: epoch}, true, nil
	}
	return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: UndefinedEpoch}, false, nil
}

// batchEpochAt returns the partitionLeaderEpoch of the batch of seg that
// holds offset (UndefinedEpoch for a legacy message, which has none).
// REQUIRES: a read lease on seg.
func batchEpochAt(seg *segment.Segment, offset int64) (_ int32, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	_, info, found, err := seg.Translate(offset, 0)
	if err != nil || !found || info.Size < batch.HeaderSize {
		return UndefinedEpoch, err
	}
	var buf [batch.HeaderSize]byte
	h, err := seg.Bytes(info.Pos, info.Pos+batch.HeaderSize, buf[:])
	if err != nil {
		return UndefinedEpoch, err
	}
	if m, ok := batch.PeekMagic(h); !ok || legacy.IsMagic(m) {
		return UndefinedEpoch, nil
	}
	return batch.Batch(h).PartitionLeaderEpoch(), nil
}

// maxTimestampOffset answers MaxTimestamp from a snapshot of snaps: the
// segment with the largest maxTimestamp (the first on ties), the first
// batch in it with that timestamp, and the first record in that batch
// carrying it (Kafka's RecordBatch.offsetOfMaxTimestamp); not found when
// that record is at or past hw. With tiered storage (t not nil) the
// copies of the offsets below the first local segment count as segments
// before it. dir names the partition in errors.
func maxTimestampOffset(snaps segmentSnapshots, t *partTier, dir string, hw int64) (_ TimestampOffset, _ bool, err error) {
	none := TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: UndefinedEpoch}
	snap, err := snaps.acquireSnapshot()
	if err != nil {
		return none, false, err
	}
	var best *segment.Segment
	bestTS, bestOff := batch.NoTimestamp, int64(-1)
	for _, seg := range snap.list {
		if t, off := seg.MaxTimestamp(); t > bestTS {
			best, bestTS, bestOff = seg, t, off
		}
	}
	if t != nil && len(snap.list) > 0 {
		if md, ok := t.maxTimestampCopy(snap.list[0].BaseOffset()); ok && md.MaxTimestamp >= bestTS {
			// The copy comes first: it wins a tie. It is searched
			// without the snapshot (the fetches may be slow).
			snaps.releaseSnapshot(snap)
			to, found, err := t.findInCopy(md, md.MaxTimestamp, md.BaseOffset)
			if err != nil {
				return none, false, t.remoteErr("max timestamp", md.ID, err)
			}
			if !found || to.Offset >= hw {
				return none, false, nil
			}
			return to, true, nil
		}
	}
	defer snaps.releaseSnapshot(snap)
	if hook := testHookMaxTimestampPicked.Load(); hook != nil {
		(*hook)()
	}
	return maxTimestampIn(dir, best, bestTS, bestOff, hw)
}

// testHookMaxTimestampPicked, when set (by tests), runs in
// maxTimestampOffset after it read the local segments' largest timestamps
// and picked one, before it reads that segment under its read lease.
var testHookMaxTimestampPicked atomic.Pointer[func()]

// maxTimestampIn is maxTimestampOffset in the local segment best, whose
// maxTimestamp is bestTS at offset bestOff. REQUIRES: a reference to best
// (the caller's snapshot).
func maxTimestampIn(dir string, best *segment.Segment, bestTS, bestOff, hw int64) (_ TimestampOffset, _ bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	none := TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: UndefinedEpoch}
	if best == nil || bestOff < 0 {
		return none, false, nil
	}
	best.AcquireRead()
	defer best.ReleaseRead()
	_, info, found, err := best.Translate(bestOff, 0)
	if err != nil {
		return none, false, fmt.Errorf("partlog/log: max timestamp in segment %d of %s: %w", best.BaseOffset(), dir, err)
	}
	if !found {
		return none, false, nil
	}
	b, err := best.Bytes(info.Pos, info.End(), nil)
	if err != nil {
		return none, false, fmt.Errorf("partlog/log: max timestamp in segment %d of %s: %w", best.BaseOffset(), dir, err)
	}
	off := bestOff
	if m, ok := batch.PeekMagic(b); ok && legacy.IsMagic(m) {
		// A legacy message: itself, or the inner messages of a wrapper.
		var dec batch.Decoder
		recs, err := dec.AppendLegacyRecords(nil, legacy.Entry(b), false)
		if err != nil {
			return none, false, fmt.Errorf("partlog/log: max timestamp in segment %d of %s: %w", best.BaseOffset(), dir, err)
		}
		for _, r := range recs {
			if r.Timestamp == bestTS {
				off = r.Offset
				break
			}
		}
		if off >= hw {
			return none, false, nil
		}
		return TimestampOffset{Timestamp: bestTS, Offset: off, LeaderEpoch: UndefinedEpoch}, true, nil
	}
	it := batch.Batch(b).Records(nil)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return none, false, fmt.Errorf("partlog/log: max timestamp in segment %d of %s: %w", best.BaseOffset(), dir, err)
		}
		if !ok {
			break
		}
		if rec.Timestamp == bestTS {
			off = rec.Offset
			break
		}
	}
	if off >= hw {
		return none, false, nil
	}
	return TimestampOffset{Timestamp: bestTS, Offset: off, LeaderEpoch: batch.Batch(b).PartitionLeaderEpoch()}, true, nil
}
