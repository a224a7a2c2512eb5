// Package vfs holds the test filesystems of partlog: an in-memory
// filesystem that simulates crashes ([MemFS], memfs.go; its crash model is
// documented on the type) and a wrapper that injects errors ([Injector],
// errorfs.go). Both implement the public interface of
// github.com/partlog/partlog/index/vfs, which this package re-exports
// under the same names (FS, File, Default, ...) so that code using the
// test filesystems names one package.
//
// Example:
//
//	fs := vfs.NewMem()
//	f, err := fs.Create("/p/00000000000000000000.log")
//	if err != nil {
//		return err
//	}
//	if _, err := f.Write(b); err != nil {
//		return err
//	}
//	if err := f.Sync(); err != nil {
//		return err
//	}
//	crashed := fs.CrashClone(vfs.CrashOptions{}) // what a crash now leaves
//
// # Concurrency
//
// MemFS and Injector are safe for concurrent use, with the File contract
// of the public package: concurrent ReadAt calls and one writer at a time;
// Close overlaps no other call.
package vfs

import pvfs "github.com/partlog/partlog/index/vfs"

// FS is the public filesystem interface (index/vfs.FS).
type FS = pvfs.FS

// File is an open file of an FS (index/vfs.File).
type File = pvfs.File

// VectorWriterAt is the optional vectored write of a File
// (index/vfs.VectorWriterAt); the test filesystems do not offer it.
type VectorWriterAt = pvfs.VectorWriterAt

// InvalidFd is what File.Fd returns for a file without an operating-system
// descriptor (index/vfs.InvalidFd): every MemFS file.
const InvalidFd = pvfs.InvalidFd

// ErrLocked is wrapped by the error Lock returns when another owner holds
// the lock (index/vfs.ErrLocked); MemFS and Injector wrap it too.
var ErrLocked = pvfs.ErrLocked

// Default is the operating system's filesystem (index/vfs.Default).
var Default = pvfs.Default
