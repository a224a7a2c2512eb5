package compaction

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// BenchmarkCompaction measures compaction rounds (until nothing is dirty)
// over ~8 MiB of
// records (10,000 distinct keys, 8 updates each, 100-byte values) in 1 MiB
// segments, on the OS filesystem (with its fsyncs) and in memory, against
// the offset map budget: throughput in MB/s of input, the bytes allocated
// and the heap in use after the rounds (runtime.MemStats).
func BenchmarkCompaction(b *testing.B) {
	for _, c := range []struct {
		fs       string
		mapBytes int
	}{{"os", 256 << 10}, {"os", 4 << 20}, {"os", 64 << 20}, {"mem", 256 << 10}, {"mem", 4 << 20}, {"mem", 64 << 20}} {
		mapBytes := c.mapBytes
		b.Run(fmt.Sprintf("fs=%s/map=%dKiB", c.fs, mapBytes>>10), func(b *testing.B) {
			now := time.UnixMilli(1_700_000_000_000)
			val := make([]byte, 100)
			var in int64
			for b.Loop() {
				b.StopTimer()
				var l *testLog
				if c.fs == "os" {
					l = newOSLog(b, 1<<20)
				} else {
					l, _ = newMemLog(b, 1<<20)
				}
				for r := range 8 {
					for j := 0; j < 10_000; j += 100 {
						var recs []kv
						for i := j; i < j+100; i++ {
							recs = append(recs, kv{key: k(fmt.Sprintf("key-%08d", i)), value: val, ts: now.UnixMilli() + int64(r)})
						}
						l.append(buildBatch(b, batch.CompressionNone, nil, recs...))
					}
				}
				l.roll()
				in = 0
				for _, s := range l.SegmentInfos() {
					in += s.Size
				}
				cfg := compactCfg(&now)
				cfg.OffsetMapBytes = mapBytes
				c, _ := NewCompactor(cfg)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.StartTimer()
				for {
					res, err := c.Apply(context.Background(), l)
					require.NoError(b, err)
					if !res.Compacted {
						break
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "MiB-alloc/op")
				b.ReportMetric(float64(after.HeapInuse)/(1<<20), "MiB-heap-after")
				l.close()
				b.StartTimer()
			}
			b.SetBytes(in)
		})
	}
}

// BenchmarkRetention1000Segments measures a retention round that deletes
// 1,000 expired segments.
func BenchmarkRetention1000Segments(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		l, _ := newMemLog(b, 1<<20)
		fillSegments(b, l, 1000, func(int) int64 { return 1 })
		r, _ := NewRetention(Config{Retention: time.Millisecond})
		b.StartTimer()
		res, err := r.Apply(context.Background(), l)
		require.NoError(b, err)
		require.Equal(b, 1000, res.SegmentsDeleted, "%+v", res)
	}
}
