//go:build linux

package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// WriteVAt is VectorWriterAt with pwritev(2), retried after EINTR and
// continued after a short write.
func (f osFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Pwritev(int(f.File.Fd()), bufs, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		total += n
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if n > 0 {
			bufs[0] = bufs[0][n:]
		}
	}
	return total, nil
}
