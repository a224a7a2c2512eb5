package index

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

func TestOffsetAppend(t *testing.T) {
	type op struct{ off, pos int64 }
	tests := []struct {
		name    string
		base    int64
		maxSize int
		before  []op
		append  op
		wantErr error
	}{
		{name: "first entry at base", base: 100, append: op{100, 0}},
		{name: "first entry above base", base: 100, append: op{150, 4096}},
		{name: "increasing", base: 0, before: []op{{5, 0}}, append: op{6, 100}},
		{name: "equal offset", base: 0, before: []op{{5, 0}}, append: op{5, 100}, wantErr: ErrNotIncreasing},
		{name: "smaller offset", base: 0, before: []op{{5, 0}, {9, 50}}, append: op{7, 100}, wantErr: ErrNotIncreasing},
		{name: "below base", base: 100, append: op{99, 0}, wantErr: ErrOffsetOverflow},
		{name: "relative offset MaxInt32", base: 100, append: op{100 + math.MaxInt32, 0}},
		{name: "relative offset past MaxInt32", base: 100, append: op{101 + math.MaxInt32, 0}, wantErr: ErrOffsetOverflow},
		{name: "negative position", base: 0, append: op{1, -1}, wantErr: ErrPositionOverflow},
		{name: "position MaxInt32", base: 0, append: op{1, math.MaxInt32}},
		{name: "position past MaxInt32", base: 0, append: op{1, math.MaxInt32 + 1}, wantErr: ErrPositionOverflow},
		{name: "full", base: 0, maxSize: 2 * OffsetEntrySize, before: []op{{1, 0}, {2, 10}}, append: op{3, 20}, wantErr: ErrIndexFull},
		{name: "last slot", base: 0, maxSize: 2*OffsetEntrySize + 7, before: []op{{1, 0}}, append: op{3, 20}},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				maxSize := tc.maxSize
				if maxSize == 0 {
					maxSize = 4096
				}
				path := filepath.Join(dir, fmt.Sprintf("%020d.index", i))
				idx := openOffset(t, fsys, path, tc.base, maxSize)
				defer idx.Close()
				for _, o := range tc.before {
					require.NoError(t, idx.Append(o.off, o.pos))
				}
				before := offsetEntries(idx)
				err := idx.Append(tc.append.off, tc.append.pos)
				require.ErrorIs(t, err, tc.wantErr, "Append(%d, %d) = %v, want %v", tc.append.off, tc.append.pos, err, tc.wantErr)
				require.Equal(t, tc.wantErr == nil, err == nil, "Append(%d, %d) = %v, want %v", tc.append.off, tc.append.pos, err, tc.wantErr)
				got := offsetEntries(idx)
				if err != nil {
					assert.True(t, strings.HasPrefix(err.Error(), "partlog/index: "), "error %q lacks the prefix, path or offset", err)
					assert.Contains(t, err.Error(), path, "error %q lacks the prefix, path or offset", err)
					assert.Contains(t, err.Error(), fmt.Sprint(tc.append.off), "error %q lacks the prefix, path or offset", err)
					assert.Equal(t, fmt.Sprint(before), fmt.Sprint(got), "entries changed on error: %v -> %v", before, got)
					return
				}
				want := append(before, OffsetEntry{tc.append.off, tc.append.pos})
				assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "entries = %v, want %v", got, want)
				le := idx.LastEntry()
				assert.Equal(t, want[len(want)-1], le, "LastEntry = %v, want %v", le, want[len(want)-1])
			})
		}
	})
}

func TestOffsetLookup(t *testing.T) {
	const base = 1000
	entries := []OffsetEntry{{1005, 0}, {1010, 300}, {1020, 700}, {1021, 900}}
	tests := []struct {
		name    string
		entries []OffsetEntry
		target  int64
		want    OffsetEntry
	}{
		{"empty index", nil, 1005, OffsetEntry{base, 0}},
		{"empty index below base", nil, 3, OffsetEntry{base, 0}},
		{"below base", entries, 999, OffsetEntry{base, 0}},
		{"min int64", entries, math.MinInt64, OffsetEntry{base, 0}},
		{"between base and first entry", entries, 1004, OffsetEntry{base, 0}},
		{"first entry exactly", entries, 1005, entries[0]},
		{"between entries", entries, 1015, entries[1]},
		{"exact middle", entries, 1020, entries[2]},
		{"last exactly", entries, 1021, entries[3]},
		{"past last", entries, 5000, entries[3]},
		{"max int64", entries, math.MaxInt64, entries[3]},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				idx := openOffset(t, fsys, filepath.Join(dir, fmt.Sprintf("%d.index", i)), base, 4096)
				defer idx.Close()
				for _, e := range tc.entries {
					require.NoError(t, idx.Append(e.Offset, e.Position))
				}
				got := idx.Lookup(tc.target)
				assert.Equal(t, tc.want, got, "Lookup(%d) = %v, want %v", tc.target, got, tc.want)
			})
		}
	})
}

func TestOffsetTruncateTo(t *testing.T) {
	entries := []OffsetEntry{{5, 0}, {10, 300}, {20, 700}}
	tests := []struct {
		name   string
		offset int64
		want   int
	}{
		{"below base", -1, 0},
		{"base", 0, 0},
		{"first entry", 5, 0},
		{"just past first", 6, 1},
		{"exact middle", 10, 1},
		{"between", 15, 2},
		{"last", 20, 2},
		{"past last", 21, 3},
		{"far past last", math.MaxInt64, 3},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				idx := openOffset(t, fsys, filepath.Join(dir, fmt.Sprintf("%d.index", i)), 0, 4096)
				defer idx.Close()
				for _, e := range entries {
					require.NoError(t, idx.Append(e.Offset, e.Position))
				}
				require.NoError(t, idx.TruncateTo(tc.offset))
				got := offsetEntries(idx)
				require.Equal(t, fmt.Sprint(entries[:tc.want]), fmt.Sprint(got), "after TruncateTo(%d): %v, want %v", tc.offset, got, entries[:tc.want])
				// The slots after the cut are reused.
				next := int64(tc.offset)
				if tc.want > 0 {
					next = max(next, entries[tc.want-1].Offset+1)
				}
				next = max(next, 0)
				if next < math.MaxInt32 {
					require.NoError(t, idx.Append(next, 5000), "Append(%d) after TruncateTo", next)
					got := idx.Lookup(math.MaxInt64)
					require.Equal(t, OffsetEntry{next, 5000}, got, "Lookup after re-append = %v", got)
				}
			})
		}
	})
}

func TestTimeMaybeAppend(t *testing.T) {
	type op struct {
		ts, off int64
		skip    bool
	}
	tests := []struct {
		name    string
		maxSize int
		before  []op
		append  op
		wantErr error
		written bool
	}{
		{name: "first entry", append: op{ts: 1000, off: 100}, written: true},
		{name: "first entry timestamp 0", append: op{ts: 0, off: 100}, written: true},
		{name: "NoTimestamp on empty index ignored", append: op{ts: NoTimestamp, off: 100}},
		{name: "greater timestamp", before: []op{{1000, 100, false}}, append: op{1001, 101, false}, written: true},
		{name: "equal timestamp ignored", before: []op{{1000, 100, false}}, append: op{1000, 105, false}},
		{name: "smaller timestamp ignored", before: []op{{1000, 100, false}}, append: op{900, 105, false}},
		{name: "equal offset greater timestamp", before: []op{{1000, 100, false}}, append: op{2000, 100, false}, written: true},
		{name: "smaller offset", before: []op{{1000, 105, false}}, append: op{2000, 104, false}, wantErr: ErrNotIncreasing},
		{name: "smaller offset and timestamp", before: []op{{1000, 105, false}}, append: op{900, 104, false}, wantErr: ErrNotIncreasing},
		{name: "below base", append: op{ts: 1000, off: 99}, wantErr: ErrOffsetOverflow},
		{name: "relative offset MaxInt32", append: op{ts: 1000, off: 100 + math.MaxInt32}, written: true},
		{name: "relative offset past MaxInt32", append: op{ts: 1000, off: 101 + math.MaxInt32}, wantErr: ErrOffsetOverflow},
		{name: "full at maxEntries-1", maxSize: 3 * TimeEntrySize, before: []op{{1, 100, false}, {2, 101, false}}, append: op{3, 102, false}, wantErr: ErrIndexFull},
		{name: "skipFullCheck fills the last slot", maxSize: 3 * TimeEntrySize, before: []op{{1, 100, false}, {2, 101, false}}, append: op{3, 102, true}, written: true},
		{name: "skipFullCheck on a full index", maxSize: 2 * TimeEntrySize, before: []op{{1, 100, false}, {2, 101, true}}, append: op{3, 102, true}, wantErr: ErrIndexFull},
		{name: "ignored on a full index", maxSize: 2 * TimeEntrySize, before: []op{{1, 100, false}}, append: op{1, 102, false}},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				maxSize := tc.maxSize
				if maxSize == 0 {
					maxSize = 4096
				}
				path := filepath.Join(dir, fmt.Sprintf("%020d.timeindex", i))
				idx := openTime(t, fsys, path, 100, maxSize)
				defer idx.Close()
				for _, o := range tc.before {
					require.NoError(t, idx.MaybeAppend(o.ts, o.off, o.skip))
				}
				before := timeEntries(idx)
				err := idx.MaybeAppend(tc.append.ts, tc.append.off, tc.append.skip)
				require.ErrorIs(t, err, tc.wantErr, "MaybeAppend(%v) = %v, want %v", tc.append, err, tc.wantErr)
				require.Equal(t, tc.wantErr == nil, err == nil, "MaybeAppend(%v) = %v, want %v", tc.append, err, tc.wantErr)
				if err != nil {
					assert.True(t, strings.HasPrefix(err.Error(), "partlog/index: "), "error %q lacks the prefix or path", err)
					assert.Contains(t, err.Error(), path, "error %q lacks the prefix or path", err)
				}
				want := before
				if tc.written {
					want = append(want, TimeEntry{tc.append.ts, tc.append.off})
				}
				got := timeEntries(idx)
				assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "entries = %v, want %v", got, want)
			})
		}
	})
}

func TestTimeLookup(t *testing.T) {
	const base = 50
	entries := []TimeEntry{{1000, 52}, {1500, 60}, {1600, 60}, {2000, 75}}
	tests := []struct {
		name    string
		entries []TimeEntry
		target  int64
		want    TimeEntry
	}{
		{"empty", nil, 1000, TimeEntry{NoTimestamp, base}},
		{"below first", entries, 999, TimeEntry{NoTimestamp, base}},
		{"negative", entries, -5, TimeEntry{NoTimestamp, base}},
		{"first", entries, 1000, entries[0]},
		{"between", entries, 1499, entries[0]},
		{"repeated offset", entries, 1600, entries[2]},
		{"last", entries, 2000, entries[3]},
		{"past last", entries, math.MaxInt64, entries[3]},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				idx := openTime(t, fsys, filepath.Join(dir, fmt.Sprintf("%d.timeindex", i)), base, 4096)
				defer idx.Close()
				for _, e := range tc.entries {
					require.NoError(t, idx.MaybeAppend(e.Timestamp, e.Offset, false))
				}
				got := idx.Lookup(tc.target)
				assert.Equal(t, tc.want, got, "Lookup(%d) = %v, want %v", tc.target, got, tc.want)
			})
		}
	})
}

func TestTimeTruncateTo(t *testing.T) {
	// Offsets may repeat in a time index; TruncateTo drops all of them.
	entries := []TimeEntry{{1000, 52}, {1500, 60}, {1600, 60}, {2000, 75}}
	tests := []struct {
		name   string
		offset int64
		want   int
	}{
		{"base", 50, 0},
		{"first", 52, 0},
		{"past first", 53, 1},
		{"repeated offset", 60, 1},
		{"past repeated", 61, 3},
		{"last", 75, 3},
		{"past last", 76, 4},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				idx := openTime(t, fsys, filepath.Join(dir, fmt.Sprintf("%d.timeindex", i)), 50, 4096)
				defer idx.Close()
				for _, e := range entries {
					require.NoError(t, idx.MaybeAppend(e.Timestamp, e.Offset, false))
				}
				require.NoError(t, idx.TruncateTo(tc.offset))
				got := timeEntries(idx)
				require.Equal(t, fmt.Sprint(entries[:tc.want]), fmt.Sprint(got), "after TruncateTo(%d): %v, want %v", tc.offset, got, entries[:tc.want])
				wantLast := TimeEntry{NoTimestamp, 50}
				if tc.want > 0 {
					wantLast = entries[tc.want-1]
				}
				require.Equal(t, wantLast, idx.LastEntry(), "LastEntry")
			})
		}
	})
}

func TestOpenArguments(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "x.index")
		for _, tc := range []struct {
			name    string
			base    int64
			maxSize int
			want    error
		}{
			{"negative base", -1, 4096, ErrOffsetOverflow},
			{"base too large", MaxBaseOffset + 1, 4096, ErrOffsetOverflow},
			{"max size below one entry", 0, OffsetEntrySize - 1, ErrInvalidSize},
		} {
			_, err := OpenOffsetIndex(fsys, path, tc.base, tc.maxSize)
			assert.ErrorIs(t, err, tc.want, "%s: OpenOffsetIndex = %v, want %v", tc.name, err, tc.want)
		}
		_, err := fsys.Stat(path)
		assert.Error(t, err, "a failed open left %s behind", path)
		idx := openOffset(t, fsys, path, MaxBaseOffset, 4096)
		require.NoError(t, idx.Append(math.MaxInt64, 0))
		got := idx.Lookup(math.MaxInt64)
		require.Equal(t, OffsetEntry{math.MaxInt64, 0}, got, "Lookup at MaxBaseOffset = %v", got)
		require.NoError(t, idx.Close())
	})
}

func TestLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "00000000000000000100.index")
		// 100 bytes round down to 12 offset entries.
		idx := openOffset(t, fsys, path, 100, 100)
		got := fileSize(t, fsys, path)
		require.Equal(t, int64(96), got, "new index preallocated to %d bytes, want 96", got)
		require.Equal(t, 12, idx.MaxEntries(), "new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		require.Equal(t, 0, idx.Entries(), "new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		require.False(t, idx.IsFull(), "new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		require.Equal(t, int64(100), idx.BaseOffset(), "new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		require.Equal(t, path, idx.Path(), "new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		for i := range 5 {
			require.NoError(t, idx.Append(int64(101+i*10), int64(i*1000)))
		}
		require.NoError(t, idx.Flush())
		require.NoError(t, idx.SanityCheck())
		require.Equal(t, int64(40), idx.sizeInBytes(), "sizeInBytes = %d", idx.sizeInBytes())

		// Seal: trim, full, then re-activate with Resize.
		require.NoError(t, idx.TrimToValidSize())
		got = fileSize(t, fsys, path)
		require.Equal(t, int64(40), got, "trimmed to %d bytes, want 40", got)
		require.True(t, idx.IsFull(), "trimmed index: full %v max %d", idx.IsFull(), idx.MaxEntries())
		require.Equal(t, 5, idx.MaxEntries(), "trimmed index: full %v max %d", idx.IsFull(), idx.MaxEntries())
		err := idx.Append(200, 9000)
		require.ErrorIs(t, err, ErrIndexFull, "Append to a trimmed index = %v", err)
		err = idx.Resize(3 * OffsetEntrySize)
		require.ErrorIs(t, err, ErrInvalidSize, "Resize below the entries = %v", err)
		// Grow past the first mapping: remaps, keeps the entries; the
		// file keeps its length until an entry is written past its end.
		require.NoError(t, idx.Resize(1000))
		got = fileSize(t, fsys, path)
		require.Equal(t, int64(40), got, "resized: %d bytes before an entry past the end, want 40", got)
		require.Equal(t, 125, idx.MaxEntries(), "after Resize: max %d entries %d lookup %v", idx.MaxEntries(), idx.Entries(), idx.Lookup(125))
		require.Equal(t, 5, idx.Entries(), "after Resize: max %d entries %d lookup %v", idx.MaxEntries(), idx.Entries(), idx.Lookup(125))
		require.Equal(t, OffsetEntry{121, 2000}, idx.Lookup(125), "after Resize: max %d entries %d lookup %v", idx.MaxEntries(), idx.Entries(), idx.Lookup(125))
		for i := 5; i < 125; i++ {
			require.NoError(t, idx.Append(int64(101+i*10), int64(i*1000)))
			if i == 5 {
				got = fileSize(t, fsys, path)
				require.Equal(t, int64(1000), got, "resized, one entry past the end: %d bytes, want 1000", got)
			}
		}
		require.True(t, idx.IsFull(), "index with 125 of 125 entries not full")
		err = idx.Resize(50 * OffsetEntrySize)
		require.ErrorIs(t, err, ErrInvalidSize, "Resize below the entries = %v", err)

		// Rename keeps it open.
		newPath := filepath.Join(dir, "00000000000000000100.index.deleted")
		require.NoError(t, idx.Rename(newPath))
		require.Equal(t, newPath, idx.Path(), "Path after Rename = %s", idx.Path())
		require.NoError(t, idx.Flush())

		// Reset: empty, back to the size given to Open.
		require.NoError(t, idx.Reset())
		require.Equal(t, 0, idx.Entries(), "after Reset: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.Equal(t, 12, idx.MaxEntries(), "after Reset: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.Equal(t, int64(96), fileSize(t, fsys, newPath), "after Reset: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.Equal(t, OffsetEntry{100, 0}, idx.Lookup(500), "Lookup after Reset")
		require.NoError(t, idx.Append(100, 0))

		// Close trims; a second Close and writes after it fail; reads
		// after it see an empty index.
		require.NoError(t, idx.Close())
		got = fileSize(t, fsys, newPath)
		require.Equal(t, int64(8), got, "closed index is %d bytes, want 8", got)
		for name, err := range map[string]error{
			"Close": idx.Close(), "Append": idx.Append(300, 0), "TruncateTo": idx.TruncateTo(0),
			"Reset": idx.Reset(), "Flush": idx.Flush(), "Trim": idx.TrimToValidSize(), "Resize": idx.Resize(4096),
		} {
			assert.ErrorIs(t, err, ErrClosed, "%s after Close = %v, want ErrClosed", name, err)
		}
		assert.Equal(t, 0, idx.Entries(), "closed index reads %d entries", idx.Entries())
		assert.Equal(t, OffsetEntry{100, 0}, idx.Lookup(100), "closed index reads %d entries", idx.Entries())

		// Reopen: one entry, the file untouched until an append.
		idx = openOffset(t, fsys, newPath, 100, 100)
		require.Equal(t, 1, idx.Entries(), "reopened: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.Equal(t, 12, idx.MaxEntries(), "reopened: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.Equal(t, int64(8), fileSize(t, fsys, newPath), "reopened: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		require.NoError(t, idx.SanityCheck())
		require.NoError(t, idx.Append(105, 77))
		got = fileSize(t, fsys, newPath)
		require.Equal(t, int64(96), got, "appending to a reopened index grew it to %d, want 96", got)
		require.NoError(t, idx.Delete())
		_, err = fsys.Stat(newPath)
		require.Error(t, err, "Delete left the file")
		require.NoError(t, idx.Delete(), "second Delete =")
	})
}

func TestTimeLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "00000000000000000000.timeindex")
		idx := openTime(t, fsys, path, 0, 5*TimeEntrySize+11)
		require.Equal(t, int64(60), fileSize(t, fsys, path), "new time index: %d bytes, %d slots", fileSize(t, fsys, path), idx.MaxEntries())
		require.Equal(t, 5, idx.MaxEntries(), "new time index: %d bytes, %d slots", fileSize(t, fsys, path), idx.MaxEntries())
		for i := range 4 {
			require.NoError(t, idx.MaybeAppend(int64(1000+i), int64(i), false))
		}
		require.True(t, idx.IsFull(), "time index with 4 of 5 entries is not full")
		// Seal: the final entry goes into the reserved slot.
		require.NoError(t, idx.MaybeAppend(2000, 9, true))
		require.NoError(t, idx.SanityCheck())
		require.NoError(t, idx.Check(10))
		err := idx.Check(9)
		require.True(t, base.IsCorruption(err), "Check(9) = %v, want corruption", err)
		require.NoError(t, idx.TrimToValidSize())
		require.NoError(t, idx.Resize(10*TimeEntrySize))
		require.Equal(t, 10, idx.MaxEntries(), "after Resize: max %d entries %d last %v", idx.MaxEntries(), idx.Entries(), idx.LastEntry())
		require.Equal(t, 5, idx.Entries(), "after Resize: max %d entries %d last %v", idx.MaxEntries(), idx.Entries(), idx.LastEntry())
		require.Equal(t, TimeEntry{2000, 9}, idx.LastEntry(), "after Resize: max %d entries %d last %v", idx.MaxEntries(), idx.Entries(), idx.LastEntry())
		require.NoError(t, idx.Reset())
		require.Equal(t, 0, idx.Entries(), "after Reset: entries %d last %v", idx.Entries(), idx.LastEntry())
		require.Equal(t, TimeEntry{NoTimestamp, 0}, idx.LastEntry(), "after Reset: entries %d last %v", idx.Entries(), idx.LastEntry())
		require.NoError(t, idx.MaybeAppend(5, 0, false))
		require.NoError(t, idx.Close())
		got := readFile(t, fsys, path)
		require.Equal(t, "00 00 00 00 00 00 00 05 00 00 00 00", fmt.Sprintf("% x", got), "closed time index bytes % x", got)
		err = idx.Close()
		require.ErrorIs(t, err, ErrClosed, "second Close = %v", err)
		err = idx.MaybeAppend(6, 1, false)
		require.ErrorIs(t, err, ErrClosed, "MaybeAppend after Close = %v", err)
		newPath := path + ".swap"
		require.NoError(t, idx.Rename(newPath))
		require.NoError(t, idx.Delete())
		_, err = fsys.Stat(newPath)
		require.Error(t, err, "Delete left the file")
	})
}

func TestEntryOutOfRangePanics(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		idx := openOffset(t, fsys, filepath.Join(dir, "a.index"), 0, 4096)
		defer idx.Close()
		tidx := openTime(t, fsys, filepath.Join(dir, "a.timeindex"), 0, 4096)
		defer tidx.Close()
		for name, f := range map[string]func(){
			"offset -1": func() { idx.Entry(-1) }, "offset 0 of 0": func() { idx.Entry(0) },
			"time -1": func() { tidx.Entry(-1) }, "time 0 of 0": func() { tidx.Entry(0) },
		} {
			func() {
				defer func() {
					assert.NotNil(t, recover(), "%s: no panic", name)
				}()
				f()
			}()
		}
	})
}

// A crash leaves an unsealed index at its preallocated size with a zero
// tail; reopening takes the entry count from the length (Kafka), and
// SanityCheck must fail (KAFKA-12734).
func TestSanityCheckZeroTailKAFKA12734(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for _, n := range []int{0, 1, 2, 7} {
			t.Run(fmt.Sprintf("%d entries", n), func(t *testing.T) {
				opath := filepath.Join(dir, fmt.Sprintf("%020d.index", n))
				tpath := filepath.Join(dir, fmt.Sprintf("%020d.timeindex", n))
				idx := openOffset(t, fsys, opath, 10, 80)
				tidx := openTime(t, fsys, tpath, 10, 120)
				for i := range n {
					require.NoError(t, idx.Append(int64(11+i), int64(100*i)))
					require.NoError(t, tidx.MaybeAppend(int64(1000+i), int64(11+i), false))
				}
				require.NoError(t, idx.Flush())
				require.NoError(t, tidx.Flush())
				// "Crash": open the files again while the first
				// handles never trimmed them.
				idx2 := openOffset(t, fsys, opath, 10, 80)
				tidx2 := openTime(t, fsys, tpath, 10, 120)
				require.Equal(t, 10, idx2.Entries(), "reopened with %d and %d entries, want the preallocated 10", idx2.Entries(), tidx2.Entries())
				require.Equal(t, 10, tidx2.Entries(), "reopened with %d and %d entries, want the preallocated 10", idx2.Entries(), tidx2.Entries())
				for name, err := range map[string]error{"offset": idx2.SanityCheck(), "time": tidx2.SanityCheck()} {
					var ce *base.CorruptionError
					require.ErrorIs(t, err, base.ErrCorrupt, "%s SanityCheck = %v, want a corruption error", name, err)
					require.ErrorAs(t, err, &ce, "%s SanityCheck = %v, want a corruption error", name, err)
					assert.True(t, strings.HasSuffix(ce.File, ".index") || strings.HasSuffix(ce.File, ".timeindex"), "%s: corruption at %s %d %q", name, ce.File, ce.Pos, ce.Field)
					assert.Equal(t, "entry 9", ce.Field, "%s: corruption at %s %d %q", name, ce.File, ce.Pos, ce.Field)
				}
				// Rebuild.
				require.NoError(t, idx2.Reset())
				require.NoError(t, idx2.SanityCheck())
				for _, x := range []interface{ Delete() error }{idx2, tidx2, idx, tidx} {
					require.NoError(t, x.Delete())
				}
			})
		}
	})
}

func TestSanityCheck(t *testing.T) {
	tests := []struct {
		name    string
		time    bool
		data    []byte
		entries int
		field   string // "" = passes
	}{
		{name: "offset empty", data: nil},
		{name: "offset one zero entry", data: make([]byte, 8), entries: 1},
		{name: "offset two entries", data: append(enc32(0, 0), enc32(5, 100)...), entries: 2},
		{name: "offset partial entry", data: append(enc32(0, 0), 1, 2, 3), entries: 1, field: "length"},
		{name: "offset last below base", data: enc32(-1, 0), entries: 1, field: "entry 0"},
		{name: "offset negative position", data: enc32(1, -5), entries: 1, field: "entry 0"},
		{name: "offset equal offsets", data: append(enc32(3, 0), enc32(3, 100)...), entries: 2, field: "entry 1"},
		{name: "offset position goes back", data: append(enc32(3, 100), enc32(4, 50)...), entries: 2, field: "entry 1"},
		{name: "offset zero tail", data: append(enc32(3, 100), make([]byte, 16)...), entries: 3, field: "entry 2"},
		{name: "time one zero entry", time: true, data: make([]byte, 12), entries: 1},
		{name: "time two entries", time: true, data: append(encTime(5, 0), encTime(6, 0)...), entries: 2},
		{name: "time partial entry", time: true, data: append(encTime(5, 0), 9), entries: 1, field: "length"},
		{name: "time last below base", time: true, data: encTime(5, -1), entries: 1, field: "entry 0"},
		{name: "time equal timestamps", time: true, data: append(encTime(5, 0), encTime(5, 1)...), entries: 2, field: "entry 1"},
		{name: "time offset goes back", time: true, data: append(encTime(5, 3), encTime(6, 2)...), entries: 2, field: "entry 1"},
		{name: "time zero tail", time: true, data: append(encTime(5, 3), make([]byte, 12)...), entries: 2, field: "entry 1"},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				path := filepath.Join(dir, fmt.Sprint(i))
				writeFile(t, fsys, path, tc.data)
				var err error
				var entries int
				if tc.time {
					idx := openTime(t, fsys, path, 0, 4096)
					err, entries = idx.SanityCheck(), idx.Entries()
					defer idx.Close()
				} else {
					idx := openOffset(t, fsys, path, 0, 4096)
					err, entries = idx.SanityCheck(), idx.Entries()
					defer idx.Close()
				}
				assert.Equal(t, tc.entries, entries, "entries = %d, want %d", entries, tc.entries)
				if tc.field == "" {
					require.NoError(t, err, "SanityCheck =")
					return
				}
				var ce *base.CorruptionError
				require.ErrorAs(t, err, &ce, "SanityCheck = %v, want a CorruptionError", err)
				require.ErrorIs(t, err, base.ErrCorrupt, "SanityCheck = %v, want a CorruptionError", err)
				assert.Equal(t, path, ce.File, "corruption in %s at %d %q, want %s %q", ce.File, ce.Pos, ce.Field, path, tc.field)
				assert.Equal(t, tc.field, ce.Field, "corruption in %s at %d %q, want %s %q", ce.File, ce.Pos, ce.Field, path, tc.field)
			})
		}
	})
}

func TestOffsetCheck(t *testing.T) {
	// A log with batches at positions 0 (offsets 0..4), 100 (5..9),
	// 200 (10..19), 300 (20..20); size 400.
	batches := map[int64]int64{0: 4, 100: 9, 200: 19, 300: 20}
	at := func(pos int64) (int64, bool) { last, ok := batches[pos]; return last, ok }
	tests := []struct {
		name  string
		data  []byte
		field string
	}{
		{"empty", nil, ""},
		{"every batch", enc32(4, 0, 9, 100, 19, 200, 20, 300), ""},
		{"sparse", enc32(9, 100, 20, 300), ""},
		{"two batches per entry (Kafka 2.x)", enc32(9, 0, 20, 200), ""},
		{"not a batch start", enc32(4, 0, 9, 101), "entry 1"},
		{"offset before its batch's end", enc32(3, 0), "entry 0"},
		{"offsets not increasing", enc32(9, 100, 9, 200), "entry 1"},
		{"positions not increasing", enc32(9, 100, 4, 0), "entry 1"},
		{"position past the log", enc32(4, 0, 30, 400), "entry 1"},
		{"batch ends at the previous entry", enc32(19, 100, 20, 200), "entry 1"},
	}
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				path := filepath.Join(dir, fmt.Sprint(i))
				writeFile(t, fsys, path, tc.data)
				idx := openOffset(t, fsys, path, 0, 4096)
				defer idx.Close()
				err := idx.Check(400, at)
				if tc.field == "" {
					require.NoError(t, err)
					return
				}
				var ce *base.CorruptionError
				require.ErrorAs(t, err, &ce, "Check = %v, want corruption in %s", err, tc.field)
				require.Equal(t, tc.field, ce.Field, "Check = %v, want corruption in %s", err, tc.field)
			})
		}
	})
}
