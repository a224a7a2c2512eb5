package index

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

func openOffset(t testing.TB, fsys vfs.FS, path string, base int64, maxSize int) *OffsetIndex {
	t.Helper()
	idx, err := OpenOffsetIndex(fsys, path, base, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func openTime(t testing.TB, fsys vfs.FS, path string, base int64, maxSize int) *TimeIndex {
	t.Helper()
	idx, err := OpenTimeIndex(fsys, path, base, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func offsetEntries(idx *OffsetIndex) []OffsetEntry {
	var es []OffsetEntry
	for i := range idx.Entries() {
		es = append(es, idx.Entry(i))
	}
	return es
}

func timeEntries(idx *TimeIndex) []TimeEntry {
	var es []TimeEntry
	for i := range idx.Entries() {
		es = append(es, idx.Entry(i))
	}
	return es
}

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
					if err := idx.Append(o.off, o.pos); err != nil {
						t.Fatal(err)
					}
				}
				before := offsetEntries(idx)
				err := idx.Append(tc.append.off, tc.append.pos)
				if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
					t.Fatalf("Append(%d, %d) = %v, want %v", tc.append.off, tc.append.pos, err, tc.wantErr)
				}
				got := offsetEntries(idx)
				if err != nil {
					if !strings.HasPrefix(err.Error(), "partlog/index: ") || !strings.Contains(err.Error(), path) ||
						!strings.Contains(err.Error(), fmt.Sprint(tc.append.off)) {
						t.Errorf("error %q lacks the prefix, path or offset", err)
					}
					if fmt.Sprint(got) != fmt.Sprint(before) {
						t.Errorf("entries changed on error: %v -> %v", before, got)
					}
					return
				}
				want := append(before, OffsetEntry{tc.append.off, tc.append.pos})
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("entries = %v, want %v", got, want)
				}
				if le := idx.LastEntry(); le != want[len(want)-1] {
					t.Errorf("LastEntry = %v, want %v", le, want[len(want)-1])
				}
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
					if err := idx.Append(e.Offset, e.Position); err != nil {
						t.Fatal(err)
					}
				}
				if got := idx.Lookup(tc.target); got != tc.want {
					t.Errorf("Lookup(%d) = %v, want %v", tc.target, got, tc.want)
				}
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
					if err := idx.Append(e.Offset, e.Position); err != nil {
						t.Fatal(err)
					}
				}
				if err := idx.TruncateTo(tc.offset); err != nil {
					t.Fatal(err)
				}
				if got := offsetEntries(idx); fmt.Sprint(got) != fmt.Sprint(entries[:tc.want]) {
					t.Fatalf("after TruncateTo(%d): %v, want %v", tc.offset, got, entries[:tc.want])
				}
				// The slots after the cut are reused.
				next := int64(tc.offset)
				if tc.want > 0 {
					next = max(next, entries[tc.want-1].Offset+1)
				}
				next = max(next, 0)
				if next < math.MaxInt32 {
					if err := idx.Append(next, 5000); err != nil {
						t.Fatalf("Append(%d) after TruncateTo: %v", next, err)
					}
					if got := idx.Lookup(math.MaxInt64); got != (OffsetEntry{next, 5000}) {
						t.Fatalf("Lookup after re-append = %v", got)
					}
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
					if err := idx.MaybeAppend(o.ts, o.off, o.skip); err != nil {
						t.Fatal(err)
					}
				}
				before := timeEntries(idx)
				err := idx.MaybeAppend(tc.append.ts, tc.append.off, tc.append.skip)
				if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
					t.Fatalf("MaybeAppend(%v) = %v, want %v", tc.append, err, tc.wantErr)
				}
				if err != nil && (!strings.HasPrefix(err.Error(), "partlog/index: ") || !strings.Contains(err.Error(), path)) {
					t.Errorf("error %q lacks the prefix or path", err)
				}
				want := before
				if tc.written {
					want = append(want, TimeEntry{tc.append.ts, tc.append.off})
				}
				if got := timeEntries(idx); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("entries = %v, want %v", got, want)
				}
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
					if err := idx.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
						t.Fatal(err)
					}
				}
				if got := idx.Lookup(tc.target); got != tc.want {
					t.Errorf("Lookup(%d) = %v, want %v", tc.target, got, tc.want)
				}
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
					if err := idx.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
						t.Fatal(err)
					}
				}
				if err := idx.TruncateTo(tc.offset); err != nil {
					t.Fatal(err)
				}
				if got := timeEntries(idx); fmt.Sprint(got) != fmt.Sprint(entries[:tc.want]) {
					t.Fatalf("after TruncateTo(%d): %v, want %v", tc.offset, got, entries[:tc.want])
				}
				wantLast := TimeEntry{NoTimestamp, 50}
				if tc.want > 0 {
					wantLast = entries[tc.want-1]
				}
				if got := idx.LastEntry(); got != wantLast {
					t.Fatalf("LastEntry = %v, want %v", got, wantLast)
				}
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
			if _, err := OpenOffsetIndex(fsys, path, tc.base, tc.maxSize); !errors.Is(err, tc.want) {
				t.Errorf("%s: OpenOffsetIndex = %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, err := fsys.Stat(path); err == nil {
			t.Errorf("a failed open left %s behind", path)
		}
		idx := openOffset(t, fsys, path, MaxBaseOffset, 4096)
		if err := idx.Append(math.MaxInt64, 0); err != nil {
			t.Fatal(err)
		}
		if got := idx.Lookup(math.MaxInt64); got != (OffsetEntry{math.MaxInt64, 0}) {
			t.Fatalf("Lookup at MaxBaseOffset = %v", got)
		}
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "00000000000000000100.index")
		// 100 bytes round down to 12 offset entries.
		idx := openOffset(t, fsys, path, 100, 100)
		if got := fileSize(t, fsys, path); got != 96 {
			t.Fatalf("new index preallocated to %d bytes, want 96", got)
		}
		if idx.MaxEntries() != 12 || idx.Entries() != 0 || idx.IsFull() || idx.BaseOffset() != 100 || idx.Path() != path {
			t.Fatalf("new index: max %d entries %d full %v base %d path %s", idx.MaxEntries(), idx.Entries(), idx.IsFull(), idx.BaseOffset(), idx.Path())
		}
		for i := range 5 {
			if err := idx.Append(int64(101+i*10), int64(i*1000)); err != nil {
				t.Fatal(err)
			}
		}
		if err := idx.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := idx.SanityCheck(); err != nil {
			t.Fatal(err)
		}
		if idx.SizeInBytes() != 40 {
			t.Fatalf("SizeInBytes = %d", idx.SizeInBytes())
		}

		// Seal: trim, full, then re-activate with Resize.
		if err := idx.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, fsys, path); got != 40 {
			t.Fatalf("trimmed to %d bytes, want 40", got)
		}
		if !idx.IsFull() || idx.MaxEntries() != 5 {
			t.Fatalf("trimmed index: full %v max %d", idx.IsFull(), idx.MaxEntries())
		}
		if err := idx.Append(200, 9000); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append to a trimmed index = %v", err)
		}
		if err := idx.Resize(3 * OffsetEntrySize); !errors.Is(err, ErrInvalidSize) {
			t.Fatalf("Resize below the entries = %v", err)
		}
		// Grow past the first mapping: remaps, keeps the entries.
		if err := idx.Resize(1000); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, fsys, path); got != 1000 {
			t.Fatalf("resized to %d bytes, want 1000", got)
		}
		if idx.MaxEntries() != 125 || idx.Entries() != 5 || idx.Lookup(125) != (OffsetEntry{121, 2000}) {
			t.Fatalf("after Resize: max %d entries %d lookup %v", idx.MaxEntries(), idx.Entries(), idx.Lookup(125))
		}
		for i := 5; i < 125; i++ {
			if err := idx.Append(int64(101+i*10), int64(i*1000)); err != nil {
				t.Fatal(err)
			}
		}
		if !idx.IsFull() {
			t.Fatal("index with 125 of 125 entries not full")
		}
		if err := idx.Resize(50 * OffsetEntrySize); !errors.Is(err, ErrInvalidSize) {
			t.Fatalf("Resize below the entries = %v", err)
		}

		// Rename keeps it open.
		newPath := filepath.Join(dir, "00000000000000000100.index.deleted")
		if err := idx.Rename(newPath); err != nil {
			t.Fatal(err)
		}
		if idx.Path() != newPath {
			t.Fatalf("Path after Rename = %s", idx.Path())
		}
		if err := idx.Flush(); err != nil {
			t.Fatal(err)
		}

		// Reset: empty, back to the size given to Open.
		if err := idx.Reset(); err != nil {
			t.Fatal(err)
		}
		if idx.Entries() != 0 || idx.MaxEntries() != 12 || fileSize(t, fsys, newPath) != 96 {
			t.Fatalf("after Reset: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		}
		if got := idx.Lookup(500); got != (OffsetEntry{100, 0}) {
			t.Fatalf("Lookup after Reset = %v", got)
		}
		if err := idx.Append(100, 0); err != nil {
			t.Fatal(err)
		}

		// Close trims; a second Close and writes after it fail; reads
		// after it see an empty index.
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, fsys, newPath); got != 8 {
			t.Fatalf("closed index is %d bytes, want 8", got)
		}
		for name, err := range map[string]error{
			"Close": idx.Close(), "Append": idx.Append(300, 0), "TruncateTo": idx.TruncateTo(0),
			"Reset": idx.Reset(), "Flush": idx.Flush(), "Trim": idx.TrimToValidSize(), "Resize": idx.Resize(4096),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
		if idx.Entries() != 0 || idx.Lookup(100) != (OffsetEntry{100, 0}) {
			t.Errorf("closed index reads %d entries", idx.Entries())
		}

		// Reopen: one entry, the file untouched until an append.
		idx = openOffset(t, fsys, newPath, 100, 100)
		if idx.Entries() != 1 || idx.MaxEntries() != 12 || fileSize(t, fsys, newPath) != 8 {
			t.Fatalf("reopened: entries %d max %d size %d", idx.Entries(), idx.MaxEntries(), fileSize(t, fsys, newPath))
		}
		if err := idx.SanityCheck(); err != nil {
			t.Fatal(err)
		}
		if err := idx.Append(105, 77); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, fsys, newPath); got != 96 {
			t.Fatalf("appending to a reopened index grew it to %d, want 96", got)
		}
		if err := idx.Delete(); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(newPath); err == nil {
			t.Fatal("Delete left the file")
		}
		if err := idx.Delete(); err != nil {
			t.Fatalf("second Delete = %v", err)
		}
	})
}

func TestTimeLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, "00000000000000000000.timeindex")
		idx := openTime(t, fsys, path, 0, 5*TimeEntrySize+11)
		if fileSize(t, fsys, path) != 60 || idx.MaxEntries() != 5 {
			t.Fatalf("new time index: %d bytes, %d slots", fileSize(t, fsys, path), idx.MaxEntries())
		}
		for i := range 4 {
			if err := idx.MaybeAppend(int64(1000+i), int64(i), false); err != nil {
				t.Fatal(err)
			}
		}
		if !idx.IsFull() {
			t.Fatal("time index with 4 of 5 entries is not full")
		}
		// Seal: the final entry goes into the reserved slot.
		if err := idx.MaybeAppend(2000, 9, true); err != nil {
			t.Fatal(err)
		}
		if err := idx.SanityCheck(); err != nil {
			t.Fatal(err)
		}
		if err := idx.Check(10); err != nil {
			t.Fatal(err)
		}
		if err := idx.Check(9); !base.IsCorruption(err) {
			t.Fatalf("Check(9) = %v, want corruption", err)
		}
		if err := idx.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if err := idx.Resize(10 * TimeEntrySize); err != nil {
			t.Fatal(err)
		}
		if idx.MaxEntries() != 10 || idx.Entries() != 5 || idx.LastEntry() != (TimeEntry{2000, 9}) {
			t.Fatalf("after Resize: max %d entries %d last %v", idx.MaxEntries(), idx.Entries(), idx.LastEntry())
		}
		if err := idx.Reset(); err != nil {
			t.Fatal(err)
		}
		if idx.Entries() != 0 || idx.LastEntry() != (TimeEntry{NoTimestamp, 0}) {
			t.Fatalf("after Reset: entries %d last %v", idx.Entries(), idx.LastEntry())
		}
		if err := idx.MaybeAppend(5, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, path); fmt.Sprintf("% x", got) != "00 00 00 00 00 00 00 05 00 00 00 00" {
			t.Fatalf("closed time index bytes % x", got)
		}
		if err := idx.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close = %v", err)
		}
		if err := idx.MaybeAppend(6, 1, false); !errors.Is(err, ErrClosed) {
			t.Fatalf("MaybeAppend after Close = %v", err)
		}
		newPath := path + ".swap"
		if err := idx.Rename(newPath); err != nil {
			t.Fatal(err)
		}
		if err := idx.Delete(); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(newPath); err == nil {
			t.Fatal("Delete left the file")
		}
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
					if recover() == nil {
						t.Errorf("%s: no panic", name)
					}
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
					if err := idx.Append(int64(11+i), int64(100*i)); err != nil {
						t.Fatal(err)
					}
					if err := tidx.MaybeAppend(int64(1000+i), int64(11+i), false); err != nil {
						t.Fatal(err)
					}
				}
				if err := idx.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tidx.Flush(); err != nil {
					t.Fatal(err)
				}
				// "Crash": open the files again while the first
				// handles never trimmed them.
				idx2 := openOffset(t, fsys, opath, 10, 80)
				tidx2 := openTime(t, fsys, tpath, 10, 120)
				if idx2.Entries() != 10 || tidx2.Entries() != 10 {
					t.Fatalf("reopened with %d and %d entries, want the preallocated 10", idx2.Entries(), tidx2.Entries())
				}
				for name, err := range map[string]error{"offset": idx2.SanityCheck(), "time": tidx2.SanityCheck()} {
					var ce *base.CorruptionError
					if !errors.Is(err, base.ErrCorrupt) || !errors.As(err, &ce) {
						t.Fatalf("%s SanityCheck = %v, want a corruption error", name, err)
					}
					if !strings.HasSuffix(ce.File, ".index") && !strings.HasSuffix(ce.File, ".timeindex") || ce.Field != "entry 9" {
						t.Errorf("%s: corruption at %s %d %q", name, ce.File, ce.Pos, ce.Field)
					}
				}
				// Rebuild.
				if err := idx2.Reset(); err != nil {
					t.Fatal(err)
				}
				if err := idx2.SanityCheck(); err != nil {
					t.Fatal(err)
				}
				for _, x := range []interface{ Delete() error }{idx2, tidx2, idx, tidx} {
					if err := x.Delete(); err != nil {
						t.Fatal(err)
					}
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
				if entries != tc.entries {
					t.Errorf("entries = %d, want %d", entries, tc.entries)
				}
				if tc.field == "" {
					if err != nil {
						t.Fatalf("SanityCheck = %v", err)
					}
					return
				}
				var ce *base.CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, base.ErrCorrupt) {
					t.Fatalf("SanityCheck = %v, want a CorruptionError", err)
				}
				if ce.File != path || ce.Field != tc.field {
					t.Errorf("corruption in %s at %d %q, want %s %q", ce.File, ce.Pos, ce.Field, path, tc.field)
				}
			})
		}
	})
}

// enc32 encodes offset entries.
func enc32(pairs ...int32) []byte {
	var b []byte
	for i := 0; i+1 < len(pairs); i += 2 {
		var e [OffsetEntrySize]byte
		putOffsetEntry(e[:], pairs[i], pairs[i+1])
		b = append(b, e[:]...)
	}
	return b
}

// encTime encodes one time entry.
func encTime(ts int64, rel int32) []byte {
	var e [TimeEntrySize]byte
	putTimeEntry(e[:], ts, rel)
	return e[:]
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
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				var ce *base.CorruptionError
				if !errors.As(err, &ce) || ce.Field != tc.field {
					t.Fatalf("Check = %v, want corruption in %s", err, tc.field)
				}
			})
		}
	})
}
