package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/legacy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkaGoSets are the records fields of the kafka-go fixtures (real broker
// Fetch v10 responses, see testdata/PROVENANCE.md): byte ranges, the
// upstream test's key letters in offset order, and the log end.
var kafkaGoSets = []struct {
	file       string
	start, end int
	letters    string
}{
	{"v1-v1.hex", 75, 362, "abcd"},
	{"v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex", 73, 1720, "ababcdcdefefghghghgh"},
	{"v1c-v1-v1c.hex", 77, 569, "abcdef"},
	{"v1c-v1c.hex", 76, 422, "abcd"},
	{"v2b-v1.hex", 77, 370, "abab"},
	{"v2bc-v1-v1c.hex", 76, 490, "abcdef"},
	{"v2bc-v1.hex", 76, 353, "abcd"},
	{"v2bc-v1c.hex", 77, 342, "abab"},
}

var letterKeys = map[byte]string{'a': "alpha", 'b': "beta", 'c': "gamma", 'd': "delta", 'e': "epsilon", 'f': "zeta", 'g': "eta", 'h': "theta"}

// Every record of the mixed magic 1 / magic 2 sets decodes, legacy ones
// through Legacy, with the offsets 0..n-1 and the upstream key order.
func TestLegacyKafkaGoFixtures(t *testing.T) {
	for _, tt := range kafkaGoSets {
		t.Run(strings.TrimSuffix(tt.file, ".hex"), func(t *testing.T) {
			set := readFixture(t, "kafka-go/fixtures/"+tt.file)[tt.start:tt.end]
			var keys []string
			next := int64(0)
			var d Decoder
			for len(set) > 0 {
				size, magic, entryNext, err := FrameEntry(set)
				require.NoError(t, err)
				if legacy.IsMagic(magic) {
					e, rest, err := legacy.Parse(set)
					require.NoError(t, err)
					require.Len(t, e, size)
					require.Equal(t, legacy.MagicV1, int(e.Magic()))
					require.NoError(t, e.ValidateHeader())
					require.NoError(t, d.ValidateLegacy(e))
					first, err := d.LegacyBaseOffset(e)
					require.NoError(t, err)
					require.Equal(t, next, first, "first offset of the entry")
					recs, err := d.AppendLegacyRecords(nil, e, true)
					require.NoError(t, err)
					for i, r := range recs {
						require.Equal(t, first+int64(i), r.Offset)
						require.Positive(t, r.Timestamp, "magic 1 messages carry a timestamp")
						keys = append(keys, string(r.Key))
						letter := r.Value[len(r.Value)-3]
						require.Equal(t, fmt.Sprintf(`{"count":0,"filler":"%s"}`, strings.Repeat(string(letter), 10)), string(r.Value))
					}
					require.Equal(t, e.Offset(), recs[len(recs)-1].Offset, "a wrapper carries its last inner offset")
					require.Equal(t, e.Offset()+1, entryNext)
					next, set = entryNext, rest
					continue
				}
				b, rest, err := Parse(set)
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				require.Equal(t, next, b.BaseOffset())
				for _, r := range decodeAll(t, b) {
					keys = append(keys, string(r.Key))
				}
				next, set = entryNext, rest
			}
			want := make([]string, len(tt.letters))
			for i := range tt.letters {
				want[i] = letterKeys[tt.letters[i]]
			}
			assert.Equal(t, want, keys)
			assert.Equal(t, int64(len(tt.letters)), next)
		})
	}
}

// legacyMessage encodes a legacy entry (for tests): magic 0 or 1.
func legacyMessage(offset int64, magic int8, attrs int8, ts int64, key, value []byte) []byte {
	var m []byte
	m = append(m, 0, 0, 0, 0, byte(magic), byte(attrs))
	if magic == legacy.MagicV1 {
		m = binary.BigEndian.AppendUint64(m, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			m = binary.BigEndian.AppendUint32(m, 0xffffffff)
			continue
		}
		m = binary.BigEndian.AppendUint32(m, uint32(len(f)))
		m = append(m, f...)
	}
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

// legacyWrapper gzips inner entries into a wrapper at offset.
func legacyWrapper(offset int64, magic int8, attrs int8, ts int64, inner ...[]byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	for _, in := range inner {
		_, _ = w.Write(in)
	}
	_ = w.Close()
	return legacyMessage(offset, magic, attrs|int8(CompressionGzip), ts, nil, buf.Bytes())
}

func TestLegacyDecode(t *testing.T) {
	var d Decoder
	t.Run("v0 plain has no timestamp", func(t *testing.T) {
		e := legacy.Entry(legacyMessage(7, legacy.MagicV0, 0, 0, []byte("k"), []byte("v")))
		require.NoError(t, d.ValidateLegacy(e))
		require.Equal(t, NoTimestamp, e.Timestamp())
		recs, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err)
		require.Equal(t, []Record{{Offset: 7, Timestamp: NoTimestamp, Key: []byte("k"), Value: []byte("v")}}, recs)
	})
	t.Run("v0 wrapper has absolute inner offsets", func(t *testing.T) {
		e := legacy.Entry(legacyWrapper(12, legacy.MagicV0, 0, 0,
			legacyMessage(10, legacy.MagicV0, 0, 0, nil, []byte("a")),
			legacyMessage(11, legacy.MagicV0, 0, 0, nil, nil),
			legacyMessage(12, legacy.MagicV0, 0, 0, []byte("k"), []byte("c"))))
		require.NoError(t, d.ValidateLegacy(e))
		first, err := d.LegacyBaseOffset(e)
		require.NoError(t, err)
		require.Equal(t, int64(10), first)
		recs, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err)
		require.Len(t, recs, 3)
		require.Nil(t, recs[1].Value, "a null value stays null")
		require.Equal(t, NoTimestamp, recs[2].Timestamp)
	})
	t.Run("v1 wrapper relative offsets and LogAppendTime", func(t *testing.T) {
		e := legacy.Entry(legacyWrapper(101, legacy.MagicV1, 0x08 /* LogAppendTime */, 5000,
			legacyMessage(0, legacy.MagicV1, 0, 10, nil, []byte("a")),
			legacyMessage(1, legacy.MagicV1, 0, 20, nil, []byte("b"))))
		require.NoError(t, d.ValidateLegacy(e))
		recs, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err)
		require.Equal(t, int64(100), recs[0].Offset)
		require.Equal(t, int64(101), recs[1].Offset)
		require.Equal(t, int64(5000), recs[0].Timestamp, "LogAppendTime: the wrapper's timestamp")
	})
	t.Run("v1 wrapper at offset 0 from an old client", func(t *testing.T) {
		e := legacy.Entry(legacyWrapper(0, legacy.MagicV1, 0, 20,
			legacyMessage(0, legacy.MagicV1, 0, 10, nil, []byte("a")),
			legacyMessage(1, legacy.MagicV1, 0, 20, nil, []byte("b"))))
		first, err := d.LegacyBaseOffset(e)
		require.NoError(t, err)
		require.Equal(t, int64(0), first)
	})
}

func TestLegacyMalformed(t *testing.T) {
	good := legacyMessage(3, legacy.MagicV1, 0, 1, []byte("k"), []byte("value"))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name      string
		b         []byte
		parse     bool // legacy.Parse fails
		truncated bool
		header    bool // ValidateHeader fails
		field     string
	}{
		{name: "short of the magic", b: good[:10], parse: true, truncated: true, field: "messageSize"},
		{name: "magic 2", b: mut(func(b []byte) []byte { b[16] = 2; return b }), parse: true, field: "magic"},
		{name: "size below the v1 overhead", b: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 21); return b }), parse: true, field: "messageSize"},
		{name: "negative size", b: mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0xfffffff0); return b }), parse: true, field: "messageSize"},
		{name: "cut short", b: good[:len(good)-1], parse: true, truncated: true, field: "messageSize"},
		{name: "crc", b: mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), header: true, field: "crc"},
		{name: "key length past the end", b: resum(mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[26:], 1000); return b })), field: "keyLength"},
		{name: "zstd codec", b: resum(mut(func(b []byte) []byte { b[17] = 4; return b })), field: "attributes"},
		{name: "gzip value that is not gzip", b: resum(mut(func(b []byte) []byte { b[17] = 1; return b })), field: "value"},
		{name: "wrapper with an inner wrapper", b: legacyWrapper(1, legacy.MagicV1, 0, 1, legacyWrapper(0, legacy.MagicV1, 0, 1, legacyMessage(0, legacy.MagicV1, 0, 1, nil, nil))), field: "inner[0]"},
		{name: "wrapper with a magic 0 message", b: legacyWrapper(0, legacy.MagicV1, 0, 1, legacyMessage(0, legacy.MagicV0, 0, 0, nil, nil)), field: "inner[0]"},
		{name: "wrapper offset below its inner offsets", b: legacyWrapper(1, legacy.MagicV1, 0, 1, legacyMessage(0, legacy.MagicV1, 0, 1, nil, nil), legacyMessage(5, legacy.MagicV1, 0, 1, nil, nil)), field: "offset"},
		{name: "v0 wrapper inner offsets not increasing", b: legacyWrapper(5, legacy.MagicV0, 0, 0, legacyMessage(5, legacy.MagicV0, 0, 0, nil, nil), legacyMessage(5, legacy.MagicV0, 0, 0, nil, nil)), field: "inner[1]"},
		{name: "empty wrapper", b: legacyWrapper(5, legacy.MagicV0, 0, 0), field: "value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// internal/legacy's errors name the field; batch's Decoder
			// returns them as a *CorruptionError.
			e, _, err := legacy.Parse(tt.b)
			if tt.parse {
				require.ErrorIs(t, err, ErrCorrupt)
				require.Equal(t, tt.truncated, isTruncated(err))
				requireField(t, located(err), tt.field)
				_, err = new(Decoder).AppendLegacyRecords(nil, tt.b, true)
				require.Equal(t, tt.truncated, isTruncated(err))
				requireField(t, err, tt.field)
				return
			}
			require.NoError(t, err)
			err = e.ValidateHeader()
			if tt.header {
				require.ErrorIs(t, err, ErrCorrupt)
				requireField(t, located(err), tt.field)
				requireField(t, new(Decoder).ValidateLegacy(e), tt.field)
				return
			}
			require.NoError(t, err)
			err = new(Decoder).ValidateLegacy(e)
			require.ErrorIs(t, err, ErrCorrupt)
			requireField(t, err, tt.field)
		})
	}
}

// resum recomputes the CRC of a legacy entry.
func resum(b []byte) []byte {
	binary.BigEndian.PutUint32(b[legacy.CRCOffset:], crc32.ChecksumIEEE(b[legacy.MagicOffset:]))
	return b
}

// FuzzLegacy checks the legacy decoder's invariants: it never panics;
// a framed entry is a prefix of the input whose size field says its
// length and whose re-parse gives the same entry; an entry that validates
// yields records in strictly increasing offsets, the last being the
// entry's offset (except an old client's wrapper at 0), each with a
// timestamp of -1 under magic 0; a CRC flip is always caught.
func FuzzLegacy(f *testing.F) {
	for _, tt := range kafkaGoSets {
		set := readFixture(f, "kafka-go/fixtures/"+tt.file)[tt.start:tt.end]
		for len(set) > 0 {
			size, _, _, err := FrameEntry(set)
			if err != nil {
				break
			}
			f.Add(set[:size])
			set = set[size:]
		}
	}
	f.Add(legacyMessage(7, legacy.MagicV0, 0, 0, []byte("k"), []byte("v")))
	f.Add(legacyWrapper(12, legacy.MagicV0, 0, 0, legacyMessage(11, legacy.MagicV0, 0, 0, nil, []byte("a")), legacyMessage(12, legacy.MagicV0, 0, 0, nil, nil)))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, rest, err := legacy.Parse(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, len(b), len(e)+len(rest))
		require.Equal(t, e.Size(), len(e))
		require.Equal(t, b[:len(e)], []byte(e))
		again, _, err := legacy.Parse(e)
		require.NoError(t, err)
		require.Equal(t, e, again)
		size, magic, next, err := FrameEntry(b)
		require.NoError(t, err)
		require.Equal(t, len(e), size)
		require.Equal(t, e.Magic(), magic)
		require.Equal(t, e.Offset()+1, next)
		if e.ValidateHeader() != nil {
			return
		}
		flipped := legacy.Entry(bytes.Clone(e))
		flipped[len(flipped)-1] ^= 0x40
		require.Error(t, flipped.ValidateHeader(), "a flipped bit escapes the CRC")
		var d Decoder
		d.MaxDecompressedSize = 1 << 20
		if d.ValidateLegacy(e) != nil {
			return
		}
		recs, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		for i, r := range recs {
			if i > 0 {
				require.Greater(t, r.Offset, recs[i-1].Offset)
			}
			if e.Magic() == legacy.MagicV0 {
				require.Equal(t, NoTimestamp, r.Timestamp)
			}
		}
		if e.Offset() != 0 {
			require.Equal(t, e.Offset(), recs[len(recs)-1].Offset)
		}
		first, err := d.LegacyBaseOffset(e)
		require.NoError(t, err)
		require.Equal(t, recs[0].Offset, first)
	})
}

// requireField checks that err is a *CorruptionError naming field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, field, ce.Field, "error: %v", err)
}

// TestLegacyConstantsMatch checks that internal/legacy, which sits below
// this package and cannot name its types, numbers codecs, the log
// overhead and the missing timestamp as this package does.
func TestLegacyConstantsMatch(t *testing.T) {
	assert.Equal(t, LogOverhead, legacy.LogOverhead)
	assert.Equal(t, int64(NoTimestamp), int64(legacy.NoTimestamp))
	assert.Equal(t, CompressionNone, Compression(legacy.CompressionNone))
	assert.Equal(t, CompressionLZ4, Compression(legacy.MaxCompression))
	assert.Equal(t, legacyPeekSize, legacy.MagicOffset+1)
}
