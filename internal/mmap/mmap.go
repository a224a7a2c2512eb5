// Package mmap maps a file's bytes into memory through golang.org/x/sys/unix
// (mmap, munmap, msync, madvise), with a heap fallback for files that have no
// operating-system descriptor (the in-memory filesystem of tests, whose Fd is
// vfs.InvalidFd) and for platforms without mmap.
//
// A mapped [Region] aliases the file: writes into a writable region reach the
// page cache without a system call and become durable with [Region.Sync]
// (msync). A heap region is a private copy read once with ReadAt at Map time:
// a read-only heap region does not see later appends to the file (callers of
// growing files use ReadAt instead), and a writable heap region writes
// through to the file in [Region.WriteAt], so that the file always holds what
// Bytes shows. Both kinds behave the same for the index code, which is what
// lets the fault-injection and crash tests cover it.
//
// Example:
//
//	f, err := fs.OpenReadWrite(path)
//	if err != nil {
//		return err
//	}
//	if err := f.Truncate(maxIndexSize); err != nil {
//		return err
//	}
//	r, err := mmap.Map(f, maxIndexSize, true)
//	if err != nil {
//		return err
//	}
//	defer r.Unmap()
//	var entry [8]byte
//	binary.BigEndian.PutUint32(entry[0:], uint32(relOffset))
//	binary.BigEndian.PutUint32(entry[4:], uint32(position))
//	if err := r.WriteAt(entry[:], int64(n*8)); err != nil {
//		return err
//	}
//	return r.Sync()
//
// # Caveats
//
// A region may be larger than its file: mapping past the end of the file is
// allowed, but touching a page that lies wholly past the file's end raises
// SIGBUS. Callers never read or write past the file's current length (they
// grow the file with Truncate first). Bytes returned by [Region.Bytes] are
// valid only until [Region.Unmap]; touching them afterwards faults.
// [Region.Shrink] unmaps the pages past a new, smaller size.
//
// # Faults
//
// A page of a mapping that the kernel cannot read (a media error, EIO) or
// that lies past the end of a file someone cut raises SIGBUS, which kills
// a Go program. Code that reads mapped memory runs between [Protect] and a
// deferred [Recover] (or inside [Guard], or copies with [SafeCopy]): such
// a fault then becomes an error wrapping [ErrFault], a *[FaultError]
// naming the file and the byte offset, and the goroutine goes on. Only
// faults at addresses inside a live mapping are turned into errors; any
// other fault is a bug and still panics. The protection is per goroutine
// (runtime/debug.SetPanicOnFault) and costs two runtime calls and a
// deferred recover per protected call. Bytes handed to code that does not
// protect itself cannot be protected.
//
// # Concurrency
//
// Bytes, Mapped and reads of the returned slice may run concurrently. One
// writer (WriteAt, Sync, Advise) may run concurrently with readers of bytes
// it is not writing. Unmap must not overlap any other call or any use of the
// bytes: callers guard it with their own reference counts.
package mmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/invariants"
)

// Errors returned by [Map] and [Region.WriteAt].
var (
	// ErrNegativeSize is returned by Map for a negative size.
	ErrNegativeSize = errors.New("partlog/mmap: negative size")
	// ErrReadOnly is returned by WriteAt on a region mapped read-only.
	ErrReadOnly = errors.New("partlog/mmap: region is read-only")
	// ErrOutOfRange is returned by WriteAt when [off, off+len(p)) is not
	// inside the region.
	ErrOutOfRange = errors.New("partlog/mmap: write out of range")
	// ErrUnmapped is returned by WriteAt, Sync and Advise after Unmap.
	ErrUnmapped = errors.New("partlog/mmap: region is unmapped")
)

// Advice values for [Region.Advise]. They are the platform's MADV_*
// constants where mmap exists; heap regions ignore them.
const (
	// Normal is MADV_NORMAL: no special treatment.
	Normal = adviceNormal
	// Random is MADV_RANDOM: expect random access, read ahead less (index
	// binary searches).
	Random = adviceRandom
	// Sequential is MADV_SEQUENTIAL: expect sequential access, read ahead
	// more (recovery scans).
	Sequential = adviceSequential
	// WillNeed is MADV_WILLNEED: start reading the pages in now.
	WillNeed = adviceWillNeed
	// DontNeed is MADV_DONTNEED: the pages may be dropped from this
	// mapping; a shared file mapping reads them back from the file.
	DontNeed = adviceDontNeed
)

// Supported reports whether this platform has mmap: without it every
// region is a heap copy.
const Supported = mmapSupported

// Region is a mapped (or heap-copied) range of a file starting at offset 0.
// See the package documentation for which methods may run concurrently.
type Region struct {
	// f is the file the region was made from; the region does not own it
	// and never closes it. Heap regions write through to it.
	f vfs.File
	// b is the region's bytes, len(b) == size; nil after Unmap.
	b []byte
	// size is the length given to Map.
	size int
	// mapped is true when b is an mmap (even for size 0 on a file with an
	// fd, where nothing is actually mapped and sys is false).
	mapped bool
	// sys is true when b came from the mmap system call and must be
	// released with munmap.
	sys bool
	// writable is the writable argument of Map.
	writable bool
	// unmapped is set by Unmap.
	unmapped bool
	// base and addr are the start of a system mapping and mlen its
	// length in bytes (whole pages): what is still mapped after Shrink.
	// Zero for heap regions.
	base unsafe.Pointer
	addr uintptr
	mlen uintptr
	// name is the file's path for FaultError (see SetName).
	name atomic.Pointer[string]
}

// pageSize is the size of a memory page.
var pageSize = uintptr(os.Getpagesize())

// roundUpPage rounds n up to a whole number of pages.
func roundUpPage(n uintptr) uintptr { return (n + pageSize - 1) &^ (pageSize - 1) }

// Map maps the first size bytes of f. size may exceed the file's length:
// pages past the end of the file must then not be touched. writable maps
// with PROT_READ|PROT_WRITE and MAP_SHARED, so writes reach the file; the
// file must then be open for writing. When f.Fd() is vfs.InvalidFd, or the
// platform has no mmap, Map returns a heap region instead (see
// [MapHeap]). size 0 gives an empty region. If f implements vfs.MapHook
// (the error injector's files do), its BeforeMap runs first and its error
// fails Map. The region does not own f: the
// caller closes f after Unmap (closing earlier is allowed for mapped
// regions, not for writable heap regions).
func Map(f vfs.File, size int, writable bool) (*Region, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNegativeSize, size)
	}
	if h, ok := f.(vfs.MapHook); ok {
		if err := h.BeforeMap(size, writable); err != nil {
			return nil, err
		}
	}
	fd := f.Fd()
	if fd == vfs.InvalidFd || !mmapSupported {
		return mapHeap(f, size, writable)
	}
	r := &Region{f: f, size: size, mapped: true, writable: writable}
	if size == 0 {
		r.b = []byte{}
		return r, nil
	}
	p, err := sysMap(fd, size, writable)
	if err != nil {
		return nil, fmt.Errorf("partlog/mmap: mmap %d bytes: %w", size, err)
	}
	r.b, r.sys = unsafe.Slice((*byte)(p), size), true
	r.base, r.addr, r.mlen = p, uintptr(p), roundUpPage(uintptr(size))
	if n, ok := f.(interface{ Name() string }); ok {
		r.SetName(n.Name())
	}
	register(r)
	return r, nil
}

// SetName sets the path a *FaultError of this region names (Map takes the
// file's Name when it has one). Callers that rename the file call it
// again. Safe to call concurrently with everything.
func (r *Region) SetName(path string) { r.name.Store(&path) }

// Shrink cuts the region to its first size bytes: a system mapping unmaps
// its whole pages past size (so a file cut to size is no longer mapped past
// its end, and the address space is returned), a heap region only
// shortens. Bytes then returns size bytes. Slices taken from Bytes before
// stay valid below size; touching them past it faults. Shrink must not
// overlap Bytes, WriteAt, Sync, Advise or Unmap (callers publish the new
// Bytes themselves).
func (r *Region) Shrink(size int) error {
	switch {
	case r.unmapped:
		return ErrUnmapped
	case size < 0 || size > r.size:
		return fmt.Errorf("%w: shrink to %d bytes of %d", ErrOutOfRange, size, r.size)
	}
	if r.sys {
		if keep := roundUpPage(uintptr(size)); keep < r.mlen {
			if err := sysUnmap(unsafe.Add(r.base, keep), r.mlen-keep); err != nil {
				return fmt.Errorf("partlog/mmap: munmap tail: %w", err)
			}
			live.Lock()
			r.mlen = keep
			live.Unlock()
		}
	}
	r.b = r.b[:size:size]
	r.size = size
	return nil
}

// MapHeap returns a heap region for f even when f could be mapped: size
// bytes read from f with ReadAt (bytes past the end of the file are zero).
// A writable heap region writes through to f in WriteAt and syncs f in Sync.
// Callers use it when mapping is disabled by configuration; Map uses it for
// files without a descriptor.
func MapHeap(f vfs.File, size int, writable bool) (*Region, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNegativeSize, size)
	}
	if h, ok := f.(vfs.MapHook); ok {
		if err := h.BeforeMap(size, writable); err != nil {
			return nil, err
		}
	}
	return mapHeap(f, size, writable)
}

func mapHeap(f vfs.File, size int, writable bool) (*Region, error) {
	b := make([]byte, size)
	if size > 0 {
		n, err := f.ReadAt(b, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("partlog/mmap: read %d bytes: %w", size, err)
		}
		clear(b[n:])
	}
	return &Region{f: f, b: b, size: size, writable: writable}, nil
}

// Bytes returns the region's bytes, len == the size given to Map; nil after
// Unmap. For a mapped region they alias the page cache and are valid only
// until Unmap.
func (r *Region) Bytes() []byte { return r.b }

// Len returns the size given to Map, or to the last Shrink (also after
// Unmap).
func (r *Region) Len() int { return r.size }

// Mapped reports whether the region aliases the file through mmap; false
// for the heap fallback.
func (r *Region) Mapped() bool { return r.mapped }

// Writable reports whether the region was mapped writable.
func (r *Region) Writable() bool { return r.writable }

// WriteAt copies p into the region at off. A heap region first writes p to
// the file with WriteAt and then copies the bytes the file accepted, so Bytes
// never shows what the file does not hold; on a short or failed write it
// returns the file's error. A mapped region only copies (the kernel writes
// the page back; Sync makes it durable).
func (r *Region) WriteAt(p []byte, off int64) error {
	switch {
	case r.unmapped:
		return ErrUnmapped
	case !r.writable:
		return ErrReadOnly
	case off < 0 || off > int64(r.size) || int64(len(p)) > int64(r.size)-off:
		return fmt.Errorf("%w: [%d, %d) of %d bytes", ErrOutOfRange, off, off+int64(len(p)), r.size)
	}
	if r.mapped {
		copy(r.b[off:], p)
		return nil
	}
	n, err := r.f.WriteAt(p, off)
	if n < 0 || n > len(p) {
		n = 0
	}
	copy(r.b[off:], p[:n])
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// Sync makes the region's writes durable: msync(MS_SYNC) for a mapped
// region, f.Sync() for a writable heap region (whose writes went to the
// file already). It does nothing for a read-only heap region.
func (r *Region) Sync() error {
	switch {
	case r.unmapped:
		return ErrUnmapped
	case r.sys:
		if len(r.b) == 0 {
			return nil
		}
		if err := sysSync(r.b); err != nil {
			return fmt.Errorf("partlog/mmap: msync: %w", err)
		}
		return nil
	case r.mapped:
		return nil
	case r.writable:
		return r.f.Sync()
	}
	return nil
}

// Advise passes adv (one of [Normal], [Random], [Sequential], [WillNeed],
// [DontNeed]) to madvise for a mapped region; it does nothing for a heap
// region.
func (r *Region) Advise(adv int) error {
	if r.unmapped {
		return ErrUnmapped
	}
	if !r.sys || len(r.b) == 0 {
		return nil
	}
	if err := sysAdvise(r.b, adv); err != nil {
		return fmt.Errorf("partlog/mmap: madvise: %w", err)
	}
	return nil
}

// Unmap releases the region; after it Bytes returns nil. It is idempotent:
// a second call returns nil. It neither syncs nor closes the file. Under the
// invariants build tag a heap region's bytes are overwritten with 0xde, so
// that a use after Unmap shows up as garbage.
func (r *Region) Unmap() error {
	if r.unmapped {
		return nil
	}
	r.unmapped = true
	b := r.b
	r.b = nil
	if invariants.Enabled && !r.sys {
		// Catch use after Unmap of a heap region (a mapped one faults):
		// whoever kept Bytes() now reads garbage.
		for i := range b {
			b[i] = 0xde
		}
	}
	if r.sys {
		unregister(r)
		if r.mlen > 0 {
			if err := sysUnmap(r.base, r.mlen); err != nil {
				return fmt.Errorf("partlog/mmap: munmap: %w", err)
			}
		}
	}
	return nil
}
