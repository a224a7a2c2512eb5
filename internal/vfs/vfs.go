// Package vfs is the filesystem every file access of partlog goes through,
// so that tests can swap the operating system for an in-memory filesystem
// that simulates crashes ([MemFS], memfs.go; its crash model is documented
// on the type) or a wrapper that injects errors ([Injector], errorfs.go).
//
// The interface is deliberately small: what a segmented log needs and no
// more. Paths are plain OS paths joined with path/filepath.
//
// Example:
//
//	fs := vfs.Default
//	f, err := fs.Create(filepath.Join(dir, "00000000000000000000.log"))
//	if err != nil {
//		return err
//	}
//	defer f.Close()
//	if _, err := f.Write(b); err != nil {
//		return err
//	}
//	return f.Sync()
//
// # Concurrency
//
// An FS is safe for concurrent use. A File is safe for concurrent ReadAt
// calls and for one writer (Write, WriteAt, Truncate, Sync, Preallocate)
// running at the same time as those readers; Close must not overlap any
// other call.
package vfs

import (
	"errors"
	"io"
	"os"
)

// InvalidFd is what File.Fd returns for a file that has no operating-system
// descriptor (an in-memory file). Code that would mmap or sendfile such a
// file falls back to ReadAt and WriteAt, so fault-injection tests cover the
// same logic.
const InvalidFd uintptr = ^uintptr(0)

// File is an open file.
type File interface {
	io.Closer
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt

	// Stat returns the file's metadata; Size is what a reader sees now.
	Stat() (os.FileInfo, error)
	// Sync makes the file's data durable (fdatasync on Linux, F_FULLFSYNC
	// where the platform needs it). After a crash, every byte written
	// before a successful Sync is there.
	Sync() error
	// Truncate changes the file's size; growing fills with zeros.
	Truncate(size int64) error
	// Preallocate reserves disk space for [off, off+n) without changing
	// the size a reader sees where the platform allows it (fallocate with
	// KEEP_SIZE on Linux); elsewhere it does nothing.
	Preallocate(off, n int64) error
	// Fd returns the operating-system descriptor, or InvalidFd.
	Fd() uintptr
}

// FS is a filesystem.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens the named file for reading and writing, creating
	// it empty if it does not exist; it never truncates.
	OpenReadWrite(name string) (File, error)
	// OpenDir opens a directory so that Sync on the result makes the
	// directory's entries (creations, renames, removals) durable.
	OpenDir(name string) (File, error)
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes the path and everything below it.
	RemoveAll(name string) error
	// Rename renames oldname to newname, replacing newname if it exists.
	// The rename is durable only after the directory is synced.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat returns the named file's metadata.
	Stat(name string) (os.FileInfo, error)
	// Lock takes an exclusive advisory lock on the named file, creating it
	// empty when it does not exist (its contents are never touched), and
	// returns the handle whose Close releases the lock. It does not wait:
	// when another owner holds the lock it returns an error wrapping
	// [ErrLocked]. An owner is a Lock call: a second Lock of the same file
	// fails even from the same process. The operating system's lock is
	// flock(2) where it exists (released by the kernel when the process
	// dies); elsewhere it only excludes owners within one process. MemFS
	// keeps its locks in memory (a crash clone has none).
	Lock(name string) (io.Closer, error)
}

// ErrLocked is wrapped by the error Lock returns when another owner holds
// the lock.
var ErrLocked = errors.New("partlog/vfs: locked by another owner")

// Default is the operating system's filesystem.
var Default FS = osFS{}
