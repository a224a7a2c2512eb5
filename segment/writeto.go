package segment

import (
	"fmt"
	"io"
	"time"
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
func (s *Segment) WriteTo(w io.Writer, start, end int64) (int64, error) {
	if s.released.Load() {
		return 0, ErrClosed
	}
	if start < 0 || start > end || end > s.size.Load() {
		return 0, fmt.Errorf("%w: [%d, %d) of %d bytes", ErrOutOfRange, start, end, s.size.Load())
	}
	if start == end {
		return 0, nil
	}
	n, handled, err := s.sendfile(w, start, end)
	if handled || err != nil {
		return n, err
	}
	if s.mapped != nil && end <= int64(len(s.mapped)) {
		m, err := w.Write(s.mapped[start:end:end])
		return int64(m), err
	}
	return io.Copy(w, io.NewSectionReader(s.logFile, start, end-start))
}
