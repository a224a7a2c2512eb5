package batch

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"
)

// referenceRecords encodes recs, added at the offset deltas deltas, with
// the general encoder (recordBodySize and appendRecord) alone: the bytes
// the Builder must produce whichever of its paths a record takes.
func referenceRecords(t require.TestingT, opts BuilderOptions, recs []Record, deltas []int32) []byte {
	var out []byte
	baseTS := opts.DeleteHorizon
	for i := range recs {
		r := &recs[i]
		if i == 0 && opts.DeleteHorizon <= 0 {
			baseTS = r.Timestamp
		}
		n, err := recordBodySize(r, deltas[i], r.Timestamp-baseTS)
		require.NoError(t, err)
		out = appendRecord(out, r, n, deltas[i], r.Timestamp-baseTS)
	}
	return out
}

// addAll adds recs at deltas (AddAt) to a new Builder and returns it.
// Every record, the first included, must take the one-pass encoding
// exactly when it is short (no headers, a timestamp within 8192 ms of the
// base, which the first record sets unless a delete horizon does, an
// offset delta below 8192, key and value together under shortMaxData
// bytes), and addSlow otherwise.
func addAll(t require.TestingT, opts BuilderOptions, recs []Record, deltas []int32) *Builder {
	bld := NewBuilder(opts)
	addRecords(t, bld, recs, deltas)
	return bld
}

// addRecords is addAll into a Builder just Reset.
func addRecords(t require.TestingT, bld *Builder, recs []Record, deltas []int32) {
	for i := range recs {
		r := recs[i]
		r.Offset = bld.opts.BaseOffset + int64(deltas[i])
		base := bld.baseTimestamp
		if i == 0 && bld.opts.DeleteHorizon <= 0 {
			base = r.Timestamp
		}
		tsd := r.Timestamp - base
		short := len(r.Headers) == 0 && tsd >= -8192 && tsd < 8192 && deltas[i] < 8192 &&
			len(r.Key)+len(r.Value) < shortMaxData
		slow := bld.slowAdds
		require.NoError(t, bld.AddAt(r))
		require.Equal(t, short, bld.slowAdds == slow, "record %d: one-pass encoding taken", i)
	}
}

// TestBuilderShortRecords: the Builder's one-pass encoding of short
// records (no headers, every varint one or two bytes) writes exactly the
// bytes of the general encoder, at every edge of that shape: lengths of
// one and two bytes, key and value at the size limit and one past it,
// timestamp and offset deltas at ±8192, nil and empty keys and values,
// any attribute byte, a buffer that must grow. The batch validates and
// decodes to its records.
func TestBuilderShortRecords(t *testing.T) {
	const base = int64(1_700_000_000_000)
	v := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	seq := func(n int) []int32 {
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(i)
		}
		return d
	}
	tests := []struct {
		name   string
		recs   []Record
		deltas []int32 // nil: 0, 1, 2, ...
	}{
		{"nil key and value", []Record{{Timestamp: base}, {Timestamp: base}, {Timestamp: base}}, nil},
		{"empty key and value", []Record{{Key: []byte{}, Value: []byte{}, Timestamp: base}, {Key: []byte{}, Value: []byte{}, Timestamp: base}}, nil},
		{"one- and two-byte lengths", []Record{{Timestamp: base}, {Key: v(63), Value: v(64), Timestamp: base}, {Key: v(64), Value: v(63), Timestamp: base},
			{Key: v(1), Value: v(127), Timestamp: base}, {Value: v(128), Timestamp: base}}, nil},
		{"key and value at the size limit", []Record{{Timestamp: base}, {Key: v(100), Value: v(shortMaxData - 101), Timestamp: base},
			{Value: v(shortMaxData - 1), Timestamp: base}, {Key: v(shortMaxData - 1), Timestamp: base}}, nil},
		{"key and value one past the limit", []Record{{Timestamp: base}, {Key: v(100), Value: v(shortMaxData - 100), Timestamp: base},
			{Value: v(shortMaxData), Timestamp: base}, {Value: v(9000), Timestamp: base}}, nil},
		{"timestamp deltas at ±8192", []Record{{Value: v(3), Timestamp: base}, {Value: v(3), Timestamp: base + 63}, {Value: v(3), Timestamp: base + 64},
			{Value: v(3), Timestamp: base - 64}, {Value: v(3), Timestamp: base - 65}, {Value: v(3), Timestamp: base + 8191},
			{Value: v(3), Timestamp: base - 8192}, {Value: v(3), Timestamp: base + 8192}, {Value: v(3), Timestamp: base - 8193},
			{Value: v(3), Timestamp: NoTimestamp}, {Value: v(3), Timestamp: math.MinInt64}, {Value: v(3), Timestamp: math.MaxInt64}}, nil},
		{"offset deltas at 64 and 8192", []Record{{Value: v(2), Timestamp: base}, {Value: v(2), Timestamp: base}, {Value: v(2), Timestamp: base},
			{Value: v(2), Timestamp: base}, {Value: v(2), Timestamp: base}, {Value: v(2), Timestamp: base}},
			[]int32{0, 63, 64, 8191, 8192, math.MaxInt32}},
		{"attributes", []Record{{Value: v(1), Timestamp: base, Attributes: -1}, {Value: v(1), Timestamp: base, Attributes: 0x7f},
			{Value: v(1), Timestamp: base, Attributes: math.MinInt8}}, nil},
		{"headers between short records", []Record{{Value: v(5), Timestamp: base}, {Value: v(5), Timestamp: base,
			Headers: []RecordHeader{{Key: []byte("h"), Value: v(3)}}}, {Value: v(5), Timestamp: base}}, nil},
		{"100 records of 100 bytes", func() []Record {
			r := make([]Record, 100)
			for i := range r {
				r[i] = Record{Value: v(100), Timestamp: base}
			}
			return r
		}(), nil},
		{"many records (the buffer grows)", func() []Record {
			r := make([]Record, 3000)
			for i := range r {
				r[i] = Record{Key: v(i % 70), Value: v(i % 300), Timestamp: base + int64(i%50)}
			}
			return r
		}(), nil},
	}
	for _, tt := range tests {
		for _, opts := range []BuilderOptions{{}, {BaseOffset: 1000, DeleteHorizon: base + 5}, {Compression: CompressionLZ4}} {
			t.Run(fmt.Sprintf("%s/%+v", tt.name, opts), func(t *testing.T) {
				deltas := tt.deltas
				if deltas == nil {
					deltas = seq(len(tt.recs))
				}
				bld := addAll(t, opts, tt.recs, deltas)
				require.Equal(t, referenceRecords(t, opts, tt.recs, deltas), bld.recs, "records differ from the general encoder's")
				b, err := bld.Build()
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				got := decodeAll(t, b)
				require.Len(t, got, len(tt.recs))
				for i := range got {
					checkRecord(t, fmt.Sprint("record ", i), got[i], decoded{opts.BaseOffset + int64(deltas[i]), tt.recs[i].Timestamp,
						tt.recs[i].Key, tt.recs[i].Value, tt.recs[i].Headers})
				}
			})
		}
	}
}

// TestBuilderShortRecordsRapid: random records with lengths, timestamps
// and offset gaps clustered around the one-pass encoding's edges give the
// general encoder's bytes, after a Reset too (a reused buffer holds the
// previous batch's bytes past its length).
func TestBuilderShortRecordsRapid(t *testing.T) {
	edge := func(t *rapid.T, label string, edges ...int64) int64 {
		e := rapid.SampledFrom(edges).Draw(t, label+"Edge")
		return e + rapid.Int64Range(-2, 2).Draw(t, label+"Off")
	}
	lenAt := func(t *rapid.T, label string) []byte {
		switch rapid.IntRange(0, 3).Draw(t, label+"Kind") {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		n := max(0, int(edge(t, label, 0, 63, 64, 127, 128, 300, shortMaxData/2, shortMaxData-1, 8191, 8192)))
		return bytes.Repeat([]byte{byte(n)}, n)
	}
	bld := NewBuilder(BuilderOptions{})
	rapid.Check(t, func(t *rapid.T) {
		opts := BuilderOptions{BaseOffset: rapid.Int64Range(0, 1<<40).Draw(t, "base")}
		if rapid.Bool().Draw(t, "horizon") {
			opts.DeleteHorizon = rapid.Int64Range(1, 1<<41).Draw(t, "deleteHorizon")
		}
		bld.Reset(opts)
		baseTS := rapid.Int64Range(-1, 1<<41).Draw(t, "baseTS")
		n := rapid.IntRange(1, 40).Draw(t, "records")
		recs := make([]Record, n)
		deltas := make([]int32, n)
		d := int64(-1)
		for i := range recs {
			recs[i] = Record{Key: lenAt(t, "key"), Value: lenAt(t, "value"), Attributes: rapid.Int8().Draw(t, "attributes"),
				Timestamp: baseTS + edge(t, "ts", 0, -64, 64, -8192, 8192, 1<<20)}
			if rapid.IntRange(0, 9).Draw(t, "header") == 0 {
				recs[i].Headers = []RecordHeader{{Key: []byte("h"), Value: lenAt(t, "hvalue")}}
			}
			d += max(1, edge(t, "gap", 1, 64, 8192))
			if d > math.MaxInt32 {
				recs, deltas = recs[:i], deltas[:i]
				break
			}
			deltas[i] = int32(d)
		}
		addRecords(t, bld, recs, deltas)
		require.Equal(t, referenceRecords(t, opts, recs, deltas), bld.recs, "records differ from the general encoder's")
	})
}
