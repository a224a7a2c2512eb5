//go:build linux

package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes the file's data and the metadata needed to read it
// (its size) without forcing unrelated metadata such as mtime.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// preallocate reserves blocks without changing the visible size. Filesystems
// that do not support fallocate are not an error: the space is then
// allocated by the writes themselves.
func preallocate(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return nil
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}
