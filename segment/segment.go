package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// Segment is one segment of a partition: a .log of record batches with its
// offset and time indexes. See the package documentation for the
// concurrency contract and the lifetimes.
//
// Readers (Translate, Read, Bytes, WriteTo, FindOffsetByTimestamp,
// NextOffset, Size) take no lock while the one writer appends, and never
// see a partly written batch: once NextOffset returns n, every batch with
// offsets below n is visible to Read.
type Segment struct {
	// The lock-free read path. Readers (Translate, Read, Bytes, WriteTo,
	// FindOffsetByTimestamp, NextOffset, Size) take no lock while the one
	// writer appends. They are safe because of these invariants:
	//
	//  1. The writer writes a batch's bytes at position size (the published
	//     size) and beyond, never below it: bytes below size are never
	//     modified by Append. Only TruncateTo and Recover shrink or rewrite
	//     the .log, and they hold the exclusive lease while readers hold
	//     shared read leases across their reads (DESIGN law 9).
	//  2. Append writes the batch (File.WriteAt returns after the bytes are in
	//     the page cache, which the read-only MAP_SHARED mapping shows, or in
	//     the in-memory file that ReadAt reads), then appends the index
	//     entries, and only then stores the new size with an atomic store.
	//     A reader loads size with an atomic load before it reads any byte,
	//     so by the Go memory model the write of every byte below the size it
	//     loaded happens before its read: it never sees a partial batch.
	//  3. Published sizes are always batch boundaries (Append adds whole
	//     batches; TruncateTo cuts at a batch start; Recover at the end of the
	//     last valid batch), so a scan of headers from a batch boundary below
	//     size reaches size exactly.
	//  4. The index publishes an entry only after its bytes are written (see
	//     index/file.go), and an entry points at a batch start. An entry may
	//     be visible before the size that covers its batch (invariant 2
	//     orders entries before size); a reader that finds an entry whose
	//     position is at or past the size it loaded knows the offset it looks
	//     for is past everything it can see, and treats it as such.
	//  5. The mapping is created before the segment is shared and unmapped only
	//     when the last reference is dropped (Unref), so a reader holding a
	//     reference never touches unmapped memory; it never reads past size,
	//     which is never past the file's end, so it never touches a page past
	//     the end of the file (SIGBUS). The writer may replace the mapping
	//     (mapTo): Seal and Recover shrink it to the file's length, which is
	//     at or above size, and unmap only pages past it; Unseal publishes a
	//     new, longer mapping and keeps the old one mapped (retired) until the
	//     last Unref. A reader loads the mapping (mem) after size, and every
	//     mapping it can load covers that size.
	//  6. nextOffset is stored after size: once NextOffset() returns n, every
	//     batch with offsets below n is visible to Read.

	fs   vfs.FS
	dir  string
	base int64
	cfg  Config
	log  *slog.Logger

	// logFile is the open .log, read-write. Never replaced.
	logFile vfs.File
	// region is the current read-only mapping of the .log (nil when
	// reading with ReadAt); retired holds the mappings Unseal replaced
	// with a longer one (readers may still hold their bytes). Set at
	// Create/Open and by the writer (mapTo); all are unmapped at the last
	// Unref.
	region  *mmap.Region
	retired []*mmap.Region
	// mem points at the current mapping's bytes, what readers read (nil
	// when the .log is not mapped). An active segment's mapping is window
	// bytes long; a sealed segment's is the .log's length (see mapTo).
	mem atomic.Pointer[[]byte]
	// window is the largest size the .log may reach:
	// max(Config.MaxSegmentBytes, the .log's size when opened); the
	// mapping of an active segment is this long.
	window int64
	// offIdx and timeIdx are the indexes. Lookups are lock-free (package
	// index); writes come from the writer only.
	offIdx  *index.OffsetIndex
	timeIdx *index.TimeIndex

	// size is the published size of the .log in bytes: a batch boundary;
	// readers look only below it. Written by the writer after the bytes
	// and index entries are in place.
	size atomic.Int64
	// nextOffset is the offset after the last batch (base when empty),
	// stored after size.
	nextOffset atomic.Int64
	// firstBatchMaxTs is the first batch's maxTimestamp, -1 when the
	// segment is empty: written by the writer (and by open, recovery and
	// truncation), read by every append's roll check without a lock.
	firstBatchMaxTs atomic.Int64
	// logPath is the .log's current path (it changes with ChangeSuffix).
	logPath atomic.Pointer[string]
	// closed is set by Close; released when the last reference is gone.
	closed   atomic.Bool
	released atomic.Bool
	// sealed is set by Seal and Open, cleared by Unseal and TruncateTo:
	// Append is refused and the indexes are trimmed.
	sealed atomic.Bool
	// dormant is set by UnsealOnWrite on a sealed segment that is its
	// partition's active one but keeps its sealed files (and so may be
	// closed at rest) until the first write; cleared by Unseal, Seal and
	// TruncateTo. Writer side.
	dormant atomic.Bool
	// trim is Seal's deferred half: the cut of both indexes' files to
	// their entries (TrimSealedIndexes, append.go).
	trim trimState
	// reserved is set when disk blocks may be reserved past the .log's
	// end by a spare's preallocation (CreateSpare). The index trim after
	// Seal and Close release them (releaseReserved, spare.go); Open
	// releases one a crash left.
	reserved atomic.Bool
	// adopt is an adoption's deferred half: the renames of a spare's
	// files to the base's names (SettleAdoption, spare.go).
	adopt adoptState
	// refs counts references; the owner holds one from Create/Open.
	refs atomic.Int32
	// deleteOnRelease is set by MarkDeleted: the last Unref removes the
	// files.
	deleteOnRelease atomic.Bool
	// indexSuspect is set when a lookup found an index entry that does not
	// match the .log; lookups then verify and fall back to scanning from
	// the start (the next Open rebuilds the index).
	indexSuspect atomic.Bool

	// txn is the transaction index (.txnindex, txnindex.go).
	txn txnIndex

	// loadDamage is the corruption an unclean Open met below the end the
	// last offset index entries gave (see LoadDamage); set by load only.
	loadDamage error

	// lease is the read lease: readers hold a shared lease across reads
	// and while they use bytes aliasing the mapping; TruncateTo and
	// Recover take the exclusive lease before they shrink the .log.
	lease readLease

	// lz is the segment's part in its Budget (budget.go): the files of a
	// sealed segment may be closed while unused and reopened on demand.
	lz lazyState

	// mu guards the timestamp metadata readers ask for.
	mu struct {
		sync.Mutex
		// maxTimestamp and offsetOfMaxTimestamp: the largest batch
		// maxTimestamp so far and the last offset of the first batch
		// that had it; -1, -1 when none.
		maxTimestamp, offsetOfMaxTimestamp int64
		// created is when the segment was created or opened, or last
		// truncated to empty.
		created time.Time
	}

	// w is the writer's state: only the single writer goroutine (Append,
	// Seal, Unseal, Flush, TruncateTo, Recover, MarkDeleted,
	// ChangeSuffix, Close) touches it, so it needs no lock.
	w struct {
		// fileSize is the .log's length as the writer knows it: equal
		// to size unless a failed write or a torn tail left bytes past
		// it (Append then cuts them first), -1 when unknown.
		fileSize int64
		// syncedAtOpen is set by a clean open that rebuilt no index (the
		// files are as the clean shutdown left them, synced) and
		// cleared by the first change of their bytes (Unseal,
		// TruncateTo, Recover): Flush then has nothing to sync.
		syncedAtOpen bool
		// openedAtRest is set by a clean open that left the files
		// closed (openCleanAtRest): they are in the sealed form
		// UnsealOnWrite wants for as long as syncedAtOpen holds.
		openedAtRest bool
		// syncIndexFiles is set by Rest and cleared by the next
		// Flush, which then fdatasyncs both index files whole.
		syncIndexFiles bool
		// bytesSinceIndex counts the bytes appended since the last
		// index entry (Kafka's bytesSinceLastIndexEntry).
		bytesSinceIndex int64
		// iov is writeBatch's WriteVAt argument, empty between calls.
		iov [2][]byte
		// maxTimestamp, offsetOfMaxTimestamp mirror mu's fields.
		maxTimestamp, offsetOfMaxTimestamp int64
		// suffix is the temporary suffix all files carry ("" or
		// DeletedSuffix, CleanedSuffix, SwapSuffix).
		suffix string
	}
}

// paths of the three files for a suffix.
func (s *Segment) path(kind, suffix string) string {
	return filepath.Join(s.dir, FileName(s.base, kind)+suffix)
}

// Create creates an empty, active segment with base offset baseOffset in dir,
// replacing any files of that name (.log, .index, .timeindex). The caller
// holds the one reference it returns with. A nil fsys is the operating
// system's filesystem.
func Create(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	return CreateWithSuffix(fsys, dir, baseOffset, "", cfg)
}

// CreateWithSuffix is Create for files carrying a temporary suffix
// (CleanedSuffix for a segment compaction writes).
func CreateWithSuffix(fsys vfs.FS, dir string, baseOffset int64, suffix string, cfg Config) (_ *Segment, err error) {
	fsys = orOS(fsys)
	s, err := newSegment(fsys, dir, baseOffset, suffix, cfg)
	if err != nil {
		return nil, err
	}
	logPath := s.path(LogSuffix, suffix)
	for _, kind := range []string{IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		if err := fsys.Remove(s.path(kind, suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	f, err := fsys.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.releaseFiles()
			_ = fsys.Remove(logPath)
			_ = fsys.Remove(s.path(IndexSuffix, suffix))
			_ = fsys.Remove(s.path(TimeIndexSuffix, suffix))
		}
	}()
	s.logFile = f
	if err := s.openFiles(0, false); err != nil {
		return nil, err
	}
	s.publishEmpty()
	s.cfg.Tracker.addSegment()
	return s, nil
}

// Open opens the existing segment with base offset baseOffset in dir. It takes
// the size from the .log, opens both indexes and checks them (never
// trusting the entry count of an index left preallocated by a crash,
// KAFKA-12734); a missing or failing index is rebuilt from a scan of
// the batch headers (CRCs are not checked: that is Recover's job). The next
// offset and the largest timestamp come from the last index entries and a
// header scan of the tail. Open never changes the .log's length or bytes
// (it only releases disk blocks a crash left reserved past the end:
// CreateSpare): bytes at its end that do not frame as batches are left
// out of Size (and reported through the Logger); Recover or the next
// Append cuts them.
//
// The segment is returned sealed: Append returns ErrSealed until Unseal.
// The partition unseals its last segment. A nil fsys is the operating
// system's filesystem.
func Open(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	return openWithSuffix(fsys, dir, baseOffset, "", cfg)
}

// openWithSuffix is Open for files carrying a temporary suffix.
func openWithSuffix(fsys vfs.FS, dir string, baseOffset int64, suffix string, cfg Config) (*Segment, error) {
	return open(fsys, dir, baseOffset, suffix, cfg, false)
}

// OpenClean is Open for a segment of a log that was shut down cleanly (its
// owner wrote a clean-shutdown marker after closing it, and nothing has
// written to it since). Every way a segment is closed, sealed, recovered or
// rebuilt ends its time index with an entry for the segment's largest
// timestamp (the final entry, as Kafka writes it on roll, recovery and
// close), so after a clean shutdown that entry is trusted once the index
// passes its checks: the largest timestamp is read from it, not from a
// scan of the batch headers after it, and the open costs the same for any
// segment size and any timestamps. After an unclean shutdown use Open (the
// last segments are then recovered, which rebuilds their indexes).
//
// Under a Budget (Config.Budget) OpenClean leaves the files of a segment
// whose indexes are small (up to 64 KiB each) closed, as the Budget leaves
// a segment it closed while unused: it reads both indexes and the batch
// headers after the last offset index entry without mapping anything,
// checks them as Open does, and holds no descriptor or mapping after it
// returns. The first method that reads the files opens them again as the
// Budget does (reading no batch data), so the first read of each segment
// after a clean open pays for that open. A segment whose files do
// not pass those checks, or whose indexes are longer, is opened with its
// files open, as Open opens it (its indexes rebuilt when they fail), and
// the Budget closes them when it is over.
func OpenClean(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	return open(fsys, dir, baseOffset, "", cfg, true)
}

// open implements Open, openWithSuffix and OpenClean; clean trusts the
// time index's last entry as the largest timestamp (see OpenClean).
func open(fsys vfs.FS, dir string, baseOffset int64, suffix string, cfg Config, clean bool) (_ *Segment, err error) {
	fsys = orOS(fsys)
	if clean && cfg.Budget != nil && suffix == "" {
		s, err := openCleanAtRest(fsys, dir, baseOffset, cfg)
		if err == nil {
			s.cfg.Tracker.addSegment()
		}
		if !errors.Is(err, errNotAtRest) {
			return s, err
		}
	}
	s, err := newSegment(fsys, dir, baseOffset, suffix, cfg)
	if err != nil {
		return nil, err
	}
	logPath := s.path(LogSuffix, suffix)
	if _, err := fsys.Stat(logPath); err != nil {
		return nil, err
	}
	// Whether an index needs rebuilding before it is opened (and
	// created, if missing). An empty index file is an index without
	// entries (what closing a segment smaller than IndexIntervalBytes
	// leaves): load checks it like any other.
	var rebuild [2]bool
	for i, kind := range []string{IndexSuffix, TimeIndexSuffix} {
		path := s.path(kind, suffix)
		st, err := fsys.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			rebuild[i] = true
		case err != nil:
			return nil, err
		case st.Size() > index.MaxFileBytes:
			// Longer than any index (damage): the index package
			// refuses to open it, so it is emptied and rebuilt, as
			// an index that fails its checks is (DESIGN law 5).
			s.log.Warn("partlog/segment: index file longer than an index can be; rebuilding it from the log",
				"segment", logPath, "index", path, "size", st.Size())
			if err := emptyFile(fsys, path); err != nil {
				return nil, err
			}
			rebuild[i] = true
		}
	}
	f, err := fsys.OpenReadWrite(logPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.releaseFiles()
		}
	}()
	s.logFile = f
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fileSize := st.Size()
	if fileSize > MaxSegmentBytesLimit {
		return nil, base.CorruptionErrorf(logPath, MaxSegmentBytesLimit, "size",
			"log of %d bytes, more than %d", fileSize, MaxSegmentBytesLimit)
	}
	if err := s.openFiles(fileSize, true); err != nil {
		return nil, err
	}
	s.w.fileSize = fileSize
	s.mu.created = s.cfg.readClock()
	rebuilt := false
	if err := s.guarded(func() (err error) {
		rebuilt, err = s.load(fileSize, rebuild[0], rebuild[1], clean)
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.offIdx.TrimToValidSize(); err != nil {
		return nil, err
	}
	if err := s.timeIdx.TrimToValidSize(); err != nil {
		return nil, err
	}
	// A crash between the seal of a segment adopted from a spare and the
	// index trim after it (or while it was active) leaves the spare's
	// reservation past the .log's end (CreateSpare). Nothing else would
	// release it for a segment that is not the last: cut the file to its
	// length, which changes neither the length nor the bytes. (st is from
	// before the load, which reads and allocates nothing in the .log.)
	if reservedPastEnd(st) {
		if err := releasePastEnd(f, fileSize); err != nil {
			return nil, fmt.Errorf("partlog/segment: release the blocks reserved past the end of %s: %w", logPath, err)
		}
	}
	if err := s.openTxnIndex(); err != nil {
		return nil, err
	}
	s.sealed.Store(true)
	s.w.syncedAtOpen = clean && !rebuilt
	s.updateClosable()
	s.cfg.Tracker.addSegment()
	return s, nil
}

// emptyFile cuts the file at path to 0 bytes.
func emptyFile(fsys vfs.FS, path string) error {
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return err
	}
	err = f.Truncate(0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// newSegment checks the arguments and fills in the fields every segment has.
func newSegment(fsys vfs.FS, dir string, baseOffset int64, suffix string, cfg Config) (*Segment, error) {
	cfg.ensureDefaults()
	if baseOffset < 0 || baseOffset > index.MaxBaseOffset {
		return nil, fmt.Errorf("%w: base offset %d", ErrOffsetOverflow, baseOffset)
	}
	if cfg.MaxSegmentBytes < 0 || cfg.MaxSegmentBytes > MaxSegmentBytesLimit {
		return nil, fmt.Errorf("partlog/segment: MaxSegmentBytes %d outside [0, %d]", cfg.MaxSegmentBytes, MaxSegmentBytesLimit)
	}
	s := &Segment{fs: fsys, dir: dir, base: baseOffset, cfg: cfg, log: cfg.Logger}
	s.w.suffix = suffix
	p := s.path(LogSuffix, suffix)
	s.logPath.Store(&p)
	s.refs.Store(1)
	s.initLazy()
	return s, nil
}

// openFiles maps the .log (whose length is fileSize) and opens both
// indexes. A sealed segment's mapping is the file's length, an active
// one's the window (see mapTo). REQUIRES: s.logFile set.
func (s *Segment) openFiles(fileSize int64, sealed bool) error {
	window := max(s.cfg.MaxSegmentBytes, fileSize)
	s.window = window
	if s.logFile.Fd() != vfs.InvalidFd && !s.cfg.DisableMmap && mmap.Supported {
		n := window
		if sealed {
			n = fileSize
		}
		r, err := mmap.Map(s.logFile, int(n), false)
		if err != nil {
			return err
		}
		if r.Mapped() {
			r.SetName(s.LogPath())
			s.lz.mapped.Store(true)
			s.region = r
			b := r.Bytes()
			s.mem.Store(&b)
		} else if err := r.Unmap(); err != nil {
			return err
		}
	}
	oi, err := index.OpenOffsetIndex(s.fs, s.path(IndexSuffix, s.w.suffix), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		return err
	}
	s.offIdx = oi
	ti, err := index.OpenTimeIndex(s.fs, s.path(TimeIndexSuffix, s.w.suffix), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		return err
	}
	s.timeIdx = ti
	return nil
}

// publishEmpty sets the state of an empty segment.
func (s *Segment) publishEmpty() {
	s.w.fileSize = 0
	s.w.bytesSinceIndex = 0
	s.w.maxTimestamp, s.w.offsetOfMaxTimestamp = batch.NoTimestamp, -1
	s.mu.Lock()
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp = batch.NoTimestamp, -1
	s.firstBatchMaxTs.Store(batch.NoTimestamp)
	s.mu.created = s.cfg.readClock()
	s.mu.Unlock()
	s.size.Store(0)
	s.nextOffset.Store(s.base)
}

// setMaxTimestamp records a new largest timestamp (writer side).
func (s *Segment) setMaxTimestamp(ts, offset int64) {
	if s.w.maxTimestamp == ts && s.w.offsetOfMaxTimestamp == offset {
		return
	}
	s.w.maxTimestamp, s.w.offsetOfMaxTimestamp = ts, offset
	s.mu.Lock()
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp = ts, offset
	s.mu.Unlock()
}

// releaseFiles unmaps and closes whatever is open, returning the first
// error.
func (s *Segment) releaseFiles() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if s.offIdx != nil {
		keep(s.offIdx.Close())
	}
	if s.timeIdx != nil {
		keep(s.timeIdx.Close())
	}
	s.mem.Store(nil)
	for _, r := range append(s.retired, s.region) {
		if r != nil {
			keep(r.Unmap())
		}
	}
	s.retired, s.region = nil, nil
	if s.logFile != nil {
		keep(s.logFile.Close())
	}
	keep(s.closeTxn())
	return first
}

// BaseOffset returns the segment's base offset: the offset in its file
// names, at or below its first batch's base offset.
func (s *Segment) BaseOffset() int64 { return s.base }

// NextOffset returns the offset after the segment's last batch, or
// BaseOffset when the segment is empty. Every batch below it is visible to
// readers.
func (s *Segment) NextOffset() int64 { return s.nextOffset.Load() }

// Size returns the published size of the .log in bytes.
func (s *Segment) Size() int64 { return s.size.Load() }

// MaxTimestamp returns the largest batch maxTimestamp in the segment and
// the last offset of the first batch that has it; -1, -1
// (batch.NoTimestamp) when no batch has a timestamp.
func (s *Segment) MaxTimestamp() (ts, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp
}

// FirstBatchMaxTimestamp returns the first batch's maxTimestamp, which
// time-based rolling measures from (Kafka's rollingBasedTimestamp); -1
// when the segment is empty.
func (s *Segment) FirstBatchMaxTimestamp() int64 {
	return s.firstBatchMaxTs.Load()
}

// Created returns the time, by Config.Now, the segment was created or
// opened (or last truncated to empty): time-based rolling falls back to it
// when batches carry no timestamps.
func (s *Segment) Created() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.created
}

// Sealed reports whether the segment refuses appends.
func (s *Segment) Sealed() bool { return s.sealed.Load() }

// LogPath returns the current path of the .log.
func (s *Segment) LogPath() string { return *s.logPath.Load() }

// Mapped reports whether the .log is read through a memory mapping (Bytes
// is then zero-copy).
func (s *Segment) Mapped() bool {
	if s.lz.budget != nil {
		// Whether it is mapped while open: closing it at rest does not
		// change how Bytes reads it.
		return s.lz.mapped.Load() && !s.released.Load()
	}
	return s.mem.Load() != nil
}

// mapping returns the current mapping's bytes, nil when the .log is not
// mapped. Readers read only below the size they loaded, which the mapping
// they load after it always covers.
func (s *Segment) mapping() []byte {
	if p := s.mem.Load(); p != nil {
		return *p
	}
	return nil
}

// mapTo makes the mapping n bytes long: a sealed segment's is cut to its
// .log's length (Region.Shrink unmaps the pages past it, so a process
// with many segments maps only their bytes and never maps a cut file past
// its end), an active one's is grown to the window by mapping it anew (the
// old mapping is retired, not unmapped: readers may still hold its
// bytes). Readers only read below the published size, which n never cuts:
// a shrink happens only when size <= n. Writer side.
func (s *Segment) mapTo(n int64) error {
	if s.region == nil {
		return nil
	}
	switch cur := int64(s.region.Len()); {
	case n == cur:
		return nil
	case n < cur:
		if err := s.region.Shrink(int(n)); err != nil {
			return err
		}
	default:
		r, err := mmap.Map(s.logFile, int(n), false)
		if err != nil {
			return err
		}
		r.SetName(s.LogPath())
		s.retired = append(s.retired, s.region)
		s.region = r
	}
	b := s.region.Bytes()
	s.mem.Store(&b)
	return nil
}

// guarded runs fn, which reads the mapped .log or indexes, with faults
// protected: a fault in a mapping (a media error, or a file cut behind the
// segment's back) becomes an error wrapping ErrFault instead of killing
// the process (package internal/mmap).
func (s *Segment) guarded(fn func() error) (err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return fn()
}

// String describes the segment for logs and test failures.
func (s *Segment) String() string {
	return fmt.Sprintf("segment(%s, size=%d, next=%d)", s.LogPath(), s.Size(), s.NextOffset())
}

// Ref adds a reference: the segment's files stay open and mapped until
// every reference is dropped with Unref. Readers take one (under whatever
// makes the segment reachable, e.g. the partition's segment list) before
// reading.
func (s *Segment) Ref() {
	if n := s.refs.Add(1); n <= 1 {
		panic(base.AssertionFailedf("partlog/segment: Ref of a released segment %s", s.LogPath()))
	}
}

// Unref drops a reference. The last one closes the files and unmaps the
// .log (and, after MarkDeleted, removes the files), returning the first
// error of doing so, and then uncounts the segment from its Tracker.
func (s *Segment) Unref() error {
	n := s.refs.Add(-1)
	switch {
	case n > 0:
		return nil
	case n < 0:
		return base.AssertionFailedf("partlog/segment: Unref of a released segment %s", s.LogPath())
	}
	s.closed.Store(true)
	s.released.Store(true)
	var err error
	if s.lz.budget != nil {
		s.lz.mu.Lock()
		s.lz.closable = false
		s.lz.budget.remove(s)
		if s.lz.resident.Swap(false) {
			err = s.releaseFiles()
		}
		s.lz.mu.Unlock()
	} else {
		err = s.releaseFiles()
	}
	if s.deleteOnRelease.Load() {
		// The files carry the .log's suffix (the .txnindex may not
		// exist: it is made on the first aborted transaction). By
		// name: a segment opened at rest has no index objects.
		logPath := s.LogPath()
		suffix := logPath[len(s.path(LogSuffix, "")):]
		for _, p := range []string{logPath, s.path(IndexSuffix, suffix), s.path(TimeIndexSuffix, suffix), s.path(TxnIndexSuffix, suffix)} {
			if rerr := s.fs.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
				err = rerr
			}
		}
	}
	s.cfg.Tracker.segmentReleased() // last: the files are closed and removed
	return err
}

// AcquireRead takes a read lease: until ReleaseRead, TruncateTo and Recover
// wait, so bytes the holder reads (or aliases with Bytes) are not cut from
// under it. Any number of leases may be held, and a goroutine may release
// a lease another acquired. A new lease waits while a truncation waits for
// the current ones or runs (see LockForTruncate).
//
// A lease also pins the segment (see Pin): its files stay open, and are
// reopened if a Budget had closed them (an error doing so is returned by
// the reads that follow).
func (s *Segment) AcquireRead() {
	s.lease.acquireShared()
	_ = s.pin()
}

// ReleaseRead releases a read lease taken with AcquireRead.
func (s *Segment) ReleaseRead() {
	s.unpin()
	s.lease.releaseShared()
}

// IndexEntries returns the number of live entries of the offset index and
// of the time index. The files of an active segment are preallocated and
// may hold stale entries past these counts (after TruncateTo or Recover);
// only this many are entries.
func (s *Segment) IndexEntries() (offset, time int) {
	if s.lz.budget != nil {
		// Without reopening a segment closed at rest: its counts were
		// kept when it was closed.
		s.lz.pins.Add(1)
		defer s.unpin()
		if !s.lz.resident.Load() {
			return int(s.lz.offEntries.Load()), int(s.lz.timeEntries.Load())
		}
	}
	return s.offIdx.Entries(), s.timeIdx.Entries()
}

// MarkDeleted renames every file of the segment to its name plus
// DeletedSuffix now, and arranges for the files to be removed when the last
// reference is dropped. Readers holding a reference keep reading. Writer
// side.
//
// It does not need the files open: the files of a segment a Budget closed
// while unused are renamed by name, not reopened. Under a Budget a deleted
// segment no one pins (Pin, AcquireRead, a method reading it) closes its
// files at once, outside the budget's count, and reopens them by their
// .deleted names when a reader holding a reference reads it again; its
// descriptors are then held only while it is read, and its disk space
// returns at the last Unref whoever holds the references.
//
// The names are Kafka's (NNN.log.deleted), so two segments with the same
// base offset deleted while a reader still holds the first share them: the
// second rename replaces the first's files (their open descriptors and
// mappings stay valid on Unix) and whichever is released first removes the
// names; the other finds them gone, which is not an error. A deleted
// segment whose files were closed cannot be reopened then: its reads
// return an error wrapping ErrDeleted.
func (s *Segment) MarkDeleted() error {
	if s.closed.Load() {
		return ErrClosed
	}
	renamed, err := s.renameIfClosed(DeletedSuffix)
	if !renamed {
		defer s.unpinWriter() // renameIfClosed pinned the open files
	}
	if err != nil {
		return err
	}
	if !renamed && s.w.suffix != DeletedSuffix {
		if err := s.ChangeSuffix(s.w.suffix, DeletedSuffix); err != nil {
			return err
		}
	}
	s.deleteOnRelease.Store(true)
	if renamed {
		s.updateClosable()
	}
	return nil
}

// ChangeSuffix renames the segment's files from suffix oldSuffix to
// newSuffix ("" for none), e.g. CleanedSuffix to SwapSuffix and SwapSuffix
// to "" during compaction (Kafka's changeFileSuffixes). The files stay open.
// If a rename fails, the ones done are undone (best effort) and the error
// returned. Writer side.
func (s *Segment) ChangeSuffix(oldSuffix, newSuffix string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.SettleAdoption(); err != nil {
		return err
	}
	if s.w.suffix != oldSuffix {
		return fmt.Errorf("%w: %s has suffix %q, not %q", ErrSuffix, s.LogPath(), s.w.suffix, oldSuffix)
	}
	if oldSuffix == newSuffix {
		return nil
	}
	if err := s.pin(); err != nil {
		s.unpin()
		return err
	}
	defer s.unpinWriter()
	if err := s.trimIndexesFirst(); err != nil {
		return err
	}
	oldLog, newLog := s.path(LogSuffix, oldSuffix), s.path(LogSuffix, newSuffix)
	if err := s.fs.Rename(oldLog, newLog); err != nil {
		return err
	}
	s.logPath.Store(&newLog)
	if err := s.offIdx.Rename(s.path(IndexSuffix, newSuffix)); err != nil {
		if s.fs.Rename(newLog, oldLog) == nil {
			s.logPath.Store(&oldLog)
		}
		return err
	}
	if err := s.timeIdx.Rename(s.path(TimeIndexSuffix, newSuffix)); err != nil {
		_ = s.offIdx.Rename(s.path(IndexSuffix, oldSuffix))
		if s.fs.Rename(newLog, oldLog) == nil {
			s.logPath.Store(&oldLog)
		}
		return err
	}
	if err := s.renameCompanions(oldSuffix, newSuffix); err != nil {
		_ = s.timeIdx.Rename(s.path(TimeIndexSuffix, oldSuffix))
		_ = s.offIdx.Rename(s.path(IndexSuffix, oldSuffix))
		if s.fs.Rename(newLog, oldLog) == nil {
			s.logPath.Store(&oldLog)
		}
		return err
	}
	s.w.suffix = newSuffix
	for _, r := range append(s.retired, s.region) {
		if r != nil {
			r.SetName(newLog)
		}
	}
	return nil
}

// companionKinds are the files of a segment that the Segment does not open
// but that live and die with it: the log package's aborted-transaction
// index. ChangeSuffix and MarkDeleted rename them with the segment's own
// files when they exist, and the last Unref after MarkDeleted removes
// them, so every file of a segment follows one protocol (Kafka's
// LogSegment renames and deletes its .txnindex with the rest).
var companionKinds = []string{TxnIndexSuffix}

// renameCompanions renames the companion files that exist from oldSuffix
// to newSuffix; on a failure it undoes the renames done.
func (s *Segment) renameCompanions(oldSuffix, newSuffix string) error {
	for i, kind := range companionKinds {
		err := s.fs.Rename(s.path(kind, oldSuffix), s.path(kind, newSuffix))
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		for _, done := range companionKinds[:i] {
			_ = s.fs.Rename(s.path(done, newSuffix), s.path(done, oldSuffix))
		}
		return err
	}
	return nil
}

// Suffix returns the temporary suffix the files carry ("" for none).
// Writer side: it must not overlap ChangeSuffix or MarkDeleted.
func (s *Segment) Suffix() string { return s.w.suffix }

// Close ends the owner's use of the segment: further calls return
// ErrClosed, an active segment gets its final time index entry (as Kafka's
// close does), and the owner's reference is dropped, so the files are
// closed and unmapped now, or when the last reader drops its reference.
// Nothing is synced. A second Close returns ErrClosed. The owner uses
// either Close or Unref to drop its reference, not both.
func (s *Segment) Close() error {
	// The files must carry the names the next start-up reads.
	aerr := s.SettleAdoption()
	if s.closed.Swap(true) {
		return ErrClosed
	}
	// No longer closable; a segment closed at rest stays closed (it is
	// sealed and its .log is Size bytes long: nothing below needs it).
	s.updateClosable()
	err := aerr
	if !s.sealed.Load() && err == nil {
		err = s.appendFinalTimeEntry()
	}
	// A cut to the size also releases blocks a spare reserved past it
	// (releaseReserved).
	if (s.w.fileSize != s.size.Load() || s.reserved.Load()) && !s.deleteOnRelease.Load() {
		perr := s.pin()
		if perr == nil {
			// trim.mu: a background TrimSealedIndexes may be
			// releasing the reservation too (releaseReserved).
			s.trim.mu.Lock()
			if s.w.fileSize != s.size.Load() {
				perr = s.logFile.Truncate(s.size.Load())
			} else {
				perr = releasePastEnd(s.logFile, s.size.Load()) // its modification time kept
			}
			if perr == nil {
				s.reserved.Store(false)
			}
			s.trim.mu.Unlock()
		}
		s.unpin()
		if perr == nil {
			s.w.fileSize = s.size.Load()
		} else if err == nil {
			err = perr
		}
	}
	if uerr := s.Unref(); err == nil {
		err = uerr
	}
	return err
}

// appendFinalTimeEntry appends the largest timestamp so far to the time
// index even if it is full (Kafka's maybeAppend(..., skipFullCheck=true)
// on roll, recovery and close).
func (s *Segment) appendFinalTimeEntry() error {
	if s.w.maxTimestamp < 0 {
		return nil
	}
	return s.timeIdx.MaybeAppend(s.w.maxTimestamp, s.w.offsetOfMaxTimestamp, true)
}
