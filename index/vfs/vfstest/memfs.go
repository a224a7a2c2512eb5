package vfstest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/partlog/partlog/index/vfs"
)

// MemFS is an in-memory FS that remembers what was made durable, so that a
// test can simulate a crash with [MemFS.CrashClone] at any moment and reopen
// what a machine would find after rebooting.
//
// Files have no operating-system descriptor: File.Fd returns [vfs.InvalidFd], so
// code that would mmap or sendfile them uses its ReadAt/WriteAt path.
// Paths are cleaned with path/filepath; relative and absolute paths both
// resolve from the root (the root is also the working directory), and ".."
// never climbs above it. Errors are *os.PathError / *os.LinkError wrapping
// the syscall.Errno the OS would return (ENOENT, EEXIST, ENOTDIR, EISDIR,
// ENOTEMPTY, EINVAL, EBADF) or os.ErrClosed, so errors.Is(err,
// fs.ErrNotExist) works as with the OS filesystem.
//
// # Crash model
//
// Durability is tracked the way a conservative POSIX filesystem provides it:
//
//   - File data (contents and length) becomes durable when File.Sync returns
//     on any handle of the file. Every write, and every length change (Create
//     of an existing file, Truncate, a write that extends the file), made
//     after the last Sync is "unsynced" and is remembered, in order, as an
//     operation of that file.
//   - A directory entry (a name created, removed, or renamed in or out of a
//     directory, including directories made by MkdirAll) becomes durable only
//     when Sync is called on a handle from OpenDir of that directory. A file
//     whose data was synced but whose directory entry was not may vanish.
//
// [MemFS.CrashClone] returns a new MemFS holding what survives:
//
//   - Always: every directory entry as of its directory's last sync, and every
//     file's data as of its last Sync, except bytes that unsynced operations
//     overwrote or cut since (those hold the old or the new value, or torn
//     zeros or garbage, as below). Appending never touches synced bytes.
//   - Each unsynced directory entry change survives with probability
//     UnsyncedDataPercent (a name then has its current value, else its value
//     at the last directory sync). Names joined by a rename since the last
//     sync of their directories form one group that survives or not as a
//     whole, so a rename is atomic: after a crash the names are as before
//     the rename or as after it (for a rename across two directories of
//     which only one was synced since, the file may then be under both
//     names or under neither, which a conservative filesystem allows too).
//     Groups are drawn independently of each other and of file data. With
//     OrderedEntries the changes survive instead as a prefix of all of
//     them in the order they were made, as a journal commits them: a name
//     can then also hold a value it took in between.
//   - Each file's unsynced operations reach the disk in order, each with
//     probability UnsyncedDataPercent; the first that does not is cut, and
//     none after it survives (with Reorder set, each survives independently,
//     so there can be holes). A cut write is torn with probability
//     TornPercent: a random prefix of its bytes is written and the rest of
//     its range is left as it was, zeroed (the length was extended but the
//     data never written), or filled with garbage, one of the three at
//     random; with TornPages each page of its range is kept, left, zeroed
//     or filled with garbage on its own draw, as writeback in any order
//     leaves a write. Length changes are never torn.
//
// With UnsyncedDataPercent 0 the clone is exactly the synced state (no write
// is torn either); with 100 it is the current state.
//
// Around that: reads and Stat always see the current state (the page
// cache); Close syncs nothing; Preallocate changes nothing; syncing a file
// does not make its directory entry durable, nor does syncing a directory
// make its files' data durable; shrinking synced bytes away is itself an
// unsynced change that a crash may undo; an open handle of a removed or
// renamed file keeps working on the same file, as with an unlinked inode. Every random choice comes
// from the seeded CrashOptions.Rand, in a deterministic order, so a seed
// reproduces a crash. The clone starts fully synced and is independent of
// the original; handles open on the original do not reach it.
//
// MemFS is safe for concurrent use, with the File contract of package
// vfs: concurrent ReadAt calls and one writer at a time on a File; Close
// overlaps no other call.
type MemFS struct {
	mu sync.RWMutex
	// root is the root directory; it always exists.
	root *memNode
	// groups maps each unsynced directory entry to its group (union-find)
	// of entries that survive a crash together. REQUIRES: mu held.
	groups map[entryKey]*entryGroup
	// nextSeq numbers groups in creation order so that CrashClone draws
	// its random choices in a deterministic order.
	nextSeq uint64
	// history holds, for each unsynced directory entry, every value it
	// took since its directory's last sync, in order (for
	// CrashOptions.OrderedEntries). REQUIRES: mu held.
	history map[entryKey][]entryValue
	// nextChange numbers the directory entry changes in the order they
	// are made.
	nextChange uint64
}

// entryValue is a value a directory entry took: n (nil when removed), by
// the change numbered seq.
type entryValue struct {
	seq uint64
	n   *memNode
}

var (
	_ vfs.FS               = (*MemFS)(nil)
	_ vfs.FilesystemSyncer = (*MemFS)(nil)
)

// NewMem returns an empty in-memory filesystem whose root directory exists
// and is durable.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(), groups: make(map[entryKey]*entryGroup), history: make(map[entryKey][]entryValue)}
}

// memNode is a file or a directory. Every field is guarded by MemFS.mu.
type memNode struct {
	isDir   bool
	modTime time.Time

	// data is the file's current contents.
	data []byte
	// syncedLen is the file's length as of the last Sync.
	syncedLen int64
	// undo holds, in order, the bytes below syncedLen that writes and
	// shrinks since the last Sync overwrote or cut, so that the synced
	// contents can be rebuilt (syncedData) without keeping a copy of the
	// file at every Sync.
	undo []undoRec
	// ops are the data operations since the last Sync, in order.
	ops []dataOp

	// locked is set while a Lock handle holds the file.
	locked bool

	// children are the directory's current entries.
	children map[string]*memNode
	// syncedChildren are the entries as of the last directory sync.
	syncedChildren map[string]*memNode
	// dirty names the entries changed since the last directory sync.
	dirty map[string]struct{}
}

// dataOp is one unsynced change to a file: a write of data at off, or
// (truncate) a change of length to size.
type dataOp struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

// undoRec records that the bytes old were at off before a change.
type undoRec struct {
	off int64
	old []byte
}

type entryKey struct {
	dir  *memNode
	name string
}

// entryGroup is a union-find node; entries whose groups share a root survive
// a crash together.
type entryGroup struct {
	parent *entryGroup
	seq    uint64
}

func (g *entryGroup) find() *entryGroup {
	for g.parent != nil {
		if g.parent.parent != nil {
			g.parent = g.parent.parent
		}
		g = g.parent
	}
	return g
}

func newDirNode() *memNode {
	return &memNode{
		isDir:          true,
		modTime:        time.Now(),
		children:       make(map[string]*memNode),
		syncedChildren: make(map[string]*memNode),
	}
}

func newFileNode() *memNode { return &memNode{modTime: time.Now()} }

// saveUndo remembers data[lo:hi] where it lies below syncedLen, before a
// change overwrites or cuts it.
func (n *memNode) saveUndo(lo, hi int64) {
	hi = min(hi, n.syncedLen, int64(len(n.data)))
	if lo < hi {
		n.undo = append(n.undo, undoRec{off: lo, old: bytes.Clone(n.data[lo:hi])})
	}
}

// syncedData rebuilds the contents as of the last Sync: the current bytes,
// with every undo record applied newest first.
func (n *memNode) syncedData() []byte {
	b := make([]byte, n.syncedLen)
	copy(b, n.data)
	for i := len(n.undo) - 1; i >= 0; i-- {
		copy(b[n.undo[i].off:], n.undo[i].old)
	}
	return b
}

// resize sets the length of data, zero-filling growth. It does not log.
func (n *memNode) resize(size int64) {
	old := int64(len(n.data))
	if size <= old {
		n.saveUndo(size, old)
		n.data = n.data[:size]
		return
	}
	if size <= int64(cap(n.data)) {
		n.data = n.data[:size]
		clear(n.data[old:]) // stale bytes of an earlier shrink
		return
	}
	nd := make([]byte, size, max(size, 2*int64(cap(n.data))))
	copy(nd, n.data)
	n.data = nd
}

// writeAt writes p at off, growing the file as needed. It does not log.
func (n *memNode) writeBytesAt(p []byte, off int64) {
	end := off + int64(len(p))
	n.saveUndo(off, end)
	if end > int64(len(n.data)) {
		n.resize(end)
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
}

// logWrite writes p at off and records the operation.
func (n *memNode) logWrite(p []byte, off int64) {
	n.writeBytesAt(p, off)
	n.ops = append(n.ops, dataOp{off: off, data: bytes.Clone(p)})
}

// logTruncate changes the length and records the operation.
func (n *memNode) logTruncate(size int64) {
	n.resize(size)
	n.modTime = time.Now()
	n.ops = append(n.ops, dataOp{truncate: true, size: size})
}

// syncData makes the current contents the durable ones.
func (n *memNode) syncData() {
	n.syncedLen = int64(len(n.data))
	n.undo = nil
	n.ops = nil
}

// splitPath returns the components of name below the root.
func splitPath(name string) []string {
	c := filepath.ToSlash(filepath.Clean(name))
	var parts []string
	for _, p := range strings.Split(c, "/") {
		if p != "" && p != "." && p != ".." {
			parts = append(parts, p)
		}
	}
	return parts
}

// lookupParent resolves every component of name but the last and returns
// the parent directory and the last component ("" for the root).
// REQUIRES: mu held.
func (m *MemFS) lookupParent(op, name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", nil
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		child := dir.children[p]
		switch {
		case child == nil:
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
		case !child.isDir:
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		dir = child
	}
	return dir, parts[len(parts)-1], nil
}

// lookup resolves name to its node. REQUIRES: mu held.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	dir, base, err := m.lookupParent(op, name)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		return m.root, nil
	}
	n := dir.children[base]
	if n == nil {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
	}
	return n, nil
}

// setEntry sets (or, for a nil node, removes) an entry of dir and marks it
// unsynced. It returns the entry's group. REQUIRES: mu held.
func (m *MemFS) setEntry(dir *memNode, name string, n *memNode) *entryGroup {
	if n == nil {
		delete(dir.children, name)
	} else {
		dir.children[name] = n
	}
	dir.modTime = time.Now()
	key := entryKey{dir, name}
	m.history[key] = append(m.history[key], entryValue{seq: m.nextChange, n: n})
	m.nextChange++
	g := m.groups[key]
	if g == nil {
		g = &entryGroup{seq: m.nextSeq}
		m.nextSeq++
		m.groups[key] = g
		if dir.dirty == nil {
			dir.dirty = make(map[string]struct{})
		}
		dir.dirty[name] = struct{}{}
	}
	return g.find()
}

// syncDir makes dir's current entries the durable ones. REQUIRES: mu held.
func (m *MemFS) syncDir(dir *memNode) {
	for name := range dir.dirty {
		delete(m.groups, entryKey{dir, name})
		delete(m.history, entryKey{dir, name})
	}
	dir.dirty = nil
	dir.syncedChildren = maps.Clone(dir.children)
}

// Create implements FS.Create: it creates the named file, or truncates it
// (an unsynced length change) if it exists.
func (m *MemFS) Create(name string) (vfs.File, error) {
	return m.openFile("open", name, true, true, true)
}

// Open implements FS.Open: the named file (or directory), read-only.
func (m *MemFS) Open(name string) (vfs.File, error) {
	return m.openFile("open", name, false, false, false)
}

// OpenReadWrite implements FS.OpenReadWrite.
func (m *MemFS) OpenReadWrite(name string) (vfs.File, error) {
	return m.openFile("open", name, true, true, false)
}

func (m *MemFS) openFile(op, name string, write, create, trunc bool) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent(op, name)
	if err != nil {
		return nil, err
	}
	var n *memNode
	if dir == nil {
		n = m.root
	} else {
		n = dir.children[base]
	}
	switch {
	case n == nil && !create:
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
	case n == nil:
		n = newFileNode()
		m.setEntry(dir, base, n)
	case n.isDir && write:
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	case trunc && len(n.data) > 0:
		n.logTruncate(0)
	}
	return &memFile{fs: m, n: n, name: name, read: true, write: write}, nil
}

// OpenDir implements FS.OpenDir. Sync on the result makes the directory's
// entries durable. Unlike the OS, it refuses a path that is not a
// directory (ENOTDIR).
func (m *MemFS) OpenDir(name string) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupDir("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, n: n, name: name, read: true}, nil
}

// Lock implements FS.Lock: it creates the file like OpenReadWrite (an
// unsynced creation a crash may lose) and marks it held until the
// returned handle is closed. Locks live in this MemFS only: a crash clone
// starts with none, as a restarted process would.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	f, err := m.openFile("lock", name, true, true, false)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	m.mu.Lock()
	defer m.mu.Unlock()
	if mf.n.locked {
		return nil, &os.PathError{Op: "lock", Path: name, Err: vfs.ErrLocked}
	}
	mf.n.locked = true
	return &memLock{fs: m, n: mf.n}, nil
}

// memLock is a held MemFS lock.
type memLock struct {
	fs   *MemFS
	n    *memNode
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		l.n.locked = false
		l.fs.mu.Unlock()
	})
	return nil
}

// Remove implements FS.Remove.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("remove", name)
	if err != nil {
		return err
	}
	if dir == nil {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	}
	n := dir.children[base]
	switch {
	case n == nil:
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOENT}
	case n.isDir && len(n.children) > 0:
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	m.setEntry(dir, base, nil)
	return nil
}

// RemoveAll implements FS.RemoveAll. A missing path is not an error.
// RemoveAll of the root removes every entry of the root.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("unlinkat", name)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return err
	}
	if dir == nil {
		for _, child := range slices.Sorted(maps.Keys(m.root.children)) {
			m.setEntry(m.root, child, nil)
		}
		return nil
	}
	if dir.children[base] != nil {
		m.setEntry(dir, base, nil)
	}
	return nil
}

// Rename implements FS.Rename with the semantics of Go's os.Rename on
// Linux: a file replaces a file; an existing directory as the target is
// refused (EEXIST). The old and new names join one crash group.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	odir, obase, err := m.lookupParent("rename", oldname)
	if err != nil {
		return linkErr(err.(*os.PathError).Err)
	}
	ndir, nbase, err := m.lookupParent("rename", newname)
	if err != nil {
		return linkErr(err.(*os.PathError).Err)
	}
	if odir == nil || ndir == nil {
		return linkErr(syscall.EBUSY)
	}
	n := odir.children[obase]
	if n == nil {
		return linkErr(syscall.ENOENT)
	}
	target := ndir.children[nbase]
	if target != nil && target.isDir {
		// Go's os.Rename refuses an existing directory as the target,
		// even an empty one or the source itself, before renaming.
		return linkErr(syscall.EEXIST)
	}
	if n.isDir {
		// A directory cannot move below itself.
		op, np := splitPath(oldname), splitPath(newname)
		if len(np) > len(op) && slices.Equal(np[:len(op)], op) {
			return linkErr(syscall.EINVAL)
		}
	}
	if target != nil {
		switch {
		case target == n:
			return nil
		case n.isDir:
			return linkErr(syscall.ENOTDIR)
		}
	}
	g1 := m.setEntry(ndir, nbase, n)
	g2 := m.setEntry(odir, obase, nil)
	// One change for OrderedEntries: a prefix has both names or neither.
	h1, h2 := m.history[entryKey{ndir, nbase}], m.history[entryKey{odir, obase}]
	h2[len(h2)-1].seq = h1[len(h1)-1].seq
	if g1 != g2 {
		if g1.seq < g2.seq {
			g2.parent = g1
		} else {
			g1.parent = g2
		}
	}
	return nil
}

// MkdirAll implements FS.MkdirAll. Each directory it creates is an unsynced
// entry of its parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range splitPath(dir) {
		child := n.children[p]
		switch {
		case child == nil:
			child = newDirNode()
			m.setEntry(n, p, child)
		case !child.isDir:
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		n = child
	}
	return nil
}

// List implements FS.List.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("open", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &os.PathError{Op: "readdirent", Path: dir, Err: syscall.ENOTDIR}
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS.Stat.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncAll makes everything in the filesystem durable, as if every file and
// every directory had been synced. Tests call it after setting up files
// whose durability is not what they test.
func (m *MemFS) SyncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncTree(m.root, make(map[*memNode]bool))
	clear(m.groups)
	clear(m.history)
}

// OpenFilesystemSync implements [vfs.FilesystemSyncer]: the handle's Sync
// makes every file and directory below each of its dirs (each dir
// included) durable, as if each had been synced, which is what the OS's
// syncfs guarantees at least. dir must exist.
func (m *MemFS) OpenFilesystemSync(dir string) (vfs.FilesystemSync, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, err := m.lookupDir("open", dir); err != nil {
		return nil, err
	}
	return &memFilesystemSync{m: m}, nil
}

// memFilesystemSync is MemFS's FilesystemSync.
type memFilesystemSync struct {
	m      *MemFS
	closed atomic.Bool
}

// Sync syncs everything below each of dirs; a dir that does not exist is
// an error, and nothing is synced then.
func (h *memFilesystemSync) Sync(dirs []string) error {
	if h.closed.Load() {
		return &os.PathError{Op: "syncfs", Path: strings.Join(dirs, " "), Err: os.ErrClosed}
	}
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	nodes := make([]*memNode, 0, len(dirs))
	for _, dir := range dirs {
		n, err := m.lookupDir("syncfs", dir)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	seen := make(map[*memNode]bool)
	for _, n := range nodes {
		m.syncTree(n, seen)
	}
	return nil
}

// Close ends the handle.
func (h *memFilesystemSync) Close() error {
	if h.closed.Swap(true) {
		return os.ErrClosed
	}
	return nil
}

// lookupDir is lookup for a directory. REQUIRES: mu held.
func (m *MemFS) lookupDir(op, name string) (*memNode, error) {
	n, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return n, nil
}

// syncTree syncs n and, for a directory, everything below it, skipping
// the nodes in seen. REQUIRES: mu held.
func (m *MemFS) syncTree(n *memNode, seen map[*memNode]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if !n.isDir {
		n.syncData()
		return
	}
	m.syncDir(n)
	for _, c := range n.children {
		m.syncTree(c, seen)
	}
}

// CrashOptions configures [MemFS.CrashClone].
type CrashOptions struct {
	// UnsyncedDataPercent, from 0 to 100, is the chance that each unsynced
	// change survives: each group of unsynced directory entries, and each
	// unsynced operation of a file (in order, unless Reorder). 0 keeps
	// exactly the synced state.
	UnsyncedDataPercent int
	// TornPercent, from 0 to 100, is the chance that a file's cut write is
	// torn: a prefix of its bytes survives and the rest of its range is left
	// unchanged, zeroed or filled with garbage. It has no effect when
	// UnsyncedDataPercent is 0.
	TornPercent int
	// TornPages tears a cut write page by page rather than at one point:
	// each page (TornPageSize bytes, aligned in the file) its range
	// touches gets, on a draw of its own, the write's bytes, or is left as
	// it was, zeroed or filled with garbage (writeback sends a write's
	// pages to the disk in any order, and a crash stops it anywhere).
	// Without it a torn write keeps a prefix of its bytes.
	TornPages bool
	// OrderedEntries makes the unsynced directory entry changes survive
	// as a prefix of all of them, in the order they were made (a journal
	// committed up to a point, as ext4's; a rename is one change), instead
	// of each rename's names surviving or not on a draw of their own: a
	// name can then hold any value it took since its directory's last
	// sync, not only that one or its current one. The prefix is drawn
	// uniformly, or empty at UnsyncedDataPercent 0 and whole at 100.
	OrderedEntries bool
	// Reorder lets each unsynced file operation survive independently of
	// the earlier ones (writeback in any order), so data can have holes.
	Reorder bool
	// Rand is the source of every random choice. When nil, a generator
	// seeded with Seed is used.
	Rand *rand.Rand
	// Seed seeds the generator when Rand is nil.
	Seed uint64
}

// CrashClone returns a new MemFS holding what would survive a crash now:
// the synced state, plus unsynced changes kept, cut or torn at random as
// opts says (see the crash model on [MemFS]). The original is unchanged.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	rng := opts.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(opts.Seed, 0x70617274))
	}
	chance := func(pct int) bool {
		switch {
		case pct <= 0:
			return false
		case pct >= 100:
			return true
		}
		return rng.IntN(100) < pct
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	// One draw per group of unsynced entries, in creation order.
	roots := make(map[*entryGroup]bool)
	for _, g := range m.groups {
		roots[g.find()] = false
	}
	order := slices.SortedFunc(maps.Keys(roots), func(a, b *entryGroup) int {
		return cmp.Compare(a.seq, b.seq)
	})
	for _, g := range order {
		roots[g] = chance(opts.UnsyncedDataPercent)
	}
	// With OrderedEntries, the changes numbered below cut survive.
	var cut uint64
	if opts.OrderedEntries {
		first := m.nextChange
		for _, h := range m.history {
			first = min(first, h[0].seq)
		}
		switch n := m.nextChange - first; {
		case opts.UnsyncedDataPercent <= 0:
			cut = first
		case opts.UnsyncedDataPercent >= 100:
			cut = m.nextChange
		default:
			cut = first + rng.Uint64N(n+1)
		}
	}

	clone := &MemFS{groups: make(map[entryKey]*entryGroup), history: make(map[entryKey][]entryValue)}
	done := make(map[*memNode]*memNode)
	var copyNode func(n *memNode) *memNode
	copyNode = func(n *memNode) *memNode {
		if c := done[n]; c != nil {
			return c
		}
		if !n.isDir {
			c := newFileNode()
			c.modTime = n.modTime
			c.data = crashData(n, opts, rng, chance)
			c.syncData()
			done[n] = c
			return c
		}
		c := newDirNode()
		c.modTime = n.modTime
		done[n] = c
		names := make(map[string]bool)
		for name := range n.children {
			names[name] = true
		}
		for name := range n.syncedChildren {
			names[name] = true
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			child := n.syncedChildren[name]
			if opts.OrderedEntries {
				for _, v := range m.history[entryKey{n, name}] {
					if v.seq < cut {
						child = v.n
					}
				}
			} else if g := m.groups[entryKey{n, name}]; g != nil && roots[g.find()] {
				child = n.children[name]
			}
			if child != nil {
				c.children[name] = copyNode(child)
			}
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	clone.root = copyNode(m.root)
	return clone
}

// crashData returns what a crash leaves of file n's data.
func crashData(n *memNode, opts CrashOptions, rng *rand.Rand, chance func(int) bool) []byte {
	out := newFileNode()
	out.data = n.syncedData()
	for _, op := range n.ops {
		if chance(opts.UnsyncedDataPercent) {
			if op.truncate {
				out.resize(op.size)
			} else {
				out.writeBytesAt(op.data, op.off)
			}
			continue
		}
		if opts.UnsyncedDataPercent > 0 && !op.truncate && len(op.data) > 0 && chance(opts.TornPercent) {
			if opts.TornPages {
				tearPages(out, op, rng)
			} else {
				tearPrefix(out, op, rng)
			}
		}
		if !opts.Reorder {
			break
		}
	}
	if out.data == nil {
		return []byte{}
	}
	return out.data
}

// tearPrefix writes what a crash leaves of the write op to out when it
// tears at one point: a prefix of its bytes, the rest of its range left
// as it was, zeroed or filled with garbage.
func tearPrefix(out *memNode, op dataOp, rng *rand.Rand) {
	k := rng.IntN(len(op.data))
	out.writeBytesAt(op.data[:k], op.off)
	rest := op.data[k:]
	switch rng.IntN(3) {
	case 0: // the rest never reached the disk
	case 1: // the length was extended, the data never written
		out.writeBytesAt(make([]byte, len(rest)), op.off+int64(k))
	case 2: // garbage
		g := make([]byte, len(rest))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		out.writeBytesAt(g, op.off+int64(k))
	}
}

// TornPageSize is the page of CrashOptions.TornPages: the page cache's
// and ext4's block size.
const TornPageSize = 4096

// tearPages writes what a crash leaves of the write op to out when it
// tears page by page (CrashOptions.TornPages).
func tearPages(out *memNode, op dataOp, rng *rand.Rand) {
	end := op.off + int64(len(op.data))
	for lo := op.off; lo < end; {
		hi := min(end, (lo/TornPageSize+1)*TornPageSize)
		p := op.data[lo-op.off : hi-op.off]
		switch rng.IntN(4) {
		case 0: // the page reached the disk
			out.writeBytesAt(p, lo)
		case 1: // it did not
		case 2: // the length was extended, the page never written
			out.writeBytesAt(make([]byte, len(p)), lo)
		case 3: // garbage
			g := make([]byte, len(p))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			out.writeBytesAt(g, lo)
		}
		lo = hi
	}
}

// String returns a listing of the tree, one entry per line, with each
// file's size, its synced size and its count of unsynced operations, and a
// "*" after each entry not yet durable in its directory. For test failure
// messages.
func (m *MemFS) String() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var b strings.Builder
	var walk func(n *memNode, indent string)
	walk = func(n *memNode, indent string) {
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			mark := ""
			if m.groups[entryKey{n, name}] != nil {
				mark = "*"
			}
			if c.isDir {
				fmt.Fprintf(&b, "%s%s/%s\n", indent, name, mark)
				walk(c, indent+"  ")
				continue
			}
			fmt.Fprintf(&b, "%s%s%s size=%d synced=%d unsyncedOps=%d\n", indent, name, mark,
				len(c.data), c.syncedLen, len(c.ops))
		}
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			if n.children[name] == nil {
				fmt.Fprintf(&b, "%s(removed %s)*\n", indent, name)
			}
		}
	}
	b.WriteString("/\n")
	walk(m.root, "  ")
	return b.String()
}

// info returns a snapshot of the node's metadata. REQUIRES: mu held.
func (n *memNode) info(name string) os.FileInfo {
	mode := os.FileMode(0o644)
	if n.isDir {
		mode = os.ModeDir | 0o755
	}
	return memFileInfo{name: name, size: int64(len(n.data)), mode: mode, modTime: n.modTime}
}

// memFileInfo is an immutable os.FileInfo.
type memFileInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() os.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return fi.modTime }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }

// memFile is an open file or directory of a MemFS. Its fields after name are
// guarded by fs.mu.
type memFile struct {
	fs    *MemFS
	n     *memNode
	name  string
	read  bool
	write bool
	// pos is the offset of the next Read or Write.
	pos    int64
	closed bool
}

var _ vfs.File = (*memFile)(nil)

func (f *memFile) err(op string, err error) error {
	return &os.PathError{Op: op, Path: f.name, Err: err}
}

// check returns the error for op on f, if any. REQUIRES: fs.mu held.
func (f *memFile) check(op string, needWrite, needFile bool) error {
	switch {
	case f.closed:
		return f.err(op, os.ErrClosed)
	case needWrite && !f.write:
		return f.err(op, syscall.EBADF)
	case needFile && f.n.isDir:
		return f.err(op, syscall.EISDIR)
	}
	return nil
}

// Close implements io.Closer; a second Close returns os.ErrClosed.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return f.err("close", os.ErrClosed)
	}
	f.closed = true
	return nil
}

// Read implements io.Reader at the handle's position.
func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false, true); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

// ReadAt implements io.ReaderAt.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("read", false, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("read", syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write implements io.Writer at the handle's position.
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true, true); err != nil {
		return 0, err
	}
	if len(p) > 0 {
		f.n.logWrite(p, f.pos)
		f.pos += int64(len(p))
	}
	return len(p), nil
}

// WriteAt implements io.WriterAt; writing past the end zero-fills the gap.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.err("write", syscall.EINVAL)
	}
	if len(p) > 0 {
		f.n.logWrite(p, off)
	}
	return len(p), nil
}

// Stat returns the file's metadata now.
func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("stat", false, false); err != nil {
		return nil, err
	}
	return f.n.info(filepath.Base(f.name)), nil
}

// Sync makes the file's data durable or, on a directory handle, the
// directory's entries.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	if f.n.isDir {
		f.fs.syncDir(f.n)
	} else {
		f.n.syncData()
	}
	return nil
}

// Truncate changes the file's length (an unsynced operation).
func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true, true); err != nil {
		return err
	}
	if size < 0 {
		return f.err("truncate", syscall.EINVAL)
	}
	if size != int64(len(f.n.data)) {
		f.n.logTruncate(size)
	}
	return nil
}

// Preallocate checks its arguments and does nothing else: the length a
// reader sees does not change.
func (f *memFile) Preallocate(off, n int64) error {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("fallocate", true, true); err != nil {
		return err
	}
	if off < 0 || n < 0 {
		return f.err("fallocate", syscall.EINVAL)
	}
	return nil
}

// Fd returns InvalidFd: in-memory files cannot be mapped.
func (f *memFile) Fd() uintptr { return vfs.InvalidFd }

var _ fs.FileInfo = memFileInfo{}
