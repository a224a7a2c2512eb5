package mmap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

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
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func fileBytes(t *testing.T, f vfs.File) []byte {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
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
			if err != nil {
				t.Fatal(err)
			}
			if r.Mapped() != m.mapped || !r.Writable() || r.Len() != 64 || len(r.Bytes()) != 64 {
				t.Fatalf("mapped=%v writable=%v len=%d bytes=%d", r.Mapped(), r.Writable(), r.Len(), len(r.Bytes()))
			}
			if err := r.WriteAt([]byte("hello"), 8); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteAt([]byte("end"), 61); err != nil {
				t.Fatal(err)
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := string(r.Bytes()[8:13]); got != "hello" {
				t.Fatalf("Bytes = %q", got)
			}
			got := fileBytes(t, f)
			if string(got[8:13]) != "hello" || string(got[61:]) != "end" {
				t.Fatalf("file = %q", got)
			}
			if err := r.Unmap(); err != nil {
				t.Fatal(err)
			}
			if r.Bytes() != nil {
				t.Fatal("Bytes after Unmap not nil")
			}
			if err := r.Unmap(); err != nil {
				t.Fatalf("second Unmap: %v", err)
			}
		})
	}
}

func TestMapReadOnly(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, []byte("0123456789"))
			r, err := Map(m.wrap(f), 10, false)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Unmap()
			if string(r.Bytes()) != "0123456789" {
				t.Fatalf("Bytes = %q", r.Bytes())
			}
			if err := r.WriteAt([]byte("x"), 0); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("WriteAt = %v, want ErrReadOnly", err)
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			// A write to the file: the shared mapping sees it, the heap
			// copy does not.
			if _, err := f.WriteAt([]byte("AB"), 0); err != nil {
				t.Fatal(err)
			}
			want := "0123456789"
			if m.mapped {
				want = "AB23456789"
			}
			if string(r.Bytes()) != want {
				t.Fatalf("after file write Bytes = %q, want %q", r.Bytes(), want)
			}
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
			if err != nil {
				t.Fatal(err)
			}
			defer r.Unmap()
			if len(r.Bytes()) != size || string(r.Bytes()[:3]) != "abc" {
				t.Fatalf("len %d prefix %q", len(r.Bytes()), r.Bytes()[:3])
			}
			if !m.mapped && !bytes.Equal(r.Bytes()[3:], make([]byte, size-3)) {
				t.Fatal("heap region not zero past EOF")
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
				if err != nil {
					t.Fatal(err)
				}
				if r.Bytes() == nil || len(r.Bytes()) != 0 {
					t.Fatalf("Bytes = %v", r.Bytes())
				}
				if err := r.WriteAt(nil, 0); writable && err != nil {
					t.Fatalf("empty WriteAt: %v", err)
				}
				if err := r.WriteAt([]byte{1}, 0); !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrReadOnly) {
					t.Fatalf("WriteAt = %v", err)
				}
				if err := r.Sync(); err != nil {
					t.Fatal(err)
				}
				if err := r.Advise(Random); err != nil {
					t.Fatal(err)
				}
				if err := r.Unmap(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestWriteAtErrors(t *testing.T) {
	f := openFile(t, make([]byte, 16))
	r, err := Map(f, 16, true)
	if err != nil {
		t.Fatal(err)
	}
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
			if err := r.WriteAt(tt.p, tt.off); !errors.Is(err, tt.want) {
				t.Fatalf("WriteAt(%d bytes, %d) = %v, want %v", len(tt.p), tt.off, err, tt.want)
			}
		})
	}
	if err := r.Unmap(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"WriteAt": r.WriteAt([]byte{1}, 0),
		"Sync":    r.Sync(),
		"Advise":  r.Advise(Normal),
	} {
		if !errors.Is(err, ErrUnmapped) {
			t.Errorf("%s after Unmap = %v, want ErrUnmapped", name, err)
		}
	}
	if _, err := Map(f, -1, false); !errors.Is(err, ErrNegativeSize) {
		t.Fatalf("Map(-1) = %v", err)
	}
	if _, err := MapHeap(f, -1, false); !errors.Is(err, ErrNegativeSize) {
		t.Fatalf("MapHeap(-1) = %v", err)
	}
}

// TestHeapWriteFailure: when the file refuses a write, Bytes shows only what
// the file accepted.
func TestHeapWriteFailure(t *testing.T) {
	f := openFile(t, make([]byte, 16))
	r, err := Map(failWrites{noFd{f}, 2}, 16, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if err := r.WriteAt([]byte("abcd"), 4); !errors.Is(err, errWrite) {
		t.Fatalf("WriteAt = %v, want errWrite", err)
	}
	if got := r.Bytes()[4:8]; !bytes.Equal(got, []byte{'a', 'b', 0, 0}) {
		t.Fatalf("Bytes = %q", got)
	}
	if got := fileBytes(t, f)[4:8]; !bytes.Equal(got, []byte{'a', 'b', 0, 0}) {
		t.Fatalf("file = %q", got)
	}
}

func TestAdvise(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := openFile(t, make([]byte, 8192))
			r, err := Map(m.wrap(f), 8192, false)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Unmap()
			for _, adv := range []int{Normal, Random, Sequential, WillNeed, DontNeed} {
				if err := r.Advise(adv); err != nil {
					t.Fatalf("Advise(%d): %v", adv, err)
				}
			}
		})
	}
}

// TestMapHeapOnFd: MapHeap ignores the descriptor.
func TestMapHeapOnFd(t *testing.T) {
	f := openFile(t, []byte("xyz"))
	r, err := MapHeap(f, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	if r.Mapped() || string(r.Bytes()) != "xyz" {
		t.Fatalf("mapped=%v bytes=%q", r.Mapped(), r.Bytes())
	}
	if err := r.WriteAt([]byte("Z"), 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := string(fileBytes(t, f)); got != "xyZ" {
		t.Fatalf("file = %q", got)
	}
}

// TestMapMemFS: files of the in-memory filesystem have no fd and get a heap
// region whose writes reach the file, so a crash clone sees them once
// synced.
func TestMapMemFS(t *testing.T) {
	mem := vfs.NewMem()
	f, err := mem.Create("/x.index")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(16); err != nil {
		t.Fatal(err)
	}
	r, err := Map(f, 16, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mapped() {
		t.Fatal("memfs file mapped")
	}
	if err := r.WriteAt([]byte{1, 2, 3, 4}, 8); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.Unmap(); err != nil {
		t.Fatal(err)
	}
	mem.SyncAll()
	c := mem.CrashClone(vfs.CrashOptions{})
	g, err := c.Open("/x.index")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := fileBytes(t, g)
	if !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0}) {
		t.Fatalf("after crash %v", got)
	}
}

// TestMapInjected: the error injector can fail the mapping itself and the
// heap region's write-through.
func TestMapInjected(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	f, err := in.Create("/x.index")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpMap)})
	if _, err := Map(f, 8, true); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Map = %v", err)
	}
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpMap)})
	if _, err := MapHeap(f, 8, true); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("MapHeap = %v", err)
	}
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpReadAt)})
	if _, err := Map(f, 8, true); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Map with failing read = %v", err)
	}
	r, err := Map(f, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpWriteAt)})
	if err := r.WriteAt([]byte{9}, 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("WriteAt = %v", err)
	}
	if r.Bytes()[0] != 0 {
		t.Fatal("failed write is visible in Bytes")
	}
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpSync)})
	if err := r.Sync(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync = %v", err)
	}
}

// TestHeapPoisonUnderInvariants: with -tags invariants, stale heap bytes
// are overwritten at Unmap.
func TestHeapPoisonUnderInvariants(t *testing.T) {
	f := openFile(t, []byte("abcd"))
	r, err := MapHeap(f, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	stale := r.Bytes()
	if err := r.Unmap(); err != nil {
		t.Fatal(err)
	}
	want := "abcd"
	if invariants.Enabled {
		want = "\xde\xde\xde\xde"
	}
	if string(stale) != want {
		t.Fatalf("stale bytes %q, want %q", stale, want)
	}
}
