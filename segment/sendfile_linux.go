//go:build linux

package segment

import (
	"errors"
	"io"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/partlog/partlog/index/vfs"
)

// maxSendfileChunk bounds one sendfile call (Linux transfers at most
// 0x7ffff000 bytes per call anyway).
const maxSendfileChunk = 1 << 30

// sendfile copies [start, end) of the .log to w with sendfile(2) when w
// exposes a descriptor. handled is false (and nothing was written) when it
// cannot: no descriptor on either side, or the kernel refuses the pair
// (EINVAL for an O_APPEND file, ENOSYS, EOPNOTSUPP), so the caller copies.
func (s *Segment) sendfile(w io.Writer, start, end int64) (written int64, handled bool, err error) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return 0, false, nil
	}
	in := s.logFile.Fd()
	if in == vfs.InvalidFd {
		return 0, false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	off := start
	var serr error
	werr := rc.Write(func(out uintptr) bool {
		for off < end {
			n, err := unix.Sendfile(int(out), int(in), &off, int(min(end-off, maxSendfileChunk)))
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // wait until the socket is writable
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	written = off - start
	if serr == nil {
		serr = werr
	}
	if serr != nil && written == 0 && (errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOSYS) || errors.Is(serr, unix.EOPNOTSUPP)) {
		return 0, false, nil
	}
	return written, true, serr
}
