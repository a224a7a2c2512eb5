package vfs

import (
	"errors"
	"fmt"
)

// ErrFault marks a read (or write) of a memory-mapped file that the kernel
// could not serve: a media error on the page (EIO while paging it in), or
// a page past the end of a file that was cut while mapped. Where partlog
// maps a file it turns the SIGBUS such a fault raises into an error
// wrapping ErrFault (a *FaultError naming the file and the byte offset),
// and a read that finds a file shorter than the bytes its reader was given
// reports the same error. It is an I/O error, not corruption: the bytes
// may be fine on a healthy disk. index.ErrFault and segment.ErrFault are
// this value. Kafka's equivalent is the IOException that takes a log
// directory offline (KAFKA_STORAGE_ERROR, 56).
var ErrFault = errors.New("partlog: I/O error reading a memory-mapped file")

// FaultError is the error of a fault on a mapped file (or of a read that
// found the file cut short); it wraps ErrFault. Reach it with errors.As.
type FaultError struct {
	// File is the path of the file, "" when unknown.
	File string
	// Off is the byte offset in the file of the bytes that could not be
	// read.
	Off int64
	// Addr is the faulting address; 0 when the loss was met by a read of
	// the file rather than on a mapped page.
	Addr uintptr
}

// Error describes the fault.
func (e *FaultError) Error() string {
	if e.Addr == 0 {
		return fmt.Sprintf("%v: %s ends at byte %d, before the bytes its reader was given: a media error, or the file was cut behind its back",
			ErrFault, e.File, e.Off)
	}
	return fmt.Sprintf("%v: %s at byte %d (fault address %#x): a media error, or the file was cut while mapped",
		ErrFault, e.File, e.Off, e.Addr)
}

// Unwrap returns ErrFault.
func (e *FaultError) Unwrap() error { return ErrFault }
