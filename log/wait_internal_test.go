package log

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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

// fakeWaitCore is the partition's side of a wait (waitCore) in
// TestWaitRules: the error it ends with, and a hook run at each look.
type fakeWaitCore struct {
	// err, when set, is what waitErr returns.
	err atomic.Pointer[error]
	// looks counts the waiter's looks at the bounds; onLook runs at each,
	// after the waiter took its channel and before it loads the bounds.
	// Both are the waiting goroutine's.
	looks  int
	onLook func(look int)
}

func (c *fakeWaitCore) waitErr() error {
	c.looks++
	if c.onLook != nil {
		c.onLook(c.looks)
	}
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}

// TestWaitRules: bounds.wait without a Partition. It returns nil once its
// bound (the high watermark, or the log end for a follower) passes the
// offset, at once or when a publication moves it; the core's error (closed,
// failed, offline) whenever it has one; ErrOffsetOutOfRange when, during
// the wait, the log end goes down or a truncation is counted while the log
// end is below the offset; otherwise it waits until ctx ends.
func TestWaitRules(t *testing.T) {
	at := func(off int64) position { return position{Offset: off} }
	const offset = 7
	type step func(b *bounds, core *fakeWaitCore, cuts *atomic.Uint64, cancel context.CancelFunc)
	for _, tc := range []struct {
		name     string
		follower bool
		hw, end  int64
		// during runs on the test's goroutine once the waiter looked at
		// the bounds a first time (nil: ctx is cancelled before the wait).
		during step
		// second runs on the waiter's goroutine at its second look.
		second func(b *bounds)
		want   error
	}{
		{name: "high watermark past", hw: 8, end: 8},
		{name: "high watermark at the offset", hw: offset, end: 9, want: context.Canceled},
		{name: "follower, log end past", follower: true, hw: 3, end: 8},
		{name: "follower, log end at the offset", follower: true, hw: 3, end: offset, want: context.Canceled},
		{name: "published past", hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, _ *atomic.Uint64, _ context.CancelFunc) {
			b.signal(b.storeQuiet(at(8), at(8), 0))
		}},
		{name: "follower, log end published past", follower: true, hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, _ *atomic.Uint64, _ context.CancelFunc) {
			b.signal(b.storeQuiet(at(5), at(8), 0))
		}},
		{name: "log end alone does not end a wait", hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, _ *atomic.Uint64, cancel context.CancelFunc) {
			b.signal(b.storeQuiet(at(5), at(9), 0))
			cancel()
		}, want: context.Canceled},
		{name: "closed during the wait", hw: 5, end: 5, during: func(b *bounds, core *fakeWaitCore, _ *atomic.Uint64, _ context.CancelFunc) {
			core.err.Store(&ErrClosed)
			b.wakeAll()
		}, want: ErrClosed},
		{name: "log end lowered during the wait", hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, _ *atomic.Uint64, _ context.CancelFunc) {
			b.wakeAll()
		}, second: func(b *bounds) { b.storeQuiet(at(3), at(3), 0) }, want: ErrOffsetOutOfRange},
		{name: "truncation counted during the wait", hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, cuts *atomic.Uint64, _ context.CancelFunc) {
			cuts.Add(1)
			b.wakeAll()
		}, want: ErrOffsetOutOfRange},
		{name: "truncation counted, log end past", follower: true, hw: 5, end: 5, during: func(b *bounds, _ *fakeWaitCore, cuts *atomic.Uint64, _ context.CancelFunc) {
			cuts.Add(1)
			b.signal(b.storeQuiet(at(5), at(9), 0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bounds
			b.storeQuiet(at(tc.hw), at(tc.end), 0)
			var cuts atomic.Uint64
			core := &fakeWaitCore{}
			looked := make(chan struct{})
			core.onLook = func(look int) {
				switch {
				case look == 1:
					close(looked)
				case look == 2 && tc.second != nil:
					tc.second(&b)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.during == nil {
				cancel() // a wait that would park returns ctx.Err()
			}
			done := make(chan error, 1)
			go func() { done <- b.wait(ctx, core, &cuts, offset, tc.follower) }()
			if tc.during != nil {
				<-looked
				tc.during(&b, core, &cuts, cancel)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the wait did not return") // a deadlock guard, not a timing check
			}
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}

	// A truncation between the call and its first look at the bounds
	// (counted after the call loaded the count) is one during the wait.
	// On the old code the first look never reported a truncation: the
	// waiter parked until ctx ended.
	t.Run("truncation counted before the first look", func(t *testing.T) {
		var b bounds
		b.storeQuiet(at(5), at(5), 0)
		var cuts atomic.Uint64
		core := &fakeWaitCore{}
		core.onLook = func(look int) {
			if look == 1 {
				b.storeQuiet(at(3), at(3), 0)
				cuts.Add(1)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a wait that would park returns ctx.Err()
		require.ErrorIs(t, b.wait(ctx, core, &cuts, offset, false), ErrOffsetOutOfRange)
	})

	t.Run("core error first", func(t *testing.T) {
		var b bounds
		b.storeQuiet(at(9), at(9), 0)
		core := &fakeWaitCore{}
		core.err.Store(&ErrClosed)
		var cuts atomic.Uint64
		require.ErrorIs(t, b.wait(context.Background(), core, &cuts, offset, false), ErrClosed,
			"a closed partition's wait returned although its bound had passed")
	})
}

// TestWaitSeesTruncationCountedAfterItsLook: a goroutine in Wait for the
// high watermark, which the appends past it did not wake, looks at the
// bounds between a restart's publication (which woke it: the high
// watermark moved) and the count of the truncation. It sees the log end
// above where it last looked and the count unchanged, and parks again.
// The count used to be raised without a wake, so it stayed parked
// although the restarted log ends below its offset; TestWaitPastLogEnd's
// "truncation after unseen appends" hit the same window through TruncateTo
// on a loaded machine. Now the count wakes it again and it returns
// ErrOffsetOutOfRange.
func TestWaitSeesTruncationCountedAfterItsLook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := Open("/p-0", Config{FS: vfs.NewMem(), DisableAutoHighWatermark: true})
		require.NoError(t, err)
		defer p.Close()
		raceAppend(t, p, 5)
		require.NoError(t, p.SetHighWatermark(5))
		done := make(chan error, 1)
		go func() { done <- p.Wait(t.Context(), 15) }()
		synctest.Wait() // parked, having seen the log end at 5
		raceAppend(t, p, 5)
		calls := 0
		hook := func() {
			if calls++; calls == 1 { // published, not counted yet
				synctest.Wait() // the waiter woke, looked and parked again
			}
		}
		testHookRestartVisible.Store(&hook)
		t.Cleanup(func() { testHookRestartVisible.Store(nil) })
		require.NoError(t, p.TruncateFullyAndStartAt(7))
		synctest.Wait()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		default:
			require.Fail(t, "Wait is still parked after a restart below its offset")
		}
	})
}
