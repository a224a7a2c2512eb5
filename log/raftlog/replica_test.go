package raftlog_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/log/raftlog"
)

// TestCompactContextEnded calls Compact with contexts that have ended, so
// that Compact often returns while its round is queued on the replica's
// loop or running there. The round's result must reach the caller only
// through the loop's answer: the race detector (CI runs this package with
// -race) saw the loop write the CleanResult after Compact had returned it.
func TestCompactContextEnded(t *testing.T) {
	r := startGroup(t, 1)
	policies, err := compaction.Policies(compaction.Config{CleanupPolicy: "compact"})
	require.NoError(t, err)
	var c *compaction.Compactor
	for _, p := range policies {
		if k, ok := p.(*compaction.Compactor); ok {
			c = k
		}
	}
	require.NotNil(t, c)
	for range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.Compact(ctx, c); err != nil {
			require.ErrorIs(t, err, context.Canceled)
		}
	}
	_, err = r.Compact(context.Background(), c)
	require.NoError(t, err)
	require.NotErrorIs(t, r.Err(), raftlog.ErrStopped)
}
