package compaction

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/segment"
)

// cleanGroup rewrites the segments of g into one new segment and swaps it
// in (see Compactor, "Crash safety").
func (c *Compactor) cleanGroup(l Log, g []*segment.Segment, rd *roundState, res *Result) error {
	cfg := l.SegmentConfig()
	// The mapping window must cover the whole group.
	var in int64
	for _, s := range g {
		in += s.Size()
	}
	if cfg.MaxSegmentBytes != 0 && cfg.MaxSegmentBytes < in {
		cfg.MaxSegmentBytes = in
	}
	out, err := segment.CreateWithSuffix(l.FS(), l.Dir(), g[0].BaseOffset(), segment.CleanedSuffix, cfg)
	if err != nil {
		return err
	}
	discard := func(err error) error {
		if derr := out.MarkDeleted(); derr != nil {
			err = errors.Join(err, derr)
		}
		if derr := out.Unref(); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	verbatim := true
	var removed, tombs int64
	for i, s := range g {
		lastSeg := i == len(g)-1
		var lastBase int64 = -1
		if lastSeg {
			lastBase = lastBatchBase(s)
		}
		err := c.sc.forEach(s, s.BaseOffset(), func(b batch.Batch, pos int64) error {
			if isLegacy(b) {
				// Legacy data is copied as it is (see isLegacy).
				_, err := out.Append(b)
				return err
			}
			nb, copied, rm, tb, err := c.filter(b, rd, lastSeg && b.BaseOffset() == lastBase)
			if err != nil {
				return fmt.Errorf("%s: batch at %d: %w", s.LogPath(), pos, err)
			}
			removed += rm
			tombs += tb
			verbatim = verbatim && copied
			if nb == nil {
				return nil
			}
			_, err = out.Append(nb)
			return err
		})
		if err != nil {
			return discard(err)
		}
	}
	if len(g) == 1 && verbatim {
		// Nothing to change in a lone segment: keep it.
		return discard(nil)
	}
	if err := out.Seal(); err != nil {
		return discard(err)
	}
	if err := out.Flush(); err != nil {
		return discard(err)
	}
	fsys, dir := l.FS(), l.Dir()
	committed := false
	commit := func() error {
		if err := out.ChangeSuffix(segment.CleanedSuffix, segment.SwapSuffix); err != nil {
			return err
		}
		if err := checkpoint.SyncDir(fsys, dir); err != nil {
			// Not durable yet: take the rename back.
			_ = out.ChangeSuffix(segment.SwapSuffix, segment.CleanedSuffix)
			return err
		}
		committed = true
		for _, s := range g {
			if err := s.MarkDeleted(); err != nil {
				return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
			}
		}
		if err := checkpoint.SyncDir(fsys, dir); err != nil {
			return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
		}
		if err := out.ChangeSuffix(segment.SwapSuffix, ""); err != nil {
			return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
		}
		if err := checkpoint.SyncDir(fsys, dir); err != nil {
			return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
		}
		return nil
	}
	if err := l.ReplaceSegments(g, []*segment.Segment{out}, commit); err != nil {
		if committed {
			// The files are past the commit point: leave them for
			// RecoverDir; drop only our reference.
			_ = out.Unref()
			return err
		}
		return discard(err)
	}
	res.SegmentsDeleted += len(g)
	res.BytesDeleted += in
	res.SegmentsWritten++
	res.BytesWritten += out.Size()
	res.RecordsRemoved += removed
	res.TombstonesRemoved += tombs
	return nil
}

// lastBatchBase returns the base offset of the last batch of s, -1 if
// empty.
func lastBatchBase(s *segment.Segment) int64 {
	if s.Size() == 0 {
		return -1
	}
	s.AcquireRead()
	defer s.ReleaseRead()
	_, info, found, err := s.Translate(s.NextOffset()-1, 0)
	if err != nil || !found {
		return -1
	}
	return info.BaseOffset
}

// filter decides what becomes of batch b: nb is the batch to write (b
// itself when copied, a rebuilt or empty batch, or nil to drop it); the
// counts are of removed records and removed tombstones. keepLast forces an
// empty batch to be kept (the last batch of the group). An empty batch,
// emptied now or by an earlier round, is otherwise kept only as the last
// batch of a live producer.
func (c *Compactor) filter(b batch.Batch, rd *roundState, keepLast bool) (nb batch.Batch, copied bool, removed, tombs int64, err error) {
	a := b.Attributes()
	if a.IsControl() {
		return b, true, 0, 0, nil
	}
	horizonPassed := a.HasDeleteHorizon() && rd.now.UnixMilli() >= b.BaseTimestamp()
	c.keep = c.keep[:0]
	kept, keptTombs := 0, 0
	it := b.Records(&c.dec)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return nil, false, 0, 0, err
		}
		if !ok {
			break
		}
		keep := rec.Key != nil
		if keep {
			if off, found := c.m.Get(rec.Key); found && rec.Offset < off {
				keep = false
			}
		}
		if keep && rec.Value == nil {
			if horizonPassed && rec.Offset < rd.end {
				keep = false
				tombs++
			} else {
				keptTombs++
			}
		}
		if keep {
			kept++
		} else {
			removed++
		}
		c.keep = append(c.keep, keep)
	}
	needHorizon := keptTombs > 0 && !a.HasDeleteHorizon()
	switch {
	case kept == 0:
		// Emptied now, or an empty header an earlier round kept: it
		// stays only while it is needed.
		if keepLast || rd.liveLast(b) {
			if removed == 0 {
				return b, true, 0, 0, nil
			}
			c.buf = batch.AppendEmptyBatch(c.buf[:0], b)
			return batch.Batch(c.buf), false, removed, tombs, nil
		}
		return nil, false, removed, tombs, nil
	case removed == 0 && !needHorizon:
		return b, true, 0, 0, nil
	case keptTombs > 0:
		h := rd.horizon
		if a.HasDeleteHorizon() {
			h = b.BaseTimestamp()
		}
		nb, err = c.rebuild(b, h)
	default:
		nb, err = c.rebuild(b, 0)
	}
	return nb, false, removed, tombs, err
}

// rebuild re-encodes b's kept records with batch.Builder: same base
// offset, lastOffsetDelta, codec, timestamp type, producer fields and
// leader epoch. A positive horizon stamps the batch with that delete
// horizon (attribute bit 6, baseTimestamp), as Kafka's cleaner does for a
// batch that keeps tombstones.
func (c *Compactor) rebuild(b batch.Batch, horizon int64) (batch.Batch, error) {
	a := b.Attributes()
	opts := batch.BuilderOptions{
		Compression:          a.Compression(),
		BaseOffset:           b.BaseOffset(),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Transactional:        a.IsTransactional(),
		LogAppendTime:        a.LogAppendTime(),
		AppendTime:           b.MaxTimestamp(),
		DeleteHorizon:        horizon,
	}
	if pid := b.ProducerID(); pid != batch.NoProducerID || b.ProducerEpoch() != batch.NoProducerEpoch || b.BaseSequence() != batch.NoSequence {
		opts.Producer = &batch.Producer{ID: pid, Epoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence()}
	}
	c.bld.Reset(opts)
	it := b.Records(&c.dec)
	for i := 0; ; i++ {
		rec, ok, err := it.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if !c.keep[i] {
			continue
		}
		if err := c.bld.AddAt(rec); err != nil {
			return nil, err
		}
	}
	if err := c.bld.SetLastOffsetDelta(b.LastOffsetDelta()); err != nil {
		return nil, err
	}
	var err error
	c.buf, err = c.bld.AppendTo(c.buf[:0])
	return batch.Batch(c.buf), err
}
