package mmap

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/invariants"
	"github.com/partlog/partlog/internal/vfs"
)

// noFd hides a file's descriptor, so Map takes the heap path.
type noFd struct{ vfs.File }

func (noFd) Fd() uintptr { return vfs.InvalidFd }

// failWrites is a file without an fd whose WriteAt accepts at most limit
// bytes and then fails.
type failWrites struct {
	noFd
	limit int
}

var errWrite = errors.New("write failed")

func (f failWrites) WriteAt(p []byte, off int64) (int, error) {
	if len(p) <= f.limit {
		return f.File.WriteAt(p, off)
	}
	n, _ := f.File.WriteAt(p[:f.limit], off)
	return n, errWrite
}

func openFile(t *testing.T, content []byte) vfs.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	f, err := vfs.Default.OpenReadWrite(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func fileBytes(t *testing.T, f vfs.File) []byte {
	t.Helper()
	fi, err := f.Stat()
	require.NoError(t, err)
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	if err != nil {
		require.True(t, err == io.EOF, err)
	}
	return b
}

// modes runs a subtest for the mapped and the heap path.
var modes = []struct {
	name   string
	wrap   func(vfs.File) vfs.File
	mapped bool
}{
	{"mapped", func(f vfs.File) vfs.File { return f }, mmapSupported},
	{"heap", func(f vfs.File) vfs.File { return noFd{f} }, false},
}

func TestMapWritable(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, make([]byte, 64))
			r, err := Map(m.wrap(f), 64, true)
			require.NoError(t, err)
			require.Equal(t, m.mapped, r.Mapped(), "mapped=%v writable=%v len=%d bytes=%d", r.Mapped(), r.Writable(), r.Len(), len(r.Bytes()))
			require.True(t, r.Writable(), "mapped=%v writable=%v len=%d bytes=%d", r.Mapped(), r.Writable(), r.Len(), len(r.Bytes()))
			require.Equal(t, 64, r.Len(), "mapped=%v writable=%v len=%d bytes=%d", r.Mapped(), r.Writable(), r.Len(), len(r.Bytes()))
			require.Len(t, r.Bytes(), 64, "mapped=%v writable=%v len=%d bytes=%d", r.Mapped(), r.Writable(), r.Len(), len(r.Bytes()))
			require.NoError(t, r.WriteAt([]byte("hello"), 8))
			require.NoError(t, r.WriteAt([]byte("end"), 61))
			require.NoError(t, r.Sync())
			gotMem := string(r.Bytes()[8:13])
			require.Equal(t, "hello", gotMem, "Bytes = %q", gotMem)
			got := fileBytes(t, f)
			require.Equal(t, "hello", string(got[8:13]), "file = %q", got)
			require.Equal(t, "end", string(got[61:]), "file = %q", got)
			require.NoError(t, r.Unmap())
			require.Nil(t, r.Bytes(), "Bytes after Unmap not nil")
			require.NoError(t, r.Unmap(), "second Unmap")
		})
	}
}

func TestMapReadOnly(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, []byte("0123456789"))
			r, err := Map(m.wrap(f), 10, false)
			require.NoError(t, err)
			defer r.Unmap()
			require.Equal(t, "0123456789", string(r.Bytes()), "Bytes = %q", r.Bytes())
			err = r.WriteAt([]byte("x"), 0)
			require.ErrorIs(t, err, ErrReadOnly, "WriteAt = %v, want ErrReadOnly", err)
			require.NoError(t, r.Sync())
			// A write to the file: the shared mapping sees it, the heap
			// copy does not.
			_, err = f.WriteAt([]byte("AB"), 0)
			require.NoError(t, err)
			want := "0123456789"
			if m.mapped {
				want = "AB23456789"
			}
			require.Equal(t, want, string(r.Bytes()), "after file write Bytes = %q, want %q", r.Bytes(), want)
		})
	}
}

// TestMapPastEOF maps more than the file holds: the bytes inside the file
// are readable; the heap copy is zero past the end.
func TestMapPastEOF(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, []byte("abc"))
			const size = 3 * 4096
			r, err := Map(m.wrap(f), size, false)
			require.NoError(t, err)
			defer r.Unmap()
			require.Len(t, r.Bytes(), size, "len %d prefix %q", len(r.Bytes()), r.Bytes()[:3])
			require.Equal(t, "abc", string(r.Bytes()[:3]), "len %d prefix %q", len(r.Bytes()), r.Bytes()[:3])
			if !m.mapped {
				require.Equal(t, string(make([]byte, size-3)), string(r.Bytes()[3:]), "heap region not zero past EOF")
			}
		})
	}
}

func TestMapEmpty(t *testing.T) {
	for _, m := range modes {
		for _, writable := range []bool{false, true} {
			name := m.name + "/ro"
			if writable {
				name = m.name + "/rw"
			}
			t.Run(name, func(t *testing.T) {
				f := openFile(t, nil)
				r, err := Map(m.wrap(f), 0, writable)
				require.NoError(t, err)
				require.NotNil(t, r.Bytes(), "Bytes = %v", r.Bytes())
				require.Empty(t, r.Bytes(), "Bytes = %v", r.Bytes())
				err = r.WriteAt(nil, 0)
				if writable {
					require.NoError(t, err, "empty WriteAt: %v", err)
				}
				err = r.WriteAt([]byte{1}, 0)
				if !errors.Is(err, ErrOutOfRange) {
					require.ErrorIs(t, err, ErrReadOnly, "WriteAt = %v", err)
				}
				require.NoError(t, r.Sync())
				require.NoError(t, r.Advise(Random))
				require.NoError(t, r.Unmap())
			})
		}
	}
}

func TestWriteAtErrors(t *testing.T) {
	f := openFile(t, make([]byte, 16))
	r, err := Map(f, 16, true)
	require.NoError(t, err)
	tests := []struct {
		name string
		p    []byte
		off  int64
		want error
	}{
		{"negative offset", []byte{1}, -1, ErrOutOfRange},
		{"past end", []byte{1}, 16, ErrOutOfRange},
		{"straddles end", []byte{1, 2}, 15, ErrOutOfRange},
		{"offset beyond size", nil, 17, ErrOutOfRange},
		{"last byte", []byte{1}, 15, nil},
		{"empty at end", nil, 16, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.WriteAt(tt.p, tt.off)
			require.ErrorIs(t, err, tt.want, "WriteAt(%d bytes, %d) = %v, want %v", len(tt.p), tt.off, err, tt.want)
		})
	}
	require.NoError(t, r.Unmap())
	for name, err := range map[string]error{
		"WriteAt": r.WriteAt([]byte{1}, 0),
		"Sync":    r.Sync(),
		"Advise":  r.Advise(Normal),
	} {
		assert.ErrorIs(t, err, ErrUnmapped, "%s after Unmap = %v, want ErrUnmapped", name, err)
	}
	_, err = Map(f, -1, false)
	require.ErrorIs(t, err, ErrNegativeSize, "Map(-1) = %v", err)
	_, err = MapHeap(f, -1, false)
	require.ErrorIs(t, err, ErrNegativeSize, "MapHeap(-1) = %v", err)
}

// TestHeapWriteFailure: when the file refuses a write, Bytes shows only what
// the file accepted.
func TestHeapWriteFailure(t *testing.T) {
	f := openFile(t, make([]byte, 16))
	r, err := Map(failWrites{noFd{f}, 2}, 16, true)
	require.NoError(t, err)
	defer r.Unmap()
	err = r.WriteAt([]byte("abcd"), 4)
	require.ErrorIs(t, err, errWrite, "WriteAt = %v, want errWrite", err)
	got := r.Bytes()[4:8]
	require.Equal(t, string([]byte{'a', 'b', 0, 0}), string(got), "Bytes = %q", got)
	got = fileBytes(t, f)[4:8]
	require.Equal(t, string([]byte{'a', 'b', 0, 0}), string(got), "file = %q", got)
}

func TestAdvise(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, make([]byte, 8192))
			r, err := Map(m.wrap(f), 8192, false)
			require.NoError(t, err)
			defer r.Unmap()
			for _, adv := range []int{Normal, Random, Sequential, WillNeed, DontNeed} {
				require.NoError(t, r.Advise(adv), "Advise(%d)", adv)
			}
		})
	}
}

// TestMapHeapOnFd: MapHeap ignores the descriptor.
func TestMapHeapOnFd(t *testing.T) {
	f := openFile(t, []byte("xyz"))
	r, err := MapHeap(f, 3, true)
	require.NoError(t, err)
	defer r.Unmap()
	require.False(t, r.Mapped(), "mapped=%v bytes=%q", r.Mapped(), r.Bytes())
	require.Equal(t, "xyz", string(r.Bytes()), "mapped=%v bytes=%q", r.Mapped(), r.Bytes())
	require.NoError(t, r.WriteAt([]byte("Z"), 2))
	require.NoError(t, r.Sync())
	got := string(fileBytes(t, f))
	require.Equal(t, "xyZ", got, "file = %q", got)
}

// TestMapMemFS: files of the in-memory filesystem have no fd and get a heap
// region whose writes reach the file, so a crash clone sees them once
// synced.
func TestMapMemFS(t *testing.T) {
	mem := vfs.NewMem()
	f, err := mem.Create("/x.index")
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(16))
	r, err := Map(f, 16, true)
	require.NoError(t, err)
	require.False(t, r.Mapped(), "memfs file mapped")
	require.NoError(t, r.WriteAt([]byte{1, 2, 3, 4}, 8))
	require.NoError(t, r.Sync())
	require.NoError(t, r.Unmap())
	mem.SyncAll()
	c := mem.CrashClone(vfs.CrashOptions{})
	g, err := c.Open("/x.index")
	require.NoError(t, err)
	defer g.Close()
	got := fileBytes(t, g)
	require.Equal(t, string([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0}), string(got), "after crash %v", got)
}

// TestMapInjected: the error injector can fail the mapping itself and the
// heap region's write-through.
func TestMapInjected(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	f, err := in.Create("/x.index")
	require.NoError(t, err)
	defer f.Close()
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpMap)})
	_, err = Map(f, 8, true)
	require.ErrorIs(t, err, vfs.ErrInjected, "Map = %v", err)
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpMap)})
	_, err = MapHeap(f, 8, true)
	require.ErrorIs(t, err, vfs.ErrInjected, "MapHeap = %v", err)
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpReadAt)})
	_, err = Map(f, 8, true)
	require.ErrorIs(t, err, vfs.ErrInjected, "Map with failing read = %v", err)
	r, err := Map(f, 8, true)
	require.NoError(t, err)
	defer r.Unmap()
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpWriteAt)})
	err = r.WriteAt([]byte{9}, 0)
	require.ErrorIs(t, err, vfs.ErrInjected, "WriteAt = %v", err)
	require.Equal(t, byte(0), r.Bytes()[0], "failed write is visible in Bytes")
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpSync)})
	err = r.Sync()
	require.ErrorIs(t, err, vfs.ErrInjected, "Sync = %v", err)
}

// TestHeapPoisonUnderInvariants: with -tags invariants, stale heap bytes
// are overwritten at Unmap.
func TestHeapPoisonUnderInvariants(t *testing.T) {
	f := openFile(t, []byte("abcd"))
	r, err := MapHeap(f, 4, false)
	require.NoError(t, err)
	stale := r.Bytes()
	require.NoError(t, r.Unmap())
	want := "abcd"
	if invariants.Enabled {
		want = "\xde\xde\xde\xde"
	}
	require.Equal(t, want, string(stale), "stale bytes %q, want %q", stale, want)
}
