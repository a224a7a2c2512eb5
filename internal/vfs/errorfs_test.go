package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestOpKinds(t *testing.T) {
	seen := make(map[string]bool)
	for k := OpKind(0); k < numOpKinds; k++ {
		name := k.String()
		if name == "" || seen[name] || strings.HasPrefix(name, "OpKind(") {
			t.Fatalf("kind %d has name %q", k, name)
		}
		seen[name] = true
		if !AllOps.Has(k) {
			t.Fatalf("AllOps lacks %v", k)
		}
	}
	if OpKind(-1).String() != "OpKind(-1)" || numOpKinds.String() != fmt.Sprintf("OpKind(%d)", numOpKinds) {
		t.Fatal("out-of-range kinds")
	}
	s := Kinds(OpWrite, OpSync)
	if !s.Has(OpWrite) || !s.Has(OpSync) || s.Has(OpWriteAt) || s.Has(numOpKinds) {
		t.Fatalf("Kinds = %b", s)
	}
	if !MutatingOps.Has(OpRename) || MutatingOps.Has(OpReadAt) {
		t.Fatal("MutatingOps")
	}
	op := Op{Kind: OpRename, Path: "a", NewPath: "b"}
	if op.String() != "rename a -> b" {
		t.Fatalf("Op.String = %q", op.String())
	}
}

// writeCheckpoint is a small scenario: the atomic-replace pattern.
func writeCheckpoint(fsys FS, dir string, data []byte) error {
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
				if err != nil {
					t.Fatalf("k=%d: clean run failed: %v", k, err)
				}
				if in.Ops() != scenarioOps {
					t.Fatalf("clean run saw %d ops, want %d", in.Ops(), scenarioOps)
				}
				break
			}
			runs++
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("k=%d: err = %v, want ErrInjected", k, err)
			}
			var ie *InjectedError
			if !errors.As(err, &ie) || !kinds.Has(ie.Op.Kind) {
				t.Fatalf("k=%d: injected into %v", k, ie)
			}
			for seed := range uint64(10) {
				c := mem.CrashClone(CrashOptions{UnsyncedDataPercent: 50, Seed: seed})
				got, rerr := readFile(c, "/cp")
				if rerr != nil || (string(got) != "old" && string(got) != "new") {
					t.Fatalf("k=%d seed=%d: checkpoint %q, %v", k, seed, got, rerr)
				}
			}
		}
		if runs == 0 || runs > scenarioOps {
			t.Fatalf("kinds %b: %d failing runs", kinds, runs)
		}
	}
}

func TestInjectorRules(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	isIndex := func(op Op) bool { return strings.HasSuffix(op.Path, ".index") }
	in.Add(Rule{Kinds: Kinds(OpSync), Match: isIndex, Err: syscall.EIO})
	in.Add(Rule{Kinds: Kinds(OpTruncate), Skip: 1, Times: -1})

	idx, err := in.Create("/0.index")
	if err != nil {
		t.Fatal(err)
	}
	log, err := in.Create("/0.log")
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Sync(); err != nil {
		t.Fatalf("log sync failed: %v", err)
	}
	err = idx.Sync()
	if !errors.Is(err, ErrInjected) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("index sync = %v", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != "/0.index" || pe.Op != "sync" {
		t.Fatalf("not a PathError for the index: %#v", err)
	}
	if err := idx.Sync(); err != nil {
		t.Fatalf("second index sync (rule fires once): %v", err)
	}
	if err := log.Truncate(10); err != nil {
		t.Fatalf("first truncate skipped: %v", err)
	}
	for range 3 {
		if err := log.Truncate(5); !errors.Is(err, ErrInjected) {
			t.Fatalf("truncate after skip = %v", err)
		}
	}
	if in.Injected() != 4 {
		t.Fatalf("Injected = %d", in.Injected())
	}

	err = in.Rename("/0.log", "/0.log.deleted")
	if err != nil {
		t.Fatal(err)
	}
	in.FailOnce(func(op Op) bool { return op.Kind == OpRename && op.NewPath == "/x" })
	var le *os.LinkError
	if err := in.Rename("/0.log.deleted", "/x"); !errors.As(err, &le) || !errors.Is(err, ErrInjected) {
		t.Fatalf("rename = %v", err)
	}
	if !exists(mem, "/0.log.deleted") || exists(mem, "/x") {
		t.Fatal("a failed rename reached the filesystem")
	}

	// Close fails but closes the file.
	in.Add(Rule{Kinds: Kinds(OpClose)})
	if err := idx.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("close = %v", err)
	}
	if _, err := idx.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("file still open after injected close: %v", err)
	}
	log.Close()

	in.Reset()
	if in.Ops() != 0 || in.Injected() != 0 {
		t.Fatal("Reset did not zero the counters")
	}
	if _, err := in.Stat("/0.index"); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	if in.Unwrap() != FS(mem) {
		t.Fatal("Unwrap")
	}
}

func TestInjectorShortWrite(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.Add(Rule{Kinds: Kinds(OpWrite, OpWriteAt), Skip: 1, ShortWrite: 3})
	f, err := in.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	n, err := f.Write([]byte("ghijkl"))
	if n != 3 || !errors.Is(err, ErrInjected) {
		t.Fatalf("short write = %d, %v", n, err)
	}
	if got, _ := readFile(mem, "/f"); string(got) != "abcdefghi" {
		t.Fatalf("content %q", got)
	}
}

func TestInjectorDiskFull(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.SetDiskFull(25)
	f, err := in.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 2 {
		if _, err := f.Write(make([]byte, 10)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	n, err := f.WriteAt(make([]byte, 10), 20)
	if n != 5 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) {
		t.Fatalf("full write = %d, %v", n, err)
	}
	if _, err := f.Write([]byte{1}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk = %v", err)
	}
	if err := f.Preallocate(0, 1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocate on a full disk = %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync on a full disk: %v", err)
	}
	if fi, _ := mem.Stat("/f"); fi.Size() != 25 {
		t.Fatalf("size %d", fi.Size())
	}
	in.SetDiskFull(-1)
	if _, err := f.Write([]byte{1}); err != nil {
		t.Fatalf("after disk-full off: %v", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if len(clones) != 6 {
		t.Fatalf("%d clones", len(clones))
	}
	if err := in.Remove("/log"); err == nil || err.Error() != "hook error" {
		t.Fatalf("hook error = %v", err)
	}
	if in.Injected() != 0 {
		t.Fatal("hook errors count as injected")
	}
	// The directory entry was never synced: no clone has the file.
	for i, c := range clones {
		if exists(c, "/log") {
			t.Fatalf("clone %d has an unsynced entry", i)
		}
	}
}

func TestInjectorMapHook(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	in.Add(Rule{Kinds: Kinds(OpMap)})
	f, err := in.Create("/idx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, ok := f.(MapHook)
	if !ok {
		t.Fatal("injector file is not a MapHook")
	}
	if err := h.BeforeMap(4096, true); !errors.Is(err, ErrInjected) {
		t.Fatalf("BeforeMap = %v", err)
	}
	if err := h.BeforeMap(4096, true); err != nil {
		t.Fatalf("second BeforeMap = %v", err)
	}
	if f.Fd() != InvalidFd {
		t.Fatal("Fd not passed through")
	}
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
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range 100 {
				if _, err := f.Write([]byte("x")); err != nil {
					if !errors.Is(err, ErrInjected) {
						t.Error(err)
					}
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failures != 10 || in.Injected() != 10 {
		t.Fatalf("failures %d injected %d", failures, in.Injected())
	}
}
