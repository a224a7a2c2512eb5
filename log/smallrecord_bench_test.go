package log_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/crc32"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// The small-record scenarios of issue 16, measured against what a plain
// log of framed records does on the same machine in the same run: every
// record framed as a 4-byte length, a 4-byte CRC-32C of the payload and
// the payload.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFramed appends one framed record (length, CRC-32C, payload).
func appendFramed(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

// BenchmarkSmallRecordAppend builds and appends batches of 100 records of
// 100 bytes (batch.Builder, Partition.AppendBuilder; no fsync) and
// reports ratio_to_framed_write: the ns per batch of a framed os.File
// write loop in the same run (each record framed with its length and
// CRC-32C, one write call per 100 records) ÷ partlog's. One op is one
// batch; bytes/s counts the values. BenchmarkSmallRecordAppendBatch is
// the same through Builder.AppendTo and AppendBatch, for comparison.
func BenchmarkSmallRecordAppend(b *testing.B) {
	benchSmallRecordAppend(b, func(p *plog.Partition, bld *batch.Builder, buf []byte) ([]byte, error) {
		_, err := p.AppendBuilder(bld)
		return buf, err
	})
}

// BenchmarkSmallRecordAppendBatch is BenchmarkSmallRecordAppend with each
// batch encoded by Builder.AppendTo and appended by AppendBatch, which
// checks the CRC-32C and walks the records of the caller's bytes.
func BenchmarkSmallRecordAppendBatch(b *testing.B) {
	benchSmallRecordAppend(b, func(p *plog.Partition, bld *batch.Builder, buf []byte) ([]byte, error) {
		buf, err := bld.AppendTo(buf[:0])
		if err != nil {
			return buf, err
		}
		_, err = p.AppendBatch(buf)
		return buf, err
	})
}

// benchSmallRecordAppend runs the small-record append benchmark with
// appendFn appending each built batch (buf is its reusable buffer).
func benchSmallRecordAppend(b *testing.B, appendFn func(p *plog.Partition, bld *batch.Builder, buf []byte) ([]byte, error)) {
	val := smallValue()
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	var buf []byte
	ts := time.Now().UnixMilli()
	b.SetBytes(smallRecordSize * smallBatchLen)
	b.ReportAllocs()
	for b.Loop() {
		bld.Reset(batch.BuilderOptions{})
		for range smallBatchLen {
			if err := bld.Add(batch.Record{Value: val, Timestamp: ts}); err != nil {
				b.Fatal(err)
			}
		}
		buf, err = appendFn(p, bld, buf)
		require.NoError(b, err)
	}
	if b.N > 0 {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(framedWriteNsPerBatch(b, val, b.N)/perOp, "ratio_to_framed_write")
	}
}

// framedWriteNsPerBatch times n batches of the framed write loop and
// returns ns per batch.
func framedWriteNsPerBatch(b *testing.B, val []byte, n int) float64 {
	f, err := os.Create(filepath.Join(b.TempDir(), "framed"))
	require.NoError(b, err)
	defer f.Close()
	var buf []byte
	start := time.Now()
	for range n {
		buf = buf[:0]
		for range smallBatchLen {
			buf = appendFramed(buf, val)
		}
		_, err := f.Write(buf)
		require.NoError(b, err)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// BenchmarkOneRecordAppend appends records of 100 bytes one per call: a
// batch.Builder holding one record, stamped with the call time as Add
// stamps it, and Partition.AppendBuilder (no fsync). It reports
// ratio_to_framed_write: the ns per record of a framed os.File write loop
// making one write call per record, in the same run, ÷ partlog's. One op
// is one record; bytes/s counts the values.
func BenchmarkOneRecordAppend(b *testing.B) {
	val := smallValue()
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	b.SetBytes(smallRecordSize)
	b.ReportAllocs()
	for b.Loop() {
		bld.Reset(batch.BuilderOptions{})
		if err := bld.Add(batch.Record{Value: val}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.AppendBuilder(bld); err != nil {
			b.Fatal(err)
		}
	}
	if b.N > 0 {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		f, err := os.Create(filepath.Join(b.TempDir(), "framed"))
		require.NoError(b, err)
		defer f.Close()
		var buf []byte
		start := time.Now()
		for range b.N {
			buf = appendFramed(buf[:0], val)
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/perOp, "ratio_to_framed_write")
	}
}

// BenchmarkOneRecordBatchRead reads a log of one-record batches of 100
// bytes from start to end: ReadFrom of 1 MiB at a time, Records.Batches,
// Batch.All, touching each value. It reports ratio_to_framed_read: the ns
// of reading the same records framed (length, CRC-32C, payload) from an
// os.File in 1 MiB reads and checking each CRC-32C, in the same run, ÷
// partlog's. One op is a pass over the log; bytes/s counts the values.
func BenchmarkOneRecordBatchRead(b *testing.B) {
	val := smallValue()
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{})
	require.NoError(b, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	ts := time.Now().UnixMilli()
	var buf, framed []byte
	for range smallReadRecords {
		bld.Reset(batch.BuilderOptions{})
		if err := bld.Add(batch.Record{Value: val, Timestamp: ts}); err != nil {
			b.Fatal(err)
		}
		buf, err = bld.AppendTo(buf[:0])
		require.NoError(b, err)
		_, err := p.AppendBatch(buf)
		require.NoError(b, err)
		framed = appendFramedRecord(framed, nil, val)
	}
	path := filepath.Join(b.TempDir(), "framed")
	require.NoError(b, os.WriteFile(path, framed, 0o644))
	f, err := os.Open(path)
	require.NoError(b, err)
	defer f.Close()
	var dec batch.Decoder
	// The loops check errors with plain ifs: require's t.Helper call
	// costs more than a record.
	pass := func() int {
		n := 0
		for off := int64(0); off < p.HighWatermark(); {
			r, err := p.ReadFrom(off, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			for bt, err := range r.Batches() {
				if err != nil {
					b.Fatal(err)
				}
				for rec, err := range bt.All(&dec) {
					if err != nil {
						b.Fatal(err)
					}
					n += len(rec.Key) + len(rec.Value)
				}
			}
			off = r.NextOffset()
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
		}
		return n
	}
	require.False(b, pass() != smallReadRecords*smallRecordSize, "short read")
	b.SetBytes(smallReadRecords * smallRecordSize)
	b.ReportAllocs()
	for b.Loop() {
		sink += pass()
	}
	if b.N > 0 {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		start := time.Now()
		for range b.N {
			sink += framedReadPass(b, f, len(framed))
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/perOp, "ratio_to_framed_read")
	}
}

// appendFramedRecord appends one framed key-value record: length,
// CRC-32C of the payload, and the payload, which is the key's length + 1
// as a uvarint (0: a null key), the key and the value.
func appendFramedRecord(dst, key, value []byte) []byte {
	kl := uint64(0)
	if key != nil {
		kl = uint64(len(key)) + 1
	}
	n := binary.PutUvarint(make([]byte, binary.MaxVarintLen64), kl)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n+len(key)+len(value)))
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, kl)
	dst = append(dst, key...)
	dst = append(dst, value...)
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// framedReadPass reads the framed log in f (size bytes) in 1 MiB reads,
// checks every record's CRC-32C, splits its payload into key and value
// (what any log of keyed records must hand its reader) and returns the
// key and value bytes.
func framedReadPass(b *testing.B, f *os.File, size int) int {
	buf := make([]byte, 1<<20)
	n, carry := 0, 0
	for pos := int64(0); pos < int64(size); {
		m, err := f.ReadAt(buf[carry:], pos)
		if m == 0 && err != nil {
			b.Fatal(err)
		}
		pos += int64(m)
		data := buf[:carry+m]
		for len(data) >= 8 {
			l := int(binary.BigEndian.Uint32(data))
			if len(data) < 8+l {
				break
			}
			payload := data[8 : 8+l]
			if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(data[4:]) {
				b.Fatal("framed record: bad CRC")
			}
			key, value, ok := splitFramed(payload)
			if !ok {
				b.Fatal("framed record: bad key length")
			}
			n += len(key) + len(value)
			data = data[8+l:]
		}
		carry = copy(buf, data)
	}
	return n
}

// splitFramed splits a framed record's payload into its key (nil when
// null) and value; ok is false when the key length does not fit.
func splitFramed(payload []byte) (key, value []byte, ok bool) {
	kl, k := binary.Uvarint(payload)
	if k <= 0 || kl > uint64(len(payload)-k)+1 {
		return nil, nil, false
	}
	if kl > 0 {
		key = payload[k : k+int(kl)-1]
		k += int(kl) - 1
	}
	return key, payload[k:], true
}
