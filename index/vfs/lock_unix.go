//go:build unix

package vfs

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Lock implements FS.Lock with flock(2) on a descriptor of its own: the
// lock belongs to that open file description, so a second Lock of the same
// file conflicts even within one process, and the kernel releases it when
// the process dies. The file is never removed (removing it would let a
// later owner lock a new file while an earlier one still holds the old).
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return &osLock{f: f}, nil
}

// osLock is a held flock; Close unlocks and closes the descriptor.
type osLock struct{ f *os.File }

func (l *osLock) Close() error {
	uerr := unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	cerr := l.f.Close()
	if uerr != nil {
		return &os.PathError{Op: "unlock", Path: l.f.Name(), Err: uerr}
	}
	return cerr
}
