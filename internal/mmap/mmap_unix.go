//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmapSupported reports whether Map uses the mmap system call.
const mmapSupported = true

const (
	adviceNormal     = unix.MADV_NORMAL
	adviceRandom     = unix.MADV_RANDOM
	adviceSequential = unix.MADV_SEQUENTIAL
	adviceWillNeed   = unix.MADV_WILLNEED
	adviceDontNeed   = unix.MADV_DONTNEED
)

// sysMap maps size bytes of fd from offset 0, shared. The mapping is
// addressed by pointer (not unix.Mmap's slice) so that Shrink can unmap
// its tail.
func sysMap(fd uintptr, size int, writable bool) (unsafe.Pointer, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	return unix.MmapPtr(int(fd), 0, nil, uintptr(size), prot, unix.MAP_SHARED)
}

// sysUnmap unmaps n bytes from addr (whole pages).
func sysUnmap(addr unsafe.Pointer, n uintptr) error { return unix.MunmapPtr(addr, n) }

func sysSync(b []byte) error {
	for {
		err := unix.Msync(b, unix.MS_SYNC)
		if err != unix.EINTR {
			return err
		}
	}
}

func sysAdvise(b []byte, adv int) error { return unix.Madvise(b, adv) }
