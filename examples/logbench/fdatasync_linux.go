//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is the raw durability primitive partlog's per-append policy
// uses on Linux.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
