package compaction

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
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

// closingMidRound is a partition that closes itself in the middle of its
// compaction rounds (closingCleaner).
type closingMidRound struct {
	*plog.Partition
	closed chan error // Close's result
}

func (p closingMidRound) Compact(ctx context.Context, c plog.Cleaner) (plog.CleanResult, error) {
	return p.Partition.Compact(ctx, &closingCleaner{Cleaner: c, p: p})
}

// closingCleaner closes the partition at the round's first batch decision
// and returns once Close has ended the round's context, so that the round
// goes on with a closed partition under it.
type closingCleaner struct {
	plog.Cleaner
	p    closingMidRound
	ctx  context.Context
	once sync.Once
}

func (c *closingCleaner) Plan(ctx context.Context, v *plog.View) (int64, error) {
	c.ctx = ctx
	return c.Cleaner.Plan(ctx, v)
}

func (c *closingCleaner) Batch(b batch.Batch) plog.BatchDecision {
	c.once.Do(func() {
		go func() { c.p.closed <- c.p.Close() }()
		<-c.ctx.Done()
	})
	return c.Cleaner.Batch(b)
}

// TestRunnerLeavesClosedPartitionUnmarked: a partition closed before its
// run, between its two policies or in the middle of its compaction round
// reports an error wrapping log.ErrClosed and is not marked failed, as
// Kafka lets a cleaning aborted by a partition's deletion go; the next run
// tries it again (and meets ErrClosed again), never answering
// ErrPartitionFailed.
func TestRunnerLeavesClosedPartitionUnmarked(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name string
		// prepare returns what the Runner is given for p, and its
		// Progress.
		prepare func(t *testing.T, p *plog.Partition) (Partition, func(Progress))
	}{
		{"closed before the run", func(t *testing.T, p *plog.Partition) (Partition, func(Progress)) {
			require.NoError(t, p.Close())
			return p, nil
		}},
		{"closed between its policies", func(t *testing.T, p *plog.Partition) (Partition, func(Progress)) {
			return p, func(pr Progress) {
				if pr.Policy == "retention" && pr.Err == nil {
					assert.NoError(t, p.Close())
				}
			}
		}},
		{"closed during its compaction round", func(t *testing.T, p *plog.Partition) (Partition, func(Progress)) {
			l := closingMidRound{Partition: p, closed: make(chan error, 1)}
			t.Cleanup(func() { require.NoError(t, <-l.closed) })
			return l, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newDirtyPartition(t, vfs.NewMem(), "/p/topic-0", now.UnixMilli())
			l, progress := tc.prepare(t, p)
			cfg := compactCfg(&now)
			cfg.CleanupPolicy = "compact,delete"
			cfg.Retention = -1
			r, err := NewRunner(cfg, RunnerOptions{Progress: progress})
			require.NoError(t, err)
			for run := range 2 {
				_, errs, err := r.Run(context.Background(), []Partition{l})
				require.NoError(t, err)
				require.ErrorIs(t, errs[p.Dir()], plog.ErrClosed, "run %d: %v", run, errs)
				require.NotErrorIs(t, errs[p.Dir()], ErrPartitionFailed, "run %d: %v", run, errs)
				require.NoError(t, r.Failed(p.Dir()), "run %d marked the closed partition", run)
			}
		})
	}
}

// TestRunnerMarkBelongsToItsPartition: a Runner's mark is the
// *log.Partition's it was made on. The marked partition stays skipped;
// the partition opened again at its directory is not that partition
// (it starts from its files): it is tried again and, its segment still
// damaged, marked again.
func TestRunnerMarkBelongsToItsPartition(t *testing.T) {
	fs := vfs.NewMem()
	now := time.UnixMilli(1_700_000_000_000)
	p := newDirtyPartition(t, fs, "/p/topic-0", now.UnixMilli())
	corruptFirstSegment(t, fs, p)
	dir := p.Dir()
	r, err := NewRunner(compactCfg(&now), RunnerOptions{})
	require.NoError(t, err)
	_, errs, err := r.Run(context.Background(), []Partition{p})
	require.NoError(t, err)
	require.ErrorIs(t, errs[dir], batch.ErrCorrupt, "%v", errs)
	require.ErrorIs(t, r.Failed(dir), batch.ErrCorrupt)
	_, errs, err = r.Run(context.Background(), []Partition{p})
	require.NoError(t, err)
	require.ErrorIs(t, errs[dir], ErrPartitionFailed, "the marked partition was not skipped: %v", errs)

	require.NoError(t, p.Close())
	p2, err := plog.Open(dir, plog.Config{FS: fs, SegmentBytes: 700, SegmentIndexBytes: 4096, IndexIntervalBytes: 64})
	require.NoError(t, err)
	defer p2.Close()
	_, errs, err = r.Run(context.Background(), []Partition{p2})
	require.NoError(t, err)
	require.ErrorIs(t, errs[dir], batch.ErrCorrupt, "the partition opened again was not tried: %v", errs)
	require.NotErrorIs(t, errs[dir], ErrPartitionFailed)
	require.ErrorIs(t, r.Failed(dir), batch.ErrCorrupt)
	_, errs, err = r.Run(context.Background(), []Partition{p2})
	require.NoError(t, err)
	require.ErrorIs(t, errs[dir], ErrPartitionFailed, "the partition marked again was not skipped: %v", errs)
}

// TestRunnerLeavesTieredPartitionUnmarked: a tiered partition refuses
// compaction (log.ErrTieredCompaction): a setting that does not fit it,
// not a fault of its files. The Runner reports the refusal on every run
// and does not mark the partition, so its retention, which runs first,
// goes on.
func TestRunnerLeavesTieredPartitionUnmarked(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	fs := vfs.NewMem()
	d, err := plog.OpenDir("/logs", plog.DirConfig{
		Config: plog.Config{FS: fs, SegmentBytes: 700, SegmentIndexBytes: 4096},
		Remote: &plog.RemoteConfig{Storage: plog.NewDirRemoteStorage("/remote", fs), Interval: time.Hour},
	})
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendPartition(t, p, 30, 4, now.UnixMilli())
	cfg := compactCfg(&now)
	cfg.CleanupPolicy = "delete,compact"
	cfg.Retention = -1
	var retention int
	r, err := NewRunner(cfg, RunnerOptions{Progress: func(pr Progress) {
		if pr.Policy == "retention" && pr.Err == nil {
			retention++
		}
	}})
	require.NoError(t, err)
	for run := range 2 {
		_, errs, err := r.Run(context.Background(), []Partition{p})
		require.NoError(t, err)
		require.ErrorIs(t, errs[p.Dir()], plog.ErrTieredCompaction, "run %d", run)
		require.NoError(t, r.Failed(p.Dir()), "run %d marked the partition", run)
	}
	require.Equal(t, 2, retention, "retention ran on every run")
}
