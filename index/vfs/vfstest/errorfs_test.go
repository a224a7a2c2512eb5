package vfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpKinds(t *testing.T) {
	seen := make(map[string]bool)
	for k := OpKind(0); k < numOpKinds; k++ {
		name := k.String()
		require.NotEqual(t, "", name, "kind %d has name %q", k, name)
		require.False(t, seen[name], "kind %d has name %q", k, name)
		require.False(t, strings.HasPrefix(name, "OpKind("), "kind %d has name %q", k, name)
		seen[name] = true
		require.True(t, AllOps.Has(k), "AllOps lacks %v", k)
	}
	require.Equal(t, "OpKind(-1)", OpKind(-1).String(), "out-of-range kinds")
	require.Equal(t, fmt.Sprintf("OpKind(%d)", numOpKinds), numOpKinds.String(), "out-of-range kinds")
	s := Kinds(OpWrite, OpSync)
	require.True(t, s.Has(OpWrite), "Kinds = %b", s)
	require.True(t, s.Has(OpSync), "Kinds = %b", s)
	require.False(t, s.Has(OpWriteAt), "Kinds = %b", s)
	require.False(t, s.Has(numOpKinds), "Kinds = %b", s)
	require.True(t, MutatingOps.Has(OpRename), "MutatingOps")
	require.False(t, MutatingOps.Has(OpReadAt), "MutatingOps")
	op := Op{Kind: OpRename, Path: "a", NewPath: "b"}
	require.Equal(t, "rename a -> b", op.String(), "Op.String = %q", op.String())
}

// TestInjectorFilesystemSync: opening the handle is an OpOpenDir and each
// Sync an OpSyncFilesystems, both failed by rules (a failed Sync reaches
// nothing); they are passed on to a MemFS, and over an FS without them the
// injector declines with errors.ErrUnsupported.
func TestInjectorFilesystemSync(t *testing.T) {
	m := NewMem()
	in := NewInjector(m)
	require.NoError(t, in.MkdirAll("/d", 0o755))
	m.SyncAll()
	writeFile(t, in, "/d/f", []byte("data"), false)
	in.Add(Rule{Kinds: Kinds(OpOpenDir)})
	_, err := in.OpenFilesystemSync("/d")
	require.ErrorIs(t, err, ErrInjected)
	h, err := in.OpenFilesystemSync("/d")
	require.NoError(t, err)
	in.Add(Rule{Kinds: Kinds(OpSyncFilesystems)})
	err = h.Sync([]string{"/d"})
	require.ErrorIs(t, err, ErrInjected)
	require.ErrorContains(t, err, "syncFilesystems /d")
	require.False(t, exists(m.CrashClone(CrashOptions{}), "/d/f"), "a failed call synced something")
	require.NoError(t, h.Sync([]string{"/d"}))
	got, err := readFile(m.CrashClone(CrashOptions{}), "/d/f")
	require.NoError(t, err)
	require.Equal(t, "data", string(got))
	require.NoError(t, h.Close())

	plain := NewInjector(struct{ vfs.FS }{m})
	_, err = plain.OpenFilesystemSync("/d")
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

// writeCheckpoint is a small scenario: the atomic-replace pattern.
func writeCheckpoint(fsys vfs.FS, dir string, data []byte) error {
	tmp := filepath.Join(dir, "cp.tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, "cp")); err != nil {
		return err
	}
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// TestInjectorWalk is the fault-injection walk: fail operation k for
// k = 0, 1, ... until the scenario runs clean. Every failing run returns the
// injected error, and after every run a crash leaves the old or the new
// checkpoint.
func TestInjectorWalk(t *testing.T) {
	const scenarioOps = 8 // create, write, sync, close, rename, openDir, sync, close
	for _, kinds := range []OpSet{AllOps, MutatingOps, Kinds(OpSync)} {
		runs := 0
		for k := int64(0); ; k++ {
			mem := NewMem()
			writeFile(t, mem, "/cp", []byte("old"), true)
			mem.SyncAll()
			in := NewInjector(mem)
			in.FailNth(k, kinds)
			err := writeCheckpoint(in, "/", []byte("new"))
			if in.Injected() == 0 {
				require.NoError(t, err, "k=%d: clean run failed", k)
				require.Equal(t, int64(scenarioOps), in.Ops(), "clean run saw %d ops, want %d", in.Ops(), scenarioOps)
				break
			}
			runs++
			require.ErrorIs(t, err, ErrInjected, "k=%d: err = %v, want ErrInjected", k, err)
			var ie *InjectedError
			require.ErrorAs(t, err, &ie, "k=%d: injected into %v", k, ie)
			require.True(t, kinds.Has(ie.Op.Kind), "k=%d: injected into %v", k, ie)
			for seed := range uint64(10) {
				c := mem.CrashClone(CrashOptions{UnsyncedDataPercent: 50, Seed: seed})
				got, rerr := readFile(c, "/cp")
				require.NoError(t, rerr, "k=%d seed=%d: checkpoint %q, %v", k, seed, got, rerr)
				if string(got) != "old" {
					require.Equal(t, "new", string(got), "k=%d seed=%d: checkpoint %q, %v", k, seed, got, rerr)
				}
			}
		}
		require.NotEqual(t, 0, runs, "kinds %b: %d failing runs", kinds, runs)
		require.LessOrEqual(t, runs, scenarioOps, "kinds %b: %d failing runs", kinds, runs)
	}
}

func TestInjectorRules(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	isIndex := func(op Op) bool { return strings.HasSuffix(op.Path, ".index") }
	in.Add(Rule{Kinds: Kinds(OpSync), Match: isIndex, Err: syscall.EIO})
	in.Add(Rule{Kinds: Kinds(OpTruncate), Skip: 1, Times: -1})

	idx, err := in.Create("/0.index")
	require.NoError(t, err)
	log, err := in.Create("/0.log")
	require.NoError(t, err)
	require.NoError(t, log.Sync(), "log sync failed")
	err = idx.Sync()
	require.ErrorIs(t, err, ErrInjected, "index sync = %v", err)
	require.ErrorIs(t, err, syscall.EIO, "index sync = %v", err)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe, "not a PathError for the index: %#v", err)
	require.Equal(t, "/0.index", pe.Path, "not a PathError for the index: %#v", err)
	require.Equal(t, "sync", pe.Op, "not a PathError for the index: %#v", err)
	require.NoError(t, idx.Sync(), "second index sync (rule fires once)")
	require.NoError(t, log.Truncate(10), "first truncate skipped")
	for range 3 {
		err := log.Truncate(5)
		require.ErrorIs(t, err, ErrInjected, "truncate after skip = %v", err)
	}
	require.Equal(t, int64(4), in.Injected(), "Injected = %d", in.Injected())

	err = in.Rename("/0.log", "/0.log.deleted")
	require.NoError(t, err)
	in.FailOnce(func(op Op) bool { return op.Kind == OpRename && op.NewPath == "/x" })
	var le *os.LinkError
	err = in.Rename("/0.log.deleted", "/x")
	require.ErrorAs(t, err, &le, "rename = %v", err)
	require.ErrorIs(t, err, ErrInjected, "rename = %v", err)
	require.True(t, exists(mem, "/0.log.deleted"), "a failed rename reached the filesystem")
	require.False(t, exists(mem, "/x"), "a failed rename reached the filesystem")

	// Close fails but closes the file.
	in.Add(Rule{Kinds: Kinds(OpClose)})
	err = idx.Close()
	require.ErrorIs(t, err, ErrInjected, "close = %v", err)
	_, err = idx.Stat()
	require.ErrorIs(t, err, os.ErrClosed, "file still open after injected close: %v", err)
	log.Close()

	in.Reset()
	require.Equal(t, int64(0), in.Ops(), "Reset did not zero the counters")
	require.Equal(t, int64(0), in.Injected(), "Reset did not zero the counters")
	_, err = in.Stat("/0.index")
	require.NoError(t, err, "after Reset")
	require.True(t, in.Unwrap() == vfs.FS(mem), "Unwrap")
}

func TestInjectorShortWrite(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.Add(Rule{Kinds: Kinds(OpWrite, OpWriteAt), Skip: 1, ShortWrite: 3})
	f, err := in.Create("/f")
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("abcdef"))
	require.NoError(t, err)
	n, err := f.Write([]byte("ghijkl"))
	require.Equal(t, 3, n, "short write = %d, %v", n, err)
	require.ErrorIs(t, err, ErrInjected, "short write = %d, %v", n, err)
	got, _ := readFile(mem, "/f")
	require.Equal(t, "abcdefghi", string(got), "content %q", got)
}

func TestInjectorDiskFull(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.SetDiskFull(25)
	f, err := in.Create("/f")
	require.NoError(t, err)
	defer f.Close()
	for i := range 2 {
		_, err := f.Write(make([]byte, 10))
		require.NoError(t, err, "write %d", i)
	}
	n, err := f.WriteAt(make([]byte, 10), 20)
	require.Equal(t, 5, n, "full write = %d, %v", n, err)
	require.ErrorIs(t, err, syscall.ENOSPC, "full write = %d, %v", n, err)
	require.ErrorIs(t, err, ErrInjected, "full write = %d, %v", n, err)
	_, err = f.Write([]byte{1})
	require.ErrorIs(t, err, syscall.ENOSPC, "write on a full disk = %v", err)
	err = f.Preallocate(0, 1)
	require.ErrorIs(t, err, syscall.ENOSPC, "preallocate on a full disk = %v", err)
	require.NoError(t, f.Sync(), "sync on a full disk")
	fi, _ := mem.Stat("/f")
	require.Equal(t, int64(25), fi.Size(), "size %d", fi.Size())
	in.SetDiskFull(-1)
	_, err = f.Write([]byte{1})
	require.NoError(t, err, "after disk-full off")
}

// TestInjectorDiskFullReserved: disk-full mode charges a WriteAt or a
// Preallocate only for the bytes the file has not written or preallocated
// through the same descriptor (a real disk holds those blocks already: an
// index writes its entries into blocks it reserved, and a full disk
// does not refuse them), and forgets what a Truncate cut.
func TestInjectorDiskFullReserved(t *testing.T) {
	tests := []struct {
		name string
		// prepare runs before disk-full mode, with free bytes left.
		prepare func(t *testing.T, f vfs.File)
		free    int64
		off     int64
		n       int
		want    int // bytes written
		full    bool
	}{
		{"into a preallocated range", func(t *testing.T, f vfs.File) {
			require.NoError(t, f.Preallocate(0, 4096))
		}, 0, 100, 8, 8, false},
		{"over written bytes", func(t *testing.T, f vfs.File) {
			_, err := f.WriteAt(make([]byte, 64), 0)
			require.NoError(t, err)
		}, 0, 10, 50, 50, false},
		{"across the end of the reserved range", func(t *testing.T, f vfs.File) {
			require.NoError(t, f.Preallocate(0, 4096))
		}, 10, 4000, 200, 106, true},
		{"between two reserved ranges", func(t *testing.T, f vfs.File) {
			require.NoError(t, f.Preallocate(0, 100))
			require.NoError(t, f.Preallocate(150, 100))
		}, 50, 50, 200, 200, false},
		{"past a truncation", func(t *testing.T, f vfs.File) {
			require.NoError(t, f.Preallocate(0, 4096))
			require.NoError(t, f.Truncate(1000))
		}, 0, 1000, 8, 0, true},
		{"nothing reserved", nil, 4, 0, 8, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMem()
			in := NewInjector(mem)
			f, err := in.Create("/f")
			require.NoError(t, err)
			defer f.Close()
			if tt.prepare != nil {
				tt.prepare(t, f)
			}
			in.SetDiskFull(tt.free)
			n, err := f.WriteAt(make([]byte, tt.n), tt.off)
			assert.Equal(t, tt.want, n)
			if tt.full {
				require.ErrorIs(t, err, syscall.ENOSPC)
				require.ErrorIs(t, err, ErrInjected)
			} else {
				require.NoError(t, err)
			}
		})
	}

	t.Run("preallocating a reserved range again", func(t *testing.T) {
		in := NewInjector(NewMem())
		f, err := in.Create("/f")
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Preallocate(0, 4096))
		in.SetDiskFull(0)
		require.NoError(t, f.Preallocate(1024, 1024))
		require.ErrorIs(t, f.Preallocate(4000, 200), syscall.ENOSPC)
	})
}

// TestInjectorHookCrash takes a crash clone at every write of a scenario
// through the hook, the way segment crash tests do.
func TestInjectorHookCrash(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	var clones []*MemFS
	in.SetHook(func(op Op) error {
		if op.Kind == OpWrite || op.Kind == OpSync {
			clones = append(clones, mem.CrashClone(CrashOptions{}))
		}
		if op.Kind == OpRemove {
			return errors.New("hook error")
		}
		return nil
	})
	f, err := in.Create("/log")
	require.NoError(t, err)
	for _, s := range []string{"a", "b", "c"} {
		_, err := f.Write([]byte(s))
		require.NoError(t, err)
		require.NoError(t, f.Sync())
	}
	f.Close()
	require.Len(t, clones, 6, "%d clones", len(clones))
	err = in.Remove("/log")
	require.Error(t, err, "hook error = %v", err)
	require.Equal(t, "hook error", err.Error(), "hook error = %v", err)
	require.Equal(t, int64(0), in.Injected(), "hook errors count as injected")
	// The directory entry was never synced: no clone has the file.
	for i, c := range clones {
		require.False(t, exists(c, "/log"), "clone %d has an unsynced entry", i)
	}
}

func TestInjectorMapHook(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.Add(Rule{Kinds: Kinds(OpMap)})
	f, err := in.Create("/idx")
	require.NoError(t, err)
	defer f.Close()
	h, ok := f.(vfs.MapHook)
	require.True(t, ok, "injector file is not a MapHook")
	err = h.BeforeMap(4096, true)
	require.ErrorIs(t, err, ErrInjected, "BeforeMap = %v", err)
	require.NoError(t, h.BeforeMap(4096, true), "second BeforeMap =")
	require.Equal(t, vfs.InvalidFd, f.Fd(), "Fd not passed through")
}

func TestInjectorConcurrent(t *testing.T) {
	in := NewInjector(NewMem())
	in.Add(Rule{Kinds: Kinds(OpWrite), Skip: 50, Times: 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := in.Create(fmt.Sprintf("/f%d", w))
			if !assert.NoError(t, err) {
				return
			}
			defer f.Close()
			for range 100 {
				if _, err := f.Write([]byte("x")); err != nil {
					assert.ErrorIs(t, err, ErrInjected)
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 10, failures, "failures %d injected %d", failures, in.Injected())
	require.Equal(t, int64(10), in.Injected(), "failures %d injected %d", failures, in.Injected())
}
