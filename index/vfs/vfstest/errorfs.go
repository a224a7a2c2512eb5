package vfstest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/partlog/partlog/index/vfs"
)

// OpKind names an operation of the FS or File interface, for [Injector]
// rules.
type OpKind int

// The operation kinds. FS methods first, then File methods.
const (
	// OpCreate is FS.Create.
	OpCreate OpKind = iota
	// OpOpen is FS.Open.
	OpOpen
	// OpOpenReadWrite is FS.OpenReadWrite.
	OpOpenReadWrite
	// OpOpenDir is FS.OpenDir.
	OpOpenDir
	// OpRemove is FS.Remove.
	OpRemove
	// OpRemoveAll is FS.RemoveAll.
	OpRemoveAll
	// OpRename is FS.Rename; Op.Path is the old name, Op.NewPath the new.
	OpRename
	// OpMkdirAll is FS.MkdirAll.
	OpMkdirAll
	// OpList is FS.List.
	OpList
	// OpStat is FS.Stat.
	OpStat
	// OpClose is File.Close. An injected Close still closes the file.
	OpClose
	// OpRead is File.Read; Op.Len is len(p).
	OpRead
	// OpReadAt is File.ReadAt; Op.Off and Op.Len are the range.
	OpReadAt
	// OpWrite is File.Write; Op.Len is len(p).
	OpWrite
	// OpWriteAt is File.WriteAt; Op.Off and Op.Len are the range.
	OpWriteAt
	// OpFileStat is File.Stat.
	OpFileStat
	// OpSync is File.Sync, of a file or of a directory from OpenDir.
	OpSync
	// OpTruncate is File.Truncate; Op.Off is the new size.
	OpTruncate
	// OpPreallocate is File.Preallocate; Op.Off and Op.Len are the range.
	OpPreallocate
	// OpMap is a memory mapping of the file (partlog calls
	// [vfs.MapHook] before it maps a file); Op.Len is the size.
	OpMap
	// OpLock is FS.Lock.
	OpLock
	// OpSyncFilesystems is a [vfs.FilesystemSync]'s Sync; Op.Path is the
	// first directory. (Opening the handle is an OpOpenDir.)
	OpSyncFilesystems
	numOpKinds
)

var opKindNames = [...]string{
	OpCreate:          "create",
	OpOpen:            "open",
	OpOpenReadWrite:   "openReadWrite",
	OpOpenDir:         "openDir",
	OpRemove:          "remove",
	OpRemoveAll:       "removeAll",
	OpRename:          "rename",
	OpMkdirAll:        "mkdirAll",
	OpList:            "list",
	OpStat:            "stat",
	OpClose:           "close",
	OpRead:            "read",
	OpReadAt:          "readAt",
	OpWrite:           "write",
	OpWriteAt:         "writeAt",
	OpFileStat:        "fileStat",
	OpSync:            "sync",
	OpTruncate:        "truncate",
	OpPreallocate:     "preallocate",
	OpMap:             "map",
	OpLock:            "lock",
	OpSyncFilesystems: "syncFilesystems",
}

func init() {
	if len(opKindNames) != int(numOpKinds) {
		panic(fmt.Sprintf("partlog/vfs: %d op kind names for %d op kinds", len(opKindNames), numOpKinds))
	}
	for k, name := range opKindNames {
		if name == "" {
			panic(fmt.Sprintf("partlog/vfs: op kind %d has no name", k))
		}
	}
}

// String returns the kind's name, e.g. "writeAt".
func (k OpKind) String() string {
	if k < 0 || k >= numOpKinds {
		return fmt.Sprintf("OpKind(%d)", int(k))
	}
	return opKindNames[k]
}

// OpSet is a set of operation kinds.
type OpSet uint64

// Kinds returns the set of the given kinds.
func Kinds(kinds ...OpKind) OpSet {
	var s OpSet
	for _, k := range kinds {
		s |= 1 << uint(k)
	}
	return s
}

// Sets of operation kinds.
const (
	// AllOps holds every kind.
	AllOps OpSet = 1<<uint(numOpKinds) - 1
	// MutatingOps holds the kinds that change the filesystem or a file:
	// Create, OpenReadWrite, Remove, RemoveAll, Rename, MkdirAll, Write,
	// WriteAt, Sync, Truncate, Preallocate, SyncFilesystems.
	MutatingOps OpSet = 1<<uint(OpCreate) | 1<<uint(OpOpenReadWrite) | 1<<uint(OpRemove) |
		1<<uint(OpRemoveAll) | 1<<uint(OpRename) | 1<<uint(OpMkdirAll) | 1<<uint(OpWrite) |
		1<<uint(OpWriteAt) | 1<<uint(OpSync) | 1<<uint(OpTruncate) | 1<<uint(OpPreallocate) |
		1<<uint(OpSyncFilesystems)
)

// Has reports whether k is in s.
func (s OpSet) Has(k OpKind) bool { return k >= 0 && k < numOpKinds && s&(1<<uint(k)) != 0 }

// Op describes one operation, as rules and hooks see it.
type Op struct {
	// Kind is the operation.
	Kind OpKind
	// Path is the file or directory operated on (the name given to the FS
	// method, or to the method that opened the File); Rename's old name.
	Path string
	// NewPath is Rename's new name; empty for other kinds.
	NewPath string
	// Off is the offset of ReadAt, WriteAt and Preallocate, and the new size
	// of Truncate; 0 otherwise.
	Off int64
	// Len is the byte count of Read, ReadAt, Write, WriteAt, Preallocate and
	// Map; 0 otherwise.
	Len int64
}

// String formats the op for test messages: "writeAt /p/00000000000000000000.log off=4096 len=61".
func (o Op) String() string {
	var b strings.Builder
	b.WriteString(o.Kind.String())
	b.WriteByte(' ')
	b.WriteString(o.Path)
	if o.NewPath != "" {
		b.WriteString(" -> ")
		b.WriteString(o.NewPath)
	}
	if o.Off != 0 {
		fmt.Fprintf(&b, " off=%d", o.Off)
	}
	if o.Len != 0 {
		fmt.Fprintf(&b, " len=%d", o.Len)
	}
	return b.String()
}

// ErrInjected marks every error an [Injector] makes up:
// errors.Is(err, ErrInjected) tells a test that the failure is the one it
// asked for.
var ErrInjected = errors.New("partlog/vfs: injected error")

// InjectedError is the error an [Injector] returns (inside an
// *os.PathError or *os.LinkError). It matches ErrInjected with errors.Is and
// unwraps to Err, the error the rule chose (syscall.ENOSPC for disk-full),
// if any.
type InjectedError struct {
	// Op is the operation that failed.
	Op Op
	// Err is the simulated cause, or nil.
	Err error
}

// Error implements error.
func (e *InjectedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v (%v)", ErrInjected, e.Err)
	}
	return ErrInjected.Error()
}

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// Unwrap returns the simulated cause.
func (e *InjectedError) Unwrap() error { return e.Err }

// Rule says which operations an [Injector] fails. A rule matches an
// operation whose kind is in Kinds (every kind when Kinds is 0) and for
// which Match, if set, returns true. The first Skip matching operations
// pass; the next Times fail (1 when Times is 0; every later one when Times
// is negative).
type Rule struct {
	// Kinds are the kinds of operation the rule counts; 0 means all.
	Kinds OpSet
	// Match, when set, must also return true for the rule to count an
	// operation. It is called with the injector's lock held and must not
	// call the injector.
	Match func(Op) bool
	// Skip is how many matching operations pass before the first failure.
	Skip int64
	// Times is how many matching operations fail after Skip: 0 means one,
	// negative means all of them.
	Times int64
	// ShortWrite, for a failing Write or WriteAt, is how many bytes (at
	// most len(p)) are written before the error is returned, as a short
	// write; 0 writes nothing.
	ShortWrite int
	// Err is the simulated cause wrapped in the returned error (for
	// example syscall.EIO); nil for a plain ErrInjected.
	Err error
}

// ruleState is a rule and its counters. Guarded by Injector.mu.
type ruleState struct {
	Rule
	seen, fired int64
}

// Injector is an FS that passes every operation to another FS, failing those
// its rules select, with errors that wrap [ErrInjected]. A test walks a
// scenario through every failure point:
//
//	for k := int64(0); ; k++ {
//		mem := vfstest.NewMem()
//		in := vfstest.NewInjector(mem)
//		in.FailNth(k, vfstest.AllOps)
//		err := scenario(in)
//		if in.Injected() == 0 { // k is past the last operation
//			if err != nil {
//				t.Fatalf("clean run: %v", err)
//			}
//			break
//		}
//		if !errors.Is(err, vfstest.ErrInjected) {
//			t.Fatalf("k=%d: %v", k, err)
//		}
//		reopenAndCheck(t, mem.CrashClone(vfstest.CrashOptions{Seed: uint64(k)}))
//	}
//
// Besides rules, it offers a hook called before every operation (to take a
// crash clone at the k-th write, or to fail an operation with any error) and
// a disk-full mode. Files it returns wrap the inner files; Fd is passed
// through, so a mapped file's stores bypass the injector (only the Map
// itself, OpMap, can fail).
//
// An Injector is safe for concurrent use.
type Injector struct {
	fs vfs.FS

	mu struct {
		sync.Mutex
		ruleStates  []*ruleState
		hookFn      func(Op) error
		ops         int64
		injectedOps int64
		// diskFree is the bytes left before writes fail with ENOSPC;
		// negative when disk-full mode is off.
		diskFree int64
	}
}

var (
	_ vfs.FS               = (*Injector)(nil)
	_ vfs.FilesystemSyncer = (*Injector)(nil)
)

// NewInjector returns an Injector over fs with no rules: every operation
// passes until rules are added.
func NewInjector(fs vfs.FS) *Injector {
	in := &Injector{fs: fs}
	in.mu.diskFree = -1
	return in
}

// Add adds a rule. Rules are checked in the order they were added; the
// first one that fires decides the error, and later rules do not count the
// operation.
func (in *Injector) Add(r Rule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mu.ruleStates = append(in.mu.ruleStates, &ruleState{Rule: r})
}

// FailNth fails the k-th (counting from 0) operation, from now on, whose
// kind is in kinds (0 means all), once.
func (in *Injector) FailNth(k int64, kinds OpSet) { in.Add(Rule{Kinds: kinds, Skip: k}) }

// FailOnce fails the next operation for which match returns true, once.
// match is called with the injector's lock held.
func (in *Injector) FailOnce(match func(Op) bool) { in.Add(Rule{Match: match}) }

// SetHook sets a function called (without the injector's lock) before every
// operation that the rules let pass; a non-nil error it returns fails the
// operation as is (wrap ErrInjected if the test relies on it). nil removes
// the hook.
func (in *Injector) SetHook(h func(Op) error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mu.hookFn = h
}

// SetDiskFull lets writes use up to free more bytes (Write counts its
// length; WriteAt and Preallocate the bytes of their range that the file,
// through the same descriptor, had not written or preallocated yet, whose
// blocks a disk holds already); a write that goes past the limit writes
// what fits and fails, and later ones fail, with an error wrapping both
// ErrInjected and syscall.ENOSPC. Truncate is not counted (a sparse
// extension); cutting a file forgets the blocks past its new end. A
// negative free turns the mode off.
func (in *Injector) SetDiskFull(free int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mu.diskFree = free
}

// Ops returns how many operations the injector has seen (passed, failed or
// hooked) since it was made or reset.
func (in *Injector) Ops() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.ops
}

// Injected returns how many errors the injector has injected (by rules and
// disk-full mode, not by the hook).
func (in *Injector) Injected() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.injectedOps
}

// Reset removes every rule, the hook and disk-full mode, and zeroes the
// counters; the injector then passes everything.
func (in *Injector) Reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.mu.ruleStates = nil
	in.mu.hookFn = nil
	in.mu.ops = 0
	in.mu.injectedOps = 0
	in.mu.diskFree = -1
}

// Unwrap returns the FS the injector wraps.
func (in *Injector) Unwrap() vfs.FS { return in.fs }

// check decides op's fate. It returns the error to fail with (nil to go on)
// and, for a failing write, how many bytes to write first.
func (in *Injector) check(op Op) (short int, err error) {
	var need int64
	switch op.Kind {
	case OpWrite, OpWriteAt, OpPreallocate:
		need = op.Len
	}
	return in.checkCharged(op, need, nil)
}

// checkCharged is check for an operation that takes need bytes of the
// disk: when they are more than disk-full mode leaves, a failing write
// first writes the first fit(free) bytes of its range (free bytes
// without fit).
func (in *Injector) checkCharged(op Op, need int64, fit func(free int64) int64) (short int, err error) {
	in.mu.Lock()
	in.mu.ops++
	for _, r := range in.mu.ruleStates {
		if r.Kinds != 0 && !r.Kinds.Has(op.Kind) {
			continue
		}
		if r.Match != nil && !r.Match(op) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip {
			continue
		}
		times := r.Times
		if times == 0 {
			times = 1
		}
		if times > 0 && r.fired >= times {
			continue
		}
		r.fired++
		in.mu.injectedOps++
		in.mu.Unlock()
		return r.ShortWrite, &InjectedError{Op: op, Err: r.Err}
	}
	if in.mu.diskFree >= 0 {
		if need > in.mu.diskFree {
			short := in.mu.diskFree
			if fit != nil {
				short = fit(short)
			}
			in.mu.diskFree = 0
			in.mu.injectedOps++
			in.mu.Unlock()
			if op.Kind == OpPreallocate {
				short = 0
			}
			return int(short), &InjectedError{Op: op, Err: syscall.ENOSPC}
		}
		in.mu.diskFree -= need
	}
	h := in.mu.hookFn
	in.mu.Unlock()
	if h != nil {
		if err := h(op); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// pathErr wraps an injected error the way the OS would report it.
func pathErr(op Op, err error) error {
	var ie *InjectedError
	if !errors.As(err, &ie) {
		return err
	}
	return &os.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
}

func (in *Injector) failOp(op Op) error {
	if _, err := in.check(op); err != nil {
		return pathErr(op, err)
	}
	return nil
}

func (in *Injector) wrapFile(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &injFile{in: in, f: f, name: name}, nil
}

// Create implements FS.
func (in *Injector) Create(name string) (vfs.File, error) {
	if err := in.failOp(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	f, err := in.fs.Create(name)
	return in.wrapFile(name, f, err)
}

// Open implements FS.
func (in *Injector) Open(name string) (vfs.File, error) {
	if err := in.failOp(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	f, err := in.fs.Open(name)
	return in.wrapFile(name, f, err)
}

// OpenReadWrite implements FS.
func (in *Injector) OpenReadWrite(name string) (vfs.File, error) {
	if err := in.failOp(Op{Kind: OpOpenReadWrite, Path: name}); err != nil {
		return nil, err
	}
	f, err := in.fs.OpenReadWrite(name)
	return in.wrapFile(name, f, err)
}

// OpenDir implements FS.
func (in *Injector) OpenDir(name string) (vfs.File, error) {
	if err := in.failOp(Op{Kind: OpOpenDir, Path: name}); err != nil {
		return nil, err
	}
	f, err := in.fs.OpenDir(name)
	return in.wrapFile(name, f, err)
}

// Remove implements FS.
func (in *Injector) Remove(name string) error {
	if err := in.failOp(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return in.fs.Remove(name)
}

// RemoveAll implements FS.
func (in *Injector) RemoveAll(name string) error {
	if err := in.failOp(Op{Kind: OpRemoveAll, Path: name}); err != nil {
		return err
	}
	return in.fs.RemoveAll(name)
}

// Rename implements FS.
func (in *Injector) Rename(oldname, newname string) error {
	op := Op{Kind: OpRename, Path: oldname, NewPath: newname}
	if _, err := in.check(op); err != nil {
		var ie *InjectedError
		if errors.As(err, &ie) {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
		}
		return err
	}
	return in.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (in *Injector) MkdirAll(dir string, perm os.FileMode) error {
	if err := in.failOp(Op{Kind: OpMkdirAll, Path: dir}); err != nil {
		return err
	}
	return in.fs.MkdirAll(dir, perm)
}

// List implements FS.
func (in *Injector) List(dir string) ([]string, error) {
	if err := in.failOp(Op{Kind: OpList, Path: dir}); err != nil {
		return nil, err
	}
	return in.fs.List(dir)
}

// Stat implements FS.
func (in *Injector) Stat(name string) (os.FileInfo, error) {
	if err := in.failOp(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return in.fs.Stat(name)
}

// Lock implements FS.Lock.
func (in *Injector) Lock(name string) (io.Closer, error) {
	if err := in.failOp(Op{Kind: OpLock, Path: name}); err != nil {
		return nil, err
	}
	return in.fs.Lock(name)
}

// OpenFilesystemSync implements [vfs.FilesystemSyncer]: an OpOpenDir
// operation, passed on to the inner FS, or, when the inner FS does not
// implement it, an error wrapping errors.ErrUnsupported (what callers fall
// back on). Each Sync of the handle is an OpSyncFilesystems operation.
func (in *Injector) OpenFilesystemSync(dir string) (vfs.FilesystemSync, error) {
	if err := in.failOp(Op{Kind: OpOpenDir, Path: dir}); err != nil {
		return nil, err
	}
	syncer, ok := in.fs.(vfs.FilesystemSyncer)
	if !ok {
		return nil, fmt.Errorf("partlog/vfstest: %T does not sync filesystems: %w", in.fs, errors.ErrUnsupported)
	}
	h, err := syncer.OpenFilesystemSync(dir)
	if err != nil {
		return nil, err
	}
	return &injFilesystemSync{in: in, h: h}, nil
}

// injFilesystemSync is a FilesystemSync of an Injector.
type injFilesystemSync struct {
	in *Injector
	h  vfs.FilesystemSync
}

// Sync is an OpSyncFilesystems operation (Op.Path the first dir).
func (s *injFilesystemSync) Sync(dirs []string) error {
	op := Op{Kind: OpSyncFilesystems}
	if len(dirs) > 0 {
		op.Path = dirs[0]
	}
	if err := s.in.failOp(op); err != nil {
		return err
	}
	return s.h.Sync(dirs)
}

// Close is an OpClose operation; an injected Close still closes.
func (s *injFilesystemSync) Close() error {
	err := s.in.failOp(Op{Kind: OpClose})
	if cerr := s.h.Close(); err == nil {
		err = cerr
	}
	return err
}

// injFile is a File of an Injector.
type injFile struct {
	in   *Injector
	f    vfs.File
	name string

	mu sync.Mutex
	// held is what WriteAt and Preallocate through this file reached:
	// blocks the disk holds, which disk-full mode does not charge again.
	held extents
}

var (
	_ vfs.File    = (*injFile)(nil)
	_ vfs.MapHook = (*injFile)(nil)
)

func (f *injFile) failOp(op Op) error {
	op.Path = f.name
	return f.in.failOp(op)
}

func (f *injFile) Close() error {
	err := f.failOp(Op{Kind: OpClose})
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *injFile) Read(p []byte) (int, error) {
	if err := f.failOp(Op{Kind: OpRead, Len: int64(len(p))}); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *injFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.failOp(Op{Kind: OpReadAt, Off: off, Len: int64(len(p))}); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

// write runs a Write or WriteAt through the rules, writing a prefix of p on
// a short write. A WriteAt charges disk-full mode only for the bytes of
// its range the file does not hold yet, and records what it wrote.
func (f *injFile) write(op Op, p []byte, do func([]byte) (int, error)) (int, error) {
	op.Path = f.name
	var short int
	var err error
	if op.Kind == OpWriteAt {
		f.mu.Lock()
		need := f.held.missing(op.Off, op.Len)
		short, err = f.in.checkCharged(op, need, func(free int64) int64 { return f.held.prefix(op.Off, op.Len, free) })
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.held.add(op.Off, int64(short))
			f.mu.Unlock()
		}()
	} else {
		short, err = f.in.check(op)
	}
	if err == nil {
		n, err := do(p)
		short = n
		return n, err
	}
	err = pathErr(op, err)
	short = min(max(short, 0), len(p))
	if short == 0 {
		return 0, err
	}
	n, werr := do(p[:short])
	short = n
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *injFile) Write(p []byte) (int, error) {
	return f.write(Op{Kind: OpWrite, Len: int64(len(p))}, p, f.f.Write)
}

func (f *injFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(Op{Kind: OpWriteAt, Off: off, Len: int64(len(p))}, p,
		func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

func (f *injFile) Stat() (os.FileInfo, error) {
	if err := f.failOp(Op{Kind: OpFileStat}); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *injFile) Sync() error {
	if err := f.failOp(Op{Kind: OpSync}); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *injFile) Truncate(size int64) error {
	if err := f.failOp(Op{Kind: OpTruncate, Off: size}); err != nil {
		return err
	}
	err := f.f.Truncate(size)
	f.mu.Lock()
	f.held.cut(size) // after a failure too: what is held is not known
	f.mu.Unlock()
	return err
}

func (f *injFile) Preallocate(off, n int64) error {
	op := Op{Kind: OpPreallocate, Path: f.name, Off: off, Len: n}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.in.checkCharged(op, f.held.missing(off, n), nil); err != nil {
		return pathErr(op, err)
	}
	if err := f.f.Preallocate(off, n); err != nil {
		return err
	}
	f.held.add(off, n)
	return nil
}

func (f *injFile) Fd() uintptr { return f.f.Fd() }

// BeforeMap implements MapHook: an OpMap operation, passed on to the inner
// file if it implements MapHook too.
func (f *injFile) BeforeMap(size int, writable bool) error {
	if err := f.failOp(Op{Kind: OpMap, Len: int64(size)}); err != nil {
		return err
	}
	if h, ok := f.f.(vfs.MapHook); ok {
		return h.BeforeMap(size, writable)
	}
	return nil
}

// extents is a set of byte ranges of a file: sorted, disjoint and not
// touching.
type extents []extent

// extent is the byte range [off, end).
type extent struct{ off, end int64 }

// missing returns how many bytes of [off, off+n) e does not hold.
func (e extents) missing(off, n int64) int64 {
	if n <= 0 {
		return 0
	}
	end, have := off+n, int64(0)
	for _, x := range e {
		if lo, hi := max(x.off, off), min(x.end, end); lo < hi {
			have += hi - lo
		}
	}
	return n - have
}

// prefix returns the length of the longest start of [off, off+n) whose
// bytes e does not hold number at most free.
func (e extents) prefix(off, n, free int64) int64 {
	at, end := off, off+n
	for _, x := range e {
		if x.end <= at {
			continue
		}
		if x.off >= end {
			break
		}
		if gap := x.off - at; gap > 0 {
			if gap > free {
				return at + free - off
			}
			free -= gap
		}
		at = min(x.end, end)
		if at >= end {
			return n
		}
	}
	return min(at+free, end) - off
}

// add adds [off, off+n) to e.
func (e *extents) add(off, n int64) {
	if n <= 0 {
		return
	}
	x := extent{off, off + n}
	var out extents
	for _, y := range *e {
		switch {
		case y.end < x.off:
			out = append(out, y)
		case y.off > x.end:
			if x.end > x.off {
				out = append(out, x)
				x = extent{}
			}
			out = append(out, y)
		default: // overlapping or touching: merge
			x = extent{min(x.off, y.off), max(x.end, y.end)}
		}
	}
	if x.end > x.off {
		out = append(out, x)
	}
	*e = out
}

// cut drops everything at or past size from e.
func (e *extents) cut(size int64) {
	out := (*e)[:0]
	for _, x := range *e {
		if x.off >= size {
			break
		}
		x.end = min(x.end, size)
		out = append(out, x)
	}
	*e = out
}
