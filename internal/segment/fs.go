package segment

import (
	"github.com/partlog/partlog/internal/index"
	"github.com/partlog/partlog/internal/vfs"
)

// FS is the filesystem a segment's files live on; it is index.FS, the one
// type every package of partlog takes (see there for its contract). A nil
// FS means the operating system's.
type FS = index.FS

// File is an open file of an FS (index.File).
type File = index.File

// orOS returns fsys, or the operating system's filesystem when it is nil.
func orOS(fsys FS) FS {
	if fsys == nil {
		return vfs.Default
	}
	return fsys
}
