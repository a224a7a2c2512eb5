package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/legacy"
)

// legacyRec is a record of a legacy message to encode (for tests).
type legacyRec struct {
	key, value []byte
	ts         int64
}

// producerWrapper encodes recs as a compressed legacy wrapper the way
// Kafka's producer and broker write one: inner offsets relative from 0
// under magic 1 (absolute from base under magic 0), the wrapper at the
// last record's absolute offset with the largest inner timestamp (or,
// under LogAppendTime, appendTime), a null key, and under magic 0 an LZ4
// frame header checksum over the wrong bytes (KAFKA-3160).
func producerWrapper(t testing.TB, magic int8, c Compression, base int64, logAppendTime bool, appendTime int64, recs ...legacyRec) []byte {
	t.Helper()
	var set []byte
	maxTS := int64(NoTimestamp)
	for i, r := range recs {
		off := int64(i)
		if magic == legacy.MagicV0 {
			off += base
		}
		var err error
		set, err = legacy.AppendMessage(set, legacy.Message{Offset: off, Magic: magic, Timestamp: r.ts, Key: r.key, Value: r.value})
		require.NoError(t, err)
		maxTS = max(maxTS, r.ts)
	}
	attrs := int8(c)
	if logAppendTime {
		attrs |= 0x08
		maxTS = appendTime
	}
	value, err := appendCompressed(nil, c, 0, set)
	require.NoError(t, err)
	if c == CompressionLZ4 && magic == legacy.MagicV0 {
		require.NoError(t, legacy.SetLZ4HeaderChecksum(value, legacy.MagicV0))
	}
	e, err := legacy.AppendMessage(nil, legacy.Message{Offset: base + int64(len(recs)) - 1, Magic: magic, Attributes: attrs, Timestamp: maxTS, Value: value})
	require.NoError(t, err)
	return e
}

// legacyCodecs are the codecs Kafka writes legacy wrappers with.
var legacyCodecs = []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4}

// TestLegacyLZ4MagicV0KafkaHeader: a magic 0 LZ4 wrapper as Kafka writes
// it, with the frame header checksum over the magic number too
// (KAFKA-3160), decodes: Kafka's reader ignores that checksum under magic
// 0. The old decoder rejected it as a corrupt frame.
func TestLegacyLZ4MagicV0KafkaHeader(t *testing.T) {
	e := producerWrapper(t, legacy.MagicV0, CompressionLZ4, 40, false, 0,
		legacyRec{key: []byte("a"), value: []byte("1")}, legacyRec{key: []byte("b"), value: []byte("2")})
	_, value, err := legacy.Entry(e).KeyValue()
	require.NoError(t, err)
	// 0x184D2204, FLG 0x60 (version 1, independent blocks), BD 0x40 (64
	// KiB blocks), then HC: the frame format's is 0x82, Kafka's magic 0
	// one is computed over the six bytes before it.
	require.Equal(t, []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40}, value[:6])
	require.NotEqual(t, byte(0x82), value[6])
	ok, err := legacy.LZ4HeaderChecksumOK(value, legacy.MagicV0)
	require.NoError(t, err)
	require.True(t, ok)
	var d Decoder
	require.NoError(t, d.ValidateLegacy(e))
	recs, err := d.AppendLegacyRecords(nil, e, true)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, int64(40), recs[0].Offset)
	require.Equal(t, "2", string(recs[1].Value))
}

// TestAppendLegacyFiltered: a legacy entry of each magic and codec
// Kafka writes, filtered with every pattern of kept records, comes back
// as Kafka's cleaner writes it (MemoryRecords.filterTo): whole when every
// record stays, absent when none does, otherwise a wrapper of the same
// magic, codec and attributes holding exactly the records kept, at their
// original offsets, the wrapper at the last one's offset, its timestamp
// the largest kept (magic 1, CreateTime) or its own (LogAppendTime), a
// valid CRC-32 and, under LZ4, the frame header checksum Kafka writes for
// the magic.
func TestAppendLegacyFiltered(t *testing.T) {
	recs := []legacyRec{
		{key: []byte("a"), value: []byte("one"), ts: 1000},
		{key: []byte("b"), value: nil, ts: 3000},
		{key: nil, value: []byte("keyless"), ts: 2000},
		{key: []byte("a"), value: bytes.Repeat([]byte("z"), 100), ts: 1500},
	}
	var d Decoder
	for _, magic := range []int8{legacy.MagicV0, legacy.MagicV1} {
		for _, c := range legacyCodecs {
			for _, lat := range []bool{false, true} {
				if lat && magic == legacy.MagicV0 {
					continue // magic 0 has no timestamps
				}
				e := producerWrapper(t, magic, c, 100, lat, 9000, recs...)
				orig, err := d.AppendLegacyRecords(nil, e, true)
				require.NoError(t, err)
				orig = cloneRecords(orig)
				for mask := range 1 << len(recs) {
					t.Run(fmt.Sprintf("v%d/%s/lat=%v/%04b", magic, c, lat, mask), func(t *testing.T) {
						checkFiltered(t, &d, e, orig, func(i int) bool { return mask&(1<<i) != 0 })
					})
				}
			}
		}
		// A plain message is kept or dropped whole.
		plain, err := legacy.AppendMessage(nil, legacy.Message{Offset: 77, Magic: magic, Timestamp: 5, Key: []byte("k"), Value: []byte("v")})
		require.NoError(t, err)
		for _, keep := range []bool{false, true} {
			out, kept, removed, err := d.AppendLegacyFiltered([]byte("x"), plain, func(r Record) bool {
				require.Equal(t, int64(77), r.Offset)
				return keep
			})
			require.NoError(t, err)
			if keep {
				require.Equal(t, append([]byte("x"), plain...), out)
				require.Equal(t, [2]int{1, 0}, [2]int{kept, removed})
			} else {
				require.Equal(t, []byte("x"), out)
				require.Equal(t, [2]int{0, 1}, [2]int{kept, removed})
			}
		}
	}
}

// cloneRecords copies recs out of a decoder's buffer.
func cloneRecords(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		out[i] = r
	}
	return out
}

// checkFiltered filters the wrapper e (whose records are orig) keeping
// the records keep says, and checks the result as TestAppendLegacyFiltered
// describes.
func checkFiltered(t *testing.T, d *Decoder, e []byte, orig []Record, keep func(i int) bool) {
	t.Helper()
	i := 0
	var want []Record
	out, kept, removed, err := d.AppendLegacyFiltered([]byte("prefix"), e, func(r Record) bool {
		require.Less(t, i, len(orig))
		require.Equal(t, orig[i], cloneRecords([]Record{r})[0], "record %d as keep sees it", i)
		k := keep(i)
		if k {
			want = append(want, orig[i])
		}
		i++
		return k
	})
	require.NoError(t, err)
	require.Equal(t, len(orig), i, "keep saw every record once")
	require.Equal(t, len(want), kept)
	require.Equal(t, len(orig)-len(want), removed)
	require.Equal(t, "prefix", string(out[:6]))
	out = out[6:]
	switch len(want) {
	case 0:
		require.Empty(t, out)
		return
	case len(orig):
		require.Equal(t, e, out, "an entry that keeps everything is copied")
		return
	}
	src, got := legacy.Entry(e), legacy.Entry(out)
	require.NoError(t, d.ValidateLegacy(out))
	recs, err := d.AppendLegacyRecords(nil, out, true)
	require.NoError(t, err)
	require.Equal(t, want, cloneRecords(recs))
	require.Equal(t, src.Magic(), got.Magic())
	require.Equal(t, src.Attributes(), got.Attributes())
	require.Equal(t, want[len(want)-1].Offset, got.Offset(), "the wrapper sits at its last record's offset")
	k, v, err := got.KeyValue()
	require.NoError(t, err)
	require.Nil(t, k, "a wrapper's key is null")
	if got.Magic() == legacy.MagicV1 {
		wantTS := src.Timestamp()
		if !src.LogAppendTime() {
			wantTS = NoTimestamp
			for _, r := range want {
				wantTS = max(wantTS, r.Timestamp)
			}
		}
		require.Equal(t, wantTS, got.Timestamp())
	}
	if Compression(got.Compression()) == CompressionLZ4 {
		ok, err := legacy.LZ4HeaderChecksumOK(v, got.Magic())
		require.NoError(t, err)
		require.True(t, ok, "LZ4 header checksum is not Kafka's for magic %d", got.Magic())
	}
	// The inner messages: as the producer wrote them but for their
	// offsets, relative from 0 under magic 1, absolute under magic 0.
	set, _, err := d.legacyInnerSet(got)
	require.NoError(t, err)
	for j := 0; len(set) > 0; j++ {
		in, rest, err := legacy.Parse(set)
		require.NoError(t, err)
		require.NoError(t, in.ValidateHeader())
		wantOff := want[j].Offset
		if got.Magic() == legacy.MagicV1 {
			wantOff -= want[0].Offset
		}
		require.Equal(t, wantOff, in.Offset())
		set = rest
	}
}

// TestAppendLegacyFilteredFixtures filters the gzip magic 1 wrappers Kafka
// brokers wrote (the kafka-go fixtures, see TestLegacyKafkaGoFixtures)
// with every pattern of kept records.
func TestAppendLegacyFilteredFixtures(t *testing.T) {
	var d Decoder
	wrappers := 0
	for _, tt := range kafkaGoSets {
		set := readFixture(t, "kafka-go/fixtures/"+tt.file)[tt.start:tt.end]
		for len(set) > 0 {
			size, magic, _, err := frameEntry(set)
			require.NoError(t, err)
			e := set[:size]
			set = set[size:]
			if !legacy.IsMagic(magic) || legacy.Entry(e).Compression() == legacy.CompressionNone {
				continue
			}
			wrappers++
			orig, err := d.AppendLegacyRecords(nil, e, true)
			require.NoError(t, err)
			orig = cloneRecords(orig)
			for mask := range 1 << len(orig) {
				checkFiltered(t, &d, e, orig, func(i int) bool { return mask&(1<<i) != 0 })
			}
		}
	}
	require.Positive(t, wrappers)
}

// TestAppendLegacyFilteredCorrupt: an entry that does not decode is an
// error wrapping ErrCorrupt, and nothing is appended.
func TestAppendLegacyFilteredCorrupt(t *testing.T) {
	e := producerWrapper(t, legacy.MagicV1, CompressionGzip, 5, false, 0, legacyRec{key: []byte("a")}, legacyRec{key: []byte("b")})
	bad := bytes.Clone(e)
	bad[len(bad)-10] ^= 0xff
	resum(bad)
	var d Decoder
	out, _, _, err := d.AppendLegacyFiltered([]byte("x"), bad, func(Record) bool { return false })
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, "x", string(out))
	_, _, _, err = d.AppendLegacyFiltered(nil, e[:20], func(Record) bool { return true })
	require.ErrorIs(t, err, ErrCorrupt)
}

// FuzzAppendLegacyFiltered: for any records, magic, codec and pattern of
// kept records, decoding what AppendLegacyFiltered writes gives the
// records kept, at their offsets.
func FuzzAppendLegacyFiltered(f *testing.F) {
	f.Add(uint8(1), uint8(1), int64(10), uint16(0b0101), []byte("a\x00bb\x00\x00ccc"))
	f.Add(uint8(0), uint8(3), int64(0), uint16(0b10), []byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, magic, codec uint8, base int64, mask uint16, data []byte) {
		m := int8(magic % 2)
		c := legacyCodecs[int(codec)%len(legacyCodecs)]
		base %= 1 << 40
		if base < 0 {
			base = -base
		}
		// Records from data: fields split at zero bytes, a key byte of
		// 0xff meaning null.
		var recs []legacyRec
		for i, field := range bytes.Split(data, []byte{0}) {
			if len(recs) == 12 {
				break
			}
			r := legacyRec{value: field, ts: int64(i) * 7 % 5}
			if len(field) == 0 || field[0] != 0xff {
				r.key = []byte{byte('a' + i%3)}
			}
			recs = append(recs, r)
		}
		e := producerWrapper(t, m, c, base, false, 0, recs...)
		var d Decoder
		orig, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err)
		orig = cloneRecords(orig)
		checkFiltered(t, &d, e, orig, func(i int) bool { return mask&(1<<i) != 0 })
	})
}
