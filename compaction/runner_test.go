package compaction

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/segment"
)

// brokenLog fails every Segments call.
type brokenLog struct{ *testLog }

var errBroken = errors.New("broken partition")

func (b brokenLog) Segments() ([]*segment.Segment, error) { return nil, errBroken }

func TestRunnerIsolatesFailures(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var logs []Log
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
	if err != nil {
		t.Fatal(err)
	}
	total, errs, err := r.Run(context.Background(), logs)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !errors.Is(errs[logs[2].Dir()], errBroken) {
		t.Fatalf("errors %v", errs)
	}
	if total.SegmentsWritten < len(good) || !total.Compacted {
		t.Fatalf("total %+v", total)
	}
	if len(reports) != 2*4+1 {
		t.Fatalf("%d progress reports", len(reports))
	}
	// The failed partition is skipped next time, until Reset.
	_, errs, _ = r.Run(context.Background(), logs)
	if !errors.Is(errs[logs[2].Dir()], ErrPartitionFailed) {
		t.Fatalf("not skipped: %v", errs)
	}
	r.Reset(logs[2].Dir())
	if r.Failed(logs[2].Dir()) != nil {
		t.Fatal("Reset kept the mark")
	}
	// A cancelled context stops the run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.Run(ctx, logs); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}
