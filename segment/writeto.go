package segment

import (
	"fmt"
	"io"
	"time"

	"github.com/partlog/partlog/internal/mmap"
)

// timeNow is time.Now; a variable so that tests can control Created.
var timeNow = time.Now

// WriteTo writes the bytes [start, end) of the .log to w, which must lie
// below Size (a range from Read). When w is a socket or a file
// (*os.File, *net.TCPConn, *net.UnixConn: anything implementing
// syscall.Conn) and the .log has a descriptor, the kernel copies the bytes
// with sendfile on Linux, never through user space; otherwise the mapped
// bytes are written directly, or the file is copied through a buffer. The
// caller holds a read lease.
func (s *Segment) WriteTo(w io.Writer, start, end int64) (_ int64, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if s.released.Load() {
		return 0, ErrClosed
	}
	if start < 0 || start > end || end > s.size.Load() {
		return 0, fmt.Errorf("%w: [%d, %d) of %d bytes", ErrOutOfRange, start, end, s.size.Load())
	}
	if start == end {
		return 0, nil
	}
	if err := s.use(); err != nil {
		return 0, err
	}
	defer s.unpin()
	n, handled, err := s.sendfile(w, start, end)
	if handled || err != nil {
		return n, err
	}
	if m := s.mapping(); m != nil && end <= int64(len(m)) {
		n, err := w.Write(m[start:end:end])
		return int64(n), err
	}
	return io.Copy(w, io.NewSectionReader(s.logFile, start, end-start))
}
