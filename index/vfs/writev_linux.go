//go:build linux

package vfs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// smallWriteV is the largest write WriteVAt gathers into one buffer on the
// stack and hands to pwrite(2) instead of pwritev(2). Below it the copy
// costs less than the kernel's import of the iovec array: a one-record
// batch (a 61-byte header and its records, 170 bytes for a 100-byte value)
// took about 440 ns through pwritev and 380 ns copied and written with
// pwrite, on the development VM (docs/performance.md, eighth round).
const smallWriteV = 512

// WriteVAt is VectorWriterAt with pwritev(2), retried after EINTR and
// continued after a short write. Buffers of smallWriteV bytes or fewer in
// all are copied into one and written with os.File.WriteAt (pwrite(2),
// which does the same retries).
func (f osFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	if size <= smallWriteV {
		var gathered [smallWriteV]byte
		p := gathered[:0]
		for _, b := range bufs {
			p = append(p, b...)
		}
		return f.File.WriteAt(p, off)
	}
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
