package log_test

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/invariants"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// idemBenchBatch is benchBatch (64 records, 16 KiB) from an idempotent
// producer: same size, same records, producer id 1, epoch 0.
func idemBenchBatch(b testing.TB, seq int32) []byte { return benchBatchFrom(b, 1, seq) }

// benchBatchFrom is benchBatch's records in a batch from producer pid
// (batch.NoProducerID: none) at sequence seq, timestamped now.
func benchBatchFrom(b testing.TB, pid int64, seq int32) []byte {
	plain := batch.Batch(logtest.MakeBatch(64, 220, 1_700_000_000_000, 3))
	prod := &batch.Producer{ID: pid, Epoch: 0, BaseSequence: seq}
	if pid < 0 {
		prod = nil
	}
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: prod})
	var dec batch.Decoder
	for r, err := range plain.All(&dec) {
		require.NoError(b, err)
		r.Timestamp = time.Now().UnixMilli()
		require.NoError(b, bld.Add(r))
	}
	bt, err := bld.Build()
	require.NoError(b, err)
	return append([]byte(nil), bt...)
}

// BenchmarkAppendBatchIdempotent compares AppendBatch of the same 16 KiB
// batches (benchBatch's records) without a producer id (none) and from an
// idempotent producer (idempotent: every append passes the sequence check
// and updates the producer's state). The sequence lies under the CRC, so
// the batches are prebuilt, 256 consecutive ones; each lap after the first
// bumps the producer epoch (outside the timer) and starts again at
// sequence 0. The none case runs the same loop.
func BenchmarkAppendBatchIdempotent(b *testing.B) {
	for _, c := range []struct {
		name string
		pid  int64
	}{{"none", batch.NoProducerID}, {"idempotent", 1}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
			require.NoError(b, err)
			defer p.Close()
			const ring = 256
			bts := make([][]byte, ring)
			for i := range bts {
				bts[i] = benchBatchFrom(b, c.pid, int32(i*64))
			}
			b.SetBytes(int64(len(bts[0])))
			b.ReportAllocs()
			i, epoch := 0, int16(0)
			for b.Loop() {
				if i == ring {
					b.StopTimer()
					epoch++
					for j := range bts {
						bts[j] = reEpoch(bts[j], epoch)
					}
					i = 0
					b.StartTimer()
				}
				_, err := p.AppendBatch(bts[i])
				require.NoError(b, err)
				i++
			}
		})
	}
}

// reEpoch returns bt with producer epoch e (CRC recomputed).
func reEpoch(bt []byte, e int16) []byte {
	bt[51], bt[52] = byte(uint16(e)>>8), byte(e)
	c := batch.Batch(bt).ComputeCRC()
	bt[17], bt[18], bt[19], bt[20] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return bt
}

// producersPartition returns a partition holding one 1-record batch from
// each of n producers.
func producersPartition(b *testing.B, n int) (*plog.Partition, string) {
	dir := filepath.Join(b.TempDir(), "bench-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(b, err)
	ts := time.Now().UnixMilli()
	for pid := range int64(n) {
		_, err := p.AppendBatch(prodBatch(b, pid, 0, 0, 1, ts, false))
		require.NoError(b, err)
	}
	return p, dir
}

// BenchmarkProducerSnapshot10k times writing (Close: snapshot fsynced at
// the log end) and loading (a clean Open, which reads the snapshot and no
// batch) the state of 10,000 producers; Close and Open's other work is
// included, so these are upper bounds.
func BenchmarkProducerSnapshot10k(b *testing.B) {
	const n = 10_000
	b.Run("write", func(b *testing.B) {
		p, dir := producersPartition(b, n)
		require.NoError(b, p.Close())
		for b.Loop() {
			b.StopTimer()
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(b, err)
			b.StartTimer()
			require.NoError(b, p.Close())
		}
	})
	b.Run("load", func(b *testing.B) {
		p, dir := producersPartition(b, n)
		require.NoError(b, p.Close())
		for b.Loop() {
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(b, err)
			b.StopTimer()
			if ps, _ := p.Producers(); len(ps) != n {
				b.Fatalf("%d producers loaded", len(ps))
			}
			require.NoError(b, p.Close())
			b.StartTimer()
		}
	})
}

// BenchmarkProducerMemory reports the heap bytes per producer the state
// takes (10,000 producers, one batch each).
func BenchmarkProducerMemory(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		b.StopTimer()
		p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
		require.NoError(b, err)
		bts := make([][]byte, n)
		ts := time.Now().UnixMilli()
		for pid := range bts {
			bts[pid] = prodBatch(b, int64(pid), 0, 0, 1, ts, false)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for _, bt := range bts {
			_, err := p.AppendBatch(bt)
			require.NoError(b, err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/producer")
		runtime.KeepAlive(bts)
		require.NoError(b, p.Close())
		b.StartTimer()
	}
}

// TestZeroAllocsIdempotent backs the 0 allocs/op claim of AppendBatch for
// a known producer's next batch, and of AppendBatchInfo for its retry.
func TestZeroAllocsIdempotent(t *testing.T) {
	if invariants.Enabled || testing.CoverMode() != "" {
		t.Skip("invariants builds do not pool Records")
	}
	p, _ := openT(t, plog.Config{})
	bts := make([][]byte, 202)
	for i := range bts {
		bts[i] = idemBenchBatch(t, int32(i*64))
	}
	_, err := p.AppendBatch(bts[0])
	require.NoError(t, err)
	i := 1
	appendAllocs := testing.AllocsPerRun(200, func() {
		_, err := p.AppendBatch(bts[i])
		require.NoError(t, err)
		i++
	})
	retryAllocs := testing.AllocsPerRun(200, func() {
		info, err := p.AppendBatchInfo(bts[i-1])
		if err != nil || !info.Duplicate { // no message built unless it fails: allocations are measured
			require.Failf(t, "not a duplicate", "%v %v", info, err)
		}
	})
	require.Equal(t, 0.0, appendAllocs, "AppendBatch allocations")
	require.Equal(t, 0.0, retryAllocs, "AppendBatchInfo (duplicate) allocations")
}
