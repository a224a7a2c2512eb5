package log_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// BenchmarkRoll times one roll onto a spare made ahead, on the operating
// system's filesystem, with the background work of the previous roll done
// and the spare ready (the quiet case: what the roll itself costs).
// roll: Partition.Roll (the lock and rollLocked); rolling-append: the
// AppendBatch of a 16 KiB batch that rolls, with its write into the new
// segment (and the background work the roll starts running beside it);
// first-append: the first AppendBatch into a segment a roll made, once
// that background work is done. The appends that fill each segment are
// not timed; the benchmark goroutine keeps its thread.
func BenchmarkRoll(b *testing.B) {
	for _, mode := range []string{"roll", "rolling-append", "first-append"} {
		b.Run(mode, func(b *testing.B) {
			const segBytes = 1 << 20
			p, err := plog.Open(b.TempDir(), plog.Config{SegmentBytes: segBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			batch := logtest.MakeBatch(100, 150, 1000, 1) // ~16 KiB
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for {
					infos := p.SegmentInfos()
					if infos[len(infos)-1].Size+int64(len(batch)) > segBytes {
						break
					}
					if _, err := p.AppendBatch(batch); err != nil {
						b.Fatal(err)
					}
				}
				if err := p.FlushRolled(); err != nil {
					b.Fatal(err)
				}
				for !p.HasSpare() {
					runtime.Gosched()
				}
				rolls := p.Stats().Rolls
				if mode == "first-append" {
					if err := p.Roll(); err != nil {
						b.Fatal(err)
					}
					if err := p.FlushRolled(); err != nil {
						b.Fatal(err)
					}
					for !p.HasSpare() {
						runtime.Gosched()
					}
				}
				b.StartTimer()
				t0 := time.Now()
				if mode == "roll" {
					err = p.Roll()
				} else {
					_, err = p.AppendBatch(batch)
				}
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if p.Stats().Rolls != rolls+1 {
					b.Fatalf("rolls %d, want %d", p.Stats().Rolls, rolls+1)
				}
				b.StartTimer()
			}
			b.StopTimer()
			// The median: the mean of a few hundred rolls on a loaded
			// machine is its outliers.
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/op")
		})
	}
}
