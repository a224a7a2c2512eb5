//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package mmap

import "golang.org/x/sys/unix"

// mmapSupported reports whether Map uses the mmap system call.
const mmapSupported = true

const (
	adviceNormal     = unix.MADV_NORMAL
	adviceRandom     = unix.MADV_RANDOM
	adviceSequential = unix.MADV_SEQUENTIAL
	adviceWillNeed   = unix.MADV_WILLNEED
	adviceDontNeed   = unix.MADV_DONTNEED
)

// sysMap maps size bytes of fd from offset 0, shared.
func sysMap(fd uintptr, size int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	return unix.Mmap(int(fd), 0, size, prot, unix.MAP_SHARED)
}

func sysUnmap(b []byte) error { return unix.Munmap(b) }

func sysSync(b []byte) error {
	for {
		err := unix.Msync(b, unix.MS_SYNC)
		if err != unix.EINTR {
			return err
		}
	}
}

func sysAdvise(b []byte, adv int) error { return unix.Madvise(b, adv) }
