// Package vfs is the filesystem every file of a partition goes through:
// segments, indexes, checkpoints, snapshots and the directory lock.
// Implement FS to put a partition elsewhere, or wrap Default (embed it and
// override what you need) to count, delay or fail some operations, as a
// fault-injection test does. Packages index, segment, log and compaction
// take an FS; a nil FS means Default, the operating system's.
//
// The package sits under index because index is the lowest package that
// opens files; it imports nothing of partlog's, so a filesystem of your
// own depends on nothing else.
//
// The interface is deliberately small: what a segmented log needs and no
// more. Paths are plain OS paths joined with path/filepath.
//
// Example, a filesystem that counts the files it creates:
//
//	type countingFS struct {
//		vfs.FS
//		creates atomic.Int64
//	}
//
//	func (c *countingFS) Create(name string) (vfs.File, error) {
//		c.creates.Add(1)
//		return c.FS.Create(name)
//	}
//
//	fs := &countingFS{FS: vfs.Default}
//	p, err := log.Open(dir, log.Config{FS: fs})
//
// # Concurrency
//
// An FS must be safe for concurrent use. A File serves concurrent ReadAt
// calls and one writer (Write, WriteAt, Truncate, Sync, Preallocate)
// running at the same time as those readers; Close must not overlap any
// other call.
//
// # Memory mapping
//
// A File whose Fd is a real descriptor is memory-mapped for reads and
// written through with sendfile and pwritev (pwrite for a small
// VectorWriterAt write) where the platform offers them. A File whose Fd
// returns InvalidFd (an in-memory file) is read and written with ReadAt
// and WriteAt instead, so the same code runs on both.
package vfs

import (
	"errors"
	"io"
	"os"
)

// InvalidFd is what File.Fd returns for a file that has no operating-system
// descriptor (an in-memory file). Such a file is read and written with
// ReadAt and WriteAt instead of being mapped or sent with sendfile.
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

// FS is a filesystem: the operations a partition needs on its directory
// and files. It must be safe for concurrent use.
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
	// dies); elsewhere it only excludes owners within one process. An
	// in-memory filesystem keeps its locks in memory.
	Lock(name string) (io.Closer, error)
}

// MapHook is implemented by a File that wants to know about, and may veto,
// a memory mapping of itself: before partlog maps a file (or, where it
// cannot map, copies it to the heap) it calls BeforeMap with the size and
// whether the mapping is writable, and fails with its error. A
// fault-injecting filesystem's files implement it to fail mappings.
type MapHook interface {
	BeforeMap(size int, writable bool) error
}

// ErrLocked is wrapped by the error Lock returns when another owner holds
// the lock.
var ErrLocked = errors.New("partlog/vfs: locked by another owner")

// Default is the operating system's filesystem.
var Default FS = osFS{}
