package batch

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/klauspost/crc32"
)

// benchBatch builds a batch of about size bytes of records whose values are
// valueSize bytes of mildly compressible text.
func benchBatch(b testing.TB, c Compression, size, valueSize int) Batch {
	bld := NewBuilder(BuilderOptions{Compression: c})
	val := make([]byte, valueSize)
	for i := range val {
		val[i] = "partlog stores Kafka logs "[i%26] + byte(i/26%3)
	}
	for i := 0; bld.encodedSize() < size; i++ {
		require.NoError(b, bld.Add(Record{Key: fmt.Appendf(nil, "key-%06d", i), Value: val, Timestamp: 1700000000000 + int64(i),
			Headers: []RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}}))
	}
	out, err := bld.Build()
	require.NoError(b, err)
	return out
}

var sink int

// BenchmarkValidate compares Validate with the bare CRC-32C (klauspost/crc32,
// Castagnoli) over the same bytes: the ratio of their MB/s is the cost of
// the record-framing walk.
func BenchmarkValidate(b *testing.B) {
	castagnoliTable := crc32.MakeTable(crc32.Castagnoli)
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20} {
		for _, valueSize := range []int{16, 100, 1000} {
			bt := benchBatch(b, CompressionNone, size, valueSize)
			name := fmt.Sprintf("%dKiB/value=%d", size>>10, valueSize)
			b.Run("crc32c/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(bt)))
				b.ReportAllocs()
				for b.Loop() {
					sink += int(crc32.Checksum(bt[crcStart:], castagnoliTable))
				}
			})
			b.Run("Validate/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(bt)))
				b.ReportAllocs()
				for b.Loop() {
					require.NoError(b, bt.Validate())
				}
			})
		}
	}
}

// BenchmarkValidateCompressed validates 16 KiB (uncompressed) batches of
// every codec; bytes/s counts the compressed size.
func BenchmarkValidateCompressed(b *testing.B) {
	for _, c := range allCodecs[1:] {
		bt := benchBatch(b, c, 16<<10, 100)
		b.Run(c.String(), func(b *testing.B) {
			var dec Decoder
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				require.NoError(b, dec.Validate(bt))
			}
		})
	}
}

// BenchmarkRecords iterates every record of a 16 KiB batch; bytes/s counts
// the batch's stored size.
func BenchmarkRecords(b *testing.B) {
	for _, c := range allCodecs {
		for _, valueSize := range []int{16, 100} {
			bt := benchBatch(b, c, 16<<10, valueSize)
			b.Run(fmt.Sprintf("%s/value=%d/records=%d", c, valueSize, bt.RecordsCount()), func(b *testing.B) {
				var dec Decoder
				b.SetBytes(int64(len(bt)))
				b.ReportAllocs()
				for b.Loop() {
					sink += iterateAll(bt, &dec)
				}
			})
		}
	}
}

// BenchmarkBuild encodes 16 KiB batches of 100-byte values with every
// codec; bytes/s counts the uncompressed size.
func BenchmarkBuild(b *testing.B) {
	val := benchBatch(b, CompressionNone, 200, 100)
	var recs []Record
	for r, err := range val.All(nil) {
		require.NoError(b, err)
		recs = append(recs, r)
	}
	for len(recs)*130 < 16<<10 {
		recs = append(recs, recs[0])
	}
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			bld := NewBuilder(BuilderOptions{Compression: c})
			var dst []byte
			for _, r := range recs {
				bld.Add(r)
			}
			b.SetBytes(int64(bld.encodedSize()))
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset(BuilderOptions{Compression: c})
				for _, r := range recs {
					require.NoError(b, bld.Add(r))
				}
				var err error
				dst, err = bld.AppendTo(dst[:0])
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkBuildSmall builds batches of 100 records of 100-byte values
// without key or headers (issue 16's small-record producer); bytes/s
// counts the values.
func BenchmarkBuildSmall(b *testing.B) {
	val := make([]byte, 100)
	bld := NewBuilder(BuilderOptions{})
	var dst []byte
	b.SetBytes(100 * 100)
	b.ReportAllocs()
	done := cpuPerOp(b)
	for b.Loop() {
		bld.Reset(BuilderOptions{})
		for range 100 {
			if err := bld.Add(Record{Value: val, Timestamp: 1_700_000_000_000}); err != nil {
				b.Fatal(err)
			}
		}
		var err error
		if dst, err = bld.AppendTo(dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
	done()
}

// BenchmarkBuilderAdd adds 100 records to a Builder (Reset, then Add; no
// Build): the record encoding alone, for short records without and with a
// key, records with a header and records whose timestamps are too far
// apart for the one-pass encoding. bytes/s counts keys and values.
func BenchmarkBuilderAdd(b *testing.B) {
	val, key := make([]byte, 100), []byte("key-0123456789ab")
	hdrs := []RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}
	for _, tc := range []struct {
		name    string
		key     []byte
		headers []RecordHeader
		tsStep  int64
	}{
		{"value=100", nil, nil, 0},
		{"key=16,value=100", key, nil, 1},
		{"key=16,value=100,header", key, hdrs, 1},
		{"ts-step=1h,value=100", nil, nil, 3_600_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bld := NewBuilder(BuilderOptions{})
			b.SetBytes(int64(100 * (len(tc.key) + len(val))))
			b.ReportAllocs()
			done := cpuPerOp(b)
			for b.Loop() {
				bld.Reset(BuilderOptions{})
				ts := int64(1_700_000_000_000)
				for range 100 {
					if err := bld.Add(Record{Key: tc.key, Value: val, Headers: tc.headers, Timestamp: ts}); err != nil {
						b.Fatal(err)
					}
					ts += tc.tsStep
				}
			}
			done()
		})
	}
}

// BenchmarkValidatePlain validates 16 KiB batches of records with 8-byte
// keys and no headers (logbench's validate batches have 1000-byte
// values), next to the CRC-32C alone, computed by klauspost/crc32 (what
// DESIGN.md's validation target compares with) and by internal/crc32c
// (what Validate uses, the AVX-512 folding where the CPU has it).
func BenchmarkValidatePlain(b *testing.B) {
	castagnoliTable := crc32.MakeTable(crc32.Castagnoli)
	for _, valueSize := range []int{100, 1000} {
		bld := NewBuilder(BuilderOptions{})
		val := make([]byte, valueSize)
		for i := 0; bld.encodedSize() < 16<<10; i++ {
			require.NoError(b, bld.Add(Record{Key: fmt.Appendf(nil, "k%07d", i), Value: val, Timestamp: 1_700_000_000_000}))
		}
		bt, err := bld.Build()
		require.NoError(b, err)
		b.Run(fmt.Sprintf("klauspost-crc32c/value=%d", valueSize), func(b *testing.B) {
			b.SetBytes(int64(len(bt)))
			done := cpuPerOp(b)
			for b.Loop() {
				sink += int(crc32.Update(0, castagnoliTable, bt[crcStart:]))
			}
			done()
		})
		b.Run(fmt.Sprintf("crc32c/value=%d", valueSize), func(b *testing.B) {
			b.SetBytes(int64(len(bt)))
			done := cpuPerOp(b)
			for b.Loop() {
				sink += int(checksum(bt[crcStart:]))
			}
			done()
		})
		b.Run(fmt.Sprintf("Validate/value=%d", valueSize), func(b *testing.B) {
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			done := cpuPerOp(b)
			for b.Loop() {
				if err := bt.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
	}
}
