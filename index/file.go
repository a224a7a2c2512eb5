package index

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// mapRegion maps an index file. Tests replace it with mmap.MapHeap to run
// the heap fallback on OS files.
var mapRegion = mmap.Map

// mapping is one mapping of the index file. A new mapping replaces the
// current one only when Resize grows the index past the mapped size; the
// old one stays mapped (in indexFile.w.retired) until Close, so that a
// lookup that loaded it keeps reading valid memory.
type mapping struct {
	region *mmap.Region
	// buf is region.Bytes(), len(buf) is a multiple of the entry size.
	buf []byte
}

// indexFile is what the offset and time indexes share: the file, its
// mapping, the entry count and the life cycle (grow, trim, resize, flush,
// close, rename, delete). It knows entries only by their size.
//
// Reader-side fields (entries, cur, maxEntries, fileLen, path) are atomics.
// The w group is touched only by the single writer goroutine. Why lookups
// need no lock:
//
//  1. The entry count is an atomic. The writer writes an entry's bytes
//     (through the mapping; through the file, which the mapping shows, for
//     the first entries after a mapping is made on Linux, see
//     fileWriteEntries; for the heap fallback through the heap copy and
//     the file) and only then publishes the new count; a reader loads
//     the count first and reads only entries below it, so it never sees a
//     partly written entry.
//  2. An entry below the published count is never rewritten, except after
//     a truncation or a reset lowered the count, and those are exclusive: no
//     reader still holds an older, larger count.
//  3. A reader loads the mapping after the count. The writer installs a
//     larger mapping (a resize) before it publishes a count that needs it,
//     so the mapping a reader sees covers its count. Replaced mappings stay
//     mapped until Close: a reader holding one reads valid memory.
//  4. The file is never shorter than entries*entrySize bytes: trimming cuts
//     it to exactly that and only TruncateTo (exclusive) lowers the count,
//     so no read touches a mapped page past the end of the file (SIGBUS).
//  5. After Close (or a delete) the index reads as empty instead of touching
//     unmapped memory, but calling a reader then is still a bug.
type indexFile struct {
	fs        vfs.FS
	base      int64
	entrySize int
	// maxBytes is maxIndexSize from the Open call rounded down to whole
	// entries: the size Reset goes back to.
	maxBytes int
	f        vfs.File

	// path is the file's current path; Rename replaces it.
	path atomic.Pointer[string]
	// entries is the number of valid entries, published by the writer
	// after their bytes are written. Readers read only entries below it.
	entries atomic.Int64
	// cur is the current mapping; its length is >= maxEntries*entrySize >=
	// entries*entrySize at every moment a reader can observe.
	cur atomic.Pointer[mapping]
	// maxEntries is the number of slots: the file is grown to
	// maxEntries*entrySize before a slot past its end is written.
	maxEntries atomic.Int64
	// fileLen is the file's length as this index last set or saw it.
	fileLen atomic.Int64

	// w is the writer's state.
	w struct {
		// retired holds mappings replaced by Resize; unmapped at Close.
		retired []*mmap.Region
		// scratch encodes the entry being appended; it lives in the
		// index so that passing it to Region.WriteAt does not allocate.
		scratch [TimeEntrySize]byte
		// sizeDirty is set when the file's length changed since the last
		// Flush: msync does not make a length change durable, fdatasync
		// does.
		sizeDirty bool
		// fileWritesLeft is how many more entries are written through
		// the file instead of the mapping (see fileWriteEntries); set
		// when a mapping is made.
		fileWritesLeft int
		// fileDirty is set when an entry was written through the file
		// since the last Flush, which then fdatasyncs the file.
		fileDirty bool
		// mapDirty is set when an entry was written through the mapping
		// (or the heap region) since the last Flush: Flush msyncs only
		// then, so that flushing an index nothing was written to costs
		// no system call (an msync of a clean mapping still makes ext4
		// flush the disk's cache). Entries written by an earlier open of
		// the file are the segment's to sync (Segment.Rest, SyncFile).
		mapDirty bool
		// last is a copy of entry lastCount-1's bytes: the one the
		// writer appended last (or read for itself), so that its checks
		// before the next append do not read the mapped page (a page
		// fault for a page only ever written through the file). Valid
		// while lastCount == entries > 0: only writeEntry raises the
		// count, and it sets the copy.
		last      [TimeEntrySize]byte
		lastCount int64
		// closed is set by Close and Delete.
		closed bool
		// reserved is how many bytes from the file's start are known to
		// have their disk blocks reserved (fallocate) or written: every
		// entry is written below it, so that a store into the mapping
		// never needs a block a full disk cannot give (SIGBUS). 0 for a
		// file opened existing (nothing is known of its blocks). See
		// reserveFor.
		reserved int64
		// refill is the end of an entry past which the next append
		// reserves more (half of the room reserved ahead of it used);
		// refill <= reserved.
		refill int64
	}
}

// open opens or creates the index file at path. See OpenOffsetIndex.
func (x *indexFile) open(fsys vfs.FS, path string, baseOffset int64, maxIndexSize, entrySize int) (err error) {
	fsys = orOS(fsys)
	if baseOffset < 0 || baseOffset > MaxBaseOffset {
		return fmt.Errorf("%w: %s: base offset %d outside [0, %d]", ErrOffsetOverflow, path, baseOffset, int64(MaxBaseOffset))
	}
	if maxIndexSize < entrySize || maxIndexSize > MaxFileBytes {
		return fmt.Errorf("%w: %s: max index size %d outside [%d, %d]", ErrInvalidSize, path, maxIndexSize, entrySize, MaxFileBytes)
	}
	x.fs, x.base, x.entrySize = fsys, baseOffset, entrySize
	x.maxBytes = roundDown(maxIndexSize, entrySize)
	x.path.Store(&path)

	_, err = fsys.Stat(path)
	created := errors.Is(err, fs.ErrNotExist)
	if err != nil && !created {
		return err
	}
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			if created {
				_ = fsys.Remove(path)
			}
		}
	}()
	var length int64
	if created {
		// Kafka preallocates a new index to its maximum size: a sparse
		// file, here as there. Disk blocks are reserved as the entries
		// grow (reserveFor), the first page now.
		if err := f.Truncate(int64(x.maxBytes)); err != nil {
			return err
		}
		x.f = f
		x.fileLen.Store(int64(x.maxBytes))
		if err := x.reserveFor(0); err != nil {
			return err
		}
		if err := writeFirstPage(f, x.maxBytes); err != nil {
			return err
		}
		length = int64(x.maxBytes)
	} else {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		length = st.Size()
		if length > MaxFileBytes {
			return base.CorruptionErrorf(path, MaxFileBytes, "length",
				"index file of %d bytes, more than %d", length, MaxFileBytes)
		}
	}
	// Kafka: an existing file's entry count is its length in whole
	// entries. After a crash that is wrong for an index that was still
	// preallocated (KAFKA-12734); SanityCheck detects it.
	n := int(length) / entrySize
	if created {
		n = 0
	}
	size := max(x.maxBytes, n*entrySize)
	r, err := mapRegion(f, size, true)
	if err != nil {
		return err
	}
	r.SetName(path) // what a FaultError names
	x.f = f
	x.cur.Store(&mapping{region: r, buf: r.Bytes()})
	x.w.fileWritesLeft = fileWritesFor(r)
	if created && x.w.fileWritesLeft > 0 && prefaultFirstPage(r) {
		x.w.fileWritesLeft = 0
	}
	x.fileLen.Store(length)
	x.maxEntries.Store(int64(size / entrySize))
	x.entries.Store(int64(n))
	return nil
}

// fileWriteEntries is how many entries after a mapping of the index is
// made are written through the file (pwrite) instead of through the
// mapping, where the two are coherent (fileWritesCoherent: Linux, whose
// file writes and shared mappings use the same page cache pages, so
// lookups through the mapping see the entries). The first store into a
// page of a mapping is a page fault: mapping the page into the process,
// and for a shared file mapping the filesystem's page_mkwrite, 45 µs
// measured on this project's 2-core VM against 2-4 µs for an 8-byte pwrite
// into the page cache. A partition's active segment makes its mappings
// when it is created or woken from rest; a Dir of many partitions each
// written a few times paid two faults (.index and .timeindex) for a few
// entries each (logbench spread_append: 2,000 faults in 8,000 appends to
// 1,000 partitions). A new index takes the fault of its first page when
// it is created (prefaultFirstPage), off the appends; a mapping of an
// existing file (opened, or grown back by Resize when a segment wakes from
// rest) writes its first entries through the file: they touch no mapped
// page, and an index written more than this many times a mapping pays the
// fault once, as before, and stores into the mapping from then on.
const fileWriteEntries = 64

// prefaultFirstPage maps the first page of a new index's mapping r into
// the process, writable, with a store of the zero writeFirstPage wrote
// there (the file's bytes do not change), and reports whether it did: the
// page fault the segment's first index entry would take is taken when the
// index is created (a partition's creation, a spare segment made ahead of
// a roll), as writeFirstPage takes the extent conversion there; the
// entries then go through the mapping from the first. A fault (the page
// unreadable) leaves the entries to go through the file.
func prefaultFirstPage(r *mmap.Region) bool {
	return mmap.Guard(func() { r.Bytes()[0] = 0 }) == nil
}

// fileWritesFor returns how many entries after the mapping r is made are
// written through the file: fileWriteEntries for a system mapping on a
// platform whose file writes and mappings are coherent, else 0 (a heap
// region writes through to the file anyway).
func fileWritesFor(r *mmap.Region) int {
	if fileWritesCoherent && r.Mapped() && r.Len() > 0 {
		return fileWriteEntries
	}
	return 0
}

// roundDown returns n rounded down to a multiple of m.
func roundDown(n, m int) int { return n / m * m }

// firstPageBytes is how much of a new index writeFirstPage writes: one
// page on the common 4 KiB-page systems, 512 offset entries.
const firstPageBytes = 4096

// Disk reservation. An index file is as long as its slots (sparse, as
// Kafka's), but its disk blocks are reserved only as its entries grow: a
// store into a mapped page whose block a full disk cannot give raises
// SIGBUS, so every entry is written below the reserved bytes, and the
// reservation runs ahead of the entries. A new index reserves its first
// reserveChunk bytes; an append whose entry ends past half of the room
// reserved ahead of the previous reservation's entry reserves again, as
// much again as the entries take (at least reserveChunk, at most
// reserveMaxStep), up to the file's length. An idle index therefore holds
// one page of disk, a busy one about twice its entries, and the appends
// pay one fallocate per doubling (a handful per segment), not per entry.
// A failed reservation fails the append that needs it, with the
// filesystem's error (ENOSPC), and writes nothing.
const (
	reserveChunk   = 4096
	reserveMaxStep = 1 << 20
)

// reserveFor makes sure the disk blocks below end (the end of the entry
// about to be written) are reserved, and reserves a step ahead of it.
// When only the step ahead fails, the error is dropped (the entry's blocks
// are reserved) and the next append tries again. REQUIRES: writer, x.f
// set, end <= fileLen.
func (x *indexFile) reserveFor(end int64) error {
	length := x.fileLen.Load()
	step := min(max(end, reserveChunk), reserveMaxStep)
	want := min((end+step+reserveChunk-1)/reserveChunk*reserveChunk, length)
	if want > x.w.reserved {
		if err := x.f.Preallocate(x.w.reserved, want-x.w.reserved); err != nil {
			if end > x.w.reserved {
				return err
			}
			return nil
		}
		x.w.reserved = want
	}
	x.w.refill = end + (x.w.reserved-end)/2
	if x.w.reserved == length {
		x.w.refill = length // nothing left to reserve until the file grows
	}
	return nil
}

// setLength sets the file's length to size: growing leaves the new bytes
// sparse (reserveFor reserves them as entries reach them), cutting frees
// the blocks past size. REQUIRES: writer.
func (x *indexFile) setLength(size int64) error {
	if err := x.f.Truncate(size); err != nil {
		return err
	}
	x.fileLen.Store(size)
	x.w.sizeDirty = true
	x.w.reserved = min(x.w.reserved, size)
	x.w.refill = min(x.w.refill, x.w.reserved)
	return nil
}

// writeFirstPage writes zeros over the first page of a new, preallocated
// index file of size bytes (its content does not change). Preallocated
// blocks are unwritten extents: on ext4 the first store into such a page
// through the mapping converts the extent in the page fault, which
// measured 3-9 ms, paid by the append that writes a segment's first index
// entry (the second append after a roll). A write through the file
// converts it in the page cache when the index is created, off that
// append (logbench rolls, README).
func writeFirstPage(f vfs.File, size int) error {
	var zeros [firstPageBytes]byte
	_, err := f.WriteAt(zeros[:min(firstPageBytes, size)], 0)
	return err
}

// Path returns the file's current path.
func (x *indexFile) Path() string { return *x.path.Load() }

// view returns the valid entries' bytes: entries*entrySize bytes of the
// current mapping, capped so that it can never reach past the mapping.
// Readers load the count before the mapping: the writer stores a new
// mapping before it publishes a count that needs it, so the mapping loaded
// second always covers the count loaded first.
func (x *indexFile) view() []byte {
	n := int(x.entries.Load()) * x.entrySize
	buf := x.cur.Load().buf
	if n > len(buf) {
		n = roundDown(len(buf), x.entrySize)
	}
	return buf[:n:n]
}

// writeEntry writes the encoded entry p into slot n and publishes n+1
// entries. REQUIRES: writer, n == entries, n < maxEntries.
func (x *indexFile) writeEntry(p []byte, n int) error {
	end := int64(n+1) * int64(x.entrySize)
	if end > x.fileLen.Load() {
		// An existing index opened shorter than its slots (a trimmed
		// one being appended to again) grows to all of them at once.
		if err := x.setLength(x.maxEntries.Load() * int64(x.entrySize)); err != nil {
			return err
		}
	}
	if end > x.w.refill {
		if err := x.reserveFor(end); err != nil {
			return err
		}
	}
	off := int64(n) * int64(x.entrySize)
	if x.w.fileWritesLeft > 0 {
		// Through the file, which the mapping shows (fileWriteEntries).
		// A short write leaves bytes past the count: never read.
		if _, err := x.f.WriteAt(p, off); err != nil {
			return err
		}
		x.w.fileWritesLeft--
		x.w.fileDirty = true
	} else if err := x.cur.Load().region.WriteAt(p, off); err != nil {
		return err
	} else {
		x.w.mapDirty = true
	}
	copy(x.w.last[:], p)
	x.w.lastCount = int64(n + 1)
	x.entries.Store(int64(n + 1))
	return nil
}

// lastBytes returns the last entry's bytes for the writer's checks, nil
// for an empty index: the copy writeEntry kept, or, when the count
// changed since (open, truncation), the entry read once: through the file
// while entries are written through it (a mapping just made, whose page
// it would fault in), else from the mapping. REQUIRES: writer.
func (x *indexFile) lastBytes() []byte {
	n := x.entries.Load()
	if n == 0 {
		return nil
	}
	if x.w.lastCount != n {
		at := (n - 1) * int64(x.entrySize)
		p := x.w.last[:x.entrySize]
		if x.w.fileWritesLeft == 0 || readFull(x.f, p, at) != nil {
			b := x.view()
			if int64(len(b)) < n*int64(x.entrySize) {
				return nil // released
			}
			copy(p, b[at:])
		}
		x.w.lastCount = n
	}
	return x.w.last[:x.entrySize]
}

// tail returns the last k (1 or 2, at most n) of the n entries the caller
// found in view(), for the O(1) SanityCheck. Where the mapping and file
// reads are coherent (fileWritesCoherent, a system mapping) they are read
// through the file: a segment checks its indexes each time its budget
// reopens it, and a read through a mapping just made would fault the page
// into the process, the cost fileWriteEntries spares the appends after it.
// A file that ends before them is the fault a read of the mapping meets
// (mmap.ReadFault). Elsewhere they are the mapping's (or the heap copy's)
// bytes. A reader.
func (x *indexFile) tail(view []byte, n, k int) ([]byte, error) {
	from := (n - k) * x.entrySize
	if !fileWritesCoherent || !x.cur.Load().region.Mapped() {
		return view[from : n*x.entrySize], nil
	}
	p := make([]byte, k*x.entrySize)
	if got, err := x.f.ReadAt(p, int64(from)); got < len(p) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, mmap.ReadFault(x.Path(), int64(from+got))
		}
		return nil, fmt.Errorf("partlog/index: read %s at %d: %w", x.Path(), from, err)
	}
	return p, nil
}

// readFull reads len(p) bytes of f at off.
func readFull(f vfs.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// truncateEntries drops every entry at or after slot n. REQUIRES: no
// concurrent reader (see the package doc), n <= entries.
func (x *indexFile) truncateEntries(n int) error {
	if x.w.closed {
		return x.closedError()
	}
	x.entries.Store(int64(n))
	return nil
}

// trimToValidSize cuts the file to its entries; the index is then full
// until Resize. The mapping is cut to the file too (Region.Shrink unmaps
// the pages past it), so that a sealed segment's index maps its entries,
// not segment.index.bytes: readers never read past the entries, which the
// shorter mapping still covers, so one that loaded the longer mapping is
// safe as well.
func (x *indexFile) trimToValidSize() error {
	if x.w.closed {
		return x.closedError()
	}
	n := x.entries.Load()
	size := n * int64(x.entrySize)
	if x.fileLen.Load() != size {
		if err := x.setLength(size); err != nil {
			return err
		}
	}
	x.maxEntries.Store(n)
	if cur := x.cur.Load(); cur.region != nil && int64(len(cur.buf)) > size {
		if err := cur.region.Shrink(int(size)); err != nil {
			return err
		}
		x.cur.Store(&mapping{region: cur.region, buf: cur.region.Bytes()})
	}
	return nil
}

// mappedBytes returns the length of the current mapping.
func (x *indexFile) mappedBytes() int { return len(x.cur.Load().buf) }

// resize sets the number of slots to maxIndexSize/entrySize (Kafka's
// AbstractIndex.resize). A file longer than the slots is cut to them; a
// shorter one grows when an entry is written past its end. It remaps only
// to grow past the current mapping.
func (x *indexFile) resize(maxIndexSize int) error {
	if x.w.closed {
		return x.closedError()
	}
	n := x.entries.Load()
	if maxIndexSize < 0 || maxIndexSize > MaxFileBytes || int64(maxIndexSize) < n*int64(x.entrySize) {
		return fmt.Errorf("%w: %s: resize to %d bytes, %d entries of %d bytes", ErrInvalidSize, x.Path(), maxIndexSize, n, x.entrySize)
	}
	size := int64(roundDown(maxIndexSize, x.entrySize))
	// Map first (a mapping may extend past the end of the file), so that
	// a failure leaves the file as it was.
	old := x.cur.Load()
	var grown *mmap.Region
	if size > int64(len(old.buf)) {
		r, err := mapRegion(x.f, int(size), true)
		if err != nil {
			return err
		}
		r.SetName(x.Path())
		grown = r
	}
	// Growing leaves the file as it is: writeEntry grows it to every
	// slot at the first entry past its end, so that reopening an active
	// segment and closing it again changes no length (nothing to sync).
	if x.fileLen.Load() > size {
		if err := x.setLength(size); err != nil {
			if grown != nil {
				_ = grown.Unmap()
			}
			return err
		}
	}
	if grown != nil {
		x.cur.Store(&mapping{region: grown, buf: grown.Bytes()})
		x.w.retired = append(x.w.retired, old.region)
		x.w.fileWritesLeft = fileWritesFor(grown)
	}
	x.maxEntries.Store(size / int64(x.entrySize))
	return nil
}

// dropRetired unmaps the mappings resize replaced (kept for the lookups
// that loaded them). REQUIRES: writer; no lookup that loaded one of them
// is running or holds its bytes.
func (x *indexFile) dropRetired() error {
	var firstErr error
	for _, r := range x.w.retired {
		if err := r.Unmap(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	clear(x.w.retired)
	x.w.retired = x.w.retired[:0]
	return firstErr
}

// flush makes the entries and the file's length durable: msync of the
// mapping when entries were written through it, then fdatasync when the
// length changed; or, when entries were written through the file since
// the last flush, fdatasync alone, which on Linux (the one platform that
// writes them so, fileWritesCoherent) also writes back the pages stored
// into through the mapping; or nothing when nothing was written.
func (x *indexFile) flush() error {
	if x.w.closed {
		return x.closedError()
	}
	switch {
	case x.w.fileDirty:
		if err := x.syncFile(); err != nil {
			return err
		}
		x.w.mapDirty = false
		return nil
	case !x.w.mapDirty:
		if x.w.sizeDirty {
			return x.syncFile()
		}
		return nil
	}
	if err := x.cur.Load().region.Sync(); err != nil {
		return err
	}
	if x.w.sizeDirty && x.cur.Load().region.Mapped() {
		if err := x.f.Sync(); err != nil {
			return err
		}
	}
	x.w.sizeDirty, x.w.mapDirty = false, false
	return nil
}

// syncFile fdatasyncs the file, its length included.
func (x *indexFile) syncFile() error {
	if x.w.closed {
		return x.closedError()
	}
	if err := x.f.Sync(); err != nil {
		return err
	}
	x.w.sizeDirty, x.w.fileDirty = false, false
	return nil
}

// release unmaps every mapping and closes the file, returning the first
// error. Afterwards the index reads as empty (a misplaced lookup finds
// nothing instead of touching unmapped memory).
func (x *indexFile) release() error {
	x.w.closed = true
	cur := x.cur.Load()
	x.entries.Store(0)
	x.maxEntries.Store(0)
	x.cur.Store(&mapping{})
	var firstErr error
	for _, r := range append(x.w.retired, cur.region) {
		if err := r.Unmap(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	x.w.retired = nil
	if err := x.f.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

// close trims the file to its entries, unmaps and closes it.
func (x *indexFile) close() error {
	if x.w.closed {
		return x.closedError()
	}
	err := x.trimToValidSize()
	if rerr := x.release(); err == nil {
		err = rerr
	}
	return err
}

// delete unmaps and closes the index if still open, then removes its file;
// a file that is already gone is not an error (Kafka's deleteIfExists).
func (x *indexFile) delete() error {
	var err error
	if !x.w.closed {
		err = x.release()
	}
	if rerr := x.fs.Remove(x.Path()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// rename renames the file; the index stays open and usable.
func (x *indexFile) rename(newPath string) error {
	if err := x.fs.Rename(x.Path(), newPath); err != nil {
		return err
	}
	x.path.Store(&newPath)
	for _, r := range append(x.w.retired, x.cur.Load().region) {
		if r != nil {
			r.SetName(newPath) // what a FaultError names
		}
	}
	return nil
}

// closedError returns ErrClosed with the path.
func (x *indexFile) closedError() error {
	return fmt.Errorf("%w: %s", ErrClosed, x.Path())
}

// checkLength is the part of SanityCheck both kinds share: the file length
// seen at open (or set since) is a whole number of entries.
func (x *indexFile) checkLength() error {
	if l := x.fileLen.Load(); l%int64(x.entrySize) != 0 {
		return base.CorruptionErrorf(x.Path(), roundDownInt64(l, int64(x.entrySize)), "length",
			"index file of %d bytes is not a multiple of the %d-byte entry", l, x.entrySize)
	}
	return nil
}

func roundDownInt64(n, m int64) int64 { return n / m * m }

// entryField names entry i for corruption errors.
func entryField(i int) string { return fmt.Sprintf("entry %d", i) }

// rebase gives an index without entries a new base offset (a spare
// segment's indexes get theirs when a roll adopts it). REQUIRES: writer,
// no reader has the index yet.
func (x *indexFile) rebase(baseOffset int64) error {
	if x.w.closed {
		return x.closedError()
	}
	if baseOffset < 0 || baseOffset > MaxBaseOffset {
		return fmt.Errorf("%w: %s: base offset %d outside [0, %d]", ErrOffsetOverflow, x.Path(), baseOffset, int64(MaxBaseOffset))
	}
	if n := x.entries.Load(); n != 0 {
		return fmt.Errorf("%w: %s: rebase of an index with %d entries", ErrInvalidArgument, x.Path(), n)
	}
	x.base = baseOffset
	return nil
}
