package segment

import (
	"io"
	"iter"

	"github.com/partlog/partlog/batch"
	impl "github.com/partlog/partlog/internal/segment"
)

// Segment is one segment: a .log of record batches with its offset and
// time indexes (and the .txnindex of its aborted transactions). See the
// package documentation for the concurrency contract and the lifetimes.
type Segment struct {
	s *impl.Segment
}

// Config configures a segment; the zero value is Kafka's defaults.
type Config = impl.Config

// FS is the filesystem a segment's files go through (the same type as
// index.FS); nil means the operating system's (index.OSFS).
type FS = impl.FS

// File is an open file of an FS.
type File = impl.File

// Slice is a range of whole batches in the .log, as Read returns it.
type Slice = impl.Slice

// RecoverResult says what Recover kept and what it cut, and why.
type RecoverResult = impl.RecoverResult

// AbortedTxn is one entry of the .txnindex: an aborted transaction whose
// ABORT marker lies in the segment.
type AbortedTxn = impl.AbortedTxn

// Budget bounds how many sealed segments sharing it keep their files open
// (Config.Budget); see NewBudget.
type Budget = impl.Budget

// BudgetStats is what Budget.Stats reports.
type BudgetStats = impl.BudgetStats

// FaultError is the error of a fault on a mapped page (a media error),
// naming the file and the byte offset; it wraps index.ErrFault (one
// sentinel for a mapped-page fault in the whole module: a segment's reads
// fault on its .log and on its indexes alike). Reach it with errors.As, or
// test for the fault with errors.Is(err, index.ErrFault).
type FaultError = impl.FaultError

// NewBudget returns a Budget that keeps at most maxOpen sealed segments'
// files open (0 or less: no limit).
func NewBudget(maxOpen int) *Budget { return impl.NewBudget(maxOpen) }

// Errors, for errors.Is.
var (
	// ErrClosed: the segment was closed.
	ErrClosed = impl.ErrClosed
	// ErrSealed: Append to a sealed segment.
	ErrSealed = impl.ErrSealed
	// ErrOffsetNotIncreasing: an appended batch does not start after the
	// segment's next offset.
	ErrOffsetNotIncreasing = impl.ErrOffsetNotIncreasing
	// ErrOffsetOverflow: a batch's offsets do not fit the segment's 32-bit
	// relative offsets.
	ErrOffsetOverflow = impl.ErrOffsetOverflow
	// ErrSegmentFull: the batch would take the .log past MaxSegmentBytes.
	ErrSegmentFull = impl.ErrSegmentFull
	// ErrOutOfRange: a byte range outside the .log.
	ErrOutOfRange = impl.ErrOutOfRange
	// ErrLegacyKept: Recover kept legacy data that fails its checks
	// (RecoverResult.Kept); it wraps batch.ErrCorrupt.
	ErrLegacyKept = impl.ErrLegacyKept
)

// FileName returns the name of the file of the segment at base with the
// given suffix, one of Kafka's ".log", ".index", ".timeindex" and
// ".txnindex": 20 digits, zero-padded, then the suffix. The temporary
// suffixes of a partition's crash protocol (.cleaned, .swap, .deleted) are
// the partition's own (package log) and not part of this API. The path of
// a segment's .log is filepath.Join(dir, FileName(s.BaseOffset(), ".log")).
func FileName(base int64, suffix string) string { return impl.FileName(base, suffix) }

// ParseFileName is FileName's inverse: the base offset and the suffix
// (everything after the 20 digits), ok false for other names.
func ParseFileName(name string) (base int64, suffix string, ok bool) {
	return impl.ParseFileName(name)
}

// Create creates an empty segment at baseOffset in dir: a new .log and
// preallocated indexes (failing if the .log exists). A nil fsys is the
// operating system's filesystem.
func Create(fsys FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	return wrap(impl.Create(fsys, dir, baseOffset, cfg))
}

// Open opens the existing segment at baseOffset in dir, checking its
// indexes and rebuilding one that is missing or fails its checks (indexes
// are hints). It does not check the batches: call Recover for a segment
// that may hold a torn tail. A nil fsys is the operating system's
// filesystem.
func Open(fsys FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	return wrap(impl.Open(fsys, dir, baseOffset, cfg))
}

func wrap(s *impl.Segment, err error) (*Segment, error) {
	if err != nil {
		return nil, err
	}
	return &Segment{s: s}, nil
}

// Append writes b, whose offsets are assigned (its base offset at or after
// NextOffset) and whose framing the caller validated, at Size, indexes it
// and only then publishes it to readers. It returns b's position. On an
// error nothing is published. Writer side.
func (s *Segment) Append(b batch.Batch) (pos int64, err error) { return s.s.Append(b) }

// Read returns the range of whole batches from the one holding startOffset
// (or the first after it), within maxBytes and never past maxPosition (a
// visibility bound; Size for everything). With minOneBatch the first batch
// is returned even when it is larger than maxBytes. An empty Slice means
// nothing qualifies. Hold a read lease (AcquireRead) until done with the
// bytes of the range.
func (s *Segment) Read(startOffset int64, maxBytes int, maxPosition int64, minOneBatch bool) (Slice, error) {
	return s.s.Read(startOffset, maxBytes, maxPosition, minOneBatch)
}

// Bytes returns the bytes [start, end) of the .log (below Size). When the
// .log is mapped they alias the mapping (zero copy; read-only) and stay
// valid while the caller holds a read lease and the segment is open;
// otherwise they are read into scratch (grown if too short).
func (s *Segment) Bytes(start, end int64, scratch []byte) ([]byte, error) {
	return s.s.Bytes(start, end, scratch)
}

// WriteTo writes the bytes [start, end) of the .log to w (with sendfile
// when w is a socket or a file on Linux). Hold a read lease.
func (s *Segment) WriteTo(w io.Writer, start, end int64) (int64, error) {
	return s.s.WriteTo(w, start, end)
}

// Batches returns the segment's batches from the one holding offset from,
// in file order, each checked as recovery checks it (framing, CRC,
// offsets); a bad one ends the walk with an error wrapping
// batch.ErrCorrupt that names the file and the position. Each batch is valid
// until the next iteration.
func (s *Segment) Batches(from int64) iter.Seq2[batch.Batch, error] { return s.s.Batches(from) }

// FindOffsetByTimestamp returns the first record whose timestamp is >= ts
// and whose offset is >= startOffset, with its timestamp (Kafka's
// findOffsetByTimestamp); found is false when none qualifies.
func (s *Segment) FindOffsetByTimestamp(ts, startOffset int64) (offset, timestamp int64, found bool, err error) {
	return s.s.FindOffsetByTimestamp(ts, startOffset)
}

// AcquireRead takes a read lease: until ReleaseRead, TruncateTo and
// Recover wait, so bytes from Read, Bytes and WriteTo are never cut under
// the reader.
func (s *Segment) AcquireRead() { s.s.AcquireRead() }

// ReleaseRead releases a lease AcquireRead took.
func (s *Segment) ReleaseRead() { s.s.ReleaseRead() }

// BaseOffset returns the segment's base offset (the number in its names).
func (s *Segment) BaseOffset() int64 { return s.s.BaseOffset() }

// NextOffset returns the offset after the last batch (BaseOffset when the
// segment is empty).
func (s *Segment) NextOffset() int64 { return s.s.NextOffset() }

// Size returns the published size of the .log in bytes.
func (s *Segment) Size() int64 { return s.s.Size() }

// MaxTimestamp returns the largest batch maxTimestamp and the last offset
// of the first batch that has it; -1, -1 when no batch has a timestamp.
func (s *Segment) MaxTimestamp() (ts, offset int64) { return s.s.MaxTimestamp() }

// Sealed reports whether the segment was sealed (read-only).
func (s *Segment) Sealed() bool { return s.s.Sealed() }

// AbortedTxns returns the entries of the segment's .txnindex, in file
// order.
func (s *Segment) AbortedTxns() []AbortedTxn { return s.s.AbortedTxns() }

// Flush makes everything appended durable (fdatasync of the .log, then of
// the indexes). Writer side.
func (s *Segment) Flush() error { return s.s.Flush() }

// Seal makes the segment read-only: a final time index entry, indexes
// trimmed to their entries, the mapping cut to the .log's length. Further
// Appends return ErrSealed. Writer side.
func (s *Segment) Seal() error {
	if err := s.s.Seal(); err != nil {
		return err
	}
	// The partition leaves the trim to its background flush after a
	// roll; a caller of this package gets the whole seal.
	return s.s.TrimSealedIndexes()
}

// TruncateTo removes the batches at and after the one holding offset (or
// the first after it) and their index entries, after waiting for every
// read lease, and returns the number of .log bytes removed. A sealed
// segment becomes active again. Writer side.
func (s *Segment) TruncateTo(offset int64) (removedBytes int64, err error) {
	return s.s.TruncateTo(offset)
}

// Recover checks every batch (framing, size up to maxBatchSize when > 0,
// CRC, increasing offsets), rebuilds both indexes and cuts the .log after
// the last valid batch, as for the last segment of a log after a crash.
// Invalid data is reported in the result, not as an error. Writer side.
func (s *Segment) Recover(maxBatchSize int) (RecoverResult, error) { return s.s.Recover(maxBatchSize) }

// Close closes the segment's files (nothing is synced); further calls
// return ErrClosed.
func (s *Segment) Close() error { return s.s.Close() }
