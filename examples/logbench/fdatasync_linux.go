//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is the raw durability primitive partlog's per-append policy
// uses on Linux.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// settle writes back everything the filesystem holding dir has pending
// (syncfs), so that a timed durability loop does not pay for the files an
// earlier round created, trimmed or removed.
func settle(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
