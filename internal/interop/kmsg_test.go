package interop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// Interop with franz-go's protocol structs (kmsg), a codec nobody here
// wrote. kmsg leaves compression to its caller, so the test compresses and
// decompresses kmsg's record bytes itself, with the same libraries but none
// of this package's code.

var allCodecs = []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}

// decoded is a record as read back: its absolute offset and its fields,
// copied.
type decoded struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []batch.RecordHeader
}

// clone copies p keeping nil apart from empty.
func clone(p []byte) []byte {
	if p == nil {
		return nil
	}
	return append([]byte{}, p...)
}

// decodeAll validates b and returns its records, copied.
func decodeAll(t testing.TB, b batch.Batch) []decoded {
	t.Helper()
	require.NoError(t, b.Validate(), "Validate")
	var dec batch.Decoder
	var out []decoded
	for r, err := range b.All(&dec) {
		require.NoError(t, err, "record %d", len(out))
		d := decoded{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)}
		for _, h := range r.Headers {
			d.Headers = append(d.Headers, batch.RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
		}
		out = append(out, d)
	}
	require.Len(t, out, int(b.RecordsCount()), "decoded %d records, header says %d", len(out), b.RecordsCount())
	return out
}

// sameBytes compares two byte fields, a nil one apart from an empty one.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// checkRecord compares a record read back with the one written.
func checkRecord(t testing.TB, where string, got decoded, want decoded) {
	t.Helper()
	assert.Equal(t, want.Offset, got.Offset, "%s: offset", where)
	assert.Equal(t, want.Timestamp, got.Timestamp, "%s: timestamp", where)
	assert.True(t, sameBytes(got.Key, want.Key), "%s: key = %q (nil %v), want %q (nil %v)", where, got.Key, got.Key == nil, want.Key, want.Key == nil)
	assert.True(t, sameBytes(got.Value, want.Value), "%s: value = %.60q (nil %v), want %.60q (nil %v)", where, got.Value, got.Value == nil, want.Value, want.Value == nil)
	if !assert.Len(t, got.Headers, len(want.Headers), "%s: headers", where) {
		return
	}
	for i := range want.Headers {
		assert.Equal(t, string(want.Headers[i].Key), string(got.Headers[i].Key), "%s: header %d key", where, i)
		assert.True(t, sameBytes(got.Headers[i].Value, want.Headers[i].Value), "%s: header %d = %q=%q, want %q", where, i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Value)
	}
}

// mustParseOne parses bytes holding exactly one batch.
func mustParseOne(t testing.TB, p []byte) batch.Batch {
	t.Helper()
	b, rest, err := batch.Parse(p)
	require.NoError(t, err, "Parse")
	require.Empty(t, rest, "Parse: %d bytes after the batch", len(rest))
	return b
}

// build encodes recs with a Builder.
func build(t testing.TB, opts batch.BuilderOptions, recs ...batch.Record) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(opts)
	for _, r := range recs {
		require.NoError(t, bld.Add(r))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// interopRecords returns records exercising null and empty keys and
// values, headers with null values, and negative timestamp deltas.
func interopRecords() []batch.Record {
	return []batch.Record{
		{Key: []byte("key-0"), Value: []byte("value-0"), Timestamp: 1700000000000,
			Headers: []batch.RecordHeader{{Key: []byte("h1"), Value: []byte("x")}, {Key: []byte("h2"), Value: nil}}},
		{Key: nil, Value: []byte("null key"), Timestamp: 1700000000005},
		{Key: []byte{}, Value: nil, Timestamp: 1699999999990},
		{Key: []byte("big"), Value: bytes.Repeat([]byte("0123456789abcdef"), 5000), Timestamp: 1700000000100,
			Headers: []batch.RecordHeader{{Key: []byte{}, Value: []byte{}}}},
	}
}

// kmsgCompress compresses raw records the way a Kafka client would: raw
// snappy blocks (as franz-go and librdkafka write them), LZ4 frames,
// gzip, zstd.
func kmsgCompress(t *testing.T, c batch.Compression, p []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case batch.CompressionNone:
		return p
	case batch.CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(p)
		require.NoError(t, w.Close())
	case batch.CompressionSnappy:
		return s2.EncodeSnappy(nil, p)
	case batch.CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(p)
		require.NoError(t, w.Close())
	case batch.CompressionZstd:
		w, _ := zstd.NewWriter(nil)
		defer w.Close()
		return w.EncodeAll(p, nil)
	}
	return buf.Bytes()
}

// kmsgDecompress undoes any codec, reading both snappy forms.
func kmsgDecompress(t *testing.T, c batch.Compression, p []byte) []byte {
	t.Helper()
	var r io.Reader
	switch c {
	case batch.CompressionNone:
		return p
	case batch.CompressionGzip:
		z, err := gzip.NewReader(bytes.NewReader(p))
		require.NoError(t, err)
		r = z
	case batch.CompressionSnappy:
		const magic = "\x82SNAPPY\x00"
		if !bytes.HasPrefix(p, []byte(magic)) {
			out, err := s2.Decode(nil, p)
			require.NoError(t, err)
			return out
		}
		var out []byte
		for pos := 16; pos < len(p); {
			n := int(binary.BigEndian.Uint32(p[pos:]))
			chunk, err := s2.Decode(nil, p[pos+4:pos+4+n])
			require.NoError(t, err)
			out = append(out, chunk...)
			pos += 4 + n
		}
		return out
	case batch.CompressionLZ4:
		r = lz4.NewReader(bytes.NewReader(p))
	case batch.CompressionZstd:
		z, err := zstd.NewReader(bytes.NewReader(p))
		require.NoError(t, err)
		defer z.Close()
		r = z
	}
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

// kmsgBatch builds a batch with kmsg, filling every field as kmsg documents
// it.
func kmsgBatch(t *testing.T, c batch.Compression, recs []batch.Record) []byte {
	var raw []byte
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	for i, r := range recs {
		kr := kmsg.Record{Attributes: 0, TimestampDelta64: r.Timestamp - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		body := kr.AppendTo(nil)[1:] // Length 0 encodes as one byte
		kr.Length = int32(len(body))
		raw = kr.AppendTo(raw)
		maxTS = max(maxTS, r.Timestamp)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(c),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: 42, ProducerEpoch: 3, FirstSequence: 100, NumRecords: int32(len(recs)),
		Records: kmsgCompress(t, c, raw),
	}
	kb.Length = int32(batch.HeaderSize - batch.LogOverhead + len(kb.Records))
	kb.CRC = int32(batch.Batch(kb.AppendTo(nil)).ComputeCRC())
	return kb.AppendTo(nil)
}

func TestInteropKmsgToPartlog(t *testing.T) {
	want := interopRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b := mustParseOne(t, kmsgBatch(t, c, want))
			require.Equal(t, int64(42), b.ProducerID(), "header %+v", b.Header())
			require.Equal(t, int16(3), b.ProducerEpoch(), "header %+v", b.Header())
			require.Equal(t, int32(100), b.BaseSequence(), "header %+v", b.Header())
			require.Equal(t, int32(-1), b.PartitionLeaderEpoch(), "header %+v", b.Header())
			require.Equal(t, int32(103), b.LastSequence(), "header %+v", b.Header())
			require.Equal(t, c, b.Attributes().Compression(), "header %+v", b.Header())
			got := decodeAll(t, b)
			for i := range want {
				checkRecord(t, fmt.Sprint("record ", i), got[i],
					decoded{int64(i), want[i].Timestamp, want[i].Key, want[i].Value, want[i].Headers})
			}
		})
	}
}

func TestInteropPartlogToKmsg(t *testing.T) {
	want := interopRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b := build(t, batch.BuilderOptions{Compression: c, BaseOffset: 500, PartitionLeaderEpoch: 9,
				Producer: &batch.Producer{ID: 42, Epoch: 3, BaseSequence: 100}, Transactional: true}, want...)
			var kb kmsg.RecordBatch
			require.NoError(t, kb.ReadFrom(b))
			require.Equal(t, int64(500), kb.FirstOffset, "kmsg header %+v", kb)
			require.Equal(t, int32(9), kb.PartitionLeaderEpoch, "kmsg header %+v", kb)
			require.Equal(t, int8(2), kb.Magic, "kmsg header %+v", kb)
			require.Equal(t, len(b), int(kb.Length)+batch.LogOverhead, "kmsg header %+v", kb)
			require.Equal(t, b.ComputeCRC(), uint32(kb.CRC), "kmsg header %+v", kb)
			require.Equal(t, int16(c)|0x10, kb.Attributes, "kmsg header %+v", kb)
			require.Equal(t, int32(3), kb.LastOffsetDelta, "kmsg header %+v", kb)
			require.Equal(t, want[0].Timestamp, kb.FirstTimestamp, "kmsg header %+v", kb)
			require.Equal(t, int64(1700000000100), kb.MaxTimestamp, "kmsg header %+v", kb)
			require.Equal(t, int64(42), kb.ProducerID, "kmsg header %+v", kb)
			require.Equal(t, int16(3), kb.ProducerEpoch, "kmsg header %+v", kb)
			require.Equal(t, int32(100), kb.FirstSequence, "kmsg header %+v", kb)
			require.Equal(t, int32(4), kb.NumRecords, "kmsg header %+v", kb)
			raw := kmsgDecompress(t, c, kb.Records)
			for i := range want {
				var kr kmsg.Record
				require.NoError(t, kr.ReadFrom(raw), "record %d", i)
				length, n := binary.Varint(raw) // zig-zag, as Kafka's records
				require.Equal(t, int64(kr.Length), length, "record %d", i)
				raw = raw[n+int(length):]
				got := decoded{Offset: kb.FirstOffset + int64(kr.OffsetDelta), Timestamp: kb.FirstTimestamp + kr.TimestampDelta64,
					Key: kr.Key, Value: kr.Value}
				for _, h := range kr.Headers {
					got.Headers = append(got.Headers, batch.RecordHeader{Key: []byte(h.Key), Value: h.Value})
				}
				checkRecord(t, fmt.Sprint("record ", i), got, decoded{500 + int64(i), want[i].Timestamp, want[i].Key, want[i].Value, want[i].Headers})
			}
			require.Empty(t, raw, "%d bytes after the records", len(raw))
		})
	}
}
