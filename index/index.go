package index

import (
	impl "github.com/partlog/partlog/internal/index"
	"github.com/partlog/partlog/internal/vfs"
)

// FS is the filesystem an index file goes through; a nil FS is the
// operating system's (OSFS). It is the same type as segment.FS.
//
// A File serves concurrent ReadAt calls and one writer running at the same
// time; Close must not overlap any other call. Sync makes the written data
// durable (fdatasync); Preallocate reserves space without changing the
// size where the platform allows it (a no-op is a valid implementation);
// Fd returns the operating-system descriptor, which is mapped (mmap) and
// used for sendfile, or -1 for a file that has none, which is then read
// and written with ReadAt and WriteAt.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// OSFS returns the operating system's filesystem, for an FS of your own to
// wrap (embed it and override what you need).
func OSFS() FS { return vfs.Default }

// OffsetEntry is one offset index entry, decoded (Kafka's OffsetPosition):
// the absolute Offset and the Position in the .log of the batch holding it.
type OffsetEntry = impl.OffsetEntry

// TimeEntry is one time index entry, decoded (Kafka's TimestampOffset):
// the largest Timestamp up to and including the absolute Offset.
type TimeEntry = impl.TimeEntry

// DefaultMaxIndexSize is Kafka's segment.index.bytes: 10 MiB. The entry
// sizes (8 and 12 bytes) are in the package documentation; an empty time
// index's lookups answer batch.NoTimestamp (-1); the largest base offset
// an index takes is math.MaxInt64 - math.MaxInt32, so that every offset
// it can hold fits an int64.
const DefaultMaxIndexSize = impl.DefaultMaxIndexSize

// Errors, for errors.Is. Each is wrapped with the file and the entry.
var (
	// ErrIndexFull: Append to an index whose slots are all used.
	ErrIndexFull = impl.ErrIndexFull
	// ErrInvalidArgument: an argument the index cannot take, a bug in
	// the caller; the wrapped message says which: an appended offset not
	// above the last entry's (below it, for a time index), offset - base
	// offset or a position outside [0, MaxInt32], a base offset above
	// math.MaxInt64 - math.MaxInt32, or a maxIndexSize smaller than one
	// entry.
	ErrInvalidArgument = impl.ErrInvalidArgument
	// ErrClosed: the index was closed.
	ErrClosed = impl.ErrClosed
	// ErrFault: a fault on a mapped page (a media error). It is the
	// module's one sentinel for such a fault: package segment's reads (of
	// the .log and of the indexes) and package log's partition return
	// errors wrapping this same value, with a *segment.FaultError naming
	// the file and the byte offset. Kafka: KAFKA_STORAGE_ERROR (56).
	ErrFault = impl.ErrFault
)

// OffsetIndex is a segment's .index: sparse entries mapping offsets to
// positions in the .log. See the package documentation.
type OffsetIndex struct {
	x *impl.OffsetIndex
}

// OpenOffsetIndex opens the offset index at path for a segment whose base
// offset is baseOffset, creating it (preallocated to maxIndexSize, rounded
// down to whole entries) if it does not exist. An existing file is not
// modified: check it with SanityCheck. A nil fs is the operating system's
// filesystem.
func OpenOffsetIndex(fs FS, path string, baseOffset int64, maxIndexSize int) (*OffsetIndex, error) {
	x, err := impl.OpenOffsetIndex(fs, path, baseOffset, maxIndexSize)
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{x: x}, nil
}

// Append adds the entry (offset, position): offset is the last offset of a
// batch, position where the batch starts. Offsets must not decrease. On an
// error the index is unchanged. One writer at a time.
func (idx *OffsetIndex) Append(offset, position int64) error { return idx.x.Append(offset, position) }

// Lookup returns the last entry whose offset is at or below target, or
// {base offset, 0} when there is none: the batch holding target starts at
// or after its Position.
func (idx *OffsetIndex) Lookup(target int64) OffsetEntry { return idx.x.Lookup(target) }

// Entry returns entry i, in [0, Entries()).
func (idx *OffsetIndex) Entry(i int) OffsetEntry { return idx.x.Entry(i) }

// LastEntry returns the last entry, or {base offset, 0} when empty.
func (idx *OffsetIndex) LastEntry() OffsetEntry { return idx.x.LastEntry() }

// Entries returns the number of entries.
func (idx *OffsetIndex) Entries() int { return idx.x.Entries() }

// TruncateTo drops every entry whose offset is >= offset (Kafka's
// truncateTo).
func (idx *OffsetIndex) TruncateTo(offset int64) error { return idx.x.TruncateTo(offset) }

// SanityCheck checks the file in O(1) (its length, the last entry against
// the base offset: the zero tail a crash leaves in a preallocated index,
// KAFKA-12734); a failing index is to be rebuilt from the log.
func (idx *OffsetIndex) SanityCheck() error { return idx.x.SanityCheck() }

// Flush makes the entries durable.
func (idx *OffsetIndex) Flush() error { return idx.x.Flush() }

// Close trims the file to its entries, unmaps and closes it; it does not
// sync (Flush first).
func (idx *OffsetIndex) Close() error { return idx.x.Close() }

// TimeIndex is a segment's .timeindex: sparse entries mapping timestamps
// to offsets. See the package documentation.
type TimeIndex struct {
	x *impl.TimeIndex
}

// OpenTimeIndex opens the time index at path for a segment whose base
// offset is baseOffset, creating it if it does not exist; as
// OpenOffsetIndex.
func OpenTimeIndex(fs FS, path string, baseOffset int64, maxIndexSize int) (*TimeIndex, error) {
	x, err := impl.OpenTimeIndex(fs, path, baseOffset, maxIndexSize)
	if err != nil {
		return nil, err
	}
	return &TimeIndex{x: x}, nil
}

// MaybeAppend adds the entry (timestamp, offset) when timestamp is larger
// than the last entry's (Kafka's maybeAppend); otherwise it does nothing.
// Offsets must not decrease. The last slot is kept free for the final entry
// written when the segment is sealed: pass skipFullCheck for that one. On
// an error the index is unchanged. One writer at a time.
func (idx *TimeIndex) MaybeAppend(timestamp, offset int64, skipFullCheck bool) error {
	return idx.x.MaybeAppend(timestamp, offset, skipFullCheck)
}

// Lookup returns the last entry whose timestamp is at or below target, or
// {batch.NoTimestamp (-1), base offset} when there is none.
func (idx *TimeIndex) Lookup(target int64) TimeEntry { return idx.x.Lookup(target) }

// Entry returns entry i, in [0, Entries()).
func (idx *TimeIndex) Entry(i int) TimeEntry { return idx.x.Entry(i) }

// LastEntry returns the last entry, or {batch.NoTimestamp, base offset} when
// empty.
func (idx *TimeIndex) LastEntry() TimeEntry { return idx.x.LastEntry() }

// Entries returns the number of entries.
func (idx *TimeIndex) Entries() int { return idx.x.Entries() }

// TruncateTo drops every entry whose offset is >= offset.
func (idx *TimeIndex) TruncateTo(offset int64) error { return idx.x.TruncateTo(offset) }

// SanityCheck checks the file in O(1) as OffsetIndex.SanityCheck does; a
// failing index is to be rebuilt from the log.
func (idx *TimeIndex) SanityCheck() error { return idx.x.SanityCheck() }

// Flush makes the entries durable.
func (idx *TimeIndex) Flush() error { return idx.x.Flush() }

// Close trims the file to its entries, unmaps and closes it; it does not
// sync (Flush first).
func (idx *TimeIndex) Close() error { return idx.x.Close() }
