package log_test

import (
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
