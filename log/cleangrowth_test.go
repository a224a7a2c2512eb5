package log_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestCompactOutputLargerThanInput: a compaction whose rewritten batches
// outgrow the segments they replace (a delete horizon stamped on a batch
// whose records are far from it in time) writes them whole. It used to
// fail with "segment is full", the cleaned segment's window being the
// input's size.
func TestCompactOutputLargerThanInput(t *testing.T) {
	one := logtest.MakeBatch(20, 4, 1, 1)
	dir := filepath.Join(t.TempDir(), "topic-0")
	// One batch per segment: the second append rolls.
	p, err := plog.Open(dir, plog.Config{SegmentBytes: int64(len(one)) + 10})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 4; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(20, 4, 1, byte(i)))
		require.NoError(t, err)
	}
	before := p.SegmentInfos()
	require.Len(t, before, 4)

	res, err := p.Compact(context.Background(), horizonCleaner{horizon: 1 << 50})
	require.NoError(t, err)
	require.Positive(t, res.SegmentsWritten)
	require.Greater(t, res.BytesWritten, res.BytesDeleted, "the rewritten batches are larger")

	// The three sealed segments were rewritten; reads stop at a segment's
	// end, so read on until the active segment.
	var n int
	for off := int64(0); off < 60; {
		r, err := p.ReadFrom(off, 1<<20)
		require.NoError(t, err)
		for b, err := range r.Batches() {
			require.NoError(t, err)
			require.True(t, b.Attributes().HasDeleteHorizon(), "batch at %d", b.BaseOffset())
			require.EqualValues(t, int64(1)<<50, b.BaseTimestamp())
			n += int(b.RecordsCount())
			off = b.NextOffset()
		}
		require.NoError(t, r.Close())
	}
	require.Equal(t, 60, n)
}
