package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestPublishWakesOnlyMovedBound (review item 8): an append that moves
// only the log end (DisableAutoHighWatermark) does not wake the goroutines
// waiting for the high watermark; it wakes the followers waiting for the
// log end. SetHighWatermark wakes the high-watermark waiters. On the old
// code one notifier woke everyone on every publication.
func TestPublishWakesOnlyMovedBound(t *testing.T) {
	p, err := Open("/d/t-0", Config{FS: vfs.NewMem(), DisableAutoHighWatermark: true})
	require.NoError(t, err)
	defer p.Close()

	hwCh, endCh := p.bounds.waitChan(false), p.bounds.waitChan(true)
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for range 2 {
		require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(b)
	require.NoError(t, err)
	require.False(t, closed(hwCh), "an append that left the high watermark woke its waiters")
	require.True(t, closed(endCh), "an append did not wake the log end's waiters")

	endCh = p.bounds.waitChan(true)
	require.NoError(t, p.SetHighWatermark(2))
	require.True(t, closed(hwCh), "SetHighWatermark did not wake the high watermark's waiters")
	require.False(t, closed(endCh), "SetHighWatermark woke the log end's waiters")

	// Close (a state change) wakes both.
	hwCh, endCh = p.bounds.waitChan(false), p.bounds.waitChan(true)
	require.NoError(t, p.Close())
	require.True(t, closed(hwCh))
	require.True(t, closed(endCh))
}
