package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/partlog/partlog/internal/corrupt"
	"github.com/pierrec/lz4/v4"
)

// build encodes records with opts, failing the test on error.
func build(t testing.TB, opts BuilderOptions, recs ...Record) Batch {
	t.Helper()
	bld := NewBuilder(opts)
	for _, r := range recs {
		require.NoError(t, bld.Add(r))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// numbered returns n records with keys k0.. and values v0.. and a header.
func numbered(n int, ts int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Timestamp: ts + int64(i),
			Headers: []RecordHeader{{Key: []byte("h"), Value: fmt.Appendf(nil, "%d", i)}}}
	}
	return recs
}

// withRecords returns a copy of tmpl whose records region is recs, with
// batchLength and the CRC fixed, so only the record framing is wrong.
func withRecords(tmpl Batch, recs []byte) Batch {
	b := append(append([]byte{}, tmpl[:HeaderSize]...), recs...)
	binary.BigEndian.PutUint32(b[batchLengthOffset:], uint32(len(b)-LogOverhead))
	Batch(b).SetCRC()
	return b[:len(b):len(b)] // a read past the end panics instead of passing unseen
}

// withHeader returns a copy of tmpl with edit applied to its header and the
// CRC fixed.
func withHeader(tmpl Batch, edit func(h []byte)) Batch {
	b := append([]byte{}, tmpl...)
	edit(b)
	Batch(b).SetCRC()
	return b
}

// rec encodes one record field by field; each argument is already encoded.
func rec(fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	return append(appendVarint(nil, int32(len(body))), body...)
}

func vi(v int32) []byte    { return appendVarint(nil, v) }
func vl(v int64) []byte    { return appendVarlong(nil, v) }
func raw(p ...byte) []byte { return p }

// checkCorrupt asserts err wraps ErrCorrupt and is a CorruptionError naming
// a field.
func checkCorrupt(t *testing.T, err error) *CorruptionError {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt, "err = %v, want ErrCorrupt", err)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "err = %#v, want a CorruptionError naming a field", err)
	require.NotEqual(t, "", ce.Field, "err = %#v, want a CorruptionError naming a field", err)
	return ce
}

// iterate runs the record iterator to its end and returns its error.
func iterate(b Batch) error {
	var dec Decoder
	it := b.Records(&dec)
	for i := 0; ; i++ {
		_, ok, err := it.Next()
		if err != nil || !ok {
			return err
		}
		if i > len(b) {
			return errors.New("iterator does not end")
		}
	}
}

func TestValidateMalformed(t *testing.T) {
	good := build(t, BuilderOptions{}, numbered(3, 1000)...)
	one := build(t, BuilderOptions{}, numbered(1, 1000)...)
	okRec := func(delta int32) []byte {
		return rec(raw(0), vl(0), vi(delta), vi(1), raw('k'), vi(1), raw('v'), vi(0))
	}
	gzipGood := build(t, BuilderOptions{Compression: CompressionGzip}, numbered(3, 1000)...)
	snappyGood := build(t, BuilderOptions{Compression: CompressionSnappy}, numbered(3, 1000)...)
	compressed := func(c Compression, payload []byte) Batch {
		return withRecords(withHeader(one, func(h []byte) {
			binary.BigEndian.PutUint16(h[attributesOffset:], uint16(Attributes(0).WithCompression(c)))
		}), payload)
	}

	tests := []struct {
		name  string
		b     Batch
		field string // the CorruptionError field, "" = not checked
		is    error  // an extra errors.Is target
	}{
		{"truncated_header", good[:HeaderSize-1], "header", ErrTruncated},
		{"truncated_records", good[:len(good)-3], "batchLength", nil},
		{"length_too_short", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[batchLengthOffset:], 10) }), "batchLength", nil},
		{"length_negative", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[batchLengthOffset:], 0xffffffff) }), "batchLength", nil},
		{"magic_1", withHeader(good, func(h []byte) { h[magicOffset] = 1 }), "magic", ErrUnsupportedMagic},
		{"magic_0", withHeader(good, func(h []byte) { h[magicOffset] = 0 }), "magic", ErrUnsupportedMagic},
		{"magic_3", withHeader(good, func(h []byte) { h[magicOffset] = 3 }), "magic", ErrUnsupportedMagic},
		{"bad_crc", func() Batch { b := append(Batch{}, good...); b[len(b)-1] ^= 1; return b }(), "crc", nil},
		{"bad_crc_header_field", func() Batch { b := append(Batch{}, good...); b[producerIDOffset] ^= 1; return b }(), "crc", nil},
		{"count_negative", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[recordsCountOffset:], 0xfffffff0) }), "recordsCount", nil},
		{"count_too_large", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[recordsCountOffset:], 1<<30) }), "records", nil},
		{"count_one_more", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[recordsCountOffset:], 4) }), "record[3].length", ErrCorrupt},
		{"count_one_less", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[recordsCountOffset:], 2) }), "records", nil},
		{"last_offset_delta_negative", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[lastOffsetDeltaOffset:], 0xffffffff) }), "lastOffsetDelta", nil},
		{"last_offset_delta_too_small", withHeader(good, func(h []byte) { binary.BigEndian.PutUint32(h[lastOffsetDeltaOffset:], 1) }), "record[2].offsetDelta", nil},
		{"unknown_codec", withHeader(good, func(h []byte) { binary.BigEndian.PutUint16(h[attributesOffset:], 5) }), "attributes", nil},
		{"compressed_control", withHeader(good, func(h []byte) { binary.BigEndian.PutUint16(h[attributesOffset:], uint16(controlBit|1)) }), "attributes", nil},
		{"trailing_bytes", withRecords(one, append(append([]byte{}, one[HeaderSize:]...), 0)), "records", nil},
		{"record_length_negative", withRecords(one, append(vi(-2), make([]byte, 8)...)), "record[0].length", nil},
		{"record_length_oversized", withRecords(one, append(vi(1000), okRec(0)...)), "record[0].length", nil},
		// Regression: an unsigned range check let a record near the end
		// claim bytes past the batch.
		{"second_record_length_past_end", withRecords(withHeader(good, func(h []byte) {
			binary.BigEndian.PutUint32(h[recordsCountOffset:], 2)
		}), append(rec(raw(0), vl(0), vi(0), vi(-1), vi(5), raw(1, 2, 3, 4, 5), vi(0)), 12, 0, 0)), "record[1].length", nil},
		{"record_length_too_small", withRecords(one, append(vi(3), 0, 0, 0, 0, 0, 0)), "record[0].length", nil},
		{"record_length_longer_than_fields", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(0), raw(0))), "record[0].length", nil},
		{"record_length_shorter_than_fields", withRecords(one, append(vi(6), raw(0, 0, 0, 2, 'k', 'v', 0)...)), "record[0].valueLength", nil},
		{"header_key_negative", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(1), vi(-2), vi(0))), "record[0].header[0].keyLength", nil},
		{"key_length_oversized", withRecords(one, rec(raw(0), vl(0), vi(0), vi(100), vi(-1), vi(0))), "record[0].keyLength", nil},
		{"value_length_oversized", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(1<<30), vi(0))), "record[0].valueLength", nil},
		{"header_count_negative", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(-1))), "record[0].headerCount", nil},
		{"header_count_oversized", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(5), vi(0), vi(0))), "record[0].headerCount", nil},
		{"header_key_null", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1), vi(0))), "record[0].header[0].keyLength", nil},
		{"header_value_oversized", withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(1), vi(1), raw('h'), vi(9))), "record[0].header[0].valueLength", nil},
		{"varint_too_long", withRecords(one, rec(raw(0), vl(0), raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x00), vi(-1), vi(-1), vi(0))), "record[0].offsetDelta", nil},
		{"varint_overflow_int32", withRecords(one, rec(raw(0), vl(0), raw(0xff, 0xff, 0xff, 0xff, 0x7f), vi(-1), vi(-1), vi(0))), "record[0].offsetDelta", nil},
		{"varint_truncated", withRecords(one, rec(raw(0), vl(0), raw(0x80, 0x80, 0x80, 0x80))), "record[0].offsetDelta", nil},
		{"record_length_varint_too_long", withRecords(one, raw(0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0)), "record[0].length", nil},
		{"varlong_too_long", withRecords(one, rec(raw(0), bytes.Repeat([]byte{0x80}, 10), raw(0), vi(0), vi(-1), vi(-1), vi(0))), "record[0].timestampDelta", nil},
		{"varlong_overflow", withRecords(one, rec(raw(0), append(bytes.Repeat([]byte{0xff}, 9), 0x02), vi(0), vi(-1), vi(-1), vi(0))), "record[0].timestampDelta", nil},
		{"offset_delta_negative", withRecords(one, rec(raw(0), vl(0), vi(-1), vi(-1), vi(-1), vi(0))), "record[0].offsetDelta", nil},
		{"offset_delta_past_last", withRecords(one, okRec(1)), "record[0].offsetDelta", nil},
		{"offset_delta_repeated", withRecords(withHeader(good, func(h []byte) {
			binary.BigEndian.PutUint32(h[recordsCountOffset:], 2)
		}), append(okRec(1), okRec(1)...)), "record[1].offsetDelta", nil},
		{"offset_delta_decreasing", withRecords(withHeader(good, func(h []byte) {
			binary.BigEndian.PutUint32(h[recordsCountOffset:], 2)
		}), append(okRec(2), okRec(1)...)), "record[1].offsetDelta", nil},
		{"control_key_short", withRecords(withHeader(one, func(h []byte) {
			binary.BigEndian.PutUint16(h[attributesOffset:], uint16(controlBit|transactionalBit))
		}), okRec(0)), "record[0].key", nil},
		{"gzip_garbage", compressed(CompressionGzip, []byte("not gzip at all")), "records", nil},
		{"gzip_truncated", withRecords(gzipGood, gzipGood[HeaderSize:len(gzipGood)-6]), "records", nil},
		{"gzip_trailing_garbage", withRecords(gzipGood, append(append([]byte{}, gzipGood[HeaderSize:]...), 1, 2, 3)), "records", nil},
		{"gzip_empty", compressed(CompressionGzip, nil), "records", nil},
		{"snappy_garbage", compressed(CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}), "records", nil},
		{"snappy_xerial_chunk_past_end", withRecords(snappyGood, append(append([]byte{}, snappyGood[HeaderSize:HeaderSize+xerialHeaderSize]...), 0, 0, 1, 0, 1)), "records", nil},
		{"snappy_xerial_chunk_length_truncated", withRecords(snappyGood, append(append([]byte{}, snappyGood[HeaderSize:HeaderSize+xerialHeaderSize]...), 0, 0)), "records", nil},
		{"snappy_xerial_bad_chunk", withRecords(snappyGood, append(append([]byte{}, snappyGood[HeaderSize:HeaderSize+xerialHeaderSize]...), 0, 0, 0, 2, 0xff, 0xff)), "records", nil},
		{"lz4_garbage", compressed(CompressionLZ4, []byte("\x04\x22\x4d\x18garbage")), "records", nil},
		{"lz4_not_a_frame", compressed(CompressionLZ4, []byte("plain")), "records", nil},
		{"zstd_garbage", compressed(CompressionZstd, []byte("\x28\xb5\x2f\xfdgarbage")), "records", nil},
		{"zstd_not_a_frame", compressed(CompressionZstd, []byte("plain")), "records", nil},
		{"compressed_records_bad_framing", withRecords(gzipGood, mustCompress(t, CompressionGzip, append(vi(-7), make([]byte, 30)...))), "record[0].length", nil},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		require.False(t, seen[tt.name], "duplicate case %s", tt.name)
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			ce := checkCorrupt(t, err)
			if tt.field != "" {
				assert.Equal(t, tt.field, ce.Field, "field = %q, want %q (%v)", ce.Field, tt.field, err)
			}
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is, "err = %v, want errors.Is %v", err, tt.is)
			}
			assert.GreaterOrEqual(t, ce.Pos, int64(-1), "position %d outside the %d-byte batch", ce.Pos, len(tt.b))
			assert.LessOrEqual(t, ce.Pos, int64(len(tt.b)), "position %d outside the %d-byte batch", ce.Pos, len(tt.b))
			// Parse, the iterator and Decoder.Validate never panic, and the
			// iterator agrees when the header is fine.
			Parse(tt.b)
			var dec Decoder
			derr := dec.Validate(tt.b)
			assert.Equal(t, err == nil, derr == nil, "Decoder.Validate = %v, Validate = %v", derr, err)
			ierr := iterate(tt.b)
			if tt.b.ValidateHeader() == nil {
				assert.Error(t, ierr, "iteration found no error")
			}
			if ierr != nil {
				assert.ErrorIs(t, ierr, ErrCorrupt, "iteration error %v does not wrap ErrCorrupt", ierr)
			}
			t.Logf("%v", err)
		})
	}
}

func mustCompress(t testing.TB, c Compression, p []byte) []byte {
	t.Helper()
	out, err := appendCompressed(nil, c, 0, p)
	require.NoError(t, err)
	return out
}

// Every prefix of a valid batch is rejected by Parse (as truncated) and by
// Validate; nothing panics.
func TestTruncatedPrefixes(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		b := build(t, BuilderOptions{Compression: c}, numbered(5, 1)...)
		for n := 0; n < len(b); n++ {
			p := b[:n]
			_, _, err := Parse(p)
			require.ErrorIs(t, err, ErrTruncated, "%s: Parse(%d of %d bytes) = %v, want ErrTruncated", c, n, len(b), err)
			require.ErrorIs(t, err, corrupt.ErrTornTail, "%s: Parse(%d of %d bytes) = %v, want ErrTruncated", c, n, len(b), err)
			err = Batch(p).Validate()
			require.ErrorIs(t, err, ErrCorrupt, "%s: Validate(%d of %d bytes) = %v", c, n, len(b), err)
			if n >= HeaderSize {
				err := iterate(Batch(p))
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt, "%s: iterate(%d bytes) = %v", c, n, err)
				}
			}
		}
	}
}

// zeroBomb returns a codec's compression of n zero bytes, streamed a
// megabyte at a time so the test never holds n bytes.
func zeroBomb(t testing.TB, c Compression, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch c {
	case CompressionZstd:
		w, err = zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	case CompressionGzip:
		w = gzip.NewWriter(&buf)
	case CompressionLZ4:
		w = lz4.NewWriter(&buf)
	default:
		return mustCompress(t, c, make([]byte, n))
	}
	require.NoError(t, err)
	zero := make([]byte, 1<<20)
	for i := 0; i < n>>20; i++ {
		_, err := w.Write(zero)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestDecompressionBomb(t *testing.T) {
	tmpl := build(t, BuilderOptions{}, numbered(1, 1)...)
	for _, tt := range []struct {
		c Compression
		n int
	}{
		// Every bomb is past the default limit's floor, so only the limit
		// can stop it.
		{CompressionGzip, 2 * minDecompressionLimit},
		{CompressionSnappy, 2 * minDecompressionLimit},
		{CompressionLZ4, 2 * minDecompressionLimit},
		{CompressionZstd, 4 * minDecompressionLimit},
	} {
		t.Run(tt.c.String(), func(t *testing.T) {
			payload := zeroBomb(t, tt.c, tt.n)
			if tt.c == CompressionSnappy {
				// Snappy cannot pass 64x (a copy costs 2 bytes per 64), so its
				// bomb is a raw block that claims n bytes and holds a few.
				payload = append(appendUvarint(nil, uint64(tt.n)), 0, 0, 0, 0)
			}
			b := withRecords(withHeader(tmpl, func(h []byte) {
				binary.BigEndian.PutUint16(h[attributesOffset:], uint16(Attributes(0).WithCompression(tt.c)))
			}), payload)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			err := b.Validate()
			runtime.ReadMemStats(&ms1)
			checkCorrupt(t, err)
			require.ErrorIs(t, err, errTooLarge, "err = %v, want the size limit", err)
			// The output buffer grows by doubling up to the limit; nothing
			// near the claimed size is ever allocated.
			alloc := ms1.TotalAlloc - ms0.TotalAlloc
			assert.LessOrEqual(t, alloc, uint64(4*minDecompressionLimit), "%d compressed bytes claiming %d: Validate allocated %d bytes", len(payload), tt.n, alloc)
			t.Logf("%d bytes -> %v", len(payload), err)
			// A Decoder with a higher limit accepts the size, then finds that
			// zeros are not records.
			dec := Decoder{MaxDecompressedSize: tt.n}
			err = dec.Validate(b)
			require.NotErrorIs(t, err, errTooLarge, "with a %d-byte limit: %v", tt.n, err)
			require.ErrorIs(t, err, ErrCorrupt, "with a %d-byte limit: %v", tt.n, err)
			err = iterate(b)
			require.ErrorIs(t, err, errTooLarge, "iterate = %v, want the size limit", err)
		})
	}
}

// The field report: a Kafka-compatible server kept the producer's base
// offset 0 in every stored batch. A batch of 11 records then one of 3,
// rebased in place to 0 and 11, both still validate and the log ends at 14.
func TestFieldReportOffsets(t *testing.T) {
	var set []byte
	var err error
	for _, n := range []int{11, 3} {
		bld := NewBuilder(BuilderOptions{Compression: CompressionLZ4, PartitionLeaderEpoch: NoPartitionLeaderEpoch})
		for _, r := range numbered(n, 1700000000000) {
			require.NoError(t, bld.Add(r))
		}
		set, err = bld.AppendTo(set)
		require.NoError(t, err)
	}
	next := int64(0)
	var ends []int64
	var bases []int64
	for rest := set; len(rest) > 0; {
		b, r, err := Parse(rest)
		require.NoError(t, err)
		require.Equal(t, int64(0), b.BaseOffset(), "producer batch base %d, want 0", b.BaseOffset())
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(7)
		require.NoError(t, b.Validate(), "after SetBaseOffset(%d)", next)
		bases = append(bases, b.BaseOffset())
		next = b.NextOffset()
		ends = append(ends, next)
		rest = r
	}
	require.Equal(t, "[0 11]", fmt.Sprint(bases), "bases %v next offsets %v, want [0 11] and [11 14]", bases, ends)
	require.Equal(t, "[11 14]", fmt.Sprint(ends), "bases %v next offsets %v, want [0 11] and [11 14]", bases, ends)
	// The records carry the assigned offsets.
	b, rest, _ := Parse(set)
	b2, _, _ := Parse(rest)
	var dec Decoder
	var offs []int64
	for _, bt := range []Batch{b, b2} {
		for r, err := range bt.All(&dec) {
			require.NoError(t, err)
			offs = append(offs, r.Offset)
		}
	}
	for i, o := range offs {
		require.Equal(t, int64(i), o, "record offsets %v", offs)
	}
	require.Len(t, offs, 14, "%d records, PLE %d", len(offs), b2.PartitionLeaderEpoch())
	require.Equal(t, int32(7), b2.PartitionLeaderEpoch(), "%d records, PLE %d", len(offs), b2.PartitionLeaderEpoch())
}

func TestSetLogAppendTime(t *testing.T) {
	b := build(t, BuilderOptions{Compression: CompressionGzip}, numbered(4, 1000)...)
	b.SetLogAppendTime(99999)
	require.NoError(t, b.Validate())
	require.True(t, b.Attributes().LogAppendTime(), "header %+v", b.Header())
	require.Equal(t, int64(99999), b.MaxTimestamp(), "header %+v", b.Header())
	require.Equal(t, CompressionGzip, b.Attributes().Compression(), "header %+v", b.Header())
	for r, err := range b.All(nil) {
		require.NoError(t, err, "record %d timestamp %d: %v", r.Offset, r.Timestamp, err)
		require.Equal(t, int64(99999), r.Timestamp, "record %d timestamp %d: %v", r.Offset, r.Timestamp, err)
	}
}

// With the delete-horizon bit set, baseTimestamp holds the horizon and
// Kafka's cleaner writes the record deltas relative to it: a record still
// reads as baseTimestamp + timestampDelta.
func TestDeleteHorizonTimestamps(t *testing.T) {
	const horizon = 1700000900000
	recs := []Record{{Value: []byte("a"), Timestamp: 1700000000000}, {Value: nil, Timestamp: 1700000000500}}
	var raw []byte
	for i, r := range recs {
		raw, _ = encodeRecord(raw, r, int32(i), r.Timestamp-horizon)
	}
	tmpl := build(t, BuilderOptions{}, recs...)
	b := withRecords(withHeader(tmpl, func(h []byte) {
		binary.BigEndian.PutUint16(h[attributesOffset:], uint16(deleteHorizonBit))
		binary.BigEndian.PutUint64(h[baseTimestampOffset:], horizon)
	}), raw)
	require.True(t, b.Attributes().HasDeleteHorizon(), "header %+v", b.Header())
	require.Equal(t, int64(horizon), b.BaseTimestamp(), "header %+v", b.Header())
	for i, r := range decodeAll(t, b) {
		require.Equal(t, recs[i].Timestamp, r.Timestamp, "record %d timestamp %d, want %d", i, r.Timestamp, recs[i].Timestamp)
	}
}

// A batch of very compressible records is legitimate: a 2 MiB record of
// zeros compresses to a few hundred bytes (a ratio far past 64), and Kafka
// accepts it. The default limit's floor lets it validate (a review found
// valid batches like this rejected, and cut out of the log by recovery).
func TestCompressibleBatchValidates(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b := build(t, BuilderOptions{Compression: c}, Record{Key: []byte("k"), Value: make([]byte, 2<<20), Timestamp: 1})
			ratio := (2 << 20) / len(b)
			if c != CompressionNone && c != CompressionSnappy {
				require.GreaterOrEqual(t, ratio, defaultMaxDecompressionRatio, "%d-byte batch: ratio %d is not past the default ratio", len(b), ratio)
			}
			require.NoError(t, b.Validate(), "Validate")
			require.NoError(t, iterate(b), "iterate")
		})
	}
}
