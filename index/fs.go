package index

import "github.com/partlog/partlog/index/vfs"

// orOS returns fsys, or the operating system's filesystem when it is nil.
func orOS(fsys vfs.FS) vfs.FS {
	if fsys == nil {
		return vfs.Default
	}
	return fsys
}
