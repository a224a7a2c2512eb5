package log_test

// Tests for read results (Records handles), bounded truncation waits and
// snapshot acquisition (issue 12, items 4, 8, 9 and 14).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestRecordsDoubleCloseEmptiedAnotherReader: Records were pooled objects
// handed out by pointer; a second Close of one put it back in the pool
// while a later ReadFrom held it, and emptied that reader's result. Now a
// second Close returns ErrClosed and touches nothing: the later reader keeps
// its bytes, whatever the pool hands out.
func TestRecordsDoubleCloseEmptiedAnotherReader(t *testing.T) {
	p, _ := openMem(t, plog.Config{})
	appendN(t, p, 3)
	for range 50 { // the pool may or may not hand back the same state
		r1, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		require.NoError(t, r1.Close())

		r2, err := p.ReadFrom(1, 1<<20)
		require.NoError(t, err)
		want := slices.Clone(r2.Bytes())
		require.Equal(t, [][2]int64{{1, 1}, {2, 2}}, batchesIn(t, want))

		require.ErrorIs(t, r1.Close(), plog.ErrClosed, "second Close")
		require.ErrorIs(t, r1.Close(), plog.ErrClosed, "third Close")
		require.Equal(t, want, r2.Bytes(), "another reader's result changed")
		require.Equal(t, int64(1), r2.FirstOffset())
		require.Equal(t, int64(3), r2.NextOffset())
		var buf bytes.Buffer
		n, err := r2.WriteTo(&buf)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), n)
		require.NoError(t, r2.Close())
	}
	require.NoError(t, p.Verify())
}

// TestRecordsUseAfterClose: every method of a closed Records (or of a copy
// of the handle, or of the zero Records) sees a closed result, never data.
func TestRecordsUseAfterClose(t *testing.T) {
	p, _ := openMem(t, plog.Config{})
	appendN(t, p, 2)
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	cp := r // a copy names the same result
	require.Equal(t, r.Bytes(), cp.Bytes())
	require.NoError(t, cp.Close())

	empty, err := p.ReadFrom(2, 1<<20) // at the high watermark: empty
	require.NoError(t, err)
	require.Empty(t, empty.Bytes())
	require.NoError(t, empty.Close())

	for name, h := range map[string]plog.Records{"closed": r, "closed copy": cp, "closed empty": empty, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			require.Nil(t, h.Bytes())
			require.Empty(t, h.Bytes())
			require.Empty(t, h.Bytes())
			require.Equal(t, int64(-1), h.FirstOffset())
			require.Equal(t, int64(-1), h.NextOffset())
			n, err := h.WriteTo(io.Discard)
			require.ErrorIs(t, err, plog.ErrClosed)
			require.Zero(t, n)
			require.ErrorIs(t, h.Close(), plog.ErrClosed)
		})
	}
	// Errors come with the zero Records.
	bad, err := p.ReadFrom(99, 1)
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
	require.Equal(t, plog.Records{}, bad)
}

// syncBuffer is an io.Writer for a slog handler shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnclosedRecordsStallWritersForever: a Records never closed kept a
// TruncateTo waiting for its read lease forever, and every writer waited
// behind the truncation. Now the truncation gives up after
// Config.TruncateWait with ErrTruncationBlocked, having changed nothing,
// the writers run, and the wait is logged and counted.
func TestUnclosedRecordsStallWritersForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		p, _ := openMem(t, plog.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		appendN(t, p, 3)
		leaked, err := p.ReadFrom(0, 1<<20) // never closed by its reader
		require.NoError(t, err)
		held := slices.Clone(leaked.Bytes())

		start := time.Now() // fake time inside the bubble
		truncated := make(chan error, 1)
		go func() { truncated <- p.TruncateTo(1) }()
		synctest.Wait()
		appended := make(chan error, 1)
		go func() {
			_, err := p.AppendBatch(logtest.MakeBatch(1, 10, 5000, 7))
			appended <- err
		}()
		synctest.Wait()
		require.Empty(t, truncated, "TruncateTo returned while Records hold the segment")
		require.Empty(t, appended, "AppendBatch ran during the truncation")
		st := p.Stats()
		require.Equal(t, 1, st.TruncationWaiting, "readers the truncation waits for")
		require.Equal(t, uint64(1), st.TruncationWaits)
		require.Contains(t, logs.String(), "truncation waits for readers")
		require.Contains(t, logs.String(), "readers=1")

		err = <-truncated // once TruncateWait elapsed (fake time)
		require.ErrorIs(t, err, plog.ErrTruncationBlocked)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, err.Error(), "1 readers")
		require.Equal(t, plog.DefaultTruncateWait, time.Since(start))
		require.NoError(t, <-appended, "the writer behind the truncation")
		require.Equal(t, int64(4), p.LogEndOffset(), "the failed truncation changed nothing")
		st = p.Stats()
		require.Equal(t, []any{0, uint64(1), uint64(1)}, []any{st.TruncationWaiting, st.TruncationWaits, st.TruncationsBlocked})
		require.Contains(t, logs.String(), "truncation gave up waiting for readers")
		require.Equal(t, held, leaked.Bytes())

		require.NoError(t, leaked.Close())
		require.NoError(t, p.TruncateTo(1)) // nothing holds it now
		require.Equal(t, int64(1), p.LogEndOffset())
		require.NoError(t, p.Verify())
	})
}

// TestTruncateByRecordsHolderHangs: TruncateTo called by the goroutine
// that holds Records on the segment to cut waited for itself forever. Now
// it returns ErrTruncationBlocked (after TruncateWait, or when the context
// of TruncateToContext ends), and nothing changed.
func TestTruncateByRecordsHolderHangs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		truncate func(p *plog.Partition) error
		cause    error
	}{
		{"TruncateTo", func(p *plog.Partition) error { return p.TruncateTo(1) }, context.DeadlineExceeded},
		{"TruncateWait", func(p *plog.Partition) error { return p.TruncateTo(1) }, context.DeadlineExceeded},
		{"TruncateToContext canceled", func(p *plog.Partition) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return p.TruncateToContext(ctx, 1)
		}, context.Canceled},
		{"TruncateToContext deadline", func(p *plog.Partition) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			return p.TruncateToContext(ctx, 1)
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := plog.Config{}
				if tc.name == "TruncateWait" {
					cfg.TruncateWait = 5 * time.Millisecond
				}
				p, _ := openMem(t, cfg)
				appendN(t, p, 3)
				r, err := p.ReadFrom(0, 1<<20)
				require.NoError(t, err)
				err = tc.truncate(p) // the holder itself
				require.ErrorIs(t, err, plog.ErrTruncationBlocked)
				require.ErrorIs(t, err, tc.cause)
				require.Equal(t, int64(3), p.LogEndOffset())
				require.Equal(t, [][2]int64{{0, 0}, {1, 1}, {2, 2}}, batchesIn(t, r.Bytes()))
				require.NoError(t, r.Close())
				require.NoError(t, p.TruncateTo(1))
				require.Equal(t, int64(1), p.LogEndOffset())
			})
		})
	}
}

// TestReadersStarveTruncation: four readers each holding Records for 3 ms,
// overlapping, kept TruncateTo (and a producer's AppendBatch behind it)
// waiting as long as they read: a new read lease was granted while a
// truncation waited. Now a truncation that wants a segment makes new reads
// of it wait, the readers in flight finish, and the truncation runs within
// one hold time, well before TruncateWait.
func TestReadersStarveTruncation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{})
		appendN(t, p, 4)
		const hold = 3 * time.Millisecond
		stop := make(chan struct{})
		var wg sync.WaitGroup
		halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
		defer halt() // also when an assertion fails
		var reads [4]int
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * hold / 4) // overlapping holds
				// At most 60 s of reading: past TruncateWait.
				for n := 0; n < int(time.Minute/hold); n++ {
					select {
					case <-stop:
						return
					default:
					}
					r, err := p.ReadFrom(0, 1<<20)
					if !assert.NoError(t, err, "ReadFrom") {
						return
					}
					reads[i]++
					time.Sleep(hold)
					if !assert.NoError(t, r.Close(), "Close") {
						return
					}
				}
			}()
		}
		time.Sleep(10 * hold) // the readers overlap
		start := time.Now()
		truncated := make(chan error, 1)
		go func() { truncated <- p.TruncateTo(2) }()
		synctest.Wait()
		appended := make(chan int64, 1)
		go func() {
			base, err := p.AppendBatch(logtest.MakeBatch(1, 10, 9000, 9))
			assert.NoError(t, err, "AppendBatch")
			appended <- base
		}()
		require.NoError(t, <-truncated)
		took := time.Since(start)
		require.Equal(t, int64(2), <-appended, "the producer appends after the cut")
		halt()
		require.LessOrEqual(t, took, hold, "the truncation waited longer than one hold time")
		for i, n := range reads {
			require.Greater(t, n, 0, "reader %d never read", i)
		}
		require.Equal(t, int64(3), p.LogEndOffset())
		require.Equal(t, uint64(0), p.Stats().TruncationsBlocked)
		require.NoError(t, p.Verify())
	})
}

// TestSetHighWatermarkWhileTruncationWaits: a goroutine that holds Records
// (a leader's fetch handler) may move the high watermark while a
// TruncateTo waits for those Records; reads of other segments go on, and
// the truncation runs once the Records are closed, clamping the high
// watermark.
func TestSetHighWatermarkWhileTruncationWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{DisableAutoHighWatermark: true})
		appendN(t, p, 2)
		require.NoError(t, p.Roll())
		appendN(t, p, 2) // segment 2 holds offsets 2 and 3
		require.NoError(t, p.SetHighWatermark(4))
		r, err := p.ReadFrom(2, 1<<20)
		require.NoError(t, err)
		truncated := make(chan error, 1)
		go func() { truncated <- p.TruncateTo(3) }()
		synctest.Wait()
		require.Equal(t, 1, p.Stats().TruncationWaiting)
		require.NoError(t, p.SetHighWatermark(3)) // does not wait
		require.Equal(t, int64(3), p.HighWatermark())
		other, err := p.ReadFrom(0, 1<<20) // segment 0: not being cut
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{0, 0}, {1, 1}}, batchesIn(t, other.Bytes()))
		require.NoError(t, other.Close())
		require.Empty(t, truncated)
		require.NoError(t, r.Close())
		require.NoError(t, <-truncated)
		require.Equal(t, int64(3), p.LogEndOffset())
		require.Equal(t, int64(3), p.HighWatermark())
		require.NoError(t, p.Verify())
	})
}

// TestSegmentInfosNilDuringRolls: SegmentInfos loaded the snapshot and
// returned nil when a roll released it before the reference was taken (1
// in 1.5 million calls). Every snapshot acquire now retries. Bounded
// stress: SegmentInfos, Segments, OffsetForTimestamp and ReadFrom against
// concurrent rolls, under -race.
func TestSegmentInfosNilDuringRolls(t *testing.T) {
	p, _ := openMem(t, plog.Config{SegmentIndexBytes: memIndexBytes})
	appendN(t, p, 1)
	const rolls = 40
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range rolls {
			if _, err := p.AppendBatch(logtest.MakeBatch(1, 10, 2000+int64(i), byte(i))); !assert.NoError(t, err, "AppendBatch") {
				return
			}
			if !assert.NoError(t, p.Roll(), "Roll") {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				infos := p.SegmentInfos()
				if !assert.True(t, len(infos) > 0 && infos[len(infos)-1].Active, "SegmentInfos() = %v during rolls", infos) {
					return
				}
				segs, err := p.Segments()
				if !assert.NoError(t, err, "Segments") || !assert.NotEmpty(t, segs, "Segments") {
					return
				}
				for _, s := range segs {
					_ = s.Unref()
				}
				if _, _, err := p.OffsetForTimestamp(1500); !assert.NoError(t, err, "OffsetForTimestamp") {
					return
				}
				r, err := p.ReadFrom(0, 100)
				if !assert.NoError(t, err, "ReadFrom") {
					return
				}
				_ = r.Close()
			}
		}()
	}
	wg.Wait()
	require.Len(t, p.SegmentInfos(), rolls+1)
	require.NoError(t, p.Close())
	require.Nil(t, p.SegmentInfos(), "closed")
	_, err := p.Segments()
	require.True(t, errors.Is(err, plog.ErrClosed))
}
