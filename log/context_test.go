package log_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// blockLogSync makes the next fdatasync of a .log wait until release is
// closed; entered is closed when it starts waiting.
func blockLogSync(in *vfs.Injector) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	})
	return entered, release
}

// TestAppendBatchContext: under FlushMessages == 1 a context that ends
// while the append waits for its fdatasync returns the assigned base with
// ctx.Err() at once; the sync completes afterwards and makes the batch
// durable and visible.
func TestAppendBatchContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, in := openMem(t, plog.Config{FlushMessages: 1})
		defer p.Close()
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
		require.NoError(t, err)

		entered, release := blockLogSync(in)
		ctx, cancel := context.WithCancel(t.Context())
		type result struct {
			base int64
			err  error
		}
		done := make(chan result, 1)
		go func() {
			base, err := p.AppendBatchContext(ctx, logtest.MakeBatch(3, 10, 2, 2))
			done <- result{base, err}
		}()
		<-entered
		cancel()
		res := <-done // returns while the fdatasync is still blocked
		require.ErrorIs(t, res.err, context.Canceled)
		require.Equal(t, int64(2), res.base)
		require.Equal(t, int64(2), p.HighWatermark(), "visible before its sync")

		close(release)
		require.NoError(t, p.Wait(t.Context(), 4), "the abandoned sync completes and publishes")
		require.Equal(t, int64(5), p.HighWatermark())
	})
}

// TestSyncContext: SyncContext returns ctx.Err() while the flush is
// blocked in fdatasync; the flush then completes (the recovery point
// moves: a later Sync has nothing to do) and the partition stays healthy.
func TestSyncContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, in := openMem(t, plog.Config{})
		defer p.Close()
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
		require.NoError(t, err)

		entered, release := blockLogSync(in)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.SyncContext(ctx) }()
		<-entered
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		syncs := p.Stats().Syncs
		close(release)
		synctest.Wait() // the abandoned flush finishes
		require.Equal(t, syncs+1, p.Stats().Syncs, "the flush did not complete")
		require.False(t, p.Stats().Failed)
		require.NoError(t, p.Sync())
	})
}

// TestContextEndedBefore: a context that ended before the call makes it
// do nothing.
func TestContextEndedBefore(t *testing.T) {
	p, _ := openT(t, plog.Config{FlushMessages: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	base, err := p.AppendBatchContext(ctx, logtest.MakeBatch(2, 10, 1, 1))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int64(-1), base)
	end, err := p.AppendAssignedContext(ctx, logtest.MakeBatch(2, 10, 1, 1))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int64(0), end)
	require.ErrorIs(t, p.SyncContext(ctx), context.Canceled)
	require.Equal(t, int64(0), p.LogEndOffset())

	// A live context: the same calls succeed.
	base, err = p.AppendBatchContext(t.Context(), logtest.MakeBatch(2, 10, 1, 1))
	require.NoError(t, err)
	require.Equal(t, int64(0), base)
	require.NoError(t, p.SyncContext(t.Context()))
}
