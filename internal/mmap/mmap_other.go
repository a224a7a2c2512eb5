//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package mmap

import (
	"errors"
	"unsafe"
)

// mmapSupported reports whether Map uses the mmap system call: not on this
// platform, where every region is a heap region.
const mmapSupported = false

const (
	adviceNormal = iota
	adviceRandom
	adviceSequential
	adviceWillNeed
	adviceDontNeed
)

var errNoMmap = errors.New("partlog/mmap: mmap not supported on this platform")

func sysMap(uintptr, int, bool) (unsafe.Pointer, error) { return nil, errNoMmap }
func sysUnmap(unsafe.Pointer, uintptr) error            { return errNoMmap }
func sysSync([]byte) error                              { return errNoMmap }
func sysAdvise([]byte, int) error                       { return errNoMmap }
