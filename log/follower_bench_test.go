package log_test

import (
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// BenchmarkFollowerAppend compares a follower's append (AppendAssigned of
// 16 KiB batches with the leader's offsets, contiguous or 10 offsets
// apart as in a compacted log) with a leader's (AppendBatch of the same
// batch), no fsync, one batch per call.
func BenchmarkFollowerAppend(b *testing.B) {
	for _, c := range []struct {
		name string
		gap  int64 // offsets between batches; -1: AppendBatch
	}{{"AppendBatch", -1}, {"AppendAssigned", 0}, {"AppendAssignedGaps", 10}} {
		b.Run(c.name, func(b *testing.B) {
			bt := batch.Batch(benchBatch())
			p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			next := int64(0)
			for b.Loop() {
				if c.gap < 0 {
					if _, err := p.AppendBatch(bt); err != nil {
						b.Fatal(err)
					}
					continue
				}
				bt.SetBaseOffset(next) // outside the CRC
				end, err := p.AppendAssigned(bt)
				if err != nil {
					b.Fatal(err)
				}
				next = end + c.gap
			}
		})
	}
}
