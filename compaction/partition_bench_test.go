package compaction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// BenchmarkPartitionCompaction: compaction rounds over a log.Partition in
// memory (10,000 keys x 8 updates, 100-byte values, 1 MiB segments).
func BenchmarkPartitionCompaction(b *testing.B) {
	now := time.UnixMilli(1_700_000_000_000)
	val := make([]byte, 100)
	var in int64
	for b.Loop() {
		b.StopTimer()
		p, err := plog.Open("/p/t-0", plog.Config{FS: vfs.NewMem(), SegmentBytes: 1 << 20,
			MessageTimestampBeforeMax: plog.NoTimestampLimit, MessageTimestampAfterMax: plog.NoTimestampLimit})
		require.NoError(b, err)
		for r := range 8 {
			for j := 0; j < 10_000; j += 100 {
				bld := batch.NewBuilder(batch.BuilderOptions{})
				for i := j; i < j+100; i++ {
					require.NoError(b, bld.Add(batch.Record{Key: []byte(fmt.Sprintf("key-%08d", i)), Value: val, Timestamp: now.UnixMilli() + int64(r)}))
				}
				bt, err := bld.Build()
				require.NoError(b, err)
				_, err = p.AppendBatch(bt)
				require.NoError(b, err)
			}
		}
		require.NoError(b, p.Roll())
		in = 0
		for _, s := range p.SegmentInfos() {
			in += s.Size
		}
		c, _ := NewCompactor(Config{CleanupPolicy: PolicyCompact, MinCleanableDirtyRatio: 0.0001, OffsetMapBytes: 4 << 20,
			DeleteRetention: time.Hour, Now: func() time.Time { return now }})
		b.StartTimer()
		for {
			res, err := c.Apply(context.Background(), p)
			require.NoError(b, err)
			if !res.Compacted {
				break
			}
		}
		b.StopTimer()
		require.NoError(b, p.Close())
		b.StartTimer()
	}
	b.SetBytes(in)
}
