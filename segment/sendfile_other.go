//go:build !linux

package segment

import "io"

// sendfile is Linux-only; elsewhere WriteTo copies.
func (s *Segment) sendfile(io.Writer, int64, int64) (int64, bool, error) { return 0, false, nil }
