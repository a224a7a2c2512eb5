//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

var _ FilesystemSyncer = osFS{}

// SyncFilesystems implements FilesystemSyncer with one syncfs(2) for each
// filesystem (device) that holds one of dirs.
func (osFS) SyncFilesystems(dirs []string) error {
	if release, ok := syncfsReportsErrors(); !ok {
		return fmt.Errorf("partlog/vfs: syncfs on Linux %s does not report write-back errors (5.8 and later do): %w", release, errors.ErrUnsupported)
	}
	synced := make(map[uint64]bool, 1)
	for _, dir := range dirs {
		var st unix.Stat_t
		if err := retryEINTR(func() error { return unix.Stat(dir, &st) }); err != nil {
			return &os.PathError{Op: "stat", Path: dir, Err: err}
		}
		if synced[st.Dev] {
			continue
		}
		if err := syncfs(dir); err != nil {
			return err
		}
		synced[st.Dev] = true
	}
	return nil
}

// syncfs runs syncfs(2) on the filesystem holding dir.
func syncfs(dir string) error {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	err = retryEINTR(func() error { return unix.Syncfs(fd) })
	cerr := unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	if cerr != nil {
		return &os.PathError{Op: "close", Path: dir, Err: cerr}
	}
	return nil
}

// retryEINTR runs call until it fails with something other than EINTR.
func retryEINTR(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

// kernelRelease is the running kernel's release (uname -r), read once.
var kernelRelease = sync.OnceValue(func() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
})

// syncfsReportsErrors reports whether the running kernel's syncfs returns
// the write-back errors it meets (Linux 5.8 and later), with the release.
func syncfsReportsErrors() (release string, ok bool) {
	release = kernelRelease()
	return release, releaseAtLeast(release, 5, 8)
}

// releaseAtLeast reports whether a kernel release string ("6.1.0-18-amd64")
// names version major.minor or a later one; one that does not parse does
// not.
func releaseAtLeast(release string, major, minor int) bool {
	fields := strings.SplitN(release, ".", 3)
	if len(fields) < 2 {
		return false
	}
	maj, err := strconv.Atoi(fields[0])
	if err != nil {
		return false
	}
	minorField := fields[1]
	if i := strings.IndexFunc(minorField, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorField = minorField[:i]
	}
	mn, err := strconv.Atoi(minorField)
	if err != nil {
		return false
	}
	return maj > major || maj == major && mn >= minor
}
