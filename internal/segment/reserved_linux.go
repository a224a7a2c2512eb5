//go:build linux

package segment

import (
	"syscall"

	"github.com/partlog/partlog/internal/vfs"
)

// reservedPastEnd reports whether f holds disk blocks well past its
// length (a spare's reservation a crash left: CreateSpare), judged by
// st_blocks, which counts the allocated 512-byte blocks. The margin
// leaves out the blocks of the last page and of the extent tree. A file
// without an operating-system stat (MemFS) reports false.
func reservedPastEnd(f vfs.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	const margin = 64 << 10
	return st.Blocks*512 > (fi.Size()+4095)&^4095+margin
}
