package log_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// BenchmarkRollSegments times Partition.Roll on MemFS in a partition that
// already has 32, 1,000 or 10,000 segments: what publishing the new segment
// list costs as the list grows (a long-retention partition has thousands).
// The append that gives each roll something to seal is not timed; p50-ns/op
// is the median roll.
func BenchmarkRollSegments(b *testing.B) {
	for _, n := range []int{32, 1000, 10000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			p, err := plog.Open("/p-0", plog.Config{FS: vfs.NewMem(), SegmentIndexBytes: 240})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			batch := logtest.MakeBatch(1, 10, 1000, 1)
			for range n - 1 {
				if _, err := p.AppendBatch(batch); err != nil {
					b.Fatal(err)
				}
				if err := p.Roll(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := p.AppendBatch(batch); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				if err := p.Roll(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/op")
		})
	}
}
