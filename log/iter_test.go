package log_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestRecordsBatches: Batches yields every whole batch of a read result,
// stops when the loop breaks, and yields the framing error of damaged
// bytes once.
func TestRecordsBatches(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	for i, n := range []int{3, 1, 5} {
		_, err := p.AppendBatch(logtest.MakeBatch(n, 10, 1, byte(i)))
		require.NoError(t, err)
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()

	var got [][2]int64
	for b, err := range r.Batches() {
		require.NoError(t, err)
		got = append(got, [2]int64{b.BaseOffset(), b.LastOffset()})
	}
	require.Equal(t, [][2]int64{{0, 2}, {3, 3}, {4, 8}}, got)
	require.Equal(t, batchesIn(t, r.Bytes()), got)

	n := 0
	for range r.Batches() {
		n++
		break
	}
	require.Equal(t, 1, n, "the iterator goes on after break")

	empty, err := p.ReadFrom(p.HighWatermark(), 1<<20)
	require.NoError(t, err)
	for range empty.Batches() {
		require.Fail(t, "an empty result yields a batch")
	}
	require.NoError(t, empty.Close())
}

// TestPartitionRecords: the iterator starts mid-batch at from, skips
// control batches, decodes compressed batches, crosses segments, and
// tails the log: it parks at the high watermark and yields what is
// appended next, until its context ends.
func TestPartitionRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{SegmentBytes: 1024})
		defer p.Close()
		bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionZstd, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
		for i := range 3 {
			require.NoError(t, bld.Add(batch.Record{Key: fmt.Appendf(nil, "z%d", i), Value: []byte("compressed"), Timestamp: 1}))
		}
		zstd, err := bld.Build()
		require.NoError(t, err)
		var want []string
		for i := range 20 {
			_, err := p.AppendBatch(logtest.MakeBatch(4, 100, int64(i), byte(i)))
			require.NoError(t, err)
			want = append(want, "k0", "k1", "k2", "k3")
		}
		end := p.LogEndOffset()
		marker, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, BaseOffset: end, ProducerID: 1, PartitionLeaderEpoch: -1})
		require.NoError(t, err)
		_, err = p.AppendAssigned(marker)
		require.NoError(t, err)
		_, err = p.AppendBatch(zstd)
		require.NoError(t, err)
		want = append(want, "z0", "z1", "z2")
		require.Greater(t, len(p.SegmentInfos()), 2, "the test must cross segments")

		ctx, cancel := context.WithCancel(t.Context())
		type item struct {
			offset int64
			key    string
			err    error
		}
		items := make(chan item)
		go func() {
			defer close(items)
			for rec, err := range p.Records(ctx, 2) {
				items <- item{rec.Offset, string(rec.Key), err}
				if err != nil {
					return
				}
			}
		}()
		var keys []string
		var offsets []int64
		for range len(want) - 2 {
			it := <-items
			require.NoError(t, it.err)
			keys = append(keys, it.key)
			offsets = append(offsets, it.offset)
		}
		require.Equal(t, want[2:], keys)
		require.Equal(t, int64(2), offsets[0])
		require.Equal(t, end+1, offsets[len(offsets)-3], "the marker's offset is skipped")

		// Caught up: the iterator parks until the next append.
		synctest.Wait()
		select {
		case it := <-items:
			require.Failf(t, "yielded past the high watermark", "%+v", it)
		default:
		}
		next, err := p.AppendBatch(logtest.MakeBatch(1, 10, 9, 9))
		require.NoError(t, err)
		it := <-items
		require.NoError(t, it.err)
		require.Equal(t, next, it.offset)

		cancel()
		it = <-items
		require.ErrorIs(t, it.err, context.Canceled)
		_, open := <-items
		require.False(t, open)
	})
}

// TestPartitionRecordsErrors: an offset below the log start, the context
// of a wait past the log end, and a closed partition end the iteration
// with their error.
func TestPartitionRecordsErrors(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
	require.NoError(t, err)
	require.NoError(t, p.DeleteRecordsBefore(2))
	for _, err := range p.Records(t.Context(), 1) { // below the log start
		require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
	}
	// Past the log end it waits (TestRecordsPastLogEnd), here until its
	// context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	for _, err := range p.Records(ctx, 7) {
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	// Breaking out of the loop releases the read: Close, which needs the
	// read leases gone, does not hang and the files stay consistent.
	for rec, err := range p.Records(t.Context(), 2) {
		require.NoError(t, err)
		require.Equal(t, int64(2), rec.Offset)
		break
	}
	require.NoError(t, p.Close())
	for _, err := range p.Records(t.Context(), 0) {
		require.ErrorIs(t, err, plog.ErrClosed)
	}
}

// TestIteratorAllocs: iterating uncompressed batches allocates nothing per
// batch or per record: a read result of 1 batch and one of 50 cost the
// same.
func TestIteratorAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p, _ := openT(t, plog.Config{})
	for i := range 50 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 50, int64(i), byte(i)))
		require.NoError(t, err)
	}
	hw := p.HighWatermark()
	count := func(from int64) float64 {
		return testing.AllocsPerRun(50, func() {
			n := int64(0)
			for rec, err := range p.Records(context.Background(), from) {
				require.NoError(t, err)
				n++
				if rec.Offset == hw-1 {
					break
				}
			}
		})
	}
	perBatches := testing.AllocsPerRun(50, func() {
		r, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		for _, err := range r.Batches() {
			require.NoError(t, err)
		}
		_ = r.Close()
	})
	require.Zero(t, perBatches, "ReadFrom + Batches")
	require.Equal(t, count(hw-1), count(0), "allocations grow with the records iterated")
}

// ExampleRecords_Batches walks the batches of a read result.
func ExampleRecords_Batches() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	_, _ = p.AppendBatch(producerBatch(2))
	_, _ = p.AppendBatch(producerBatch(3))

	r, err := p.ReadFrom(0, 1<<20)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	for b, err := range r.Batches() {
		if err != nil {
			panic(err)
		}
		fmt.Printf("batch [%d, %d], %d records\n", b.BaseOffset(), b.LastOffset(), b.RecordsCount())
	}
	// Output:
	// batch [0, 1], 2 records
	// batch [2, 4], 3 records
}

// ExamplePartition_Records tails a partition: it yields the records from
// offset 1 on, then waits for more until the context ends.
func ExamplePartition_Records() {
	dir, _ := os.MkdirTemp("", "partlog-example")
	defer os.RemoveAll(dir)
	p, err := plog.Open(dir, plog.Config{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	_, _ = p.AppendBatch(producerBatch(3))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for rec, err := range p.Records(ctx, 1) {
		if err != nil {
			fmt.Println("stopped:", err)
			break
		}
		fmt.Printf("%d: %s\n", rec.Offset, rec.Value)
		if rec.Offset == 2 {
			// Caught up: a real consumer would keep ranging and be woken
			// by the next append; this one stops.
			cancel()
		}
	}
	// Output:
	// 1: event 1
	// 2: event 2
	// stopped: context canceled
}

// TestPartitionRecordsHighWatermarkInsideBatch: with the high watermark
// set inside a batch (which hides the batch from ReadFrom) the iterator
// parks until the high watermark passes the batch, instead of reading the
// same empty result over and over.
func TestPartitionRecordsHighWatermarkInsideBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, in := openMem(t, plog.Config{DisableAutoHighWatermark: true})
		defer p.Close()
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, 1, 1))
		require.NoError(t, err)
		require.NoError(t, p.SetHighWatermark(2))

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var reads atomic.Int64
		in.SetHook(func(op vfs.Op) error {
			if op.Kind == vfs.OpReadAt && reads.Add(1) == 1000 {
				cancel() // spinning: stop it, and fail below
			}
			return nil
		})
		items, errs := recordsInBackground(ctx, p)
		synctest.Wait()
		require.Less(t, reads.Load(), int64(1000), "the iterator spins on an empty read")
		require.Empty(t, items)

		require.NoError(t, p.SetHighWatermark(4))
		for want := range int64(4) {
			require.Equal(t, want, <-items)
		}
		cancel()
		require.ErrorIs(t, <-errs, context.Canceled)
	})
}

// TestPartitionRecordsSplitBatchCut: an iterator parked until the high
// watermark passes the batch it splits goes on waiting when a truncation
// cuts that batch at the iterator's next offset: the next offset is still
// in the log, and the records it yields next are those appended there. On
// the old code the wait's out-of-range error (the log end went below the
// high watermark waited for) ended the iteration.
func TestPartitionRecordsSplitBatchCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openMem(t, plog.Config{DisableAutoHighWatermark: true})
		defer p.Close()
		appendBatches(t, p, 2, 4) // [0, 1] and [2, 5]
		require.NoError(t, p.SetHighWatermark(4))

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		items, errs := recordsInBackground(ctx, p)
		synctest.Wait()
		require.Equal(t, []int64{0, 1}, []int64{<-items, <-items})

		require.NoError(t, p.TruncateTo(2))
		synctest.Wait()
		select {
		case err := <-errs:
			require.NoError(t, err, "a truncation that left the next offset in the log ended the iteration")
		default:
		}

		appendBatches(t, p, 3)
		require.NoError(t, p.SetHighWatermark(5))
		for want := int64(2); want < 5; want++ {
			require.Equal(t, want, <-items)
		}
		require.NoError(t, p.TruncateTo(1)) // now below the next offset
		require.ErrorIs(t, <-errs, plog.ErrOffsetOutOfRange)
	})
}

// BenchmarkPartitionRecords iterates 50 uncompressed batches of 4 records
// with Partition.Records; the allocations are the iterator's setup, none
// per batch or record.
func BenchmarkPartitionRecords(b *testing.B) {
	p, _ := openT(b, plog.Config{})
	for i := range 50 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 50, int64(i), byte(i)))
		require.NoError(b, err)
	}
	last := p.HighWatermark() - 1
	b.ReportAllocs()
	for b.Loop() {
		for rec, err := range p.Records(context.Background(), 0) {
			require.NoError(b, err)
			if rec.Offset == last {
				break
			}
		}
	}
}

// recordsInBackground iterates p.Records(ctx, 0) in a goroutine, sending
// each record's offset on items and the error that ends the iteration on
// errs.
func recordsInBackground(ctx context.Context, p *plog.Partition) (items <-chan int64, errs <-chan error) {
	offsets := make(chan int64, 8)
	failed := make(chan error, 1)
	go func() {
		for rec, err := range p.Records(ctx, 0) {
			if err != nil {
				failed <- err
				return
			}
			offsets <- rec.Offset
		}
	}()
	return offsets, failed
}
