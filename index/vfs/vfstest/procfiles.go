package vfstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
