package log_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// pollResult is what one Poll yielded: the offsets of its records and its
// error, if any.
type pollResult struct {
	offsets []int64
	err     error
}

// startPoll runs a Poll to its end in a goroutine; the result arrives on
// the channel.
func startPoll(ctx context.Context, p *plog.Partition, from int64, maxRecords int) <-chan pollResult {
	done := make(chan pollResult, 1)
	go func() {
		var res pollResult
		for rec, err := range p.Poll(ctx, from, maxRecords) {
			if err != nil {
				res.err = err
				break
			}
			res.offsets = append(res.offsets, rec.Offset)
		}
		done <- res
	}()
	return done
}

// appendBatches appends batches of the given record counts.
func appendBatches(t *testing.T, p *plog.Partition, counts ...int) {
	t.Helper()
	for i, n := range counts {
		_, err := p.AppendBatch(logtest.MakeBatch(n, 10, 1000+int64(i), byte(i)))
		require.NoError(t, err)
	}
}

// offsetsFrom returns lo, lo+1, ..., hi-1.
func offsetsFrom(lo, hi int64) []int64 {
	var out []int64
	for o := lo; o < hi; o++ {
		out = append(out, o)
	}
	return out
}

// TestPoll: Poll yields at most maxRecords records from its offset, the
// visible ones at once, across segments, without waiting once it yielded
// one; with nothing visible it waits for the first records (also for an
// offset past the log end), until its context ends.
func TestPoll(t *testing.T) {
	cases := []struct {
		name       string
		cfg        plog.Config
		setup      func(t *testing.T, p *plog.Partition) // before the poll
		from       int64
		maxRecords int
		// during runs once the poll is parked (nil: the poll must not
		// park).
		during  func(t *testing.T, p *plog.Partition)
		timeout time.Duration // a deadline on the poll's context
		want    []int64
		wantErr error
	}{
		{
			name:       "bounded by maxRecords",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 4, 4, 4) },
			from:       0,
			maxRecords: 6,
			want:       offsetsFrom(0, 6),
		},
		{
			name:       "from inside a batch",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 4, 4) },
			from:       2,
			maxRecords: 3,
			want:       offsetsFrom(2, 5),
		},
		{
			name:       "stops at the high watermark without waiting",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3, 2) },
			from:       1,
			maxRecords: 100,
			want:       offsetsFrom(1, 5),
		},
		{
			name: "across segments",
			cfg:  plog.Config{SegmentBytes: 100},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 2, 2, 2, 2, 2, 2)
				require.Greater(t, len(p.SegmentInfos()), 2, "six batches in three segments or more")
			},
			from:       1,
			maxRecords: 9,
			want:       offsetsFrom(1, 10),
		},
		{
			name:       "waits for the first records",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3) },
			from:       3,
			maxRecords: 10,
			during:     func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 2) },
			want:       offsetsFrom(3, 5),
		},
		{
			name:       "waits past the log end",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3) },
			from:       7,
			maxRecords: 2,
			during:     func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 10) },
			want:       offsetsFrom(7, 9),
		},
		{
			name: "waits for a batch the high watermark splits",
			cfg:  plog.Config{DisableAutoHighWatermark: true},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 2, 4)
				require.NoError(t, p.SetHighWatermark(4)) // inside [2, 5]
			},
			from:       0,
			maxRecords: 10,
			want:       offsetsFrom(0, 2),
		},
		{
			name: "a split batch is waited for when nothing else is visible",
			cfg:  plog.Config{DisableAutoHighWatermark: true},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 2, 4)
				require.NoError(t, p.SetHighWatermark(4))
			},
			from:       3,
			maxRecords: 10,
			during:     func(t *testing.T, p *plog.Partition) { require.NoError(t, p.SetHighWatermark(6)) },
			want:       offsetsFrom(3, 6),
		},
		{
			// The poll waits for the high watermark to pass 4; the
			// truncation cuts the batch it waits for, not its offset 2.
			name: "truncation of the split batch it waits for",
			cfg:  plog.Config{DisableAutoHighWatermark: true},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 2, 4)
				require.NoError(t, p.SetHighWatermark(4))
			},
			from:       2,
			maxRecords: 10,
			during: func(t *testing.T, p *plog.Partition) {
				require.NoError(t, p.TruncateTo(2))
				synctest.Wait() // the poll looked at the truncated log
				appendBatches(t, p, 3)
				require.NoError(t, p.SetHighWatermark(5))
			},
			want: offsetsFrom(2, 5),
		},
		{
			name:       "deadline with nothing to read",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3) },
			from:       3,
			maxRecords: 10,
			timeout:    time.Second,
			wantErr:    context.DeadlineExceeded,
		},
		{
			name:       "maxRecords below one",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3) },
			from:       0,
			maxRecords: 0,
		},
		{
			name: "below the log start",
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 2, 2)
				require.NoError(t, p.DeleteRecordsBefore(2))
			},
			from:       0,
			maxRecords: 10,
			wantErr:    plog.ErrOffsetOutOfRange,
		},
		{
			name:       "truncation under a poll past the log end",
			setup:      func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 1, 1, 1) },
			from:       5,
			maxRecords: 10,
			during:     func(t *testing.T, p *plog.Partition) { require.NoError(t, p.TruncateTo(1)) },
			wantErr:    plog.ErrOffsetOutOfRange,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, _ := openMem(t, tc.cfg)
				defer p.Close()
				tc.setup(t, p)
				ctx := t.Context()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				done := startPoll(ctx, p, tc.from, tc.maxRecords)
				synctest.Wait()
				if tc.during != nil {
					select {
					case res := <-done:
						require.Failf(t, "Poll returned before the records came", "%+v", res)
					default:
					}
					tc.during(t, p)
				} else if tc.timeout > 0 {
					time.Sleep(tc.timeout)
				}
				synctest.Wait()
				var res pollResult
				select {
				case res = <-done:
				default:
					require.FailNow(t, "Poll is still waiting")
				}
				if tc.wantErr != nil {
					require.ErrorIs(t, res.err, tc.wantErr)
				} else {
					require.NoError(t, res.err)
				}
				assert.Equal(t, tc.want, res.offsets)
				assert.Zero(t, p.Stats().OpenReaders, "Poll left a read open")
			})
		})
	}
}

// TestPollBreak: a loop body that breaks out of Poll ends it and releases
// its read; a Poll over a partition closed meanwhile yields ErrClosed.
func TestPollBreak(t *testing.T) {
	p, _ := openMem(t, plog.Config{})
	appendN(t, p, 5)
	n := 0
	for rec, err := range p.Poll(t.Context(), 0, 10) {
		require.NoError(t, err)
		require.Equal(t, int64(n), rec.Offset)
		if n++; n == 2 {
			break
		}
	}
	require.Equal(t, 2, n)
	require.Zero(t, p.Stats().OpenReaders)

	require.NoError(t, p.Close())
	for _, err := range p.Poll(t.Context(), 0, 10) {
		require.ErrorIs(t, err, plog.ErrClosed)
	}
}

// TestReadEmptyNextOffset: an empty read's NextOffset is the offset that
// was read, where the next read continues; FirstOffset stays -1 (no
// batch), and a closed result says -1 for both.
func TestReadEmptyNextOffset(t *testing.T) {
	cases := []struct {
		name   string
		cfg    plog.Config
		setup  func(t *testing.T, p *plog.Partition)
		offset int64
	}{
		{name: "empty log", offset: 0},
		{name: "at the high watermark", setup: func(t *testing.T, p *plog.Partition) { appendBatches(t, p, 3) }, offset: 3},
		{name: "past the high watermark, below the log end", cfg: plog.Config{DisableAutoHighWatermark: true},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 3, 3)
				require.NoError(t, p.SetHighWatermark(3))
			}, offset: 4},
		{name: "inside a batch the high watermark splits", cfg: plog.Config{DisableAutoHighWatermark: true},
			setup: func(t *testing.T, p *plog.Partition) {
				appendBatches(t, p, 3, 3)
				require.NoError(t, p.SetHighWatermark(4))
			}, offset: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openMem(t, tc.cfg)
			if tc.setup != nil {
				tc.setup(t, p)
			}
			r, err := p.ReadFrom(tc.offset, 1<<20)
			require.NoError(t, err)
			require.Empty(t, r.Bytes())
			require.Equal(t, tc.offset, r.NextOffset())
			require.Equal(t, int64(-1), r.FirstOffset())
			require.NoError(t, r.Close())
			require.Equal(t, int64(-1), r.NextOffset())
		})
	}
}

// TestRecordsPastLogEnd: Partition.Records from an offset past the log
// end waits for appends to reach it, as Wait does, and then yields from
// there.
func TestRecordsPastLogEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{})
		defer p.Close()
		appendBatches(t, p, 3)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		got := make(chan int64, 10)
		go func() {
			defer close(got)
			for rec, err := range p.Records(ctx, 5) {
				if err != nil {
					return
				}
				got <- rec.Offset
				if rec.Offset == 6 {
					return
				}
			}
		}()
		synctest.Wait()
		require.Empty(t, got)
		appendBatches(t, p, 1) // log end 4: still short of 5
		synctest.Wait()
		require.Empty(t, got)
		appendBatches(t, p, 4) // offsets 4-7
		synctest.Wait()
		var offsets []int64
		for o := range got {
			offsets = append(offsets, o)
		}
		require.Equal(t, []int64{5, 6}, offsets)
	})
}

// TestReadCommittedEmptyNextOffset: an empty read_committed result, at or
// past the last stable offset, says where to read next as ReadFrom's does:
// the offset that was read.
func TestReadCommittedEmptyNextOffset(t *testing.T) {
	p, _ := openMem(t, plog.Config{})
	appendBatches(t, p, 2)                           // offsets 0-1, outside any transaction
	_, err := p.AppendBatch(txnBatch(t, 9, 0, 0, 3)) // offsets 2-4: an open transaction
	require.NoError(t, err)
	require.Equal(t, int64(2), p.LastStableOffset())
	for _, off := range []int64{2, 3, 5} { // at the LSO, inside the open transaction, at the log end
		recs, aborted, err := p.ReadCommitted(off, 1<<20)
		require.NoError(t, err)
		require.Empty(t, recs.Bytes())
		require.Nil(t, aborted)
		require.Equal(t, off, recs.NextOffset(), "offset %d", off)
		require.NoError(t, recs.Close())
	}
	// From below the LSO the read stops at it.
	recs, _, err := p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(2), recs.NextOffset())
	require.NoError(t, recs.Close())
}
