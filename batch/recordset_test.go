package batch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/legacy"
)

// setItem is one step of a walk over a record set: a record, an entry
// decodeRun leaves to its caller ("other at"), or the error the walk ended
// with.
type setItem struct {
	rec   Record
	other int // position of the entry, -1 for a record or an error
	err   string
}

// walkRuns walks set with decodeRun, k records at a time, stepping over
// each entry it leaves to its caller with frameEntry (as package log
// does), and returns what it saw.
func walkRuns(t testing.TB, set []byte, k int) []setItem {
	var out []setItem
	var dec Decoder
	dst := make([]Record, k)
	st := batchaccess.RunState{Last: -1}
	for st.Pos < len(set) {
		for i := range dst {
			dst[i] = Record{Offset: -7, Key: []byte("stale"), Headers: []RecordHeader{{Key: []byte("stale")}}, Attributes: 9} // every field must be written
		}
		pos := st.Pos
		n, other, err := decodeRun(dst, &dec, set, &st)
		require.LessOrEqual(t, n, k)
		for _, r := range dst[:n] {
			r.Headers = slices.Clone(r.Headers)
			out = append(out, setItem{rec: r, other: -1})
		}
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return append(out, setItem{other: -1, err: err.Error()})
		}
		if other {
			require.Zero(t, st.Rec)
			size, _, _, ferr := frameEntry(set[st.Pos:])
			out = append(out, setItem{other: st.Pos})
			if ferr != nil {
				return out
			}
			st.Last, st.Pos = st.Pos, st.Pos+size
			continue
		}
		require.True(t, n > 0 || st.Pos == len(set), "no progress at %d", pos)
	}
	return out
}

// walkReference is walkRuns' result built from Parse's framing and
// Batch.All, entry by entry.
func walkReference(set []byte) []setItem {
	var out []setItem
	var dec Decoder
	for pos := 0; pos < len(set); {
		rest := set[pos:]
		b, _, err := Parse(rest)
		if err != nil || b.Attributes().Compression() != CompressionNone || b.Attributes().IsControl() {
			out = append(out, setItem{other: pos})
			size, _, _, ferr := frameEntry(rest)
			if ferr != nil {
				return out
			}
			pos += size
			continue
		}
		for r, err := range b.All(&dec) {
			if err != nil {
				return append(out, setItem{other: -1, err: err.Error()})
			}
			r.Headers = slices.Clone(r.Headers)
			out = append(out, setItem{rec: r, other: -1})
		}
		pos += len(b)
	}
	return out
}

// requireRunsMatchAll checks decodeRun against Batch.All on set, for
// several run lengths.
func requireRunsMatchAll(t testing.TB, set []byte) {
	want := walkReference(set)
	for _, k := range []int{1, 2, 3, 7, 32} {
		require.Equal(t, want, walkRuns(t, set, k), "runs of %d", k)
	}
}

// recordSet builds a record set of varied entries: one-record batches,
// a batch longer than a run, records with headers and with long varints,
// LogAppendTime, null keys and values, a compressed batch, a control
// batch and a legacy message.
func recordSet(t testing.TB) (set []byte, long [2]int) {
	const ts = 1_700_000_000_000
	off := int64(0)
	add := func(opts BuilderOptions, recs ...Record) {
		opts.BaseOffset = off
		bld := NewBuilder(opts)
		for _, r := range recs {
			require.NoError(t, bld.Add(r))
		}
		b, err := bld.Build()
		require.NoError(t, err)
		set = append(set, b...)
		off = b.NextOffset()
	}
	for i := range 3 {
		add(BuilderOptions{}, Record{Value: fmt.Appendf(nil, "one %d", i), Timestamp: ts})
	}
	var many []Record
	for i := range 40 {
		many = append(many, Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), Timestamp: ts + int64(i)})
	}
	add(BuilderOptions{}, many...)
	add(BuilderOptions{}, Record{Value: []byte("a"), Timestamp: ts},
		Record{Value: []byte("h"), Timestamp: ts, Headers: []RecordHeader{{Key: []byte("x"), Value: []byte("1")}, {Key: []byte(""), Value: nil}}},
		Record{Value: []byte("b"), Timestamp: ts},
		Record{Value: []byte("h2"), Timestamp: ts, Headers: []RecordHeader{{Key: []byte("y"), Value: []byte("2")}}})
	long[0] = len(set)
	add(BuilderOptions{}, Record{Key: make([]byte, 9000), Value: []byte("long key"), Timestamp: ts + 100_000}, Record{Timestamp: ts - 100_000})
	long[1] = len(set)
	add(BuilderOptions{Compression: CompressionGzip}, Record{Value: []byte("zipped"), Timestamp: ts}, Record{Value: []byte("zipped 2"), Timestamp: ts})
	marker, err := AppendControlBatch(nil, TxnMarker{Type: ControlCommit, BaseOffset: off, ProducerID: 7})
	require.NoError(t, err)
	set = append(set, marker...)
	off++
	add(BuilderOptions{}, Record{Value: []byte("after marker"), Timestamp: ts})
	lat := len(set)
	add(BuilderOptions{}, Record{Value: []byte("append time"), Timestamp: ts})
	Batch(set[lat:]).setLogAppendTime(ts + 5)
	set = append(set, legacyMessage(off, legacy.MagicV1, 0, ts, nil, []byte("legacy"))...)
	off++
	add(BuilderOptions{}, Record{Value: []byte("last"), Timestamp: ts})
	return set, long
}

// TestDecodeRunMatchesAll: decodeRun (package log's Records.All) yields
// exactly what Parse's framing and Batch.All yield, entry by entry, for
// runs of every length: records across run boundaries inside a batch, a
// run ending after each record with headers, the entries it leaves to
// its caller (compressed, control, legacy) at their positions; and on
// every single-byte change and every truncation of the set the same
// records and the same error, in Next's words.
func TestDecodeRunMatchesAll(t *testing.T) {
	set, long := recordSet(t)
	want := walkReference(set)
	others := 0
	for _, it := range want {
		if it.other >= 0 {
			others++
		}
		require.Empty(t, it.err)
	}
	require.Equal(t, 3, others, "compressed, control and legacy entries")
	requireRunsMatchAll(t, set)
	for i := 0; i < len(set); i++ {
		if i > long[0]+80 && i < long[1]-40 && i%97 != 0 {
			continue // inside the long key
		}
		for _, delta := range []byte{1, 0x80, 0xfe} {
			c := slices.Clone(set)
			c[i] += delta
			requireRunsMatchAll(t, c)
		}
		requireRunsMatchAll(t, slices.Clone(set[:i]))
	}
}

// TestDecodeRunAllocs: decoding a run of uncompressed records allocates
// nothing once the Decoder's header scratch exists.
func TestDecodeRunAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	set, _ := recordSet(t)
	var dec Decoder
	dst := make([]Record, 32)
	walk := func() {
		st := batchaccess.RunState{Last: -1}
		for st.Pos < len(set) {
			_, other, err := decodeRun(dst, &dec, set, &st)
			if err != nil {
				panic(err)
			}
			if other {
				size, _, _, _ := frameEntry(set[st.Pos:])
				st.Last, st.Pos = st.Pos, st.Pos+size
			}
		}
	}
	walk()
	require.Zero(t, testing.AllocsPerRun(20, walk))
}

func FuzzDecodeRun(f *testing.F) {
	set, _ := recordSet(f)
	f.Add(set)
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := walkReference(data)
		for _, k := range []int{1, 32} {
			require.Equal(t, want, walkRuns(t, data, k), "runs of %d", k)
		}
	})
}
