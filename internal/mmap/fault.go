package mmap

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	pvfs "github.com/partlog/partlog/index/vfs"
)

// ErrFault marks a read (or write) of mapped memory that the kernel could
// not serve (index/vfs.ErrFault): code run between [Protect] and [Recover]
// gets an error wrapping it instead of dying of SIGBUS, a *[FaultError]
// naming the file (as last given to Region.SetName, or the name of the file
// Map was given) and the byte offset. A read of a file that ends before
// the bytes its reader knows it holds is the same loss met without the
// mapping, and [ReadFault] reports it as the same error.
var ErrFault = pvfs.ErrFault

// FaultError is the error a protected read of mapped memory returns when it
// faults (index/vfs.FaultError). It wraps ErrFault.
type FaultError = pvfs.FaultError

// ReadFault is the fault a read of file meets when the file ends at off,
// before the bytes its reader knows it holds (the size it was mapped with,
// or a size taken earlier): the same loss a mapped read of those bytes
// meets as SIGBUS, which [Recover] turns into a *FaultError. A reader that
// reads such a file through the mapping or with reads reports both as this
// error, so whether it was mapped does not change the answer: an I/O error
// wrapping ErrFault, not damage in the file's contents.
func ReadFault(file string, off int64) *FaultError { return &FaultError{File: file, Off: off} }

// live is the registry of the regions mapped with mmap: a fault is turned
// into an error only when its address lies inside one of them (any other
// fault is a bug and stays a panic). Map, Shrink and Unmap update it; the
// fault path reads it.
var live struct {
	sync.Mutex
	regions map[*Region]struct{}
}

// register adds r to the registry.
func register(r *Region) {
	live.Lock()
	if live.regions == nil {
		live.regions = make(map[*Region]struct{})
	}
	live.regions[r] = struct{}{}
	live.Unlock()
}

// unregister removes r from the registry.
func unregister(r *Region) {
	live.Lock()
	delete(live.regions, r)
	live.Unlock()
}

// lookupFault returns the FaultError for a fault at addr, or nil when addr
// lies in no mapped region.
func lookupFault(addr uintptr) *FaultError {
	live.Lock()
	defer live.Unlock()
	for r := range live.regions {
		if addr >= r.addr && addr-r.addr < r.mlen {
			name := ""
			if p := r.name.Load(); p != nil {
				name = *p
			}
			return &FaultError{File: name, Off: int64(addr - r.addr), Addr: addr}
		}
	}
	return nil
}

// Protect makes a memory fault of the calling goroutine panic (a
// recoverable runtime error) instead of killing the process, and returns
// the previous setting, which the caller hands to Recover in the same
// defer statement:
//
//	func (s *Segment) Read(...) (_ Slice, err error) {
//		defer mmap.Recover(mmap.Protect(), &err)
//		... // reads of mapped memory
//	}
//
// The setting (runtime/debug.SetPanicOnFault) belongs to the goroutine, so
// protection does not reach goroutines the protected code starts.
func Protect() (prev bool) { return debug.SetPanicOnFault(true) }

// Recover ends the protection Protect began: it restores the previous
// setting and, when the function is unwinding because of a fault inside a
// mapped region, stops the panic and stores a *FaultError in *err (the
// function's other results are then meaningless). Any other panic — a
// fault outside every region, which is a bug, or a panic that is not a
// fault — continues. It must be deferred directly (defer
// mmap.Recover(mmap.Protect(), &err)), not called from another deferred
// function, or it cannot stop the panic.
func Recover(prev bool, err *error) {
	if !prev { // a nested protection leaves the setting on
		debug.SetPanicOnFault(false)
	}
	if v := recover(); v != nil {
		*err = asFault(v)
	}
}

// asFault returns the FaultError for the recovered value v, or panics with
// v again when it is not a fault in a mapped region.
func asFault(v any) error {
	if re, ok := v.(runtime.Error); ok {
		if a, ok := re.(interface{ Addr() uintptr }); ok {
			if fe := lookupFault(a.Addr()); fe != nil {
				faults.Add(1)
				return fe
			}
		}
	}
	panic(v)
}

// faults counts the faults turned into errors (for tests).
var faults atomic.Int64

// Faults returns the number of faults turned into errors since the process
// started.
func Faults() int64 { return faults.Load() }

// Guard runs fn with faults protected: a fault in a mapped region while fn
// runs makes Guard return a *FaultError (fn does not finish); otherwise it
// returns nil. Other panics of fn propagate.
func Guard(fn func()) (err error) {
	defer Recover(Protect(), &err)
	fn()
	return nil
}

// SafeCopy is copy(dst, src) for a src that may alias a mapped region: a
// fault while copying returns 0 and a *FaultError instead of killing the
// process (dst may then hold part of src).
func SafeCopy(dst, src []byte) (n int, err error) {
	defer Recover(Protect(), &err)
	return copy(dst, src), nil
}
