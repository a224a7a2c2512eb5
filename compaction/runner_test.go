package compaction

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// brokenLog fails every round.
type brokenLog struct{ *testLog }

var errBroken = errors.New("broken partition")

func (b brokenLog) Compact(context.Context, plog.Cleaner) (plog.CleanResult, error) {
	return plog.CleanResult{CleanedTo: -1}, errBroken
}

func (b brokenLog) DeleteExpired(context.Context, plog.RetentionPolicy) (plog.CleanResult, error) {
	return plog.CleanResult{CleanedTo: -1}, errBroken
}

func TestRunnerIsolatesFailures(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var logs []Partition
	var good []*testLog
	for i := range 5 {
		l := newOSLog(t, 500)
		fillLog(t, l, 10, 3, now.UnixMilli())
		if i == 2 {
			logs = append(logs, brokenLog{l})
			continue
		}
		good = append(good, l)
		logs = append(logs, l)
	}
	cfg := compactCfg(&now)
	cfg.CleanupPolicy = "compact,delete"
	cfg.Retention = -1
	var mu sync.Mutex
	var reports []Progress
	r, err := NewRunner(cfg, RunnerOptions{Workers: 2, Progress: func(p Progress) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	}})
	require.NoError(t, err)
	total, errs, err := r.Run(context.Background(), logs)
	require.NoError(t, err)
	require.Len(t, errs, 1, "errors %v", errs)
	require.ErrorIs(t, errs[logs[2].Dir()], errBroken, "errors %v", errs)
	require.GreaterOrEqual(t, total.SegmentsWritten, len(good), "total %+v", total)
	require.True(t, total.Compacted, "total %+v", total)
	require.Len(t, reports, 2*4+1, "%d progress reports", len(reports))
	// The failed partition is skipped next time, until Reset.
	_, errs, _ = r.Run(context.Background(), logs)
	require.ErrorIs(t, errs[logs[2].Dir()], ErrPartitionFailed, "not skipped: %v", errs)
	r.Reset(logs[2].Dir())
	require.NoError(t, r.Failed(logs[2].Dir()), "Reset kept the mark")
	// A cancelled context stops the run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = r.Run(ctx, logs)
	require.ErrorIs(t, err, context.Canceled, "cancelled run: %v", err)
}
