package segment

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
)

// Errors of Append and the other methods. None of them marks corruption;
// corrupt files give errors that wrap batch.ErrCorrupt (Kafka error code
// CORRUPT_MESSAGE, 2) and name the file and the position (see
// [RecoverResult] and Open). The sentinels below are conditions the
// partition handles (it rolls, or it checks offsets before calling) or
// bugs in the caller; the Kafka error code a broker answers with, where
// one applies, is given with each.
var (
	// ErrClosed is returned by every method after Close (or after the
	// last Unref released the segment). Kafka: KAFKA_STORAGE_ERROR (56)
	// if it ever reaches a client.
	ErrClosed = errors.New("partlog/segment: segment is closed")
	// ErrSealed is returned by Append on a sealed segment: the partition
	// appends only to its active segment. Open returns sealed segments;
	// Unseal makes one active.
	ErrSealed = errors.New("partlog/segment: segment is sealed")
	// ErrOffsetNotIncreasing is returned by Append for a batch whose base
	// offset is below NextOffset: offsets only grow (DESIGN law 1). A bug
	// in the caller, which assigns offsets (Kafka's
	// UnexpectedAppendOffsetException; no client-facing code).
	ErrOffsetNotIncreasing = errors.New("partlog/segment: batch offset not increasing")
	// ErrOffsetOverflow is returned by Append for a batch whose offsets lie
	// below the base offset or more than MaxInt32 above it (Kafka's
	// LogSegmentOffsetOverflowException). The partition rolls first
	// (RollOffsetOverflow).
	ErrOffsetOverflow = errors.New("partlog/segment: offset does not fit the segment's relative offsets")
	// ErrSegmentFull is returned by Append when the batch does not fit:
	// the .log would outgrow Config.MaxSegmentBytes, or an index entry is
	// due and an index is full. The partition rolls first (ShouldRoll).
	ErrSegmentFull = errors.New("partlog/segment: segment is full")
	// ErrOutOfRange is returned by Bytes and WriteTo for a byte range that
	// is not inside the published part of the .log, and by Read for a
	// negative byte limit. The partition maps offsets outside the log to
	// OFFSET_OUT_OF_RANGE (1) before it gets here.
	ErrOutOfRange = errors.New("partlog/segment: range out of bounds")
	// ErrSuffix is returned by ChangeSuffix when the files do not carry
	// the old suffix.
	ErrSuffix = errors.New("partlog/segment: files do not have that suffix")
	// ErrDeleted is returned by the methods that read a deleted segment
	// (MarkDeleted) whose files were closed while unused (Budget) and
	// cannot be opened again as its own: they were removed, or replaced
	// by those of a later segment deleted with the same base offset. The
	// segment is no longer in its partition's list: read from the
	// partition's current segments instead (package log retries the
	// read).
	ErrDeleted = errors.New("partlog/segment: segment deleted and its files gone")
)

// ErrFault marks a read of the memory-mapped .log or index that the kernel
// could not serve: a media error on the page, or a file cut behind the
// segment's back. The read returns an error wrapping it (a
// *FaultError naming the file and the byte offset) instead of the
// process dying of SIGBUS; the segment's other pages may still read. It is
// an I/O error, not corruption. Package log takes the partition offline.
// It is index.ErrFault and vfs.ErrFault (this same value). Kafka:
// KAFKA_STORAGE_ERROR (56). Bytes returned by Bytes (zero-copy) are read
// by the caller, outside this protection.
var ErrFault = vfs.ErrFault

// FaultError is the error a faulting read returns (it wraps ErrFault): the
// file, the byte offset in it and the faulting address. It is package
// index/vfs's type, named here for the users of a segment; test for it
// with errors.As.
type FaultError = vfs.FaultError

// ErrTornTail marks the Cause of a recovery scan that stopped at an
// incomplete write at the end of the .log: a short or zeroed tail, or a
// last batch that fails its checks, what a crash leaves and recovery cuts.
// Damage followed by more data is corruption and does not wrap it;
// test with errors.Is(res.Cause, ErrTornTail). It wraps batch.ErrCorrupt,
// and batch.ErrTruncated wraps it.
var ErrTornTail = base.ErrTornTail

// ErrLegacyKept marks the Cause of a recovery that found legacy data
// (magic 0 or 1 messages Kafka wrote before 0.11) it cannot prove torn and
// therefore did not cut (RecoverResult.Kept, DESIGN law 12). It wraps
// batch.ErrCorrupt but not ErrTornTail. Kafka: KAFKA_STORAGE_ERROR
// (56) for the partition that refuses to load.
var ErrLegacyKept = fmt.Errorf("%w: legacy data kept", base.ErrCorrupt)
