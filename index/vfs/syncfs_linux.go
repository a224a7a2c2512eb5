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

// OpenFilesystemSync implements FilesystemSyncer: the handle keeps a
// descriptor open on each filesystem (device) it syncs, the first one
// dir's, so that syncfs(2) reports every write-back error from the
// descriptor's opening on (Linux samples a filesystem's error state when
// a descriptor is opened, and syncfs reports only what followed).
func (osFS) OpenFilesystemSync(dir string) (FilesystemSync, error) {
	if release, ok := syncfsReportsErrors(); !ok {
		return nil, fmt.Errorf("partlog/vfs: syncfs on Linux %s does not report write-back errors (5.8 and later do): %w", release, errors.ErrUnsupported)
	}
	h := &osFilesystemSync{fds: make(map[uint64]int, 1)}
	if _, err := h.fdFor(dir); err != nil {
		return nil, err
	}
	return h, nil
}

// osFilesystemSync is the OS's FilesystemSync: a directory descriptor a
// device.
type osFilesystemSync struct {
	mu     sync.Mutex
	fds    map[uint64]int // by device
	closed bool
}

// fdFor returns the descriptor of the filesystem that holds dir, opening
// one (on dir) the first time its device is seen. REQUIRES: mu held, or
// the handle not yet shared.
func (h *osFilesystemSync) fdFor(dir string) (int, error) {
	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Stat(dir, &st) }); err != nil {
		return -1, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if fd, ok := h.fds[st.Dev]; ok {
		return fd, nil
	}
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	h.fds[st.Dev] = fd
	return fd, nil
}

// Sync runs syncfs(2) once on each filesystem that holds one of dirs.
func (h *osFilesystemSync) Sync(dirs []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &os.PathError{Op: "syncfs", Path: strings.Join(dirs, " "), Err: os.ErrClosed}
	}
	fds := make(map[int]string, len(h.fds))
	for _, dir := range dirs {
		fd, err := h.fdFor(dir)
		if err != nil {
			return err
		}
		if _, ok := fds[fd]; !ok {
			fds[fd] = dir
		}
	}
	for fd, dir := range fds {
		if err := retryEINTR(func() error { return unix.Syncfs(fd) }); err != nil {
			return &os.PathError{Op: "syncfs", Path: dir, Err: err}
		}
	}
	return nil
}

// Close closes the descriptors.
func (h *osFilesystemSync) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return os.ErrClosed
	}
	h.closed = true
	var first error
	for _, fd := range h.fds {
		if err := unix.Close(fd); err != nil && first == nil {
			first = err
		}
	}
	clear(h.fds)
	return first
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
