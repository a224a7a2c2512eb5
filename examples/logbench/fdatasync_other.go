//go:build !linux

package main

import "os"

// fdatasync falls back to File.Sync (F_FULLFSYNC on darwin), which is what
// partlog's vfs uses there too.
func fdatasync(f *os.File) error { return f.Sync() }

// settle is a no-op where syncfs does not exist: the rounds then start
// with whatever the filesystem has pending.
func settle(string) error { return nil }
