package batch

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fixtures are under testdata/kafka, with the provenance of every file in
// testdata/PROVENANCE.md. kafkajs files are JSON-serialised Node Buffers and
// kafka-go files are ASCII hex: both are decoded here, byte for byte.

const fixtureDir = "testdata/kafka"

func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	p := filepath.Join(fixtureDir, filepath.FromSlash(rel))
	raw, err := os.ReadFile(p)
	require.NoError(t, err, "read fixture")
	switch {
	case strings.HasSuffix(p, ".json"):
		var buf struct {
			Type string `json:"type"`
			Data []int  `json:"data"`
		}
		err := json.Unmarshal(raw, &buf)
		require.NoError(t, err, "%s: not a JSON Buffer: %v", rel, err)
		require.Equal(t, "Buffer", buf.Type, "%s: not a JSON Buffer: %v", rel, err)
		out := make([]byte, len(buf.Data))
		for i, v := range buf.Data {
			require.GreaterOrEqual(t, v, 0, "%s: byte %d = %d", rel, i, v)
			require.LessOrEqual(t, v, 255, "%s: byte %d = %d", rel, i, v)
			out[i] = byte(v)
		}
		return out
	case strings.HasSuffix(p, ".hex"):
		out, err := hex.DecodeString(strings.TrimSpace(string(raw)))
		require.NoError(t, err, "%s", rel)
		return out
	}
	return raw
}

// decoded is a record as the golden tests compare it.
type decoded struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

// decodeAll validates b and returns its records, deep-copied.
func decodeAll(t testing.TB, b Batch) []decoded {
	t.Helper()
	require.NoError(t, b.Validate(), "Validate")
	var dec Decoder
	var out []decoded
	for r, err := range b.All(&dec) {
		require.NoError(t, err, "record %d", len(out))
		d := decoded{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)}
		for _, h := range r.Headers {
			d.Headers = append(d.Headers, RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
		}
		out = append(out, d)
	}
	require.Len(t, out, int(b.RecordsCount()), "decoded %d records, header says %d", len(out), b.RecordsCount())
	return out
}

// clone copies p keeping nil apart from empty.
func clone(p []byte) []byte {
	if p == nil {
		return nil
	}
	return append([]byte{}, p...)
}

func hdrs(kv ...string) []RecordHeader {
	var h []RecordHeader
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, RecordHeader{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return h
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

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
		assert.Equal(t, string(want.Headers[i].Key), string(got.Headers[i].Key), "%s: header %d = %q=%q, want %q=%q", where, i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
		assert.True(t, sameBytes(got.Headers[i].Value, want.Headers[i].Value), "%s: header %d = %q=%q, want %q=%q", where, i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
	}
}

// mustParseOne parses a fixture holding exactly one batch.
func mustParseOne(t testing.TB, p []byte) Batch {
	t.Helper()
	b, rest, err := Parse(p)
	require.NoError(t, err, "Parse")
	require.Empty(t, rest, "Parse: %d bytes after the batch", len(rest))
	return b
}

func TestGoldenRskafka(t *testing.T) {
	const dir = "rskafka/extracted/record.rs/"
	x100 := bytes.Repeat([]byte("x"), 100)
	fooBar := hdrs("foo", "bar")
	tests := []struct {
		file  string
		codec Compression
		want  []decoded
	}{
		{"test_decode_fixture_nocompression.bin", CompressionNone,
			[]decoded{{0, 1641388919, []byte{}, []byte("hello kafka"), fooBar}}},
		{"test_decode_fixture_gzip.bin", CompressionGzip,
			[]decoded{{0, 1643105170535, x100, []byte("hello kafka"), fooBar}}},
		{"test_decode_fixture_lz4.bin", CompressionLZ4,
			[]decoded{{0, 1643649156900, x100, []byte("hello kafka"), fooBar}}},
		{"test_decode_fixture_snappy.bin", CompressionSnappy,
			[]decoded{{0, 1643735486034, x100, []byte("hello kafka"), fooBar}}},
		{"test_decode_fixture_zstd.bin", CompressionZstd,
			[]decoded{{0, 1643889882029, x100, []byte("hello kafka"), fooBar}}},
		{"test_decode_fixture_snappy_java.bin", CompressionSnappy, []decoded{
			{0, 1645092371121, x100, []byte("hello kafka"), fooBar},
			{1, 1645092371121, x100, []byte("some value"), fooBar},
		}},
		{"test_decode_fixture_null_key.bin", CompressionNone, nil}, // checked below
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(tt.file, "test_decode_fixture_"), ".bin"), func(t *testing.T) {
			b := mustParseOne(t, readFixture(t, dir+tt.file))
			h := b.Header()
			assert.Equal(t, int64(0), h.BaseOffset, "header = %+v", h)
			assert.Equal(t, int32(0), h.PartitionLeaderEpoch, "header = %+v", h)
			assert.Equal(t, int64(-1), h.ProducerID, "header = %+v", h)
			assert.Equal(t, int16(-1), h.ProducerEpoch, "header = %+v", h)
			assert.Equal(t, int32(-1), h.BaseSequence, "header = %+v", h)
			assert.False(t, h.Attributes.LogAppendTime(), "header = %+v", h)
			assert.False(t, h.Attributes.IsTransactional(), "header = %+v", h)
			assert.Equal(t, h.MaxTimestamp, h.BaseTimestamp, "header = %+v", h)
			assert.Equal(t, tt.codec, h.Attributes.Compression(), "header = %+v", h)
			got := decodeAll(t, b)
			if tt.want == nil { // null_key
				// SOURCES.md's "protobuf value of 101 bytes" is the inner
				// message: the value is a tag byte, a length byte (0x65 =
				// 101) and those 101 bytes.
				require.Len(t, got, 1, "null_key: %+v", got)
				require.Nil(t, got[0].Key, "null_key: %+v", got)
				require.Len(t, got[0].Value, 103, "null_key: %+v", got)
				require.Equal(t, byte(101), got[0].Value[1], "null_key: %+v", got)
				require.Equal(t, int64(1643879633398), got[0].Timestamp, "null_key: %+v", got)
				want := hdrs("content-type", `application/x-protobuf; schema="influxdata.iox.write_buffer.v1.WriteBufferPayload"`,
					"iox-namespace", "namespace")
				checkRecord(t, "null_key", got[0], decoded{0, 1643879633398, nil, got[0].Value, want})
				return
			}
			require.Len(t, got, len(tt.want), "%d records, want %d", len(got), len(tt.want))
			for i := range got {
				checkRecord(t, fmt.Sprint("record ", i), got[i], tt.want[i])
			}
			if tt.file == "test_decode_fixture_snappy_java.bin" {
				assert.True(t, isXerial(b[HeaderSize:]), "want xerial framing and lastOffsetDelta 1")
				assert.Equal(t, int32(1), b.LastOffsetDelta(), "want xerial framing and lastOffsetDelta 1")
			}
			if tt.file == "test_decode_fixture_snappy.bin" {
				assert.False(t, isXerial(b[HeaderSize:]), "want a raw snappy block")
			}
		})
	}
}

// The librdkafka batch without compression re-encodes to identical bytes.
func TestGoldenReencodeNoCompression(t *testing.T) {
	orig := readFixture(t, "rskafka/extracted/record.rs/test_decode_fixture_nocompression.bin")
	b := mustParseOne(t, orig)
	got := reencode(t, b, BuilderOptions{})
	require.Equal(t, string(orig), string(got), "re-encoded:\n%x\nwant:\n%x", got, orig)
}

// reencode decodes b and builds it again with b's header fields; opts
// supplies the codec.
func reencode(t testing.TB, b Batch, opts BuilderOptions) Batch {
	t.Helper()
	opts.BaseOffset = b.BaseOffset()
	opts.PartitionLeaderEpoch = b.PartitionLeaderEpoch()
	a := b.Attributes()
	opts.Transactional = a.IsTransactional()
	opts.LogAppendTime = a.LogAppendTime()
	opts.AppendTime = b.MaxTimestamp()
	if b.ProducerID() != NoProducerID || b.ProducerEpoch() != NoProducerEpoch || b.BaseSequence() != NoSequence {
		opts.Producer = &Producer{ID: b.ProducerID(), Epoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence()}
	}
	bld := NewBuilder(opts)
	var dec Decoder
	it := b.Records(&dec)
	for {
		r, ok, err := it.Next()
		require.NoError(t, err)
		if !ok {
			break
		}
		require.NoError(t, bld.AddAt(r))
	}
	require.NoError(t, bld.SetLastOffsetDelta(b.LastOffsetDelta()))
	out, err := bld.Build()
	require.NoError(t, err)
	return out
}

// recordLength returns the length varint of the first record of b.
func recordLength(t testing.TB, b Batch) int32 {
	var dec Decoder
	data, err := dec.decompress(b)
	require.NoError(t, err)
	c := cursor{b: data}
	n := c.varint("length")
	require.False(t, c.failed, "bad record length")
	return n
}

// xerialChunks counts the chunks of a xerial snappy payload.
func xerialChunks(p []byte) int {
	n := 0
	for pos := xerialHeaderSize; pos+4 <= len(p); n++ {
		pos += 4 + int(binary.BigEndian.Uint32(p[pos:]))
	}
	return n
}

func TestGoldenTansu(t *testing.T) {
	const dir = "tansu/extracted/"
	lorem := func(t *testing.T, r decoded) {
		assert.Nil(t, r.Key, "want a null key and a 445-byte Lorem ipsum value, got %q / %d bytes", r.Key, len(r.Value))
		assert.Len(t, r.Value, 445, "want a null key and a 445-byte Lorem ipsum value, got %q / %d bytes", r.Key, len(r.Value))
		assert.True(t, bytes.HasPrefix(r.Value, []byte("Lorem ipsum")), "want a null key and a 445-byte Lorem ipsum value, got %q / %d bytes", r.Key, len(r.Value))
	}
	kv := func(pairs ...string) []decoded {
		var d []decoded
		for i := 0; i+1 < len(pairs); i += 2 {
			d = append(d, decoded{Offset: int64(i / 2), Key: []byte(pairs[i]), Value: []byte(pairs[i+1])})
		}
		return d
	}
	compaction := kv("k1", "v1", "k2", "v2", "k1", "v3", "k1", "v4", "k3", "v5", "k2", "v6", "k4", "v7",
		"k5", "v8", "k5", "v9", "k2", "v10", "k6", "v11")

	t.Run("produce_request_v10_002_xerial", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v10_002.bin"))
		assert.Equal(t, uint32(137053011), b.CRC(), "crc %d length %d record length %d", b.CRC(), b.length(), recordLength(t, b))
		assert.Equal(t, int32(502), b.length(), "crc %d length %d record length %d", b.CRC(), b.length(), recordLength(t, b))
		assert.Equal(t, int32(452), recordLength(t, b), "crc %d length %d record length %d", b.CRC(), b.length(), recordLength(t, b))
		assert.True(t, isXerial(b[HeaderSize:]), "want xerial snappy")
		assert.Equal(t, CompressionSnappy, b.Attributes().Compression(), "want xerial snappy")
		assert.Equal(t, int64(1), b.ProducerID(), "producer %d/%d/%d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		assert.Equal(t, int16(0), b.ProducerEpoch(), "producer %d/%d/%d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		assert.Equal(t, int32(0), b.BaseSequence(), "producer %d/%d/%d", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		got := decodeAll(t, b)
		require.Len(t, got, 1, "%d records", len(got))
		lorem(t, got[0])
	})
	t.Run("produce_request_v10_003_raw_snappy", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v10_003.bin"))
		assert.False(t, isXerial(b[HeaderSize:]), "want raw snappy, pid -1, PLE 0: %+v", b.Header())
		assert.Equal(t, CompressionSnappy, b.Attributes().Compression(), "want raw snappy, pid -1, PLE 0: %+v", b.Header())
		assert.Equal(t, int64(-1), b.ProducerID(), "want raw snappy, pid -1, PLE 0: %+v", b.Header())
		assert.Equal(t, int32(0), b.PartitionLeaderEpoch(), "want raw snappy, pid -1, PLE 0: %+v", b.Header())
		got := decodeAll(t, b)
		require.Len(t, got, 1, "%d records", len(got))
		lorem(t, got[0])
	})
	t.Run("produce_request_v10_001", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v10_001.bin"))
		got := decodeAll(t, b)
		want := kv("qwerty", "poiuy", "asdfgh", "lkjhg", "jkljkl", "iuiui", "qwerty", "ytrrrwqee",
			"qwrrrtiip", "jkljkljklkjkjklkjljlkjljkljlkjj")
		require.Len(t, got, len(want), "%d records, pid %d seq %d", len(got), b.ProducerID(), b.BaseSequence())
		require.Equal(t, int64(1), b.ProducerID(), "%d records, pid %d seq %d", len(got), b.ProducerID(), b.BaseSequence())
		require.Equal(t, int32(0), b.BaseSequence(), "%d records, pid %d seq %d", len(got), b.ProducerID(), b.BaseSequence())
		for i := range got {
			want[i].Timestamp = 1721978771334
			if i > 0 {
				want[i].Timestamp += 8
			}
			assert.Len(t, got[i].Headers, 3, "record %d headers %q", i, got[i].Headers)
			assert.Equal(t, "h1", string(got[i].Headers[0].Key), "record %d headers %q", i, got[i].Headers)
			assert.Equal(t, "h2", string(got[i].Headers[1].Key), "record %d headers %q", i, got[i].Headers)
			assert.Equal(t, "h3", string(got[i].Headers[2].Key), "record %d headers %q", i, got[i].Headers)
			want[i].Headers = got[i].Headers
			checkRecord(t, fmt.Sprint("record ", i), got[i], want[i])
		}
	})
	t.Run("produce_request_v10_000", func(t *testing.T) {
		got := decodeAll(t, mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v10_000.bin")))
		require.Len(t, got, 1, "%d records", len(got))
		want := decoded{0, got[0].Timestamp, []byte("qwerty"), []byte("poiuy"), hdrs("h1", "pqr", "h2", "jkl", "h3", "uio")}
		checkRecord(t, "record 0", got[0], want)
	})
	t.Run("produce_request_v7_000", func(t *testing.T) {
		got := decodeAll(t, mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v7_000.bin")))
		require.Len(t, got, 1, "%d records", len(got))
		want := decoded{0, got[0].Timestamp, []byte("Key 0"), []byte("Message 0"), hdrs("header_key", "header_value")}
		checkRecord(t, "record 0", got[0], want)
	})
	t.Run("produce_request_v3_000", func(t *testing.T) {
		got := decodeAll(t, mustParseOne(t, readFixture(t, dir+"decode.rs/produce_request_v3_000.bin")))
		require.Len(t, got, 5, "%d records", len(got))
		for i, r := range got {
			checkRecord(t, fmt.Sprint("record ", i), r, decoded{int64(i), r.Timestamp, []byte{}, []byte("0123456789"), nil})
		}
	})
	for _, name := range []string{"produce_request_v9_001", "fetch_response_v12_002"} {
		t.Run(name, func(t *testing.T) {
			b := mustParseOne(t, readFixture(t, dir+"decode.rs/"+name+".bin"))
			got := decodeAll(t, b)
			require.Len(t, got, len(compaction), "%d records, pid %d", len(got), b.ProducerID())
			require.Equal(t, int64(1), b.ProducerID(), "%d records, pid %d", len(got), b.ProducerID())
			for i := range got {
				want := compaction[i]
				want.Timestamp = got[i].Timestamp
				checkRecord(t, fmt.Sprint("record ", i), got[i], want)
			}
		})
	}
	t.Run("fetch_response_v16_001", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"decode.rs/fetch_response_v16_001.bin"))
		got := decodeAll(t, b)
		require.Len(t, got, 1, "%d records, PLE %d", len(got), b.PartitionLeaderEpoch())
		require.Equal(t, int32(-1), b.PartitionLeaderEpoch(), "%d records, PLE %d", len(got), b.PartitionLeaderEpoch())
		checkRecord(t, "record 0", got[0], decoded{0, got[0].Timestamp, nil, []byte("poiuy"), nil})
	})
	for _, tt := range []struct {
		name           string
		recLen, valLen int
		chunks         int
	}{
		{"batch_of_100", 7123, 7116, 1},
		{"batch_of_500", 26836, 26828, 1},
		{"batch_of_1_000", 51436, 51428, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParseOne(t, readFixture(t, dir+"snappy.rs/"+tt.name+".bin"))
			assert.True(t, isXerial(b[HeaderSize:]), "want xerial with %d chunks, got %d", tt.chunks, xerialChunks(b[HeaderSize:]))
			assert.Equal(t, tt.chunks, xerialChunks(b[HeaderSize:]), "want xerial with %d chunks, got %d", tt.chunks, xerialChunks(b[HeaderSize:]))
			n := recordLength(t, b)
			assert.Equal(t, tt.recLen, int(n), "record length %d, want %d", n, tt.recLen)
			got := decodeAll(t, b)
			require.Len(t, got, 1, "%d records, value %d bytes", len(got), len(got[0].Value))
			require.Len(t, got[0].Value, tt.valLen, "%d records, value %d bytes", len(got), len(got[0].Value))
		})
	}
}

func TestGoldenSarama(t *testing.T) {
	const dir = "sarama/extracted/record_test.go/"
	t.Run("empty_record", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"empty_record.bin"))
		assert.Equal(t, uint32(0x595fb7dd), b.CRC(), "crc %#x count %d", b.CRC(), b.RecordsCount())
		assert.Equal(t, int32(0), b.RecordsCount(), "crc %#x count %d", b.CRC(), b.RecordsCount())
		got := decodeAll(t, b)
		assert.Empty(t, got, "%d records", len(got))
	})
	t.Run("control_batch", func(t *testing.T) {
		b := mustParseOne(t, readFixture(t, dir+"control_batch.bin"))
		assert.Equal(t, controlBit, b.Attributes(), "attributes %v count %d", b.Attributes(), b.RecordsCount())
		assert.Equal(t, int32(0), b.RecordsCount(), "attributes %v count %d", b.Attributes(), b.RecordsCount())
		got := decodeAll(t, b)
		assert.Empty(t, got, "%d records", len(got))
	})
	for _, tt := range []struct {
		file  string
		codec Compression
	}{
		{"uncompressed_record.bin", CompressionNone},
		{"gzipped_record.bin", CompressionGzip},
		{"snappy_compressed_record.bin", CompressionSnappy},
		{"lz4_compressed_record.bin", CompressionLZ4},
	} {
		t.Run(strings.TrimSuffix(tt.file, ".bin"), func(t *testing.T) {
			b := mustParseOne(t, readFixture(t, dir+tt.file))
			assert.Equal(t, tt.codec, b.Attributes().Compression(), "header %+v", b.Header())
			assert.Equal(t, int64(0), b.MaxTimestamp(), "header %+v", b.Header())
			assert.Equal(t, int64(0), b.ProducerID(), "header %+v", b.Header())
			assert.Equal(t, int64(1479847795000), b.BaseTimestamp(), "header %+v", b.Header())
			if tt.codec == CompressionSnappy {
				assert.True(t, isXerial(b[HeaderSize:]), "want xerial framing")
			}
			got := decodeAll(t, b)
			require.Len(t, got, 1, "%d records", len(got))
			want := decoded{0, 1479847795005, []byte{1, 2, 3, 4}, []byte{5, 6, 7},
				[]RecordHeader{{Key: []byte{8, 9, 10}, Value: []byte{11, 12}}}}
			checkRecord(t, "record 0", got[0], want)
		})
	}
}

// kjsBatch says where a v2 batch starts in a kafkajs fixture and what it
// holds.
type kjsBatch struct {
	at          int
	base, last  int64
	codec       Compression
	n           int
	key, value  string
	headers     []RecordHeader
	firstTS     int64 // 0: not checked
	logAppend   bool
	leaderEpoch int32
}

func TestGoldenKafkaJS(t *testing.T) {
	const fetch = "kafkajs/src/protocol/requests/fetch/fixtures/"
	scala := []kjsBatch{}
	for i, ts := range []int64{1539644731680, 1539644732194, 1539644732699, 1539644733203, 1539644733708, 1539644734213} {
		scala = append(scala, kjsBatch{at: 91 + 107*i, base: int64(i), last: int64(i), n: 1,
			key: fmt.Sprintf("KEY-%d", i+1), value: fmt.Sprintf("VALUE-Lorem ipsum dolor sit amet-%d", i+1), firstTS: ts})
	}
	tests := []struct {
		file    string
		batches []kjsBatch
	}{
		{"kafkajs/src/protocol/recordBatch/fixtures/v0_recordbatch.json", []kjsBatch{{at: 0, base: 0, last: 0,
			codec: CompressionGzip, n: 1, key: "key-0", value: "value-0-2020-08-14T17:13:08.682Z",
			firstTS: 1597425188809 /* LogAppendTime: maxTimestamp */, logAppend: true}}},
		{fetch + "v11_response.json", []kjsBatch{{at: 135, base: 0, last: 2, n: 3, key: "key-0", value: "some-value-0",
			headers: hdrs("header-key-0", "header-value-0")}}},
		{fetch + "v4_response.json", []kjsBatch{{at: 75, base: 0, last: 2, n: 3, key: "key-0", value: "some-value-0",
			headers: hdrs("header-key-0", "header-value-0"), firstTS: 1509827900073}}},
		{fetch + "v4_from_scala_producer_response.json", scala},
		{fetch + "v4_response_gzip.json", []kjsBatch{
			{at: 75, base: 0, last: 2, codec: CompressionGzip, n: 3, key: "key-0", value: "some-value-0"},
			{at: 199, base: 3, last: 5, codec: CompressionGzip, n: 3, key: "key-1", value: "some-value-1"},
		}},
		{fetch + "v4_response_mixed_formats.json", []kjsBatch{
			{at: 120569, base: 1611, last: 1847, n: 237, key: "key-814", value: "value-814-2019-01-17T12:30:24.805Z"},
			{at: 132145, base: 1848, last: 1912, n: 65, key: "key-37", value: "value-37-2019-01-17T12:30:27.808Z"},
			{at: 135303, base: 1913, last: 2424, n: 512, key: "key-12", value: "value-12-2019-01-17T12:30:30.811Z"},
		}},
		{fetch + "v4_response_snappy.json", []kjsBatch{{at: 54, base: 0, last: 0, codec: CompressionSnappy, n: 1,
			key: "key-149", value: "value-149-2019-02-04T15:13:48.187Z"}}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(filepath.Base(tt.file), ".json"), func(t *testing.T) {
			data := readFixture(t, tt.file)
			for _, w := range tt.batches {
				b, _, err := Parse(data[w.at:])
				require.NoError(t, err, "@%d", w.at)
				assert.Equal(t, w.base, b.BaseOffset(), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, w.last, b.LastOffset(), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, w.codec, b.Attributes().Compression(), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, w.n, int(b.RecordsCount()), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, w.logAppend, b.Attributes().LogAppendTime(), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, w.leaderEpoch, b.PartitionLeaderEpoch(), "@%d: header %+v", w.at, b.Header())
				assert.Equal(t, int64(-1), b.ProducerID(), "@%d: header %+v", w.at, b.Header())
				got := decodeAll(t, b)
				checkRecord(t, fmt.Sprint("@", w.at), got[0], decoded{w.base, got[0].Timestamp, []byte(w.key), []byte(w.value), w.headers})
				if w.firstTS != 0 {
					assert.Equal(t, w.firstTS, got[0].Timestamp, "@%d: first timestamp %d, want %d", w.at, got[0].Timestamp, w.firstTS)
				}
				for i, r := range got {
					assert.Equal(t, w.base+int64(i), r.Offset, "@%d record %d: offset %d", w.at, i, r.Offset)
					if w.logAppend {
						assert.Equal(t, b.MaxTimestamp(), r.Timestamp, "@%d: LogAppendTime record timestamp %d, want maxTimestamp %d", w.at, r.Timestamp, b.MaxTimestamp())
					}
				}
				if strings.Contains(tt.file, "v11") || strings.Contains(tt.file, "v4_response.json") {
					for i, r := range got {
						want := decoded{int64(i), r.Timestamp, fmt.Appendf(nil, "key-%d", i), fmt.Appendf(nil, "some-value-%d", i),
							hdrs(fmt.Sprintf("header-key-%d", i), fmt.Sprintf("header-value-%d", i))}
						checkRecord(t, fmt.Sprint("record ", i), r, want)
					}
				}
			}
		})
	}
	// The v0_recordbatch header fields SOURCES.md states.
	b := mustParseOne(t, readFixture(t, "kafkajs/src/protocol/recordBatch/fixtures/v0_recordbatch.json"))
	assert.Equal(t, int64(1597425188775), b.BaseTimestamp(), "v0_recordbatch header %+v", b.Header())
	assert.Equal(t, int64(1597425188809), b.MaxTimestamp(), "v0_recordbatch header %+v", b.Header())
	assert.Equal(t, int16(0), b.ProducerEpoch(), "v0_recordbatch header %+v", b.Header())
	assert.Equal(t, int32(0), b.BaseSequence(), "v0_recordbatch header %+v", b.Header())
	// Magic 1 messages come before the v2 batches in the mixed-format
	// response, each one rejected with ErrUnsupportedMagic.
	mixed := readFixture(t, fetch+"v4_response_mixed_formats.json")
	// not at an entry boundary: any error will do, but never a batch
	_, _, err := Parse(mixed[120569-1024:])
	assert.Error(t, err, "Parse inside legacy messages succeeded")
}

// The suspect kafkajs batch says "no compression" over a zstd payload: the
// CRC is right but the records are not records.
func TestGoldenKafkaJSSuspectZstd(t *testing.T) {
	b := mustParseOne(t, readFixture(t, "kafkajs/src/protocol/recordBatch/fixtures/v0_recordbatch_zstd.json"))
	err := b.ValidateHeader()
	require.NoError(t, err, "ValidateHeader: %v (the CRC is right)", err)
	err = b.Validate()
	require.ErrorIs(t, err, ErrCorrupt, "Validate = %v, want ErrCorrupt", err)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "want a CorruptionError naming a record field, got %#v", err)
	require.NotEqual(t, "", ce.Field, "want a CorruptionError naming a record field, got %#v", err)
	require.GreaterOrEqual(t, ce.Pos, int64(HeaderSize), "want a CorruptionError naming a record field, got %#v", err)
	t.Logf("rejected: %v", err)
	it := b.Records(nil)
	for {
		_, ok, err := it.Next()
		if err != nil {
			break
		}
		require.True(t, ok, "iteration ended without an error")
	}
}

// kafkaGoFixture is a kafka-go Fetch v10 response: where its records field
// lies and the entries in it.
type kafkaGoFixture struct {
	file       string
	start, end int
	entries    string // v1 = a legacy message, v2 = a batch: "v1 v1 v2:4-4:0:1"
	letters    string // the upstream test's key sequence
}

func TestGoldenKafkaGo(t *testing.T) {
	tests := []kafkaGoFixture{
		{"v1-v1.hex", 75, 362, "v1 v1 v1 v1", "abcd"},
		{"v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex", 73, 1720,
			"v1 v1 v1 v1 v2:4-4:0:1 v2:5-5:0:1 v2:6-6:1:1 v2:7-7:1:1 v2:8-9:0:2 v2:10-11:1:2 v2:12-13:0:2 v2:14-15:1:2 v1 v1 v1",
			"ababcdcdefefghghghgh"},
		{"v1c-v1-v1c.hex", 77, 569, "v1 v1 v1 v1 v1", "abcdef"},
		{"v1c-v1c.hex", 76, 422, "v1 v1 v1", "abcd"},
		{"v2-v2.hex", 76, 378, "v2:0-1:0:2 v2:2-3:0:2", "abcd"},
		{"v2b-v1.hex", 77, 370, "v2:0-1:0:2 v1 v1", "abab"},
		{"v2bc-v1-v1c.hex", 76, 490, "v2:0-1:1:2 v1 v1 v1", "abcdef"},
		{"v2bc-v1.hex", 76, 353, "v2:0-1:1:2 v1 v1", "abcd"},
		{"v2bc-v1c.hex", 77, 342, "v2:0-1:1:2 v1", "abab"},
		{"v2c-v2-v2c.hex", 76, 498, "v2:0-1:1:2 v2:2-3:0:2 v2:4-5:1:2", "abcdef"},
		{"v2c-v2c.hex", 78, 346, "v2:0-1:1:2 v2:2-3:1:2", "abcd"},
	}
	names := map[byte]string{'a': "alpha", 'b': "beta", 'c': "gamma", 'd': "delta", 'e': "epsilon", 'f': "zeta", 'g': "eta", 'h': "theta"}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".hex"), func(t *testing.T) {
			data := readFixture(t, "kafka-go/fixtures/"+tt.file)
			set := data[tt.start:tt.end]
			var keys []string
			for i, e := range strings.Fields(tt.entries) {
				require.GreaterOrEqual(t, len(set), LogOverhead+5, "entry %d: %d bytes left", i, len(set))
				size := LogOverhead + int(binary.BigEndian.Uint32(set[batchLengthOffset:]))
				b, rest, err := Parse(set)
				if e == "v1" {
					require.ErrorIs(t, err, ErrUnsupportedMagic, "entry %d (magic %d): Parse = %v, want ErrUnsupportedMagic", i, set[magicOffset], err)
					require.ErrorIs(t, err, ErrCorrupt, "entry %d (magic %d): Parse = %v, want ErrUnsupportedMagic", i, set[magicOffset], err)
					require.Nil(t, b, "entry %d (magic %d): Parse = %v, want ErrUnsupportedMagic", i, set[magicOffset], err)
					m := set[magicOffset]
					if m != 0 {
						require.Equal(t, byte(1), m, "entry %d: magic %d", i, m)
					}
					set = set[size:]
					continue
				}
				require.NoError(t, err, "entry %d", i)
				var base, last int64
				var codec Compression
				var n int
				_, err = fmt.Sscanf(e, "v2:%d-%d:%d:%d", &base, &last, &codec, &n)
				require.NoError(t, err)
				assert.Equal(t, base, b.BaseOffset(), "entry %d: header %+v, want %s", i, b.Header(), e)
				assert.Equal(t, last, b.LastOffset(), "entry %d: header %+v, want %s", i, b.Header(), e)
				assert.Equal(t, codec, b.Attributes().Compression(), "entry %d: header %+v, want %s", i, b.Header(), e)
				assert.Equal(t, n, int(b.RecordsCount()), "entry %d: header %+v, want %s", i, b.Header(), e)
				for j, r := range decodeAll(t, b) {
					assert.Equal(t, base+int64(j), r.Offset, "entry %d record %d: offset %d", i, j, r.Offset)
					keys = append(keys, string(r.Key))
					letter := r.Value[len(r.Value)-3]
					want := fmt.Sprintf(`{"count":0,"filler":"%s"}`, strings.Repeat(string(letter), 10))
					assert.Equal(t, want, string(r.Value), "entry %d record %d: %s=%s", i, j, r.Key, r.Value)
					assert.Equal(t, string(r.Key), names[letter], "entry %d record %d: %s=%s", i, j, r.Key, r.Value)
				}
				set = rest
			}
			assert.Empty(t, set, "%d bytes after the last entry", len(set))
			// The v2 keys are a subsequence of the upstream sequence.
			seq := tt.letters
			for _, k := range keys {
				found := false
				for len(seq) > 0 {
					l := seq[0]
					seq = seq[1:]
					if names[l] == k {
						found = true
						break
					}
				}
				assert.True(t, found, "key %s out of the upstream order %s", k, tt.letters)
			}
		})
	}
}

// Segments written by real brokers (Kafka 2.7.1 and 2.1): every batch
// validates and decodes; compaction left gaps and tombstones.
func TestGoldenBrokerLogs(t *testing.T) {
	tests := []struct {
		file  string
		bases []int64
		tombs []int64 // offsets of tombstones (null values)
	}{
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000000.log", []int64{0}, nil},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-17/00000000000000000001.log", []int64{1, 2}, []int64{2}},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-28/00000000000000000000.log", []int64{1}, nil},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-28/00000000000000000002.log", []int64{2}, []int64{2}},
		// Offset 4 is a group-metadata tombstone the cleaner keeps.
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-39/00000000000000000000.log", []int64{4, 16, 17}, []int64{4}},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-39/00000000000000000018.log", []int64{18}, []int64{18, 19}},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-8/00000000000000000000.log", []int64{0, 1, 2}, []int64{2}},
		{"kafka-2.7.1/kafka-logs/__consumer_offsets-33/00000000000000000000.log", []int64{0, 1, 2}, []int64{2}},
		{"kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000000.log", []int64{56, 57}, nil},
		{"kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000058.log", []int64{58}, []int64{58, 59}},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(tt.file, "kafka-"), "/", "_"), func(t *testing.T) {
			set := readFixture(t, tt.file)
			var bases, tombs []int64
			for len(set) > 0 {
				b, rest, err := Parse(set)
				require.NoError(t, err, "batch %d", len(bases))
				bases = append(bases, b.BaseOffset())
				for _, r := range decodeAll(t, b) {
					assert.NotNil(t, r.Key, "offset %d: null key in __consumer_offsets", r.Offset)
					if r.Value == nil {
						tombs = append(tombs, r.Offset)
					}
				}
				set = rest
			}
			assert.Equal(t, fmt.Sprint(tt.bases), fmt.Sprint(bases), "batch bases %v, want %v", bases, tt.bases)
			assert.Equal(t, fmt.Sprint(tt.tombs), fmt.Sprint(tombs), "tombstones at %v, want %v", tombs, tt.tombs)
		})
	}
}
