package vfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// OpenFiles counts the descriptors and the mappings of this process that
// refer to files under dir, from /proc/self/fd and /proc/self/maps: what a
// test of an open-segment budget (segment.Budget, log.DirConfig's
// MaxOpenSegments) checks against it. Off Linux it returns an error
// wrapping errors.ErrUnsupported.
func OpenFiles(dir string) (fds, maps int, err error) {
	if runtime.GOOS != "linux" {
		return 0, 0, fmt.Errorf("vfstest: counting open files: %w on %s", errors.ErrUnsupported, runtime.GOOS)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir) {
			fds++
		}
	}
	m, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(m), "\n") {
		if strings.Contains(line, dir) {
			maps++
		}
	}
	return fds, maps, nil
}

// MappedBytes returns the resident bytes (Rss, from /proc/self/smaps) of
// this process's mappings of the files whose path starts with prefix (a
// file's path, or a directory's with its trailing separator): the pages
// the process touched through those mappings and still has mapped, a
// store into or a read of a mapped page having faulted it in. A test of
// code that must not touch a mapping (an index's first entries, written
// through the file) checks that it stays 0. Off Linux it returns an error
// wrapping errors.ErrUnsupported.
func MappedBytes(prefix string) (int64, error) {
	if runtime.GOOS != "linux" {
		return 0, fmt.Errorf("vfstest: resident mapped bytes: %w on %s", errors.ErrUnsupported, runtime.GOOS)
	}
	m, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var total int64
	in := false
	for _, line := range strings.Split(string(m), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A mapping's first line: range, mode, offset, device,
			// inode and, for a file, its path.
			in = len(fields) >= 6 && strings.HasPrefix(strings.Join(fields[5:], " "), prefix)
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("vfstest: /proc/self/smaps: %q: %w", line, err)
			}
			total += kib << 10
		}
	}
	return total, nil
}
