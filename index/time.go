package index

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// TimeIndex is a segment's .timeindex file: a sparse, sorted map from the
// largest timestamp seen so far to the offset where it was seen. See the
// package doc for the format and for which methods may run concurrently.
type TimeIndex struct {
	// x is the file, its mapping and the entry count, shared in
	// shape with the other index kind.
	x indexFile
}

// OpenTimeIndex opens the time index at path for a segment whose base
// offset is baseOffset, creating it if it does not exist. It follows the
// same rules as [OpenOffsetIndex], with TimeEntrySize-byte entries; for a
// maxIndexSize of 10 MiB that is 873,813 slots, of which 873,812 can be
// filled by MaybeAppend before the index is full.
func OpenTimeIndex(fs vfs.FS, path string, baseOffset int64, maxIndexSize int) (*TimeIndex, error) {
	idx := &TimeIndex{}
	if err := idx.x.open(fs, path, baseOffset, maxIndexSize, TimeEntrySize); err != nil {
		return nil, err
	}
	return idx, nil
}

// MaybeAppend adds the entry (timestamp, offset) if timestamp is greater
// than the last entry's (NoTimestamp for an empty index, so a timestamp
// must be >= 0); otherwise, including an equal timestamp with a different
// offset, it does nothing and returns nil (Kafka's maybeAppend; a smaller
// timestamp, which Kafka rejects, is ignored too). Before that, an offset
// smaller than the last entry's returns ErrNotIncreasing; an equal offset
// is allowed. An entry that would be written needs offset - BaseOffset()
// in [0, MaxInt32] (ErrOffsetOverflow) and a free slot: when IsFull(), it
// returns ErrIndexFull unless skipFullCheck, which the segment sets for the
// final entry it writes when sealed, into the slot IsFull keeps free. On
// any error the index is unchanged.
func (idx *TimeIndex) MaybeAppend(timestamp, offset int64, skipFullCheck bool) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if x.w.closed {
		return x.closedError()
	}
	n := int(x.entries.Load())
	last := idx.LastAppended()
	if n > 0 && offset < last.Offset {
		return fmt.Errorf("%w: %s: offset %d (timestamp %d) appended after offset %d (entry %d, timestamp %d)",
			ErrNotIncreasing, x.Path(), offset, timestamp, last.Offset, n-1, last.Timestamp)
	}
	if timestamp <= last.Timestamp {
		return nil
	}
	if maxEntries := x.maxEntries.Load(); int64(n) >= maxEntries || (!skipFullCheck && int64(n) >= maxEntries-1) {
		return fmt.Errorf("%w: %s: %d entries of %d, appending timestamp %d at offset %d", ErrIndexFull, x.Path(), n, maxEntries, timestamp, offset)
	}
	rel := offset - x.base
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("%w: %s: offset %d, base offset %d", ErrOffsetOverflow, x.Path(), offset, x.base)
	}
	p := x.w.scratch[:TimeEntrySize]
	putTimeEntry(p, timestamp, int32(rel))
	return x.writeEntry(p, n)
}

// Lookup returns the entry with the largest timestamp <= target, or
// {NoTimestamp, BaseOffset()} when there is none. It searches the warm
// section first (see the package doc). It does not allocate.
func (idx *TimeIndex) Lookup(target int64) TimeEntry {
	b := idx.x.view()
	i := searchTimes(b, target)
	if i < 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: idx.x.base}
	}
	return TimeEntry{Timestamp: timestampAt(b, i), Offset: timeOffsetAt(b, idx.x.base, i)}
}

// Entry returns entry i. It panics if i is not in [0, Entries()).
func (idx *TimeIndex) Entry(i int) TimeEntry {
	b := idx.x.view()
	if i < 0 || i >= len(b)/TimeEntrySize {
		panic(fmt.Errorf("partlog/index: %s: entry %d out of range [0, %d)", idx.x.Path(), i, len(b)/TimeEntrySize))
	}
	return TimeEntry{Timestamp: timestampAt(b, i), Offset: timeOffsetAt(b, idx.x.base, i)}
}

// LastEntry returns the last entry, or {NoTimestamp, BaseOffset()} when
// the index is empty.
func (idx *TimeIndex) LastEntry() TimeEntry {
	b := idx.x.view()
	n := len(b) / TimeEntrySize
	if n == 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: idx.x.base}
	}
	return TimeEntry{Timestamp: timestampAt(b, n-1), Offset: timeOffsetAt(b, idx.x.base, n-1)}
}

// LastAppended is LastEntry for the writer, from its copy of the entry it
// appended last; see OffsetIndex.LastAppended. Writer side.
func (idx *TimeIndex) LastAppended() TimeEntry {
	b := idx.x.lastBytes()
	if b == nil {
		return TimeEntry{Timestamp: NoTimestamp, Offset: idx.x.base}
	}
	return TimeEntry{Timestamp: timestampAt(b, 0), Offset: timeOffsetAt(b, idx.x.base, 0)}
}

// Entries returns the number of entries.
func (idx *TimeIndex) Entries() int { return int(idx.x.entries.Load()) }

// MaxEntries returns the number of slots: Entries() after TrimToValidSize,
// maxIndexSize/TimeEntrySize (or more, for a longer existing file)
// otherwise.
func (idx *TimeIndex) MaxEntries() int { return int(idx.x.maxEntries.Load()) }

// IsFull reports whether Entries() >= MaxEntries()-1: Kafka keeps the last
// slot for the entry MaybeAppend writes with skipFullCheck when the
// segment is sealed.
func (idx *TimeIndex) IsFull() bool { return idx.x.entries.Load() >= idx.x.maxEntries.Load()-1 }

// BaseOffset returns the segment's base offset given to OpenTimeIndex.
func (idx *TimeIndex) BaseOffset() int64 { return idx.x.base }

// Path returns the file's current path.
func (idx *TimeIndex) Path() string { return idx.x.Path() }

// sizeInBytes returns the bytes the entries take: Entries()*TimeEntrySize.
func (idx *TimeIndex) sizeInBytes() int64 { return idx.x.entries.Load() * TimeEntrySize }

// TruncateTo drops every entry whose offset is >= offset; an offset above
// the last entry's changes nothing (Kafka's truncateTo). Entries' offsets
// may repeat; all entries with an offset >= offset go.
func (idx *TimeIndex) TruncateTo(offset int64) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	b := idx.x.view()
	n := firstOffsetAtOrAbove(len(b)/TimeEntrySize, offset, func(i int) int64 { return timeOffsetAt(b, idx.x.base, i) })
	return idx.x.truncateEntries(n)
}

// Reset drops every entry and sets the file back to the maxIndexSize given
// to OpenTimeIndex, ready for a rebuild (Kafka's reset).
func (idx *TimeIndex) Reset() error {
	if err := idx.x.truncateEntries(0); err != nil {
		return err
	}
	return idx.x.resize(idx.x.maxBytes)
}

// SanityCheck looks for the damage a crash or a foreign file can leave, in
// O(1) (Kafka's sanityCheck, made stricter). It returns an error wrapping
// batch.ErrCorrupt, with the path and the byte position, when:
//   - the file length is not a multiple of TimeEntrySize;
//   - the last entry's offset is below BaseOffset();
//   - there are two entries or more and the last one's timestamp is not
//     greater than the second last's (MaybeAppend writes strictly growing
//     timestamps), or its offset is smaller.
//
// As for [OffsetIndex.SanityCheck], the last rule catches the zero tail of
// a preallocated index after a crash (KAFKA-12734). An index that fails is
// rebuilt from the log (Reset, then MaybeAppend).
//
// SanityCheck is O(1): it does not look at the entries in between, so it
// cannot see a hole left when the kernel wrote back a later page of the
// mapping but not an earlier one before a crash. As in Kafka, segments
// after the recovery point of an unclean shutdown are rebuilt (or verified
// with Check), not trusted on SanityCheck alone.
func (idx *TimeIndex) SanityCheck() (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if err := x.checkLength(); err != nil {
		return err
	}
	v := x.view()
	n := len(v) / TimeEntrySize
	if n == 0 {
		return nil
	}
	k := min(n, 2)
	b, err := x.tail(v, n, k)
	if err != nil {
		return err
	}
	last := TimeEntry{Timestamp: timestampAt(b, k-1), Offset: timeOffsetAt(b, x.base, k-1)}
	pos := int64(n-1) * TimeEntrySize
	if last.Offset < x.base {
		return base.CorruptionErrorf(x.Path(), pos, entryField(n-1),
			"last offset %d is below the base offset %d", last.Offset, x.base)
	}
	if k > 1 {
		prev := TimeEntry{Timestamp: timestampAt(b, 0), Offset: timeOffsetAt(b, x.base, 0)}
		if last.Timestamp <= prev.Timestamp || last.Offset < prev.Offset {
			return base.CorruptionErrorf(x.Path(), pos, entryField(n-1),
				"last entry (timestamp %d, offset %d) does not follow entry %d (timestamp %d, offset %d): a zero-filled preallocated tail?",
				last.Timestamp, last.Offset, n-2, prev.Timestamp, prev.Offset)
		}
	}
	return nil
}

// Check verifies every entry in O(entries): timestamps strictly increase,
// offsets never decrease and lie in [BaseOffset(), nextOffset), where
// nextOffset is the segment's next offset. The first violation is returned
// as an error wrapping batch.ErrCorrupt.
func (idx *TimeIndex) Check(nextOffset int64) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if err := x.checkLength(); err != nil {
		return err
	}
	b := x.view()
	prev := TimeEntry{Timestamp: math.MinInt64, Offset: x.base}
	for i := range len(b) / TimeEntrySize {
		e := TimeEntry{Timestamp: timestampAt(b, i), Offset: timeOffsetAt(b, x.base, i)}
		pos := int64(i) * TimeEntrySize
		switch {
		case i > 0 && e.Timestamp <= prev.Timestamp:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "timestamp %d after timestamp %d", e.Timestamp, prev.Timestamp)
		case e.Offset < prev.Offset:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "offset %d after offset %d", e.Offset, prev.Offset)
		case e.Offset >= nextOffset:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "offset %d at or past the next offset %d", e.Offset, nextOffset)
		}
		prev = e
	}
	return nil
}

// TrimToValidSize cuts the file to its entries, as Kafka does when a
// segment is sealed or closed. The index is then full until Resize.
func (idx *TimeIndex) TrimToValidSize() error { return idx.x.trimToValidSize() }

// Resize sets the number of slots to maxIndexSize/TimeEntrySize (Kafka's
// resize); a file longer than the slots is cut to them, a shorter one grows
// to them when an entry is written past its end. It returns ErrInvalidSize if the
// entries would not fit. Growing past the mapped size maps the file again;
// the old mapping stays valid until Close.
func (idx *TimeIndex) Resize(maxIndexSize int) error { return idx.x.resize(maxIndexSize) }

// DropOldMappings unmaps the mappings Resize replaced, which otherwise stay
// mapped until Close. The caller must know that no lookup made before the
// last Resize that grew the mapped size is still running or holds bytes it
// read (its segment's readers let go). Writer side.
func (idx *TimeIndex) DropOldMappings() error { return idx.x.dropRetired() }

// Flush makes the entries durable: msync of the mapping (the file's Sync
// for an unmapped file) when entries were stored through it, fdatasync
// when entries were written through the file or the file's length
// changed; nothing when this index wrote nothing since the last Flush.
// Entries an earlier index of the same file wrote are SyncFile's.
func (idx *TimeIndex) Flush() error { return idx.x.flush() }

// SyncFile fdatasyncs the file through its descriptor: its entries and
// its length, whoever wrote them (also an index of the same file closed
// since, through a mapping since unmapped), which Flush alone does not
// promise for changes it did not make.
func (idx *TimeIndex) SyncFile() error { return idx.x.syncFile() }

// Close trims the file to its entries, unmaps it and closes it. It does
// not sync (Flush first for durability). Everything is released even when
// trimming fails; the first error is returned. A second Close returns
// ErrClosed.
func (idx *TimeIndex) Close() error { return idx.x.close() }

// Rename renames the file to newPath; the index stays open.
func (idx *TimeIndex) Rename(newPath string) error { return idx.x.rename(newPath) }

// Delete unmaps and closes the index (without trimming) if it is open, and
// removes its file. A missing file is not an error.
func (idx *TimeIndex) Delete() error { return idx.x.delete() }

// Rebase gives an index without entries the base offset baseOffset; see
// OffsetIndex.Rebase.
func (idx *TimeIndex) Rebase(baseOffset int64) error { return idx.x.rebase(baseOffset) }
