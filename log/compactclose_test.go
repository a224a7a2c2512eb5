package log_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// slowCleaner is horizonCleaner that reports its first Batch call on
// started and takes a little while over each batch, so that a round over
// many batches is still running when the test acts.
type slowCleaner struct {
	horizonCleaner
	once    *sync.Once
	started chan struct{}
}

func (c slowCleaner) Batch(b batch.Batch) plog.BatchDecision {
	c.once.Do(func() { close(c.started) })
	time.Sleep(200 * time.Microsecond)
	return c.horizonCleaner.Batch(b)
}

// TestCloseStopsCompact: Close during a compaction round stops the round,
// which returns an error wrapping ErrClosed, and waits for it, so that no
// .cleaned file is left behind and nothing touches the directory after
// Close returned. Close used to return while the round went on writing.
func TestCloseStopsCompact(t *testing.T) {
	one := logtest.MakeBatch(20, 4, 1, 1)
	p, dir := openT(t, plog.Config{SegmentBytes: 100 * int64(len(one))})
	for i := range 2000 { // 20 segments of 100 batches
		_, err := p.AppendBatch(logtest.MakeBatch(20, 4, 1, byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.SetHighWatermark(p.LogEndOffset()))

	c := slowCleaner{horizonCleaner: horizonCleaner{horizon: 1 << 50}, once: new(sync.Once), started: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := p.Compact(context.Background(), c)
		done <- err
	}()
	<-c.started
	require.NoError(t, p.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, plog.ErrClosed)
	default:
		t.Fatal("Close returned while the compaction round was still running")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), segment.CleanedSuffix), "left behind: %s", e.Name())
	}
}
