package logtest

import (
	"io"
	"os"
	"sync"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
)

// CrashFS is a filesystem for crash tests: an in-memory filesystem
// ([vfstest.MemFS]) that takes what a machine crash would leave just
// before its at-th operation (counting every call of the filesystem and
// of its files from 0, from any goroutine), and goes on working
// afterwards, so the code under test runs to its end unharmed. A test
// runs a history once on a CrashFS that never crashes (at < 0) to count
// its operations with Ops, then once per crash point k in [0, Ops), and
// checks each State:
//
//	fs := logtest.NewCrashFS(k, vfstest.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: uint64(k)})
//	p, err := plog.Open("/p", plog.Config{FS: fs})
//	m := logtest.NewModel(0, false)
//	// ... append to p and m; after p.Sync returns:
//	if !fs.Crashed() {
//		m.Sync() // acknowledged before the crash: it must survive
//	}
//	// ... at the end:
//	p.Close()
//	q, err := plog.Open("/p", plog.Config{FS: fs.State()})
//	err = m.Crash(q.LogEndOffset(), q.HighWatermark())
//	err = logtest.Check(q, m)
//
// What the code under test saw acknowledged while Crashed reported false
// was acknowledged before the crash; what it saw after may or may not be
// in the State. The crash keeps what the options say of the writes not
// yet synced ([vfstest.CrashOptions]; the zero options keep exactly the
// synced state).
//
// A CrashFS is safe for concurrent use.
type CrashFS struct {
	inj     *vfstest.Injector
	live    *vfstest.MemFS
	crashAt int64
	opts    vfstest.CrashOptions

	mu    sync.Mutex
	ops   int64
	state *vfstest.MemFS
}

var _ vfs.FS = (*CrashFS)(nil)

// NewCrashFS returns an empty CrashFS that crashes just before its at-th
// operation, keeping what opts says of the unsynced writes; a negative at
// never crashes (a run that only counts operations).
func NewCrashFS(at int64, opts vfstest.CrashOptions) *CrashFS {
	c := &CrashFS{live: vfstest.NewMem(), crashAt: at, opts: opts}
	c.inj = vfstest.NewInjector(c.live)
	c.inj.SetHook(c.beforeOp)
	return c
}

// beforeOp counts an operation and takes the crash state before the
// at-th.
func (c *CrashFS) beforeOp(vfstest.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == c.crashAt {
		c.state = c.live.CrashClone(c.opts)
	}
	c.ops++
	return nil
}

// Ops returns how many operations the filesystem has served.
func (c *CrashFS) Ops() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Crashed reports whether the crash state has been taken: from the instant
// the at-th operation began.
func (c *CrashFS) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state != nil
}

// State returns what the crash left, a filesystem of its own to reopen the
// partition on (fully synced, independent of this one), or nil while
// Crashed reports false.
func (c *CrashFS) State() *vfstest.MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Live returns the filesystem the operations go to, as it is now: what
// the code under test sees.
func (c *CrashFS) Live() *vfstest.MemFS { return c.live }

// Create implements vfs.FS.
func (c *CrashFS) Create(name string) (vfs.File, error) { return c.inj.Create(name) }

// Open implements vfs.FS.
func (c *CrashFS) Open(name string) (vfs.File, error) { return c.inj.Open(name) }

// OpenReadWrite implements vfs.FS.
func (c *CrashFS) OpenReadWrite(name string) (vfs.File, error) { return c.inj.OpenReadWrite(name) }

// OpenDir implements vfs.FS.
func (c *CrashFS) OpenDir(name string) (vfs.File, error) { return c.inj.OpenDir(name) }

// Remove implements vfs.FS.
func (c *CrashFS) Remove(name string) error { return c.inj.Remove(name) }

// RemoveAll implements vfs.FS.
func (c *CrashFS) RemoveAll(name string) error { return c.inj.RemoveAll(name) }

// Rename implements vfs.FS.
func (c *CrashFS) Rename(oldname, newname string) error { return c.inj.Rename(oldname, newname) }

// MkdirAll implements vfs.FS.
func (c *CrashFS) MkdirAll(dir string, perm os.FileMode) error { return c.inj.MkdirAll(dir, perm) }

// List implements vfs.FS.
func (c *CrashFS) List(dir string) ([]string, error) { return c.inj.List(dir) }

// Stat implements vfs.FS.
func (c *CrashFS) Stat(name string) (os.FileInfo, error) { return c.inj.Stat(name) }

// Lock implements vfs.FS.
func (c *CrashFS) Lock(name string) (io.Closer, error) { return c.inj.Lock(name) }
