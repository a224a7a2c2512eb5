package index

import (
	"errors"
	"fmt"
	"io"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
)

// ErrTooLarge is returned by ReadOffsetIndex and ReadTimeIndex for a file
// longer than the limit the caller gave: the caller opens the index
// instead (OpenOffsetIndex, OpenTimeIndex), which maps it rather than
// reading it whole. It marks no damage.
var ErrTooLarge = errors.New("partlog/index: index file longer than the read limit")

// ReadOffsetIndex reads the offset index file at path, for a segment whose
// base offset is baseOffset, into memory, without mapping it and without
// keeping it open, and returns its entries (none for an empty file). It
// is for a caller that needs an index's entries once (a segment opened
// after a clean shutdown that leaves its files closed) and must not pay
// for a mapping.
//
// The file must be whole entries (the length of a trimmed index) and its
// entries must be what OpenOffsetIndex, [OffsetIndex.SanityCheck] and the
// ordering rules of [OffsetIndex.Check] accept: every offset at or above
// baseOffset and above the one before, every position at or above 0 and
// above the one before. Anything else is an error wrapping
// batch.ErrCorrupt naming the file, the byte position and the entry (so a
// preallocated index with a zero tail, KAFKA-12734, is refused: its first
// zero entry does not follow the entry before it). A file longer than
// maxBytes bytes is not read: the error wraps ErrTooLarge. A missing file
// is the filesystem's error (fs.ErrNotExist); other I/O errors are
// returned as they are. A nil fs is the operating system's filesystem.
func ReadOffsetIndex(fsys vfs.FS, path string, baseOffset int64, maxBytes int) ([]OffsetEntry, error) {
	b, err := readIndexFile(fsys, path, baseOffset, maxBytes, OffsetEntrySize)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	entries := make([]OffsetEntry, len(b)/OffsetEntrySize)
	prev := OffsetEntry{Offset: baseOffset - 1, Position: -1}
	for i := range entries {
		e := OffsetEntry{Offset: offsetAt(b, baseOffset, i), Position: positionAt(b, i)}
		if e.Offset <= prev.Offset || e.Position <= prev.Position {
			return nil, base.CorruptionErrorf(path, int64(i)*OffsetEntrySize, entryField(i),
				"entry (offset %d, position %d) does not follow (offset %d, position %d)", e.Offset, e.Position, prev.Offset, prev.Position)
		}
		entries[i], prev = e, e
	}
	return entries, nil
}

// ReadTimeIndex is ReadOffsetIndex for a time index file. Its entries must
// be what OpenTimeIndex, [TimeIndex.SanityCheck] and the ordering rules of
// [TimeIndex.Check] accept, and what only a segment writes: every
// timestamp at or above 0 (entries are written for timestamps >= 0 only)
// and above the one before, every offset at or above baseOffset and at or
// above the one before.
func ReadTimeIndex(fsys vfs.FS, path string, baseOffset int64, maxBytes int) ([]TimeEntry, error) {
	b, err := readIndexFile(fsys, path, baseOffset, maxBytes, TimeEntrySize)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	entries := make([]TimeEntry, len(b)/TimeEntrySize)
	prev := TimeEntry{Timestamp: NoTimestamp, Offset: baseOffset}
	for i := range entries {
		e := TimeEntry{Timestamp: timestampAt(b, i), Offset: timeOffsetAt(b, baseOffset, i)}
		if e.Timestamp <= prev.Timestamp || e.Offset < prev.Offset {
			return nil, base.CorruptionErrorf(path, int64(i)*TimeEntrySize, entryField(i),
				"entry (timestamp %d, offset %d) does not follow (timestamp %d, offset %d)", e.Timestamp, e.Offset, prev.Timestamp, prev.Offset)
		}
		entries[i], prev = e, e
	}
	return entries, nil
}

// readIndexFile returns the bytes of the index file at path, checked to be
// whole entries of entrySize bytes and at most maxBytes long.
func readIndexFile(fsys vfs.FS, path string, baseOffset int64, maxBytes, entrySize int) (_ []byte, err error) {
	if baseOffset < 0 || baseOffset > MaxBaseOffset {
		return nil, fmt.Errorf("%w: %s: base offset %d outside [0, %d]", ErrOffsetOverflow, path, baseOffset, int64(MaxBaseOffset))
	}
	f, err := orOS(fsys).Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := st.Size()
	switch {
	case n > int64(maxBytes):
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit %d", ErrTooLarge, path, n, maxBytes)
	case n%int64(entrySize) != 0:
		return nil, base.CorruptionErrorf(path, roundDownInt64(n, int64(entrySize)), "length",
			"index file of %d bytes is not a multiple of the %d-byte entry", n, entrySize)
	case n == 0:
		return nil, nil
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the file shrank under the read
		}
		return nil, fmt.Errorf("partlog/index: read %s: %w", path, err)
	}
	return b, nil
}
