package log_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// TestTruncateCleanerCheckpointClamp checks the clamp itself: only when the
// file exists and its offset is above the new end; a full truncation (the
// log start's batch) clamps to the log start; and a round whose snapshot
// predates a truncation does not raise the checkpoint again.
func TestTruncateCleanerCheckpointClamp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-3")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 600})
	require.NoError(t, err)
	defer p.Close()
	app := func(n int) {
		for i := 0; i < n; i++ {
			bld := batch.NewBuilder(batch.BuilderOptions{})
			require.NoError(t, bld.Add(batch.Record{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte("v"), Timestamp: 1000}))
			b, err := bld.Build()
			require.NoError(t, err)
			_, err = p.AppendBatch(b)
			require.NoError(t, err)
		}
	}
	cp := func() int64 {
		t.Helper()
		off, found, err := p.CleanerCheckpoint()
		require.NoError(t, err)
		if !found {
			return -1
		}
		return off
	}
	app(30)
	// No file: TruncateTo creates none.
	require.NoError(t, p.TruncateTo(28))
	got := cp()
	require.Equal(t, int64(-1), got, "TruncateTo created a cleaner checkpoint at %d", got)
	// At or below the new end: unchanged.
	ok, err := p.WriteCleanerCheckpoint(20, p.Truncations())
	require.NoError(t, err, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.True(t, ok, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.NoError(t, p.TruncateTo(25))
	got = cp()
	require.Equal(t, int64(20), got, "checkpoint %d after TruncateTo(25), want 20 (unchanged)", got)
	// Above: clamped.
	require.NoError(t, p.TruncateTo(12))
	got = cp()
	require.Equal(t, int64(12), got, "checkpoint %d after TruncateTo(12), want 12", got)
	// A round that started before a truncation does not write.
	gen := p.Truncations()
	require.NoError(t, p.TruncateTo(8))
	ok, err = p.WriteCleanerCheckpoint(11, gen)
	require.NoError(t, err, "stale WriteCleanerCheckpoint wrote: %v %v", ok, err)
	require.False(t, ok, "stale WriteCleanerCheckpoint wrote: %v %v", ok, err)
	got = cp()
	require.Equal(t, int64(8), got, "checkpoint %d, want 8", got)
	// Full truncation: the log start inside the batch holding the offset.
	app(1) // offset 8
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := 0; i < 4; i++ {
		bld.Add(batch.Record{Key: []byte("m"), Value: []byte("v"), Timestamp: 1000})
	}
	b, _ := bld.Build()
	// 9..12
	_, err = p.AppendBatch(append([]byte(nil), b...))
	require.NoError(t, err)
	ok, err = p.WriteCleanerCheckpoint(13, p.Truncations())
	require.NoError(t, err, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.True(t, ok, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.NoError(t, p.DeleteRecordsBefore(11))
	require.NoError(t, p.TruncateTo(11))
	require.Equal(t, int64(11), p.LogEndOffset(), "full truncation: start %d end %d, want 11 11", p.LogStartOffset(), p.LogEndOffset())
	require.Equal(t, int64(11), p.LogStartOffset(), "full truncation: start %d end %d, want 11 11", p.LogStartOffset(), p.LogEndOffset())
	got = cp()
	require.Equal(t, int64(11), got, "checkpoint %d after full truncation to 11, want 11", got)
}
