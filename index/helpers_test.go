package index

import (
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/vfs"
)

// fsMode is one way of backing an index in tests.
type fsMode struct {
	name string
	// setup returns the FS and a directory to use, and arranges cleanup.
	setup func(t testing.TB) (vfs.FS, string)
}

// fsModes covers the mapped path (OS files), the heap fallback on OS files
// (mapRegion = mmap.MapHeap) and the heap fallback for files without a
// descriptor (vfs.NewMem).
var fsModes = []fsMode{
	{"mmap", func(t testing.TB) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
	{"heap-os", func(t testing.TB) (vfs.FS, string) {
		useHeap(t)
		return vfs.Default, t.TempDir()
	}},
	{"heap-mem", func(t testing.TB) (vfs.FS, string) {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("/mem", 0o755))
		return m, "/mem"
	}},
}

// useHeap makes the index use heap regions on OS files until the test
// ends. Tests that call it must not run in parallel.
func useHeap(t testing.TB) {
	mapRegion = mmap.MapHeap
	t.Cleanup(func() { mapRegion = mmap.Map })
}

// forEachMode runs f as a subtest per fsMode.
func forEachMode(t *testing.T, f func(t *testing.T, fsys vfs.FS, dir string)) {
	for _, m := range fsModes {
		t.Run(m.name, func(t *testing.T) {
			fsys, dir := m.setup(t)
			f(t, fsys, dir)
		})
	}
}

// fileSize returns the length of the file at path.
func fileSize(t tb, fsys vfs.FS, path string) int64 {
	t.Helper()
	st, err := fsys.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// readFile returns the bytes of the file at path.
func readFile(t tb, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

// writeFile creates the file at path holding b.
func writeFile(t tb, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.Create(path)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// tb is what the file helpers need of a *testing.T or a *rapid.T.
type tb interface {
	require.TestingT
	Helper()
}

// targets returns benchTargets targets in [lo, hi).
func targets(lo, hi int64) []int64 {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := make([]int64, benchTargets)
	for i := range ts {
		ts[i] = lo + rng.Int64N(hi-lo)
	}
	return ts
}

func openOffset(t testing.TB, fsys vfs.FS, path string, base int64, maxSize int) *OffsetIndex {
	t.Helper()
	idx, err := OpenOffsetIndex(fsys, path, base, maxSize)
	require.NoError(t, err)
	return idx
}

func openTime(t testing.TB, fsys vfs.FS, path string, base int64, maxSize int) *TimeIndex {
	t.Helper()
	idx, err := OpenTimeIndex(fsys, path, base, maxSize)
	require.NoError(t, err)
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

func linearOffset(es []OffsetEntry, base, target int64) OffsetEntry {
	found := OffsetEntry{Offset: base}
	for _, e := range es {
		if e.Offset <= target {
			found = e
		}
	}
	return found
}
