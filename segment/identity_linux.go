//go:build linux

package segment

import (
	"io/fs"
	"syscall"
)

// fileIdentity returns the device and inode of the file fi describes (its
// Stat), which stay the same across renames and differ between files; ok
// is false for a file without an operating-system stat (MemFS).
func fileIdentity(fi fs.FileInfo) (id [2]uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return id, false
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, true
}
