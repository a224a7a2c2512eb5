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
// included, with and without a Decoder.
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
