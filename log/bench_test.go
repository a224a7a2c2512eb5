package log_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/invariants"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestZeroAllocs backs the 0 allocs/op claims of AppendBatch and ReadFrom
// (+ Records.Close) with testing.AllocsPerRun. A Records is a handle
// returned by value; the state behind it is pooled.
func TestZeroAllocs(t *testing.T) {
	if invariants.Enabled || testing.CoverMode() != "" {
		t.Skip("invariants and coverage builds add allocations of their own")
	}
	p, _ := openT(t, plog.Config{})
	b := logtest.MakeBatch(100, 150, 1000, 1) // ~16 KiB
	_, err := p.AppendBatch(b)
	require.NoError(t, err)
	appendAllocs := testing.AllocsPerRun(200, func() {
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
	})
	o := int64(0)
	readAllocs := testing.AllocsPerRun(200, func() {
		r, err := p.ReadFrom(o, 1)
		require.NoError(t, err)
		o = r.NextOffset() % p.LogEndOffset()
		require.NoError(t, r.Close())
	})
	require.Equal(t, 0.0, appendAllocs, "AppendBatch allocations")
	require.Equal(t, 0.0, readAllocs, "ReadFrom allocations")
}

// BenchmarkAppendBatch appends 16 KiB batches (no fsync) and, in the same
// run, writes the same bytes as many times with a plain sequential os.File
// write loop; it reports ratio_to_raw_write = raw ns/op ÷ append ns/op
// (DESIGN: >= 0.85).
func BenchmarkAppendBatch(b *testing.B) {
	bt := benchBatch()
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	defer p.Close()
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		_, err := p.AppendBatch(bt)
		require.NoError(b, err)
	}
	if b.N > 0 {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(rawWriteNsPerOp(b, bt, b.N)/perOp, "ratio_to_raw_write")
	}
}

// rawWriteNsPerOp times n sequential os.File writes of bt and returns
// ns/write.
func rawWriteNsPerOp(b *testing.B, bt []byte, n int) float64 {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	require.NoError(b, err)
	defer f.Close()
	start := time.Now()
	for range n {
		_, err := f.Write(bt)
		require.NoError(b, err)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// readBenchPartition fills a partition with 64 MiB of 16 KiB batches.
func readBenchPartition(b *testing.B) (*plog.Partition, int) {
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	bt := benchBatch()
	for i := 0; i < (64<<20)/len(bt); i++ {
		_, err := p.AppendBatch(bt)
		require.NoError(b, err)
	}
	return p, len(bt)
}

// BenchmarkReadFrom reads the log sequentially, one 16 KiB batch per read.
// zero-copy: ReadFrom + Bytes + Close, no byte touched; copy: the bytes are
// copied into a buffer, and a plain memcpy loop copies the same bytes out of
// the segment's mapping, for ratio_to_memcpy = memcpy ns/op ÷ copy ns/op
// (DESIGN: >= 0.80).
func BenchmarkReadFrom(b *testing.B) {
	p, size := readBenchPartition(b)
	defer p.Close()
	end := p.LogEndOffset()
	dst := make([]byte, size)
	read := func(b *testing.B, o *int64, copyOut bool) {
		r, err := p.ReadFrom(*o, size)
		require.NoError(b, err)
		if copyOut {
			copy(dst, r.Bytes())
		}
		*o = r.NextOffset()
		if *o >= end {
			*o = 0
		}
		require.NoError(b, r.Close())
	}
	b.Run("zero-copy", func(b *testing.B) {
		var o int64
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			read(b, &o, false)
		}
	})
	b.Run("copy", func(b *testing.B) {
		var o int64
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			read(b, &o, true)
		}
		if b.N > 0 {
			// memcpy of the same bytes: the same batches, copied straight
			// out of the segment's mapping in the same order.
			all, err := p.ReadFrom(0, 1<<30)
			require.NoError(b, err)
			src := all.Bytes()
			off := 0
			start := time.Now()
			for range b.N {
				copy(dst, src[off:off+size])
				off += size
				if off+size > len(src) {
					off = 0
				}
			}
			memNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			_ = all.Close()
			b.ReportMetric(memNs/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "ratio_to_memcpy")
		}
	})
	b.Run("writeto-discard", func(b *testing.B) {
		var o int64
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			r, err := p.ReadFrom(o, size)
			require.NoError(b, err)
			_, err = r.WriteTo(io.Discard)
			require.NoError(b, err)
			o = r.NextOffset()
			if o >= end {
				o = 0
			}
			_ = r.Close()
		}
	})
}

// BenchmarkAppendBatchWithReaders appends 16 KiB batches while 0 or 8
// goroutines tail the log (zero-copy reads of every batch; when caught up
// they wait 50 µs, as a consumer's fetch would). DESIGN: throughput with 8
// readers >= 90% of none; compare the two sub-benchmarks' MB/s. (Readers
// that spin without ever blocking would instead measure the Go scheduler:
// each append's write system call puts the appender behind them.)
func BenchmarkAppendBatchWithReaders(b *testing.B) {
	for _, readers := range []int{0, 8} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			bt := benchBatch()
			p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
			require.NoError(b, err)
			defer p.Close()
			_, err = p.AppendBatch(bt)
			require.NoError(b, err)
			var stop atomic.Bool
			var wg sync.WaitGroup
			for range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var o int64
					for !stop.Load() {
						r, err := p.ReadFrom(o, len(bt))
						if err != nil {
							b.Error(err)
							return
						}
						empty := len(r.Bytes()) == 0
						if !empty {
							o = r.NextOffset()
						}
						_ = r.Close()
						if empty {
							// Caught up: wait for more, as a consumer's
							// fetch would.
							time.Sleep(50 * time.Microsecond)
						}
					}
				}()
			}
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				_, err := p.AppendBatch(bt)
				require.NoError(b, err)
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}
