package log_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// BenchmarkRecordsAll reads a log of smallReadRecords records of 100 bytes
// from start to end with ReadFrom of 1 MiB at a time and Records.All,
// touching each key and value, in batches of 1 (logbench's one_record_read
// without its framed baseline), 8 and 100 records. It reports ns/record
// and cpu-ns/record, the thread's CPU time (Linux), much steadier than
// ns/op on a shared machine, which also counts the time other processes
// held the core. One op is a pass over the log.
func BenchmarkRecordsAll(b *testing.B) {
	for _, perBatch := range []int{1, 8, 100} {
		b.Run(fmt.Sprintf("batch=%d", perBatch), func(b *testing.B) { benchRecordsAll(b, perBatch) })
	}
}

func benchRecordsAll(b *testing.B, perBatch int) {
	val := smallValue()
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	ts := time.Now().UnixMilli()
	var buf []byte
	for i := 0; i < smallReadRecords; i += perBatch {
		bld.Reset(batch.BuilderOptions{})
		for j := range perBatch {
			require.NoError(b, bld.Add(batch.Record{Value: val, Timestamp: ts + int64(j)}))
		}
		buf, err = bld.AppendTo(buf[:0])
		require.NoError(b, err)
		_, err = p.AppendBatch(buf)
		require.NoError(b, err)
	}
	records := int(p.HighWatermark())
	var dec batch.Decoder
	// Errors are checked with plain ifs: require's t.Helper call costs
	// more than a record.
	pass := func() int {
		n := 0
		for off := int64(0); off < p.HighWatermark(); {
			r, err := p.ReadFrom(off, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			for rec, err := range r.All(&dec) {
				if err != nil {
					b.Fatal(err)
				}
				n += len(rec.Key) + len(rec.Value)
			}
			off = r.NextOffset()
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
		}
		return n
	}
	require.Equal(b, records*smallRecordSize, pass(), "short read")
	b.SetBytes(int64(records * smallRecordSize))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPUNanos()
	for b.Loop() {
		sink += pass()
	}
	c1 := threadCPUNanos()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
	if c0 > 0 && c1 > c0 {
		b.ReportMetric(float64(c1-c0)/float64(b.N)/float64(records), "cpu-ns/record")
	}
}
