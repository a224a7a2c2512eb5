//go:build linux

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// processResources returns the process's open descriptors
// (/proc/self/fd), its mappings (/proc/self/maps) and its resident memory
// in bytes (VmRSS); ok is false when /proc does not tell.
func processResources() (fds, maps int, rss int64, ok bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, 0, false
	}
	m, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, 0, false
	}
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, 0, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, 0, 0, false
			}
			rss = kib << 10
		}
	}
	return len(ents), strings.Count(string(m), "\n"), rss, true
}

// diskBytes returns the disk blocks the files under dir hold, in bytes
// (st_blocks), and whether the platform tells.
func diskBytes(dir string) (int64, bool) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err == nil
}
