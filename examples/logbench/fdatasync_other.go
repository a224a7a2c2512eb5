//go:build !linux

package main

import "os"

// fdatasync falls back to File.Sync (F_FULLFSYNC on darwin), which is what
// partlog's vfs uses there too.
func fdatasync(f *os.File) error { return f.Sync() }
