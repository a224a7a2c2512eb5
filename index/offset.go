package index

import (
	"fmt"
	"math"
	"sort"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// OffsetIndex is a segment's .index file: a sparse, sorted map from offsets
// to the .log positions of the batches that hold them. See the package doc
// for the format and for which methods may run concurrently.
type OffsetIndex struct {
	// x is the file, its mapping and the entry count, shared in
	// shape with the other index kind.
	x indexFile
}

// OpenOffsetIndex opens the offset index at path for a segment whose base
// offset is baseOffset, creating it if it does not exist.
//
// A new file is preallocated to maxIndexSize rounded down to whole entries
// (Kafka). An existing file holds len/OffsetEntrySize entries, rounded down
// (Kafka): a sealed index is exactly its entries, but an index left
// preallocated by a crash has a zero tail that this count includes, which
// [OffsetIndex.SanityCheck] detects. An existing file is not modified by
// opening it: it is mapped with room for max(maxIndexSize, its length)
// bytes of slots, and grown to that size only when an entry is appended
// past its end (or by Resize or Reset). A 0-byte file (Kafka leaves them
// for cleaned segments) opens as an empty index.
//
// maxIndexSize must hold at least one entry; baseOffset must be in [0,
// MaxBaseOffset]. A nil fs is the operating system's filesystem.
func OpenOffsetIndex(fs vfs.FS, path string, baseOffset int64, maxIndexSize int) (*OffsetIndex, error) {
	idx := &OffsetIndex{}
	if err := idx.x.open(fs, path, baseOffset, maxIndexSize, OffsetEntrySize); err != nil {
		return nil, err
	}
	return idx, nil
}

// Append adds the entry (offset, position): offset is the last offset of
// the batch (or batches) written at position in the .log. offset must be
// greater than the last entry's (ErrNotIncreasing), offset - BaseOffset()
// must be in [0, MaxInt32] (ErrOffsetOverflow) and position in [0,
// MaxInt32] (ErrPositionOverflow); a full index returns ErrIndexFull.
// On any error the index is unchanged.
//
// The entry's bytes are written before the new count is published, so
// concurrent lookups see either the old entries or all of the new ones.
func (idx *OffsetIndex) Append(offset, position int64) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if x.w.closed {
		return x.closedError()
	}
	n := int(x.entries.Load())
	if int64(n) >= x.maxEntries.Load() {
		return fmt.Errorf("%w: %s: %d entries, appending offset %d", ErrIndexFull, x.Path(), n, offset)
	}
	if n > 0 {
		if last := idx.LastAppended().Offset; offset <= last {
			return fmt.Errorf("%w: %s: offset %d appended after offset %d (entry %d)", ErrNotIncreasing, x.Path(), offset, last, n-1)
		}
	}
	rel := offset - x.base
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("%w: %s: offset %d, base offset %d", ErrOffsetOverflow, x.Path(), offset, x.base)
	}
	if position < 0 || position > math.MaxInt32 {
		return fmt.Errorf("%w: %s: offset %d at position %d", ErrPositionOverflow, x.Path(), offset, position)
	}
	p := x.w.scratch[:OffsetEntrySize]
	putOffsetEntry(p, int32(rel), int32(position))
	return x.writeEntry(p, n)
}

// Lookup returns the entry with the largest offset <= target, or
// {BaseOffset(), 0} when there is none (an empty index, or a target below
// the first entry). It searches the warm section first (see the package
// doc). It does not allocate.
func (idx *OffsetIndex) Lookup(target int64) OffsetEntry {
	b := idx.x.view()
	i := searchOffsets(b, idx.x.base, target)
	if i < 0 {
		return OffsetEntry{Offset: idx.x.base}
	}
	return OffsetEntry{Offset: offsetAt(b, idx.x.base, i), Position: positionAt(b, i)}
}

// SearchPosition returns how many entries have a position below pos: the
// first ones, as positions grow with offsets. It binary-searches one view
// of the index and does not allocate.
func (idx *OffsetIndex) SearchPosition(pos int64) int {
	b := idx.x.view()
	return sort.Search(len(b)/OffsetEntrySize, func(i int) bool { return positionAt(b, i) >= pos })
}

// Entry returns entry i. It panics if i is not in [0, Entries()).
func (idx *OffsetIndex) Entry(i int) OffsetEntry {
	b := idx.x.view()
	if i < 0 || i >= len(b)/OffsetEntrySize {
		panic(fmt.Errorf("partlog/index: %s: entry %d out of range [0, %d)", idx.x.Path(), i, len(b)/OffsetEntrySize))
	}
	return OffsetEntry{Offset: offsetAt(b, idx.x.base, i), Position: positionAt(b, i)}
}

// LastEntry returns the last entry, or {BaseOffset(), 0} when the index is
// empty.
func (idx *OffsetIndex) LastEntry() OffsetEntry {
	b := idx.x.view()
	n := len(b) / OffsetEntrySize
	if n == 0 {
		return OffsetEntry{Offset: idx.x.base}
	}
	return OffsetEntry{Offset: offsetAt(b, idx.x.base, n-1), Position: positionAt(b, n-1)}
}

// LastAppended is LastEntry for the writer: the same entry, from the
// writer's copy of the entry it appended last, so that the appender's
// checks do not read the mapped page (the first entries after an existing
// file is mapped are written through the file, see the package doc, and
// reading them through the mapping would map the page). After the count
// changed otherwise (an open, TruncateTo) it reads the entry once:
// through the file while entries are written through it, else from the
// mapping. Writer side: it must not overlap the writer's or the exclusive
// methods.
func (idx *OffsetIndex) LastAppended() OffsetEntry {
	b := idx.x.lastBytes()
	if b == nil {
		return OffsetEntry{Offset: idx.x.base}
	}
	return OffsetEntry{Offset: offsetAt(b, idx.x.base, 0), Position: positionAt(b, 0)}
}

// Entries returns the number of entries.
func (idx *OffsetIndex) Entries() int { return int(idx.x.entries.Load()) }

// MaxEntries returns the number of slots: Entries() after TrimToValidSize,
// maxIndexSize/OffsetEntrySize (or more, for a longer existing file)
// otherwise.
func (idx *OffsetIndex) MaxEntries() int { return int(idx.x.maxEntries.Load()) }

// IsFull reports whether every slot holds an entry, so that Append would
// return ErrIndexFull. A trimmed index is full until Resize.
func (idx *OffsetIndex) IsFull() bool { return idx.x.entries.Load() >= idx.x.maxEntries.Load() }

// BaseOffset returns the segment's base offset given to OpenOffsetIndex.
func (idx *OffsetIndex) BaseOffset() int64 { return idx.x.base }

// Path returns the file's current path.
func (idx *OffsetIndex) Path() string { return idx.x.Path() }

// sizeInBytes returns the bytes the entries take: Entries()*OffsetEntrySize.
func (idx *OffsetIndex) sizeInBytes() int64 { return idx.x.entries.Load() * OffsetEntrySize }

// TruncateTo drops every entry whose offset is >= offset; an offset above
// the last entry's changes nothing (Kafka's truncateTo). The dropped bytes
// stay in the file until overwritten or trimmed.
func (idx *OffsetIndex) TruncateTo(offset int64) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	b := idx.x.view()
	n := firstOffsetAtOrAbove(len(b)/OffsetEntrySize, offset, func(i int) int64 { return offsetAt(b, idx.x.base, i) })
	return idx.x.truncateEntries(n)
}

// Reset drops every entry and sets the file back to the maxIndexSize given
// to OpenOffsetIndex, ready for a rebuild (Kafka's reset).
func (idx *OffsetIndex) Reset() error {
	if err := idx.x.truncateEntries(0); err != nil {
		return err
	}
	return idx.x.resize(idx.x.maxBytes)
}

// SanityCheck looks for the damage a crash or a foreign file can leave, in
// O(1) (Kafka's sanityCheck, made stricter). It returns an error wrapping
// batch.ErrCorrupt, with the path and the byte position, when:
//   - the file length is not a multiple of OffsetEntrySize;
//   - the last entry's offset is below BaseOffset() or its position is
//     negative;
//   - there are two entries or more and the last one's offset is not
//     greater than the second last's, or its position is smaller.
//
// The last rule catches a preallocated index whose entry count was taken
// from its length after a crash (KAFKA-12734): its tail is zeros, and a
// zero entry (relative offset 0, position 0) is never greater than the
// entry before it. Kafka's own check misses that case, so Kafka then
// treats the index as full and rolls a new segment at once. An index that
// fails SanityCheck is rebuilt from the log (Reset, then Append).
//
// SanityCheck is O(1): it does not look at the entries in between, so it
// cannot see a hole left when the kernel wrote back a later page of the
// mapping but not an earlier one before a crash. As in Kafka, segments
// after the recovery point of an unclean shutdown are rebuilt (or verified
// with Check), not trusted on SanityCheck alone.
func (idx *OffsetIndex) SanityCheck() (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if err := x.checkLength(); err != nil {
		return err
	}
	v := x.view()
	n := len(v) / OffsetEntrySize
	if n == 0 {
		return nil
	}
	k := min(n, 2)
	b, err := x.tail(v, n, k)
	if err != nil {
		return err
	}
	last := OffsetEntry{Offset: offsetAt(b, x.base, k-1), Position: positionAt(b, k-1)}
	pos := int64(n-1) * OffsetEntrySize
	if last.Offset < x.base {
		return base.CorruptionErrorf(x.Path(), pos, entryField(n-1),
			"last offset %d is below the base offset %d", last.Offset, x.base)
	}
	if last.Position < 0 {
		return base.CorruptionErrorf(x.Path(), pos, entryField(n-1),
			"last position %d is negative", last.Position)
	}
	if k > 1 {
		prev := OffsetEntry{Offset: offsetAt(b, x.base, 0), Position: positionAt(b, 0)}
		if last.Offset <= prev.Offset || last.Position < prev.Position {
			return base.CorruptionErrorf(x.Path(), pos, entryField(n-1),
				"last entry (offset %d, position %d) does not follow entry %d (offset %d, position %d): a zero-filled preallocated tail?",
				last.Offset, last.Position, n-2, prev.Offset, prev.Position)
		}
	}
	return nil
}

// Check verifies every entry against the log, in O(entries) calls of
// batchStartAt: offsets strictly increase from BaseOffset() on, positions
// strictly increase and are below logSize, batchStartAt(position) reports
// a batch starting there (ok), and that batch's last offset is greater
// than the previous entry's offset and at most the entry's offset (Kafka
// indexes a batch's last offset; older versions the last offset of the last
// batch of one append, which can be a later batch). The first violation is
// returned as an error wrapping batch.ErrCorrupt. Segments use it in
// consistency checks and tests; lookups do not need it.
func (idx *OffsetIndex) Check(logSize int64, batchStartAt func(pos int64) (lastOffset int64, ok bool)) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault

	x := &idx.x
	if err := x.checkLength(); err != nil {
		return err
	}
	b := x.view()
	prev := OffsetEntry{Offset: x.base - 1, Position: -1}
	for i := range len(b) / OffsetEntrySize {
		e := OffsetEntry{Offset: offsetAt(b, x.base, i), Position: positionAt(b, i)}
		pos := int64(i) * OffsetEntrySize
		switch {
		case e.Offset <= prev.Offset:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "offset %d after offset %d", e.Offset, prev.Offset)
		case e.Position <= prev.Position:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "position %d after position %d", e.Position, prev.Position)
		case e.Position >= logSize:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "position %d at or past the log's end %d", e.Position, logSize)
		}
		last, ok := batchStartAt(e.Position)
		switch {
		case !ok:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i), "no batch starts at position %d (offset %d)", e.Position, e.Offset)
		case last > e.Offset || last <= prev.Offset:
			return base.CorruptionErrorf(x.Path(), pos, entryField(i),
				"batch at position %d ends at offset %d, outside (%d, %d]", e.Position, last, prev.Offset, e.Offset)
		}
		prev = e
	}
	return nil
}

// TrimToValidSize cuts the file to its entries, as Kafka does when a
// segment is sealed or closed. The index is then full until Resize.
func (idx *OffsetIndex) TrimToValidSize() error { return idx.x.trimToValidSize() }

// Resize sets the number of slots to maxIndexSize/OffsetEntrySize (Kafka's
// resize: it makes a trimmed index appendable again when its segment
// becomes active); a file longer than the slots is cut to them, a shorter
// one grows to them when an entry is written past its end. It returns
// ErrInvalidSize if the entries would not fit. Growing past the mapped
// size maps the file again; the old mapping stays valid until Close.
func (idx *OffsetIndex) Resize(maxIndexSize int) error { return idx.x.resize(maxIndexSize) }

// DropOldMappings unmaps the mappings Resize replaced, which otherwise stay
// mapped until Close. The caller must know that no lookup made before the
// last Resize that grew the mapped size is still running or holds bytes it
// read (its segment's readers let go). Writer side.
func (idx *OffsetIndex) DropOldMappings() error { return idx.x.dropRetired() }

// Flush makes the entries durable: msync of the mapping (the file's Sync
// for an unmapped file) when entries were stored through it, fdatasync
// when entries were written through the file or the file's length
// changed; nothing when this index wrote nothing since the last Flush.
// Entries an earlier index of the same file wrote are SyncFile's.
func (idx *OffsetIndex) Flush() error { return idx.x.flush() }

// SyncFile fdatasyncs the file through its descriptor: its entries and
// its length, whoever wrote them (also an index of the same file closed
// since, through a mapping since unmapped), which Flush alone does not
// promise for changes it did not make.
func (idx *OffsetIndex) SyncFile() error { return idx.x.syncFile() }

// Close trims the file to its entries, unmaps it and closes it. It does
// not sync (Flush first for durability). Everything is released even when
// trimming fails; the first error is returned. A second Close returns
// ErrClosed.
func (idx *OffsetIndex) Close() error { return idx.x.close() }

// Rename renames the file to newPath (for the .deleted, .cleaned and .swap
// suffixes); the index stays open.
func (idx *OffsetIndex) Rename(newPath string) error { return idx.x.rename(newPath) }

// Delete unmaps and closes the index (without trimming) if it is open, and
// removes its file. A missing file is not an error.
func (idx *OffsetIndex) Delete() error { return idx.x.delete() }

// Rebase gives an index without entries the base offset baseOffset (a
// spare segment's, when a roll adopts it). It returns ErrInvalidArgument
// when the index has entries. Writer side; no lookup may run yet.
func (idx *OffsetIndex) Rebase(baseOffset int64) error { return idx.x.rebase(baseOffset) }
