package segment

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// txnGolden is a .txnindex of two entries, written out by hand from the
// layout of Kafka's AbortedTxn (storage/.../log/AbortedTxn.java, version 0:
// version int16 at 0, producerId int64 at 2, firstOffset int64 at 10,
// lastOffset int64 at 18, lastStableOffset int64 at 26; 34 bytes; no file
// header), not from this package's encoder. No Kafka .txnindex file exists
// in the fixtures (SOURCES.md), so the golden is the documented layout.
var txnGolden = strings.Join([]string{
	// entry 0: producer 1000, first 3, last 7, lso 8
	"0000" + "00000000000003e8" + "0000000000000003" + "0000000000000007" + "0000000000000008",
	// entry 1: producer 0x0102030405060708, first 9, last 12, lso 10
	"0000" + "0102030405060708" + "0000000000000009" + "000000000000000c" + "000000000000000a",
}, "")

var txnGoldenEntries = []AbortedTxn{
	{ProducerID: 1000, FirstOffset: 3, LastOffset: 7, LastStableOffset: 8},
	{ProducerID: 0x0102030405060708, FirstOffset: 9, LastOffset: 12, LastStableOffset: 10},
}

// TestTxnIndexGolden: the encoder, the decoder and the file a Segment
// writes all match Kafka's layout byte for byte.
func TestTxnIndexGolden(t *testing.T) {
	want, err := hex.DecodeString(txnGolden)
	require.NoError(t, err)
	require.Len(t, want, 2*TxnIndexEntrySize)

	var enc []byte
	for _, a := range txnGoldenEntries {
		enc = AppendTxnIndexEntry(enc, a)
	}
	assert.Equal(t, want, enc)
	got, err := DecodeTxnIndex("x", want)
	require.NoError(t, err)
	assert.Equal(t, txnGoldenEntries, got)

	fsys := vfs_NewMemForTest(t)
	s, err := Create(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	defer mustClose(t, s)
	mustAppend(t, s, simpleBatch(t, 0, 13, 1000, 1))
	_, err = fsys.Stat(segPath("/x", 0, TxnIndexSuffix))
	require.ErrorIs(t, err, fs.ErrNotExist, "made lazily, on the first entry")
	for _, a := range txnGoldenEntries {
		require.NoError(t, s.AppendAbortedTxn(a))
	}
	require.NoError(t, s.Flush())
	assert.Equal(t, want, readAll(t, fsys, segPath("/x", 0, TxnIndexSuffix)))
	assert.Equal(t, txnGoldenEntries, s.AbortedTxns())
}

// TestDecodeTxnIndexErrors: damage gives a typed error naming the file and
// the byte position, with the entries before it.
func TestDecodeTxnIndexErrors(t *testing.T) {
	good, err := hex.DecodeString(txnGolden)
	require.NoError(t, err)
	badVersion := append([]byte(nil), good...)
	badVersion[TxnIndexEntrySize+1] = 1
	tests := []struct {
		name    string
		data    []byte
		torn    bool
		pos     int64
		entries int
	}{
		{name: "partial last entry", data: good[:len(good)-5], torn: true, pos: TxnIndexEntrySize, entries: 1},
		{name: "unknown version", data: badVersion, pos: TxnIndexEntrySize, entries: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeTxnIndex("f.txnindex", tc.data)
			require.ErrorIs(t, err, base.ErrCorrupt)
			assert.Equal(t, tc.torn, base.IsTornTail(err))
			var ce *base.CorruptionError
			require.True(t, errors.As(err, &ce))
			assert.Equal(t, "f.txnindex", ce.File)
			assert.Equal(t, tc.pos, ce.Pos)
			assert.Len(t, got, tc.entries)
		})
	}
}

// TestTxnIndexFollowsTheSegment: the .txnindex is truncated with the
// segment, cut by recovery, renamed by ChangeSuffix, removed with the
// segment's other files, replaced by Create and reloaded by Open; bad
// entries are refused and change nothing.
func TestTxnIndexFollowsTheSegment(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	path := segPath("/x", 0, TxnIndexSuffix)
	s, err := Create(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	for i := range 4 {
		mustAppend(t, s, simpleBatch(t, int64(i*5), 5, 1000, 1)) // 0-4, 5-9, 10-14, 15-19
	}
	a := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7},
		{ProducerID: 2, FirstOffset: 7, LastOffset: 11, LastStableOffset: 12},
		{ProducerID: 3, FirstOffset: 12, LastOffset: 16, LastStableOffset: 17},
	}
	for _, e := range a {
		require.NoError(t, s.AppendAbortedTxn(e))
	}
	for _, bad := range []AbortedTxn{
		{ProducerID: 4, FirstOffset: 0, LastOffset: 16, LastStableOffset: 17}, // not after the last
		{ProducerID: 4, FirstOffset: 0, LastOffset: 20, LastStableOffset: 21}, // past the segment
		{ProducerID: 4, FirstOffset: 18, LastOffset: 17, LastStableOffset: 18},
	} {
		require.ErrorIs(t, s.AppendAbortedTxn(bad), ErrTxnIndexOrder)
	}
	assert.Equal(t, a, s.AbortedTxns())

	got, complete := s.CollectAbortedTxns(nil, 7, 12)
	assert.Equal(t, a[1:2], got, "overlapping [7, 12)")
	assert.True(t, complete, "entry 1's LSO 12 reaches the bound")
	got, complete = s.CollectAbortedTxns(nil, 17, 20)
	assert.Empty(t, got)
	assert.False(t, complete)

	_, err = s.TruncateTo(12) // cuts the batch 10-14: markers at 11 and 16 go
	require.NoError(t, err)
	assert.Equal(t, a[:1], s.AbortedTxns())
	assert.Len(t, readAll(t, fsys, path), TxnIndexEntrySize)

	mustAppend(t, s, simpleBatch(t, 10, 5, 1000, 1))
	require.NoError(t, s.AppendAbortedTxn(a[1]))
	require.NoError(t, s.ChangeSuffix("", CleanedSuffix))
	_, err = fsys.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Len(t, readAll(t, fsys, path+CleanedSuffix), 2*TxnIndexEntrySize)
	require.NoError(t, s.ChangeSuffix(CleanedSuffix, ""))
	require.NoError(t, s.Flush())
	mustClose(t, s)

	// Reopen: the entries come back; one past the .log's end (a crash
	// kept the entry, not its marker) is left out, then cut by Recover.
	data := readAll(t, fsys, path)
	data = AppendTxnIndexEntry(data, AbortedTxn{ProducerID: 9, FirstOffset: 15, LastOffset: 30, LastStableOffset: 31})
	writeFile(t, fsys, path, data)
	s, err = Open(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	assert.Equal(t, a[:2], s.AbortedTxns())
	_, err = s.Recover(0)
	require.NoError(t, err)
	assert.Len(t, readAll(t, fsys, path), 2*TxnIndexEntrySize, "recovery cut the entry past the end")

	require.NoError(t, s.MarkDeleted())
	_, err = fsys.Stat(path + DeletedSuffix)
	require.NoError(t, err, "renamed with the other files")
	require.NoError(t, s.Unref())
	_, err = fsys.Stat(path + DeletedSuffix)
	require.ErrorIs(t, err, fs.ErrNotExist, "removed with the other files")

	// Create replaces a stale .txnindex of the same name.
	writeFile(t, fsys, path, data)
	s, err = Create(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	defer mustClose(t, s)
	assert.Empty(t, s.AbortedTxns())
	_, err = fsys.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestOpenTxnIndexDamage: a torn last entry is ignored and cut by the next
// write; an entry of an unknown version makes Open fail with a typed error
// naming the file; neither is modified by Open.
func TestOpenTxnIndexDamage(t *testing.T) {
	good, err := hex.DecodeString(txnGolden)
	require.NoError(t, err)
	for _, torn := range []bool{true, false} {
		fsys := vfs_NewMemForTest(t)
		s, err := Create(fsys, "/x", 0, Config{})
		require.NoError(t, err)
		mustAppend(t, s, simpleBatch(t, 0, 20, 1000, 1))
		mustClose(t, s)
		path := segPath("/x", 0, TxnIndexSuffix)
		data := append([]byte(nil), good...)
		if torn {
			data = data[:len(data)-3]
		} else {
			data[TxnIndexEntrySize] = 0x7f
		}
		writeFile(t, fsys, path, data)
		s, err = Open(fsys, "/x", 0, Config{})
		require.NoError(t, err)
		assert.Equal(t, data, readAll(t, fsys, path), "Open changes nothing")
		if !torn {
			// Damage is kept for the owner to judge, with the entries
			// before it; a truncation that rewrites the damaged part
			// clears it.
			derr := s.TxnIndexDamage()
			require.ErrorIs(t, derr, base.ErrCorrupt)
			require.Contains(t, derr.Error(), path)
			assert.Equal(t, txnGoldenEntries[:1], s.AbortedTxns())
			require.NoError(t, s.TruncateAbortedTxns(txnGoldenEntries[0].LastOffset+1))
			require.NoError(t, s.TxnIndexDamage())
			assert.Equal(t, good[:TxnIndexEntrySize], readAll(t, fsys, path))
			mustClose(t, s)
			continue
		}
		require.NoError(t, s.TxnIndexDamage())
		assert.Equal(t, txnGoldenEntries[:1], s.AbortedTxns())
		require.NoError(t, s.Unseal())
		e := AbortedTxn{ProducerID: 5, FirstOffset: 10, LastOffset: 13, LastStableOffset: 14}
		require.NoError(t, s.AppendAbortedTxn(e))
		assert.Equal(t, AppendTxnIndexEntry(good[:TxnIndexEntrySize:TxnIndexEntrySize], e), readAll(t, fsys, path))
		mustClose(t, s)
	}
}

// writeFile replaces a file's contents.
func writeFile(t tb, fsys vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fsys.Create(path)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// TestTxnIndexAcrossBudgetClose: a segment budget closes an unused sealed
// segment's .txnindex with its other files; a truncation into the segment
// and a new entry after it then work on the file the segment had (they
// used to skip the truncation of the closed file and create it anew,
// leaving zeroed entries in place of the ones kept), and the unsynced
// entries are synced before the close.
func TestTxnIndexAcrossBudgetClose(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, Budget: NewBudget(0)}
		s, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		for i := range 4 {
			mustAppend(t, s, simpleBatch(t, int64(i*5), 5, 1000, 1)) // 0-4, 5-9, 10-14, 15-19
		}
		a := []AbortedTxn{
			{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7},
			{ProducerID: 2, FirstOffset: 7, LastOffset: 11, LastStableOffset: 12},
			{ProducerID: 3, FirstOffset: 12, LastOffset: 16, LastStableOffset: 17},
		}
		for _, e := range a {
			require.NoError(t, s.AppendAbortedTxn(e))
		}
		require.NoError(t, s.Seal())
		require.False(t, s.Resident(), "an unused sealed segment is closed")

		require.NoError(t, s.Unseal())
		_, err = s.TruncateTo(10)
		require.NoError(t, err)
		assert.Equal(t, a[:1], s.AbortedTxns())
		mustAppend(t, s, simpleBatch(t, 10, 5, 1000, 1))
		again := AbortedTxn{ProducerID: 9, FirstOffset: 8, LastOffset: 12, LastStableOffset: 13}
		require.NoError(t, s.AppendAbortedTxn(again))
		require.NoError(t, s.Flush())
		require.NoError(t, s.Close())

		s, err = Open(fsys, dir, 0, Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20})
		require.NoError(t, err)
		defer s.Close()
		assert.Equal(t, []AbortedTxn{a[0], again}, s.AbortedTxns())
		st, err := fsys.Stat(segPath(dir, 0, TxnIndexSuffix))
		require.NoError(t, err)
		assert.EqualValues(t, 2*TxnIndexEntrySize, st.Size())
	})
}

// TestTxnIndexWriterRacesBudgetClose: the writer's transaction index
// methods on a sealed segment (what the producer state replay after a
// truncation calls) keep the segment's files open while they use the
// .txnindex: a reader's Unpin that lets the budget close the segment meanwhile
// used to close the file under them (a data race on the file, a nil file
// or a write to a closed one).
func TestTxnIndexWriterRacesBudgetClose(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, Budget: NewBudget(0)}
	s, err := Create(vfs.Default, dir, 0, cfg)
	require.NoError(t, err)
	defer s.Close()
	mustAppend(t, s, simpleBatch(t, 0, 20, 1000, 1))
	require.NoError(t, s.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7}))
	require.NoError(t, s.Seal())

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader: each Unpin lets the budget close the segment
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			assert.NoError(t, s.Pin())
			s.Unpin()
		}
	}()
	for i := range 300 {
		require.NoError(t, s.TruncateAbortedTxns(0), "round %d", i)
		require.NoError(t, s.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7}), "round %d", i)
		require.NoError(t, s.FlushTxnIndex(), "round %d", i)
	}
	close(stop)
	wg.Wait()
}

// TestOpenTxnIndexZeroedEntry: an entry whose first and last offsets are
// equal (what a torn write that kept only the version and producer id of
// an unsynced entry leaves, the rest zeroed) names no transaction, since
// a transaction's data comes before its marker: Open ignores it and the
// ones after it, as it does an entry out of order. It used to be served
// in a segment at base 0, where offset 0 is inside the segment, and
// read_committed reads reported a phantom aborted transaction after a
// crash (found by log.TestTxnCrash with PARTLOG_CRASH_SEED=1796131616767093462).
func TestOpenTxnIndexZeroedEntry(t *testing.T) {
	fsys := vfs_NewMemForTest(t)
	s, err := Create(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	mustAppend(t, s, simpleBatch(t, 0, 20, 1000, 1))
	mustClose(t, s)
	path := segPath("/x", 0, TxnIndexSuffix)
	data := AppendTxnIndexEntry(nil, AbortedTxn{ProducerID: 2})
	data = AppendTxnIndexEntry(data, AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 9, LastStableOffset: 10})
	writeFile(t, fsys, path, data)
	s, err = Open(fsys, "/x", 0, Config{})
	require.NoError(t, err)
	defer mustClose(t, s)
	assert.Empty(t, s.AbortedTxns())
}

// TestOpenTxnIndexEmptyAbortEntry: Kafka before 2.8 (KAFKA-10702) wrote a
// .txnindex entry for an ABORT marker of a producer that had no data in
// the partition, with the marker's offset as the first offset too. Open
// keeps such entries and the ones after them; an entry whose marker and
// last stable offsets are 0, what a torn write leaves, still ends the
// entries Open keeps.
func TestOpenTxnIndexEmptyAbortEntry(t *testing.T) {
	data := AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 9, LastStableOffset: 10}
	for _, tc := range []struct {
		name    string
		entries []AbortedTxn
		want    int // entries kept
	}{
		{"empty abort, then an abort with data", []AbortedTxn{{ProducerID: 8, FirstOffset: 4, LastOffset: 4, LastStableOffset: 5}, data}, 2},
		{"empty abort while a transaction is open", []AbortedTxn{{ProducerID: 8, FirstOffset: 4, LastOffset: 4, LastStableOffset: 2}, data}, 2},
		{"empty abort at offset 0", []AbortedTxn{{ProducerID: 8, FirstOffset: 0, LastOffset: 0, LastStableOffset: 1}, data}, 2},
		{"abort with data, then an empty abort", []AbortedTxn{data, {ProducerID: 8, FirstOffset: 12, LastOffset: 12, LastStableOffset: 13}}, 2},
		{"zeroed after the producer id", []AbortedTxn{{ProducerID: 2}, data}, 0},
		{"empty abort while a transaction open since offset 0 is", []AbortedTxn{{ProducerID: 8, FirstOffset: 4, LastOffset: 4}, data}, 2},
		{"first offset past the marker", []AbortedTxn{{ProducerID: 2, FirstOffset: 5, LastOffset: 4, LastStableOffset: 5}, data}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs_NewMemForTest(t)
			s, err := Create(fsys, "/x", 0, Config{})
			require.NoError(t, err)
			mustAppend(t, s, simpleBatch(t, 0, 20, 1000, 1))
			mustClose(t, s)
			var b []byte
			for _, e := range tc.entries {
				b = AppendTxnIndexEntry(b, e)
			}
			writeFile(t, fsys, segPath("/x", 0, TxnIndexSuffix), b)
			s, err = Open(fsys, "/x", 0, Config{})
			require.NoError(t, err)
			defer mustClose(t, s)
			got := s.AbortedTxns()
			require.Len(t, got, tc.want)
			if tc.want > 0 {
				require.Equal(t, tc.entries[:tc.want], got)
			}
		})
	}
}
