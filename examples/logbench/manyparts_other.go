//go:build !linux

package main

// processResources is not measured outside Linux (no /proc): ok is false
// and the figures are left out.
func processResources() (fds, maps int, rss int64, ok bool) { return 0, 0, 0, false }

// diskBytes is not measured outside Linux: ok is false.
func diskBytes(dir string) (int64, bool) { return 0, false }
