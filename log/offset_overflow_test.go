package log_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// batchAt returns a valid batch of n records whose base offset is base.
func batchAt(n int, base int64) []byte {
	b := logtest.MakeBatch(n, 8, 1_700_000_000_000, 1)
	batch.Batch(b).SetBaseOffset(base)
	return b
}

// TestOffsetOverflowRefused is the reliability issue's first case: every
// call that takes an offset from its caller and would move the log end
// offset past math.MaxInt64 (a batch whose next offset, base +
// lastOffsetDelta + 1, does not fit an int64; a restart at an offset no
// segment can start at) is refused with a typed error and changes
// nothing: the records acknowledged before it stay readable, the next
// good append succeeds, and the partition closes and reopens under both
// recovery policies. On 86b910c AppendAssigned accepted a 3-record batch
// at MaxInt64-2: the log end offset wrapped to MinInt64 and the directory
// no longer opened.
func TestOffsetOverflowRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(p *plog.Partition) error
		want error
	}{
		{"AppendAssigned last offset MaxInt64", func(p *plog.Partition) error {
			_, err := p.AppendAssigned(batchAt(3, math.MaxInt64-2))
			return err
		}, plog.ErrInvalidBatch},
		{"AppendAssigned base MaxInt64", func(p *plog.Partition) error {
			_, err := p.AppendAssigned(batchAt(1, math.MaxInt64))
			return err
		}, plog.ErrInvalidBatch},
		{"AppendAssigned second batch overflows", func(p *plog.Partition) error {
			set := append(batchAt(1, 10), batchAt(2, math.MaxInt64-1)...)
			_, err := p.AppendAssigned(set)
			return err
		}, plog.ErrInvalidBatch},
		{"TruncateFullyAndStartAt MaxInt64", func(p *plog.Partition) error {
			return p.TruncateFullyAndStartAt(math.MaxInt64)
		}, plog.ErrOffsetOutOfRange},
		{"TruncateFullyAndStartAt past the largest segment base", func(p *plog.Partition) error {
			return p.TruncateFullyAndStartAt(math.MaxInt64 - math.MaxInt32 + 1)
		}, plog.ErrOffsetOutOfRange},
		{"DeleteRecordsBefore MaxInt64", func(p *plog.Partition) error {
			return p.DeleteRecordsBefore(math.MaxInt64)
		}, plog.ErrOffsetOutOfRange},
		{"SetHighWatermark MaxInt64", func(p *plog.Partition) error {
			return p.SetHighWatermark(math.MaxInt64)
		}, plog.ErrOffsetOutOfRange},
		{"AssignEpochStartOffset MaxInt64", func(p *plog.Partition) error {
			return p.AssignEpochStartOffset(7, math.MaxInt64)
		}, plog.ErrUnexpectedOffset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, policy := range []plog.RecoveryPolicy{plog.DefaultRecovery{}, plog.StrictRecovery{}} {
				cfg := plog.Config{Recovery: policy}
				p, dir := openT(t, cfg)
				_, err := p.AppendBatch(logtest.MakeBatch(3, 8, 1_700_000_000_000, 2))
				require.NoError(t, err)
				err = tc.op(p)
				require.Error(t, err)
				assert.True(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
				require.Equal(t, int64(3), p.LogEndOffset(), "the log end offset moved")
				base, err := p.AppendBatch(logtest.MakeBatch(2, 8, 1_700_000_000_000, 3))
				require.NoError(t, err, "the next good append")
				require.Equal(t, int64(3), base)
				require.NoError(t, p.Close())

				p, err = plog.Open(dir, cfg)
				require.NoError(t, err, "reopen")
				require.Equal(t, int64(5), p.LogEndOffset())
				r, err := p.ReadFrom(0, 1<<20)
				require.NoError(t, err)
				require.Equal(t, [][2]int64{{0, 2}, {3, 4}}, batchesIn(t, r.Bytes()))
				require.NoError(t, r.Close())
				require.NoError(t, p.Close())
			}
		})
	}
}

// maxSegmentBase is index.MaxBaseOffset: the largest base offset a segment
// may have.
const maxSegmentBase = int64(math.MaxInt64 - math.MaxInt32)

// reopenBoth closes p and reopens dir cleanly, then after an unclean
// shutdown under both recovery policies, and checks each time that the log
// holds want ([base, last] of each batch from start) and passes Verify.
func reopenBoth(t *testing.T, p *plog.Partition, dir string, cfg plog.Config, start int64, want [][2]int64) {
	t.Helper()
	require.NoError(t, p.Close())
	for _, policy := range []plog.RecoveryPolicy{nil, plog.DefaultRecovery{}, plog.StrictRecovery{}} {
		if policy != nil {
			makeUnclean(t, dir)
		}
		cfg.Recovery = policy
		q, err := plog.Open(dir, cfg)
		require.NoError(t, err, "reopen (policy %T)", policy)
		require.NoError(t, q.Verify())
		r, err := q.ReadFrom(start, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, batchesIn(t, r.Bytes()), "policy %T", policy)
		require.NoError(t, r.Close())
		require.NoError(t, q.Close())
	}
}

// TestAppendsPastLargestSegmentBase (law 1): a segment's base offset is at
// most maxSegmentBase (base + any 32-bit relative offset must fit an
// int64), so once the log end offset passes it no segment can start at the
// log end. Appends whose offsets fit an int64 (last offset <= MaxInt64-1,
// the documented limit) must still succeed: the append that takes the log
// end past the bound goes into a segment starting as high as it can, and
// no roll (size, time, index, relative offsets, Roll) happens after it;
// the last segment grows past segment.bytes. Before, every roll past the
// bound failed with an untyped "create segment" error, forever: the first
// append after segment.bytes filled, and a follower's batch near MaxInt64
// followed by a producer batch.
func TestAppendsPastLargestSegmentBase(t *testing.T) {
	t.Run("leader after TruncateFullyAndStartAt(maxSegmentBase)", func(t *testing.T) {
		cfg := plog.Config{SegmentBytes: 1024}
		p, dir := openT(t, cfg)
		require.NoError(t, p.TruncateFullyAndStartAt(maxSegmentBase)) // accepted, as documented
		var want [][2]int64
		for i := range 10 { // about 2.9 KiB: the segment passes segment.bytes
			base, err := p.AppendBatch(logtest.MakeBatch(2, 100, 1_700_000_000_000, byte(i)))
			require.NoError(t, err, "append %d at log end %d", i, p.LogEndOffset())
			require.Equal(t, maxSegmentBase+2*int64(i), base)
			want = append(want, [2]int64{base, base + 1})
		}
		segs := p.SegmentInfos()
		require.Len(t, segs, 1)
		require.Greater(t, segs[0].Size, cfg.SegmentBytes)
		err := p.Roll()
		require.ErrorIs(t, err, plog.ErrLogFull)
		require.Equal(t, segs, p.SegmentInfos(), "the refused roll changed the segments")
		res, err := p.DeleteExpired(context.Background(), keepNewest(0))
		require.NoError(t, err, "retention keeps the last segment")
		require.Zero(t, res.SegmentsDeleted)
		reopenBoth(t, p, dir, cfg, maxSegmentBase, want)

		// Reopened, the last segment (larger than segment.bytes) grows on.
		p, err = plog.Open(dir, cfg)
		require.NoError(t, err)
		defer p.Close()
		base, err := p.AppendBatch(logtest.MakeBatch(2, 100, 1_700_000_000_000, 10))
		require.NoError(t, err)
		require.Equal(t, maxSegmentBase+20, base)
		require.Len(t, p.SegmentInfos(), 1)
	})

	t.Run("follower batch near MaxInt64 then producer batches up to the limit", func(t *testing.T) {
		p, dir := openT(t, plog.Config{})
		_, err := p.AppendAssigned(batchAt(1, math.MaxInt64-3))
		require.NoError(t, err)
		require.Equal(t, int64(math.MaxInt64-2), p.LogEndOffset())
		segs := p.SegmentInfos()
		// The gap before the batch rolls to the highest base that holds
		// every offset up to MaxInt64, below the batch's (Open accepts a
		// gap between segments that the next segment's first batch shows).
		require.Equal(t, maxSegmentBase, segs[len(segs)-1].BaseOffset)
		// One record at MaxInt64-2: next offset MaxInt64-1, within the limit.
		base, err := p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_000, 3))
		require.NoError(t, err)
		require.Equal(t, int64(math.MaxInt64-2), base)
		// The last offset the limit allows.
		base, err = p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_000, 4))
		require.NoError(t, err)
		require.Equal(t, int64(math.MaxInt64-1), base)
		_, err = p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_000, 5))
		require.ErrorIs(t, err, plog.ErrInvalidBatch, "next offset past MaxInt64")
		reopenBoth(t, p, dir, plog.Config{}, math.MaxInt64-3,
			[][2]int64{{math.MaxInt64 - 3, math.MaxInt64 - 3}, {math.MaxInt64 - 2, math.MaxInt64 - 2}, {math.MaxInt64 - 1, math.MaxInt64 - 1}})
	})

	t.Run("the append that passes the bound rolls to the log end", func(t *testing.T) {
		cfg := plog.Config{SegmentBytes: 4096}
		p, dir := openT(t, cfg)
		start := maxSegmentBase - 10
		require.NoError(t, p.TruncateFullyAndStartAt(start))
		var want [][2]int64
		for i := range 6 { // bases start, start+4, start+8 (passes the bound), start+12, ...
			base, err := p.AppendBatch(logtest.MakeBatch(4, 20, 1_700_000_000_000, byte(i)))
			require.NoError(t, err, "append %d", i)
			want = append(want, [2]int64{base, base + 3})
		}
		segs := p.SegmentInfos()
		require.Len(t, segs, 2, "one roll, before the batch that passes the bound")
		require.Equal(t, start+8, segs[1].BaseOffset)
		// The last segment holds every offset up to its base + 2^31-1,
		// math.MaxInt64-2 here: a follower batch ending there fits, and
		// the offset after it, within the documented limit, is refused
		// with ErrLogFull.
		_, err := p.AppendAssigned(batchAt(2, math.MaxInt64-3))
		require.NoError(t, err)
		want = append(want, [2]int64{math.MaxInt64 - 3, math.MaxInt64 - 2})
		require.Len(t, p.SegmentInfos(), 2)
		_, err = p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_000, 9))
		require.ErrorIs(t, err, plog.ErrLogFull)
		require.Equal(t, int64(math.MaxInt64-1), p.LogEndOffset())
		// Retention may not roll it away: the older segment goes, the
		// last one stays.
		require.NoError(t, p.SetHighWatermark(p.LogEndOffset()))
		res, err := p.DeleteExpired(context.Background(), keepNewest(0))
		require.NoError(t, err)
		require.Equal(t, 1, res.SegmentsDeleted)
		require.Equal(t, start+8, p.LogStartOffset())
		reopenBoth(t, p, dir, cfg, start+8, want[2:])
	})
}

// TestLogFullRefusesAndChangesNothing (laws 1 and 8): past maxSegmentBase
// the last segment takes a batch only when its last offset lies within
// 2^31-1 of the segment's base, the .log stays within 2 GiB and the
// indexes have room. A batch it cannot hold gets an error wrapping
// ErrLogFull before anything is written (for AppendAssigned, before any
// batch of the record set): the log is unchanged, an append that fits
// still succeeds, and the partition reopens under both policies.
func TestLogFullRefusesAndChangesNothing(t *testing.T) {
	t.Run("offsets past the last segment's", func(t *testing.T) {
		p, dir := openT(t, plog.Config{})
		start := maxSegmentBase - 100
		require.NoError(t, p.TruncateFullyAndStartAt(start))
		_, err := p.AppendAssigned(batchAt(200, start)) // passes the bound: the segment at start is the last
		require.NoError(t, err)
		end := p.LogEndOffset()
		_, err = p.AppendAssigned(batchAt(1, math.MaxInt64-10)) // 2^31+89 past the segment's base
		require.ErrorIs(t, err, plog.ErrLogFull)
		_, err = p.AppendAssigned(append(batchAt(1, end+5), batchAt(1, math.MaxInt64-10)...))
		require.ErrorIs(t, err, plog.ErrLogFull, "a record set with such a batch")
		require.Equal(t, end, p.LogEndOffset(), "a refused append changed the log end")
		_, err = p.AppendAssigned(batchAt(1, math.MaxInt64-200)) // 2^31-101 past it
		require.NoError(t, err)
		base, err := p.AppendBatch(logtest.MakeBatch(2, 8, 1_700_000_000_000, 1))
		require.NoError(t, err)
		reopenBoth(t, p, dir, plog.Config{}, start,
			[][2]int64{{start, start + 199}, {math.MaxInt64 - 200, math.MaxInt64 - 200}, {base, base + 1}})
	})

	t.Run("indexes full", func(t *testing.T) {
		// Two time index slots (one kept for the seal's entry): room for
		// one entry, which the second append takes.
		cfg := plog.Config{SegmentIndexBytes: 24, IndexIntervalBytes: 1}
		p, dir := openT(t, cfg)
		require.NoError(t, p.TruncateFullyAndStartAt(maxSegmentBase))
		var want [][2]int64
		for i := range 2 {
			base, err := p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_000+int64(i), byte(i)))
			require.NoError(t, err)
			want = append(want, [2]int64{base, base})
		}
		end := p.LogEndOffset()
		_, err := p.AppendBatch(logtest.MakeBatch(1, 8, 1_700_000_000_002, 2))
		require.ErrorIs(t, err, plog.ErrLogFull)
		_, err = p.AppendMarker(marker(batch.ControlAbort, 9, 0, 0))
		require.ErrorIs(t, err, plog.ErrLogFull)
		_, err = p.AppendAssigned(batchAt(1, end+3))
		require.ErrorIs(t, err, plog.ErrLogFull)
		require.Equal(t, end, p.LogEndOffset(), "a refused append changed the log end")
		require.Len(t, p.SegmentInfos(), 1)

		// A truncation gives the index entries back.
		require.NoError(t, p.TruncateTo(end-1))
		_, err = p.AppendAssigned(append(batchAt(1, end+3), batchAt(1, end+9)...))
		require.ErrorIs(t, err, plog.ErrLogFull, "no batch of a set is written when one would be refused")
		require.Equal(t, end-1, p.LogEndOffset())
		_, err = p.AppendAssigned(batchAt(1, end+3))
		require.NoError(t, err)
		want = append(want[:1], [2]int64{end + 3, end + 3})
		reopenBoth(t, p, dir, cfg, maxSegmentBase, want)
	})
}
