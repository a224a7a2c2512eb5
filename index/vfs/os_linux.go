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

// openFile is os.OpenFile for the files and directories the vfs opens,
// none of which the runtime's poller can wait on: os.OpenFile tries each
// new descriptor on the poller (an epoll_ctl that fails for a regular file,
// and fcntl calls around it), which an open of many small partitions paid
// about five system calls a file for. open(2) and os.NewFile (one fcntl,
// no poller) give the same blocking *os.File. Errors are *os.PathError, as
// os.OpenFile's.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), name), nil
		case err == unix.EINTR:
			continue
		default:
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}
