//go:build !linux

package segment

import (
	"io/fs"

	"github.com/partlog/partlog/index/vfs"
)

// reservedPastEnd reports false where the preallocation keeps no blocks
// past the length (vfs.File.Preallocate does nothing outside Linux).
func reservedPastEnd(fs.FileInfo) bool { return false }

// releasePastEnd cuts f to n, its length (nothing is reserved past it
// here: see reservedPastEnd).
func releasePastEnd(f vfs.File, n int64) error { return f.Truncate(n) }
