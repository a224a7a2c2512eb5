package log_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// taggedBatch builds a batch of n records whose first key names its
// appender and sequence number.
func taggedBatch(t tb, id, seq, n int) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: -1})
	for i := 0; i < n; i++ {
		err := bld.Add(batch.Record{Key: fmt.Appendf(nil, "a%d-%d", id, seq), Value: make([]byte, 16+i), Timestamp: int64(seq)})
		require.NoError(t, err)
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// firstKey returns the key of b's first record.
func firstKey(t tb, b batch.Batch) string {
	t.Helper()
	it := b.Records(nil)
	rec, ok, err := it.Next()
	require.NoError(t, err)
	require.True(t, ok)
	return string(rec.Key)
}

// TestConcurrentAppenders checks law 2 under the race detector: 8
// appenders and 4 readers; the appenders' ranges are disjoint, gap-free and
// in the order the batches are on disk; readers only see whole batches
// below the high watermark.
func TestConcurrentAppenders(t *testing.T) {
	const appenders, perAppender = 8, 150
	p, _ := openT(t, plog.Config{SegmentBytes: 32 << 10, IndexIntervalBytes: 512})
	type result struct {
		id, seq, n int
		base       int64
	}
	results := make([][]result, appenders)
	var wg, readers sync.WaitGroup
	var done atomic.Bool
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func(seed uint64) {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			gt := goT{t}
			for !done.Load() {
				hw := p.HighWatermark()
				if hw == 0 {
					runtime.Gosched()
					continue
				}
				o := rng.Int64N(hw)
				rec, err := p.ReadFrom(o, rng.IntN(8000))
				if !assert.NoError(t, err, "ReadFrom(%d)", o) {
					return
				}
				next := checkRecords(gt, rec, o)
				after := p.HighWatermark()
				assert.LessOrEqual(t, next, after, "read past the high watermark")
				require.NoError(gt, rec.Close())
			}
		}(uint64(r))
	}
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			for seq := 0; seq < perAppender; seq++ {
				n := 1 + (id*7+seq*13)%20
				base, err := p.AppendBatch(taggedBatch(goT{t}, id, seq, n))
				if !assert.NoError(t, err, "append") {
					return
				}
				results[id] = append(results[id], result{id, seq, n, base})
			}
		}(a)
	}
	wg.Wait()
	done.Store(true)
	readers.Wait()

	var all []result
	for id, rs := range results {
		for i := 1; i < len(rs); i++ {
			require.True(t, rs[i].base > rs[i-1].base, "appender %d: bases not increasing", id)
		}
		all = append(all, rs...)
	}
	slices.SortFunc(all, func(a, b result) int { return int(a.base - b.base) })
	next := int64(0)
	for _, r := range all {
		require.Equal(t, next, r.base, "gap or overlap")
		next += int64(r.n)
	}
	require.Equal(t, next, p.LogEndOffset())

	// Disk order is reservation order.
	i := 0
	for o := int64(0); o < p.LogEndOffset(); {
		rec, err := p.ReadFromFollower(o, 1<<20)
		require.NoError(t, err)
		for b := rec.Bytes(); len(b) > 0; {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			require.Equal(t, all[i].base, bt.BaseOffset())
			require.Equal(t, fmt.Sprintf("a%d-%d", all[i].id, all[i].seq), firstKey(t, bt))
			o, b, i = bt.NextOffset(), rest, i+1
		}
		require.NoError(t, rec.Close())
	}
	require.Equal(t, len(all), i)
	require.NoError(t, p.Verify())
}

// TestReadsRaceWithRollTruncateDelete runs readers that hold Records while a
// writer appends, rolls, truncates and deletes whole segments under them
// (law 9): every held byte stays intact until the reader closes it.
func TestReadsRaceWithRollTruncateDelete(t *testing.T) {
	for _, mmap := range []bool{true, false} {
		t.Run(fmt.Sprintf("mmap=%v", mmap), func(t *testing.T) {
			p, _ := openT(t, plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 256, DisableMmap: !mmap})
			var done atomic.Bool
			var readers sync.WaitGroup
			var reads, outOfRange atomic.Int64
			for r := 0; r < 4; r++ {
				readers.Add(1)
				go func(seed uint64) {
					defer readers.Done()
					rng := rand.New(rand.NewPCG(seed, 2))
					gt := goT{t}
					for !done.Load() {
						start, hw := p.LogStartOffset(), p.HighWatermark()
						o := start + rng.Int64N(hw-start+1)
						rec, err := p.ReadFrom(o, rng.IntN(3000))
						if errors.Is(err, plog.ErrOffsetOutOfRange) {
							outOfRange.Add(1) // truncated or deleted meanwhile
							continue
						}
						if !assert.NoError(t, err, "ReadFrom(%d)", o) {
							return
						}
						held := slices.Clone(rec.Bytes())
						if len(rec.Bytes()) != 0 {
							checkRecords(gt, rec, o)
						}
						time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
						require.Equal(gt, held, rec.Bytes())
						if len(rec.Bytes()) != 0 {
							checkRecords(gt, rec, o)
						}
						require.NoError(gt, rec.Close())
						reads.Add(1)
					}
				}(uint64(r))
			}
			rng := rand.New(rand.NewPCG(7, 7))
			for i := 0; i < 600; i++ {
				switch {
				case i%41 == 40:
					end, start := p.LogEndOffset(), p.LogStartOffset()
					require.NoError(t, p.TruncateTo(start+(end-start)*3/4))
				case i%29 == 28:
					start, hw := p.LogStartOffset(), p.HighWatermark()
					require.NoError(t, p.DeleteRecordsBefore(start+(hw-start)/2))
				case i%13 == 12:
					require.NoError(t, p.Roll())
				default:
					_, err := p.AppendBatch(logtest.MakeBatch(1+rng.IntN(10), rng.IntN(200), int64(i), byte(i)))
					require.NoError(t, err)
				}
			}
			done.Store(true)
			readers.Wait()
			require.NoError(t, p.Verify())
			t.Logf("%d reads, %d out of range, %d segments", reads.Load(), outOfRange.Load(), len(p.SegmentInfos()))
		})
	}
}

// TestReaderDoesNotBlockWriter holds Records on the active segment while
// the same goroutine appends, rolls and deletes that segment: none of it
// may wait for the reader (only TruncateTo of the held bytes does).
func TestReaderDoesNotBlockWriter(t *testing.T) {
	p, _ := openT(t, plog.Config{SegmentBytes: 4096})
	_, err := p.AppendBatch(logtest.MakeBatch(5, 100, 0, 0))
	require.NoError(t, err)
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	held := slices.Clone(r.Bytes())
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 50; i++ { // several rolls past the held segment
			if _, err := p.AppendBatch(logtest.MakeBatch(5, 100, int64(i), byte(i))); err != nil {
				done <- err
				return
			}
		}
		if err := p.Roll(); err != nil {
			done <- err
			return
		}
		done <- p.DeleteRecordsBefore(p.HighWatermark())
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.Fail(t, "the writer waited for a reader")
	}
	require.True(t, len(p.SegmentInfos()) >= 1)
	require.Equal(t, held, r.Bytes())
	require.NoError(t, r.Close())
	require.NoError(t, p.Verify())
}
