package batch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// iterated is what an iteration yields: the records (headers copied, as
// they are reused) and the error it ended with.
type iterated struct {
	recs []Record
	err  string
}

func iterateNext(b Batch) iterated {
	var out iterated
	var dec Decoder
	it := b.Records(&dec)
	for {
		r, ok, err := it.Next()
		if err != nil {
			out.err = err.Error()
			return out
		}
		if !ok {
			return out
		}
		r.Headers = slices.Clone(r.Headers)
		out.recs = append(out.recs, r)
	}
}

func iterateAllSeq(b Batch, dec *Decoder) iterated {
	var out iterated
	for r, err := range b.All(dec) {
		if err != nil {
			out.err = err.Error()
			break
		}
		r.Headers = slices.Clone(r.Headers)
		out.recs = append(out.recs, r)
	}
	return out
}

// requireAllMatchesNext checks that All (with its fast path for
// uncompressed batches) yields exactly what the Iter does, errors
// included, with and without a Decoder, compressed batches too: a corrupt
// payload gets the same error whatever the pooled decompressors decoded
// before (TestDecompressAfterCorruptInput).
func requireAllMatchesNext(t testing.TB, b Batch) {
	want := iterateNext(b)
	var dec Decoder
	require.Equal(t, want, iterateAllSeq(b, &dec), "All with a Decoder")
	require.Equal(t, want, iterateAllSeq(b, &dec), "All reusing the Decoder")
	require.Equal(t, want, iterateAllSeq(b, nil), "All without a Decoder")
}

// TestAllMatchesNext compares All with Iter.Next on valid batches (plain,
// with headers, LogAppendTime, control) and on every single-byte change
// and every truncation of their records.
func TestAllMatchesNext(t *testing.T) {
	hdrs := []RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}, {Key: []byte("n"), Value: nil}}
	build := func(opts BuilderOptions, recs ...Record) Batch {
		bld := NewBuilder(opts)
		for _, r := range recs {
			require.NoError(t, bld.Add(r))
		}
		out, err := bld.Build()
		require.NoError(t, err)
		return out
	}
	cases := map[string]Batch{
		"one record": build(BuilderOptions{}, Record{Value: []byte("v"), Timestamp: 5}),
		"three records": build(BuilderOptions{BaseOffset: 10}, Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 5},
			Record{Value: nil, Timestamp: 3}, Record{Key: []byte{}, Value: make([]byte, 300), Timestamp: 9, Headers: hdrs}),
		"log append time": build(BuilderOptions{LogAppendTime: true, AppendTime: 77}, Record{Value: []byte("v"), Timestamp: 5},
			Record{Value: []byte("w"), Timestamp: 6, Headers: hdrs}),
	}
	ctl, err := AppendControlBatch(nil, TxnMarker{Type: ControlCommit, ProducerID: 7, Timestamp: 5})
	require.NoError(t, err)
	cases["control"] = ctl
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			requireAllMatchesNext(t, b)
			for i := HeaderSize - 4; i < len(b); i++ { // recordsCount, then the records
				for _, x := range []byte{0x01, 0x80, 0xff} {
					m := slices.Clone(b)
					m[i] ^= x
					t.Run(fmt.Sprintf("byte %d ^ %#x", i, x), func(t *testing.T) { requireAllMatchesNext(t, m) })
				}
			}
			for n := HeaderSize; n < len(b); n++ {
				requireAllMatchesNext(t, slices.Clone(b[:n]))
			}
		})
	}
}

// TestBuilderPlainPathMatchesAppendRecord checks that the Builder's path
// for records without headers encodes byte for byte what encodeRecord
// (the general encoder) does, across the varint size boundaries of every
// field.
func TestBuilderPlainPathMatchesAppendRecord(t *testing.T) {
	var sizes = []int{-1, 0, 1, 63, 64, 127, 128, 8191, 8192, 70000}
	bytesOf := func(n int) []byte {
		if n < 0 {
			return nil
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	const base = 1_700_000_000_000
	for _, ks := range sizes {
		for _, vs := range sizes {
			for _, ts := range []int64{base, base + 1, base - 1, base + 63, base + 64, base + 1<<40, base - 1<<40, NoTimestamp} {
				t.Run(fmt.Sprintf("key=%d/value=%d/ts=%d", ks, vs, ts-base), func(t *testing.T) {
					bld := NewBuilder(BuilderOptions{BaseOffset: 5})
					first := Record{Key: []byte("k"), Value: []byte("v"), Timestamp: base, Attributes: 3}
					rec := Record{Key: bytesOf(ks), Value: bytesOf(vs), Timestamp: ts}
					require.NoError(t, bld.Add(first))
					rec.Offset = 5 + 70
					require.NoError(t, bld.AddAt(rec))
					b, err := bld.Build()
					require.NoError(t, err)
					want, err := encodeRecord(nil, first, 0, 0)
					require.NoError(t, err)
					want, err = encodeRecord(want, rec, 70, ts-base)
					require.NoError(t, err)
					require.Equal(t, want, []byte(b[HeaderSize:]))
					require.NoError(t, b.Validate())
				})
			}
		}
	}
}

// TestAllShortAndLongFields: All decodes a record in line when all its
// varints take one or two bytes and it has no headers, and any other
// record through fastRecord. Batches mixing both, across the two-byte
// boundary of every field (lengths 8191 and 8192, timestamp deltas of
// ±8191 and ±8192 ms, offset deltas past 8191), yield what Iter.Next
// yields, and so do their truncations.
func TestAllShortAndLongFields(t *testing.T) {
	const base = 1_700_000_000_000
	bytesOf := func(n int) []byte {
		if n < 0 {
			return nil
		}
		return make([]byte, n)
	}
	hdrs := []RecordHeader{{Key: []byte("h"), Value: nil}}
	short := Record{Key: []byte("k"), Value: []byte("v"), Timestamp: base}
	tests := []struct {
		name string
		rec  Record
		at   int64 // offset delta of rec (0: the next one)
	}{
		{"key 8191", Record{Key: bytesOf(8191), Value: []byte("v"), Timestamp: base}, 0},
		{"key 8192", Record{Key: bytesOf(8192), Value: []byte("v"), Timestamp: base}, 0},
		{"value 8191", Record{Value: bytesOf(8191), Timestamp: base}, 0},
		{"value 8192", Record{Value: bytesOf(8192), Timestamp: base}, 0},
		{"timestamp +8191", Record{Value: []byte("v"), Timestamp: base + 8191}, 0},
		{"timestamp +8192", Record{Value: []byte("v"), Timestamp: base + 8192}, 0},
		{"timestamp -8192", Record{Value: []byte("v"), Timestamp: base - 8192}, 0},
		{"timestamp -8193", Record{Value: []byte("v"), Timestamp: base - 8193}, 0},
		{"offset delta 8191", Record{Value: []byte("v"), Timestamp: base}, 8191},
		{"offset delta 8192", Record{Value: []byte("v"), Timestamp: base}, 8192},
		{"headers", Record{Value: []byte("v"), Timestamp: base, Headers: hdrs}, 0},
		{"null key and value", Record{Timestamp: base}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bld := NewBuilder(BuilderOptions{BaseOffset: 100})
			require.NoError(t, bld.Add(short))
			rec := tt.rec
			if tt.at > 0 {
				rec.Offset = 100 + tt.at
				require.NoError(t, bld.AddAt(rec))
			} else {
				require.NoError(t, bld.Add(rec))
			}
			next := short
			next.Offset = 100 + max(tt.at, 1) + 1
			require.NoError(t, bld.AddAt(next))
			b, err := bld.Build()
			require.NoError(t, err)
			require.NoError(t, b.Validate())
			got := iterateAllSeq(b, nil)
			require.Empty(t, got.err)
			require.Len(t, got.recs, 3)
			require.Equal(t, rec.Key, got.recs[1].Key)
			require.Equal(t, len(rec.Value), len(got.recs[1].Value))
			require.Equal(t, rec.Timestamp, got.recs[1].Timestamp)
			requireAllMatchesNext(t, b)
			for n := HeaderSize; n < len(b); n += max(1, len(b)/300) {
				requireAllMatchesNext(t, slices.Clone(b[:n]))
			}
		})
	}
}
