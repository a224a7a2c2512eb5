//go:build linux

package segment

import (
	"fmt"
	"io/fs"
	"syscall"

	"github.com/partlog/partlog/index/vfs"
)

// reservedPastEnd reports whether the file fi describes (its Stat) holds
// disk blocks well past its length (a spare's reservation a crash left:
// CreateSpare), judged by st_blocks, which counts the allocated 512-byte
// blocks. The margin leaves out the blocks of the last page and of the
// extent tree. A file without an operating-system stat (MemFS) reports
// false.
func reservedPastEnd(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	const margin = 64 << 10
	return st.Blocks*512 > (fi.Size()+4095)&^4095+margin
}

// releasePastEnd cuts f to n, its length, which frees the disk blocks
// reserved past it and changes neither the length nor the bytes, and puts
// back the access and modification times the cut set: Linux's ftruncate
// sets them even when the length does not change, and retention ages a
// segment whose batches carry no usable timestamp by its .log's
// modification time (compaction.Retention). A file without an
// operating-system descriptor (MemFS) is only cut.
func releasePastEnd(f vfs.File, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := f.Truncate(n); err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	fd := f.Fd()
	if !ok || fd == vfs.InvalidFd {
		return nil
	}
	tv := []syscall.Timeval{
		syscall.NsecToTimeval(syscall.TimespecToNsec(st.Atim)),
		syscall.NsecToTimeval(syscall.TimespecToNsec(st.Mtim)),
	}
	if err := syscall.Futimes(int(fd), tv); err != nil {
		return fmt.Errorf("restore the modification time: %w", err)
	}
	return nil
}
