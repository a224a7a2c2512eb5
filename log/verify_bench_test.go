package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// BenchmarkVerify verifies a partition of 4 MiB of uncompressed batches
// (100 records of 100-byte values each, 1 MiB segments); bytes/s counts
// the .log bytes.
func BenchmarkVerify(b *testing.B) {
	p, _ := openT(b, plog.Config{SegmentBytes: 1 << 20})
	var size int64
	for i := 0; size < 4<<20; i++ {
		bt := logtest.MakeBatch(100, 100, int64(1000+i), byte(i))
		size += int64(len(bt))
		_, err := p.AppendBatch(bt)
		require.NoError(b, err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, p.Verify())
	}
}
