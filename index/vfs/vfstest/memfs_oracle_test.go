package vfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"
)

// errClass reduces an error to what both filesystems must agree on: nil,
// or the errno.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "error: " + err.Error()
}

// TestMemFSMatchesOS runs random operation sequences on MemFS and on the
// operating system's filesystem (in a temporary directory) and requires the
// same results and errors: the OS (Linux) is the oracle for MemFS's
// semantics.
func TestMemFSMatchesOS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MemFS follows Linux's errors; other systems differ in details")
	}
	base := t.TempDir()
	paths := []string{"a", "b", "d", "d/a", "d/b", "d/e", "d/e/a", "a/x"}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "oracle")
		require.NoError(rt, err)
		defer os.RemoveAll(dir)
		mem := NewMem()
		osPath := func(p string) string { return filepath.Join(dir, p) }
		memPath := func(p string) string { return "/" + p }
		pathGen := rapid.SampledFrom(paths)

		type step struct {
			name string
			run  func(fsys vfs.FS, p func(string) string) string
		}
		steps := []func() step{
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"create " + n, func(fsys vfs.FS, p func(string) string) string {
					f, err := fsys.Create(p(n))
					if err == nil {
						err = f.Close()
					}
					return errClass(err)
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				off := rapid.Int64Range(0, 40).Draw(rt, "off")
				data := rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "data")
				return step{fmt.Sprintf("writeAt %s %d %d", n, off, len(data)), func(fsys vfs.FS, p func(string) string) string {
					f, err := fsys.OpenReadWrite(p(n))
					if err != nil {
						return errClass(err)
					}
					defer f.Close()
					k, err := f.WriteAt(data, off)
					return fmt.Sprint(k, errClass(err))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				data := rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "data")
				return step{fmt.Sprintf("append %s %d", n, len(data)), func(fsys vfs.FS, p func(string) string) string {
					f, err := fsys.OpenReadWrite(p(n))
					if err != nil {
						return errClass(err)
					}
					defer f.Close()
					fi, err := f.Stat()
					if err != nil {
						return errClass(err)
					}
					k, err := f.WriteAt(data, fi.Size())
					return fmt.Sprint(k, errClass(err))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				size := rapid.Int64Range(0, 48).Draw(rt, "size")
				return step{fmt.Sprintf("truncate %s %d", n, size), func(fsys vfs.FS, p func(string) string) string {
					f, err := fsys.OpenReadWrite(p(n))
					if err != nil {
						return errClass(err)
					}
					defer f.Close()
					return errClass(f.Truncate(size))
				}}
			},
			func() step {
				a, b := pathGen.Draw(rt, "old"), pathGen.Draw(rt, "new")
				return step{"rename " + a + " " + b, func(fsys vfs.FS, p func(string) string) string {
					return errClass(fsys.Rename(p(a), p(b)))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"remove " + n, func(fsys vfs.FS, p func(string) string) string {
					return errClass(fsys.Remove(p(n)))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"removeAll " + n, func(fsys vfs.FS, p func(string) string) string {
					return errClass(fsys.RemoveAll(p(n)))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"write read-only " + n, func(fsys vfs.FS, p func(string) string) string {
					f, err := fsys.Open(p(n))
					if err != nil {
						return errClass(err)
					}
					defer f.Close()
					k, err := f.Write([]byte("x"))
					return fmt.Sprint(k, errClass(err))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"mkdirAll " + n, func(fsys vfs.FS, p func(string) string) string {
					return errClass(fsys.MkdirAll(p(n), 0o755))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"read " + n, func(fsys vfs.FS, p func(string) string) string {
					b, err := readFile(fsys, p(n))
					return fmt.Sprintf("%q %s", b, errClass(err))
				}}
			},
			func() step {
				n := rapid.SampledFrom([]string{"", "d", "d/e", "a"}).Draw(rt, "dir")
				return step{"list " + n, func(fsys vfs.FS, p func(string) string) string {
					names, err := fsys.List(p(n))
					return fmt.Sprint(names, errClass(err))
				}}
			},
			func() step {
				n := pathGen.Draw(rt, "path")
				return step{"stat " + n, func(fsys vfs.FS, p func(string) string) string {
					fi, err := fsys.Stat(p(n))
					if err != nil {
						return errClass(err)
					}
					if fi.IsDir() {
						return "dir"
					}
					return fmt.Sprint("file ", fi.Size(), fi.Name())
				}}
			},
		}
		nsteps := rapid.IntRange(1, 40).Draw(rt, "steps")
		var history []string
		for range nsteps {
			s := steps[rapid.IntRange(0, len(steps)-1).Draw(rt, "op")]()
			want := s.run(vfs.Default, osPath)
			got := s.run(mem, memPath)
			history = append(history, s.name+" -> "+want)
			require.Equal(rt, want, got, "%s: memfs %q, os %q\nhistory:\n%s\nmemfs:\n%s", s.name, got, want, slices.Concat(history), mem)
		}
		// A crash clone at 100% equals the current state.
		c := mem.CrashClone(CrashOptions{UnsyncedDataPercent: 100})
		for _, p := range paths {
			a, aerr := readFile(mem, memPath(p))
			b, berr := readFile(c, memPath(p))
			require.Equal(rt, string(b), string(a), "100%% clone differs at %s", p)
			require.Equal(rt, errClass(berr), errClass(aerr), "100%% clone differs at %s", p)
		}
	})
}
