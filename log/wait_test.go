package log_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// startWait runs wait in a goroutine and returns the channel its result
// arrives on.
func startWait(wait func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- wait() }()
	return done
}

// requireParked checks, inside a synctest bubble, that the waiter has not
// returned: synctest.Wait returns once it is durably blocked.
func requireParked(t *testing.T, done <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		require.Failf(t, "Wait returned before the record was visible", "returned %v", err)
	default:
	}
}

// requireReturned checks, inside a synctest bubble, that the waiter has
// returned, and returns its result.
func requireReturned(t *testing.T, done <-chan error) error {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		return err
	default:
		require.Fail(t, "Wait is still parked")
		return nil
	}
}

// TestWaitWakesOnAppend: a tailing consumer parks at the high watermark and
// is woken by the append that makes its offset visible, not before.
func TestWaitWakesOnAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{})
		defer p.Close()
		ctx := t.Context()
		require.NoError(t, p.Wait(ctx, -1), "an offset below the high watermark returns at once")

		done := startWait(func() error { return p.Wait(ctx, 0) })
		requireParked(t, done)
		_, err := p.AppendBatch(logtest.MakeBatch(3, 10, 1, 1))
		require.NoError(t, err)
		require.NoError(t, requireReturned(t, done))

		// Offset 3 is the next one: offsets 0-2 do not satisfy it.
		done = startWait(func() error { return p.Wait(ctx, 3) })
		requireParked(t, done)
		require.NoError(t, p.Wait(ctx, 2))
		_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 2, 2))
		require.NoError(t, err)
		require.NoError(t, requireReturned(t, done))
	})
}

// TestWaitHighWatermark: under DisableAutoHighWatermark an append moves the
// log end but not the visibility bound: Wait stays parked until
// SetHighWatermark passes the offset, while WaitFollower returns on the
// append.
func TestWaitHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{DisableAutoHighWatermark: true})
		defer p.Close()
		ctx := t.Context()
		consumer := startWait(func() error { return p.Wait(ctx, 0) })
		follower := startWait(func() error { return p.WaitFollower(ctx, 0) })
		requireParked(t, consumer)
		requireParked(t, follower)

		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
		require.NoError(t, err)
		require.NoError(t, requireReturned(t, follower))
		requireParked(t, consumer)

		require.NoError(t, p.SetHighWatermark(1))
		require.NoError(t, requireReturned(t, consumer))
	})
}

// TestWaitEnds: Wait returns the context's error, ErrClosed on Close, the
// sticky failure when the partition fails, and ErrOffsetOutOfRange for an
// offset the log end cannot reach.
func TestWaitEnds(t *testing.T) {
	t.Run("context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, _ := openMem(t, plog.Config{})
			defer p.Close()
			ctx, cancel := context.WithCancel(t.Context())
			done := startWait(func() error { return p.Wait(ctx, 0) })
			requireParked(t, done)
			cancel()
			require.ErrorIs(t, requireReturned(t, done), context.Canceled)
		})
	})
	t.Run("close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, _ := openMem(t, plog.Config{})
			done := startWait(func() error { return p.Wait(t.Context(), 0) })
			requireParked(t, done)
			require.NoError(t, p.Close())
			require.ErrorIs(t, requireReturned(t, done), plog.ErrClosed)
			require.ErrorIs(t, p.Wait(t.Context(), 0), plog.ErrClosed)
		})
	})
	t.Run("failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, in := openMem(t, plog.Config{})
			defer p.Close()
			_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 1, 1))
			require.NoError(t, err)
			done := startWait(func() error { return p.Wait(t.Context(), 1) })
			requireParked(t, done)
			in.FailOnce(func(op vfs.Op) bool {
				return op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix)
			})
			require.ErrorIs(t, p.Sync(), plog.ErrFailed)
			err = requireReturned(t, done)
			require.ErrorIs(t, err, plog.ErrFailed)
			require.ErrorIs(t, err, vfs.ErrInjected)
		})
	})
	t.Run("truncated below the offset", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, _ := openMem(t, plog.Config{})
			defer p.Close()
			_, err := p.AppendBatch(logtest.MakeBatch(4, 10, 1, 1))
			require.NoError(t, err)

			// A truncation below a parked waiter's offset ends its wait.
			done := startWait(func() error { return p.Wait(t.Context(), 4) })
			requireParked(t, done)
			require.NoError(t, p.TruncateTo(2))
			require.ErrorIs(t, requireReturned(t, done), plog.ErrOffsetOutOfRange)
		})
	})
}

// TestWaitPastLogEnd: an offset past the log end is waited for (a long
// poll for records not yet written), until appends bring the high
// watermark past it; the context ends the wait, and a truncation during
// it that leaves the log end below the offset ends it with
// ErrOffsetOutOfRange, also when appends the waiter did not see (they
// moved only the log end) had raised the end before the truncation: the
// waiter sees the count of truncations move. A truncation above the
// offset, or to it, does not end the wait.
func TestWaitPastLogEnd(t *testing.T) {
	type step func(t *testing.T, p *plog.Partition)
	appendN := func(n int) step {
		return func(t *testing.T, p *plog.Partition) {
			_, err := p.AppendBatch(logtest.MakeBatch(n, 10, 1, 1))
			require.NoError(t, err)
		}
	}
	truncate := func(to int64) step {
		return func(t *testing.T, p *plog.Partition) { require.NoError(t, p.TruncateTo(to)) }
	}
	setHW := func(hw int64) step {
		return func(t *testing.T, p *plog.Partition) { require.NoError(t, p.SetHighWatermark(hw)) }
	}
	manualHW := plog.Config{DisableAutoHighWatermark: true}
	cases := []struct {
		name   string
		cfg    plog.Config
		start  int    // records before the wait, one a batch
		offset int64  // the offset waited for
		follow bool   // WaitFollower
		steps  []step // while the waiter is parked; it is checked after each
		// parkedAfter is how many steps leave the waiter parked; the
		// last step ends the wait with want.
		parkedAfter int
		want        error
		cancel      bool // cancel the context after the steps
	}{
		{name: "append reaches the offset", start: 5, offset: 15, steps: []step{appendN(5), appendN(5), appendN(1)}, parkedAfter: 2},
		{name: "one append passes the offset", start: 5, offset: 15, steps: []step{appendN(20)}},
		{name: "empty log", start: 0, offset: 3, steps: []step{appendN(3), appendN(1)}, parkedAfter: 1},
		{name: "follower", start: 2, offset: 6, follow: true, steps: []step{appendN(4), appendN(1)}, parkedAfter: 1},
		{name: "context cancels", start: 5, offset: 15, steps: []step{appendN(3)}, parkedAfter: 1, cancel: true, want: context.Canceled},
		{name: "truncation below it", start: 5, offset: 15, steps: []step{truncate(3)}, want: plog.ErrOffsetOutOfRange},
		{name: "truncation after appends", start: 5, offset: 15, steps: []step{appendN(5), truncate(8)}, parkedAfter: 1, want: plog.ErrOffsetOutOfRange},
		{name: "truncation above it", cfg: manualHW, start: 20, offset: 15, steps: []step{truncate(17), truncate(15), appendN(1), setHW(16)}, parkedAfter: 3},
		{name: "truncation after unseen appends", cfg: manualHW, start: 5, offset: 15, steps: []step{appendN(5), truncate(7)}, parkedAfter: 1, want: plog.ErrOffsetOutOfRange},
		{name: "follower truncated below it", start: 5, offset: 15, follow: true, steps: []step{truncate(1)}, want: plog.ErrOffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := openMem(t, tc.cfg)
				defer p.Close()
				for range tc.start { // one record a batch: truncations cut where asked
					appendN(1)(t, p)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := startWait(func() error {
					if tc.follow {
						return p.WaitFollower(ctx, tc.offset)
					}
					return p.Wait(ctx, tc.offset)
				})
				requireParked(t, done)
				for i, st := range tc.steps {
					st(t, p)
					if i < tc.parkedAfter {
						requireParked(t, done)
					}
				}
				if tc.cancel {
					requireParked(t, done)
					cancel()
				}
				err := requireReturned(t, done)
				if tc.want == nil {
					require.NoError(t, err)
					bound := p.HighWatermark()
					if tc.follow {
						bound = p.LogEndOffset()
					}
					require.Greater(t, bound, tc.offset)
					return
				}
				require.ErrorIs(t, err, tc.want)
			})
		})
	}
}

// TestWaitAppendAllocs: an append allocates nothing more when a waiter
// existed before (the notifier's generation is dropped on publish) and
// nothing at all when nobody waits.
func TestWaitAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p, _ := openT(t, plog.Config{})
	b := logtest.MakeBatch(2, 50, 1, 1)
	allocs := testing.AllocsPerRun(100, func() {
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
	})
	require.Zero(t, allocs)
}

// ExamplePartition_Wait parks a consumer at the high watermark until a
// producer's append makes its next offset visible.
func ExamplePartition_Wait() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	woken := make(chan error)
	go func() {
		// Caught up at offset 0: wait for it, with a bound on the wait.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		woken <- p.Wait(ctx, 0)
	}()
	if _, err := p.AppendBatch(producerBatch(2)); err != nil {
		panic(err)
	}
	fmt.Println("woken:", <-woken, "high watermark:", p.HighWatermark())
	// Output:
	// woken: <nil> high watermark: 2
}

// BenchmarkAppendBatchParkedWaiters appends with 0 and 1000 goroutines
// parked in Wait for a high watermark the appends do not move
// (DisableAutoHighWatermark): an append that only moves the log end must
// not pay for waking them.
func BenchmarkAppendBatchParkedWaiters(b *testing.B) {
	for _, waiters := range []int{0, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{DisableAutoHighWatermark: true})
			require.NoError(b, err)
			defer p.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var started, done sync.WaitGroup
			for range waiters {
				started.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					started.Done()
					_ = p.Wait(ctx, 0)
				}()
			}
			started.Wait()
			for range 100 { // let them park
				runtime.Gosched()
			}
			bt := logtest.MakeBatch(10, 100, 1, 1)
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				_, err := p.AppendBatch(bt)
				require.NoError(b, err)
			}
			b.StopTimer()
			cancel()
			done.Wait()
		})
	}
}
