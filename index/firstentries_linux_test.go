//go:build linux

// The first entries after an index is mapped are written through the file
// (fileWriteEntries): they touch no page of the mapping, which shows them
// all the same (Linux: file writes and shared mappings are coherent).

package index

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// firstEntriesIndex is one index kind, as TestIndexFirstEntriesTouchNoMappedPage
// drives it: entry i is appended, expected back and read by the writer.
type firstEntriesIndex struct {
	x      *indexFile
	append func(i int) error
	// last is what the writer's LastAppended returns, encoded.
	last func() []byte
	// lookup is entry i found through the mapping (a reader), encoded.
	lookup func(i int) []byte
	close  func() error
}

// firstEntriesKinds are the two index kinds; want(i) is entry i's bytes.
var firstEntriesKinds = []struct {
	name string
	ext  string
	size int
	want func(i int) []byte
	open func(t *testing.T, path string) firstEntriesIndex
}{
	{"offset", ".index", OffsetEntrySize,
		func(i int) []byte { return enc32(int32(i*10+5), int32(i*100)) },
		func(t *testing.T, path string) firstEntriesIndex {
			idx := openOffset(t, vfs.Default, path, 0, DefaultMaxIndexSize)
			enc := func(e OffsetEntry) []byte { return enc32(int32(e.Offset), int32(e.Position)) }
			return firstEntriesIndex{
				x:      &idx.x,
				append: func(i int) error { return idx.Append(int64(i*10+5), int64(i*100)) },
				last:   func() []byte { return enc(idx.LastAppended()) },
				lookup: func(i int) []byte { return enc(idx.Lookup(int64(i*10 + 5))) },
				close:  idx.Close,
			}
		}},
	{"time", ".timeindex", TimeEntrySize,
		func(i int) []byte { return encTime(int64(1000+i), int32(i*10)) },
		func(t *testing.T, path string) firstEntriesIndex {
			idx := openTime(t, vfs.Default, path, 0, DefaultMaxIndexSize)
			enc := func(e TimeEntry) []byte { return encTime(e.Timestamp, int32(e.Offset)) }
			return firstEntriesIndex{
				x:      &idx.x,
				append: func(i int) error { return idx.MaybeAppend(int64(1000+i), int64(i*10), false) },
				last:   func() []byte { return enc(idx.LastAppended()) },
				lookup: func(i int) []byte { return enc(idx.Lookup(int64(1000 + i))) },
				close:  idx.Close,
			}
		}},
}

// mapped returns the resident bytes of the process's mappings of path.
func mapped(t *testing.T, path string) int64 {
	t.Helper()
	n, err := vfs.MappedBytes(path)
	require.NoError(t, err)
	return n
}

// TestIndexFirstEntriesTouchNoMappedPage: the first fileWriteEntries
// entries appended after an existing index is mapped (opened again, or
// grown back by Resize after a trim, as a segment woken from rest is) map
// no new page of its mappings into the process (no page fault), the
// writer's LastAppended included; the file holds them, and lookups
// through the mapping see them. The entry after them, and every entry
// where the index writes through the mapping (fileWritesLeft 0: another
// platform), maps the page: what the measure would show if the first
// entries touched it. A new index's entries on its first page map
// nothing new either (TestNewIndexFirstPageFaultedAtCreate).
func TestIndexFirstEntriesTouchNoMappedPage(t *testing.T) {
	type step struct {
		// reopen closes the index and opens it again; wake trims it and
		// grows it back (a new mapping); noFileWrites makes it write
		// through the mapping.
		reopen, wake, noFileWrites bool
		// appends is how many entries to append next.
		appends int
		// touched says whether these appends may map a page.
		touched bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"reopened", []step{{appends: 5}, {reopen: true, appends: fileWriteEntries}}},
		{"the entry after the first ones", []step{{appends: 1}, {reopen: true, appends: fileWriteEntries}, {appends: 1, touched: true}}},
		{"written through the mapping", []step{{appends: 1}, {reopen: true, noFileWrites: true, appends: 1, touched: true}}},
		{"grown back after a trim", []step{{appends: fileWriteEntries + 3}, {wake: true, appends: fileWriteEntries}}},
		{"new index (its first page faulted in when created)", []step{{appends: fileWriteEntries + 3}}},
	}
	for _, kind := range firstEntriesKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "00000000000000000000"+kind.ext)
				idx := kind.open(t, path)
				defer func() { require.NoError(t, idx.close()) }()
				n := 0
				for _, st := range tt.steps {
					switch {
					case st.reopen:
						require.NoError(t, idx.close())
						idx = kind.open(t, path)
					case st.wake:
						require.NoError(t, idx.x.trimToValidSize())
						require.NoError(t, idx.x.resize(DefaultMaxIndexSize))
					}
					if st.noFileWrites {
						idx.x.w.fileWritesLeft = 0
					}
					before := mapped(t, path)
					for range st.appends {
						require.NoError(t, idx.append(n))
						require.Equal(t, kind.want(n), idx.last(), "LastAppended after entry %d", n)
						n++
					}
					if st.touched {
						assert.Greater(t, mapped(t, path), before, "appends through the mapping map its page")
					} else {
						assert.Equal(t, before, mapped(t, path), "resident bytes of the mappings after %d appends", st.appends)
					}
				}
				file, err := os.ReadFile(path)
				require.NoError(t, err)
				for i := range n {
					want := kind.want(i)
					require.Equal(t, want, file[i*kind.size:(i+1)*kind.size], "entry %d in the file", i)
					require.Equal(t, want, idx.lookup(i), "entry %d through the mapping", i)
				}
				assert.Positive(t, mapped(t, path), "lookups read the mapping")
			})
		}
	}
}

// TestIndexFlushSyncsFileWrites: Flush after an entry written through the
// file fdatasyncs the file (msync covers what was stored through the
// mapping, not what was written to the file); after an entry stored
// through the mapping it msyncs, as before, and makes no fdatasync.
func TestIndexFlushSyncsFileWrites(t *testing.T) {
	tests := []struct {
		name         string
		noFileWrites bool
		wantSyncs    int
	}{
		{"written through the file", false, 1},
		{"written through the mapping", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := vfs.NewInjector(vfs.Default)
			path := filepath.Join(t.TempDir(), "0.index")
			require.NoError(t, openOffset(t, in, path, 0, DefaultMaxIndexSize).Close())
			idx := openOffset(t, in, path, 0, DefaultMaxIndexSize) // an existing file
			defer func() { require.NoError(t, idx.Close()) }()
			if tt.noFileWrites {
				idx.x.w.fileWritesLeft = 0
			}
			require.NoError(t, idx.Append(7, 0))
			require.NoError(t, idx.Flush()) // the file grew: fdatasync in either case
			require.NoError(t, idx.Append(9, 100))
			syncs := 0
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpSync && op.Path == path {
					syncs++
				}
				return nil
			})
			require.NoError(t, idx.Flush())
			assert.Equal(t, tt.wantSyncs, syncs, "fdatasyncs of the first Flush")
			require.NoError(t, idx.Flush())
			assert.Equal(t, tt.wantSyncs, syncs, "a second Flush with nothing written")
			in.SetHook(nil)
			file, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(enc32(7, 0, 9, 100), file[:2*OffsetEntrySize]))
		})
	}
}

// TestNewIndexFirstPageFaultedAtCreate: creating an index maps its first
// page into the process (prefaultFirstPage: the page fault of the first
// entry is taken then, off the appends), and the entries that fill that
// page map nothing more and go through the mapping (no file write).
func TestNewIndexFirstPageFaultedAtCreate(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, kind := range firstEntriesKinds {
		t.Run(kind.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "00000000000000000000"+kind.ext)
			idx := kind.open(t, path)
			defer func() { require.NoError(t, idx.close()) }()
			require.Equal(t, page, mapped(t, path), "resident after the create")
			assert.Zero(t, idx.x.w.fileWritesLeft, "entries go through the mapping")
			n := int(page)/kind.size - 1 // the time index keeps its last slot
			for i := range n {
				require.NoError(t, idx.append(i))
			}
			assert.Equal(t, page, mapped(t, path), "resident after %d entries", n)
			assert.False(t, idx.x.w.fileDirty, "no entry written through the file")
			for i := range n {
				require.Equal(t, kind.want(i), idx.lookup(i), "entry %d", i)
			}
		})
	}
}
