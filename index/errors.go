package index

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/index/vfs"
)

// ErrInvalidArgument is wrapped by every error that reports an argument
// the index cannot take, a bug in the caller: ErrNotIncreasing,
// ErrOffsetOverflow, ErrPositionOverflow and ErrInvalidSize. The public
// package index exports it alone.
var ErrInvalidArgument = errors.New("partlog/index: invalid argument")

// Errors returned by Append and MaybeAppend. None of them marks corruption:
// they report a full index or a caller bug, and the index is unchanged when
// one is returned. Each is returned wrapped with the index path and the
// values involved; test for it with errors.Is.
var (
	// ErrIndexFull is returned when the index has no free slot: the offset
	// index holds MaxEntries entries, or the time index holds
	// MaxEntries-1 (its last slot is reserved for the entry written when
	// the segment is sealed). The segment rolls before it appends to a
	// full index (Kafka: the roll condition "index is full").
	ErrIndexFull = errors.New("partlog/index: index is full")
	// ErrNotIncreasing is returned by OffsetIndex.Append when the offset
	// is not greater than the last entry's, and by TimeIndex.MaybeAppend
	// when the offset is smaller than the last entry's (Kafka's
	// InvalidOffsetException). It is a bug in the caller.
	ErrNotIncreasing = fmt.Errorf("%w: offset not increasing", ErrInvalidArgument)
	// ErrOffsetOverflow is returned when offset - baseOffset is negative
	// or does not fit in an int32, the width of an entry's relative
	// offset (Kafka's IndexOffsetOverflowException), and by the Open
	// functions for a base offset outside [0, MaxInt64-MaxInt32]. The
	// segment rolls before a batch's offsets overflow.
	ErrOffsetOverflow = fmt.Errorf("%w: relative offset overflow", ErrInvalidArgument)
	// ErrPositionOverflow is returned by OffsetIndex.Append for a file
	// position outside [0, MaxInt32], the width of an entry's position.
	ErrPositionOverflow = fmt.Errorf("%w: position overflow", ErrInvalidArgument)
)

// Errors returned by the other operations.
var (
	// ErrInvalidSize is returned by the Open functions when maxIndexSize
	// is smaller than one entry, and by Resize when the new size would not
	// hold the current entries.
	ErrInvalidSize = fmt.Errorf("%w: invalid index size", ErrInvalidArgument)
	// ErrClosed is returned by every method that changes the index after
	// Close or Delete.
	ErrClosed = errors.New("partlog/index: index is closed")
)

// ErrFault marks a read of the mapped index file that the kernel could not
// serve (a media error, or a file cut behind the index's back): see the
// package documentation, "Media errors". The error also carries the file
// and the byte offset (a *vfs.FaultError). It is vfs.ErrFault, the
// module's one sentinel for it: packages segment and log return errors
// wrapping this same value. Kafka: KAFKA_STORAGE_ERROR (56).
var ErrFault = vfs.ErrFault
