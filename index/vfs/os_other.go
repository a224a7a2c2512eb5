//go:build !linux

package vfs

import "os"

// datasync uses File.Sync, which on darwin issues F_FULLFSYNC.
func datasync(f *os.File) error { return f.Sync() }

// preallocate does nothing where fallocate does not exist; writes allocate
// the space.
func preallocate(*os.File, int64, int64) error { return nil }

// openFile is os.OpenFile.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
