package log_test

import (
	"fmt"
	"path/filepath"
	"testing"

	plog "github.com/partlog/partlog/log"
)

// BenchmarkSegmentResources opens a cleanly closed partition of 2,000
// one-batch segments without a budget (every segment keeps its files open,
// as Kafka does) and with MaxOpenSegments 16, and reports the descriptors
// and mappings its directory holds per segment: at rest after Open
// (fds/seg, maps/seg) and after reading every segment once (fds/seg-read,
// maps/seg-read), with the time of the open and the reads.
func BenchmarkSegmentResources(b *testing.B) {
	const n = 2000
	dir := filepath.Join(b.TempDir(), "topic-0")
	writeSegments(b, dir, n)
	for _, budget := range []int{0, 16} {
		b.Run(fmt.Sprintf("MaxOpenSegments=%d", budget), func(b *testing.B) {
			cfg := plog.Config{SegmentBytes: 1 << 20, SegmentIndexBytes: 1024, MaxOpenSegments: budget}
			for b.Loop() {
				p, err := plog.Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				fds, maps, ok := openFiles(b, dir)
				if !ok {
					b.Skip("needs /proc/self")
				}
				b.ReportMetric(float64(fds)/n, "fds/seg")
				b.ReportMetric(float64(maps)/n, "maps/seg")
				b.StartTimer()
				for off := range int64(n) {
					r, err := p.ReadFrom(off, 1)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				fds, maps, _ = openFiles(b, dir)
				b.ReportMetric(float64(fds)/n, "fds/seg-read")
				b.ReportMetric(float64(maps)/n, "maps/seg-read")
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
