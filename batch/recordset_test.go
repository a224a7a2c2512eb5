package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/legacy"
)

// setItem is one step of a walk over a record set: a record, an entry
// DecodeRun leaves to its caller ("other at"), or the error the walk ended
// with.
type setItem struct {
	rec   Record
	other int // position of the entry, -1 for a record or an error
	err   string
}

// walkRuns walks set with DecodeRun, k records at a time, stepping over
// each entry it leaves to its caller with FrameEntry (as package log
// does), and returns what it saw.
func walkRuns(t testing.TB, set []byte, k int) []setItem {
	var out []setItem
	var dec Decoder
	dst := make([]Record, k)
	st := RunState{Last: -1}
	for st.Pos < len(set) {
		for i := range dst {
			dst[i] = Record{Offset: -7, Key: []byte("stale"), Headers: []RecordHeader{{Key: []byte("stale")}}, Attributes: 9} // every field must be written
		}
		pos := st.Pos
		n, other, err := dec.DecodeRun(dst, set, &st)
		// Plain ifs rather than require in the loop: the damage tests
		// walk millions of sets.
		if n > k {
			t.Fatalf("DecodeRun returned %d records into %d", n, k)
		}
		for _, r := range dst[:n] {
			r.Headers = slices.Clone(r.Headers)
			out = append(out, setItem{rec: r, other: -1})
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeRun: %v, not ErrCorrupt", err)
			}
			return append(out, setItem{other: -1, err: err.Error()})
		}
		if other {
			if st.Rec != 0 {
				t.Fatalf("other inside a batch: st %+v", st)
			}
			size, _, _, ferr := FrameEntry(set[st.Pos:])
			out = append(out, setItem{other: st.Pos})
			if ferr != nil {
				return out
			}
			st.Last, st.Pos = st.Pos, st.Pos+size
			continue
		}
		if n == 0 && st.Pos != len(set) {
			t.Fatalf("no progress at %d", pos)
		}
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
			size, _, _, ferr := FrameEntry(rest)
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

// requireRunsMatchAll checks DecodeRun against Batch.All on set, for
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
	Batch(set[lat:]).SetLogAppendTime(ts + 5)
	set = append(set, legacyMessage(off, legacy.MagicV1, 0, ts, nil, []byte("legacy"))...)
	off++
	add(BuilderOptions{}, Record{Value: []byte("last"), Timestamp: ts})
	return set, long
}

// TestDecodeRunMatchesAll: DecodeRun (package log's Records.All) yields
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
		st := RunState{Last: -1}
		for st.Pos < len(set) {
			_, other, err := dec.DecodeRun(dst, set, &st)
			if err != nil {
				panic(err)
			}
			if other {
				size, _, _, _ := FrameEntry(set[st.Pos:])
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
	ones, _ := oneRecordSet(f)
	f.Add(ones)
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

// oneRecordSet builds a record set of one-record batches: first the
// shapes runOnes decodes (a null key and a 100-byte value, whose lengths
// take two bytes; short keys and values; an empty key, an empty value; a
// null value; LogAppendTime; an offsetDelta inside a wider lastOffsetDelta; a
// length varint in two bytes where one would do), common of them, then
// shapes it leaves to DecodeRun's loop (a key length of two bytes, a
// header, a record of 7 bytes, a batch of two records) and one more of
// the common shape after them.
func oneRecordSet(t testing.TB) (set []byte, common int) {
	const ts = 1_700_000_000_000
	off := int64(0)
	one := func(opts BuilderOptions, r Record) []byte {
		opts.BaseOffset = off
		bld := NewBuilder(opts)
		require.NoError(t, bld.Add(r))
		b, err := bld.Build()
		require.NoError(t, err)
		off = b.NextOffset()
		return b
	}
	val := make([]byte, 100)
	for i := range val {
		val[i] = byte(i)
	}
	set = append(set, one(BuilderOptions{}, Record{Value: val, Timestamp: ts})...)
	set = append(set, one(BuilderOptions{}, Record{Key: []byte("k"), Value: []byte("v"), Timestamp: ts})...)
	set = append(set, one(BuilderOptions{}, Record{Key: []byte{}, Value: []byte("e"), Timestamp: ts})...)
	set = append(set, one(BuilderOptions{}, Record{Key: []byte("ke"), Value: []byte{}, Timestamp: ts})...)
	set = append(set, one(BuilderOptions{}, Record{Key: []byte("tombstone"), Timestamp: ts})...)
	lat := len(set)
	set = append(set, one(BuilderOptions{}, Record{Value: []byte("append time"), Timestamp: ts})...)
	Batch(set[lat:]).SetLogAppendTime(ts + 5)
	// offsetDelta 2 of lastOffsetDelta 3 (compaction leaves such batches).
	wide := one(BuilderOptions{}, Record{Value: []byte("wide"), Timestamp: ts})
	binary.BigEndian.PutUint32(wide[lastOffsetDeltaOffset:], 3)
	wide[HeaderSize+3] = 4 // length, attributes, timestampDelta, offsetDelta
	set = append(set, wide...)
	off += 3
	// The length varint of an 8-byte record in two bytes (0x90 0x00).
	short := one(BuilderOptions{}, Record{Key: []byte("k"), Value: []byte("v"), Timestamp: ts})
	require.Equal(t, byte(16), short[HeaderSize])
	short = slices.Insert(short, HeaderSize+1, 0)
	short[HeaderSize] = 0x90
	binary.BigEndian.PutUint32(short[batchLengthOffset:], uint32(len(short)-LogOverhead))
	set = append(set, short...)
	common = 8
	set = append(set, one(BuilderOptions{}, Record{Key: make([]byte, 64), Value: []byte("long key"), Timestamp: ts})...)
	set = append(set, one(BuilderOptions{}, Record{Value: []byte("h"), Timestamp: ts, Headers: []RecordHeader{{Key: []byte("x"), Value: []byte("1")}}})...)
	set = append(set, one(BuilderOptions{}, Record{Timestamp: ts})...)
	bld := NewBuilder(BuilderOptions{BaseOffset: off})
	require.NoError(t, bld.Add(Record{Value: []byte("a"), Timestamp: ts}))
	require.NoError(t, bld.Add(Record{Value: []byte("b"), Timestamp: ts}))
	two, err := bld.Build()
	require.NoError(t, err)
	set = append(set, two...)
	off = two.NextOffset()
	set = append(set, one(BuilderOptions{}, Record{Value: val, Timestamp: ts})...)
	return set, common
}

// TestRunOnes: runOnes decodes the common shapes of oneRecordSet, each
// exactly as Batch.All does, stops at the first entry it leaves to
// DecodeRun's loop and at a full dst, and leaves st there.
func TestRunOnes(t *testing.T) {
	set, common := oneRecordSet(t)
	want := walkReference(set)
	require.Len(t, want, common+6)
	for _, it := range want {
		require.Equal(t, -1, it.other)
		require.Empty(t, it.err)
	}
	dst := make([]Record, 32)
	st := RunState{Last: -1}
	n := runOnes(dst, set, &st)
	require.Equal(t, common, n)
	var got []setItem
	for _, r := range dst[:n] {
		got = append(got, setItem{rec: r, other: -1})
	}
	require.Equal(t, want[:common], got)
	end := 0
	for range common {
		st.Last = end
		b, _, err := Parse(set[end:])
		require.NoError(t, err)
		end += len(b)
	}
	require.Equal(t, RunState{Pos: end, Last: st.Last}, st)

	st = RunState{Last: -1}
	require.Equal(t, 3, runOnes(dst[:3], set, &st), "a full dst")
	n = runOnes(dst, set, &st)
	require.Equal(t, common-3, n, "resumed")
	require.Equal(t, want[3:common], func() (out []setItem) {
		for _, r := range dst[:n] {
			out = append(out, setItem{rec: r, other: -1})
		}
		return out
	}())
	requireRunsMatchAll(t, set)
}

// TestDecodeRunOnesDamaged: on every change of every byte of a record set
// of one-record batches to every other value, and on every truncation,
// DecodeRun (runOnes first) yields exactly what Parse's framing and
// Batch.All yield, and the same error.
func TestDecodeRunOnesDamaged(t *testing.T) {
	set, _ := oneRecordSet(t)
	check := func(c []byte) {
		want := walkReference(c)
		for _, k := range []int{1, 32} {
			if got := walkRuns(t, c, k); !slices.EqualFunc(want, got, sameItem) {
				require.Equal(t, want, got, "runs of %d", k) // says how
			}
		}
	}
	c := slices.Clone(set)
	for i := range set {
		for v := range 256 {
			if byte(v) == set[i] {
				continue
			}
			c[i] = byte(v)
			check(c)
		}
		c[i] = set[i]
		check(set[:i])
	}
}

// sameItem compares two setItems as require.Equal does, without its cost
// (TestDecodeRunOnesDamaged compares a few million).
func sameItem(a, b setItem) bool {
	if a.other != b.other || a.err != b.err {
		return false
	}
	x, y := a.rec, b.rec
	return x.Offset == y.Offset && x.Timestamp == y.Timestamp && x.Attributes == y.Attributes &&
		sameBytes(x.Key, y.Key) && sameBytes(x.Value, y.Value) &&
		slices.EqualFunc(x.Headers, y.Headers, func(g, h RecordHeader) bool {
			return sameBytes(g.Key, h.Key) && sameBytes(g.Value, h.Value)
		}) && (x.Headers == nil) == (y.Headers == nil)
}
