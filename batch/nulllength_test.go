package batch

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kafka reads a key, value or header value whose length is any negative
// number as null (DefaultRecord.readFrom through Utils.readBytes), not only
// -1, and its broker stores such a record: every reader here does the
// same, uncompressed and compressed, in every one of its paths (the one-
// and two-byte varints of the quick paths, the five-byte ones of the
// general walk). A header key stays never null: a negative one is corrupt,
// as in Kafka.
func TestNegativeLengthsReadAsNull(t *testing.T) {
	tmpl := build(t, BuilderOptions{}, numbered(3, 1000)...)
	recs := [][]byte{
		rec(raw(0), vl(0), vi(0), vi(-2), vi(-1), vi(0)),                                    // key -2
		rec(raw(0), vl(1), vi(1), vi(1), raw('k'), vi(-64), vi(1), vi(1), raw('h'), vi(-3)), // value -64, header value -3
		rec(raw(0), vl(2), vi(2), vi(math.MinInt32), vi(-9000), vi(0)),                      // five-byte and two-byte lengths
	}
	var data []byte
	for _, r := range recs {
		data = append(data, r...)
	}
	plain := withRecords(tmpl, data)
	gz := withRecords(withHeader(tmpl, func(h []byte) {
		binary.BigEndian.PutUint16(h[attributesOffset:], uint16(Attributes(0).WithCompression(CompressionGzip)))
	}), mustCompress(t, CompressionGzip, data))
	one := withRecords(withHeader(tmpl, func(h []byte) {
		binary.BigEndian.PutUint32(h[recordsCountOffset:], 1)
		binary.BigEndian.PutUint32(h[lastOffsetDeltaOffset:], 0)
	}), recs[0])

	check := func(t *testing.T, got []Record) {
		t.Helper()
		require.Len(t, got, 3)
		assert.Nil(t, got[0].Key)
		assert.Nil(t, got[0].Value)
		assert.Equal(t, []byte("k"), got[1].Key)
		assert.Nil(t, got[1].Value)
		require.Len(t, got[1].Headers, 1)
		assert.Equal(t, []byte("h"), got[1].Headers[0].Key)
		assert.Nil(t, got[1].Headers[0].Value)
		assert.Nil(t, got[2].Key)
		assert.Nil(t, got[2].Value)
		for i, r := range got {
			assert.Equal(t, int64(i), r.Offset)
			assert.Equal(t, int64(1000+i), r.Timestamp)
		}
	}
	for name, b := range map[string]Batch{"plain": plain, "gzip": gz} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, b.Validate())
			var dec Decoder
			require.NoError(t, dec.Validate(b))
			tr, err := b.ValidateBody()
			require.NoError(t, err)
			assert.Equal(t, TimeRange{Min: 1000, Max: 1002}, tr)

			var got []Record
			it := b.Records(&dec)
			for {
				r, ok, err := it.Next()
				require.NoError(t, err)
				if !ok {
					break
				}
				r.Headers = append([]RecordHeader(nil), r.Headers...)
				got = append(got, r)
			}
			check(t, got)

			got = got[:0]
			for r, err := range b.All(&dec) {
				require.NoError(t, err)
				r.Headers = append([]RecordHeader(nil), r.Headers...)
				got = append(got, r)
			}
			check(t, got)
		})
	}
	t.Run("decode_run", func(t *testing.T) {
		set := append(append([]byte{}, one...), plain...)
		items := walkRuns(t, set, 4)
		require.Len(t, items, 4, "%+v", items)
		var got []Record
		for _, it := range items {
			require.Empty(t, it.err)
			got = append(got, it.rec)
		}
		assert.Nil(t, got[0].Key)
		assert.Nil(t, got[0].Value)
		check(t, got[1:])
	})
	t.Run("header_key_negative", func(t *testing.T) {
		bad := withRecords(one, rec(raw(0), vl(0), vi(0), vi(-1), vi(-1), vi(1), vi(-2), vi(-1)))
		ce := checkCorrupt(t, bad.Validate())
		assert.Equal(t, "record[0].header[0].keyLength", ce.Field)
		assert.Error(t, iterate(bad))
	})
}
