package index

import "github.com/partlog/partlog/internal/vfs"

// FS is the filesystem index files are opened through: the one every
// package of partlog uses (segment.FS and the log package's Config.FS are
// this same type). A nil FS means the operating system's. An importer
// implements it to put the files elsewhere, to count or fail operations in
// tests, and so on; an FS must be safe for concurrent use.
//
// Paths are plain OS paths joined with path/filepath. List returns entry
// names sorted; Rename replaces its target; OpenDir returns a handle whose
// Sync makes the directory's entries durable; Open opens read-only,
// OpenReadWrite creates without truncating, Create creates or truncates.
type FS = vfs.FS

// File is an open file of an FS. It is safe for concurrent ReadAt calls
// and one writer running at the same time; Close must not overlap any
// other call. Sync makes the written data durable (fdatasync); Preallocate
// reserves space without changing the size where the platform allows it
// (a no-op is a valid implementation); Fd returns the operating-system
// descriptor, which is mapped (mmap) and used for sendfile, or -1
// for a file that has none, which is then read and written with ReadAt
// and WriteAt.
type File = vfs.File

// OSFS returns the operating system's filesystem, the one a nil FS stands
// for: what an FS of the importer's own wraps to count, delay or fail some
// operations and pass the rest through.
func OSFS() FS { return vfs.Default }

// orOS returns fsys, or the operating system's filesystem when it is nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return vfs.Default
	}
	return fsys
}
