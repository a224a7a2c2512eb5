//go:build !unix

package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sync"
)

// processLocks holds the files this process locked, by absolute path:
// without flock(2), Lock only excludes owners within one process.
var processLocks struct {
	sync.Mutex
	held map[string]bool
}

// Lock implements FS.Lock for platforms without flock(2): it creates the
// file and records the lock in this process only.
func (osFS) Lock(name string) (io.Closer, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	processLocks.Lock()
	defer processLocks.Unlock()
	if processLocks.held[abs] {
		_ = f.Close()
		return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
	}
	if processLocks.held == nil {
		processLocks.held = map[string]bool{}
	}
	processLocks.held[abs] = true
	return &processLock{f: f, abs: abs}, nil
}

// processLock is a held in-process lock.
type processLock struct {
	f   *os.File
	abs string
}

func (l *processLock) Close() error {
	processLocks.Lock()
	delete(processLocks.held, l.abs)
	processLocks.Unlock()
	return l.f.Close()
}
