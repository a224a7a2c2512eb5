package segment

import (
	"errors"
	"iter"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
)

// Batches returns the entries of the segment whose last offset is at or
// after from, in file order: RecordBatch v2 batches, and legacy messages
// (magic 0 or 1, from Kafka before 0.11) as they are; a consumer tells
// them apart with batch.PeekMagic (a legacy entry's v2 accessors mean
// nothing). Package log's compaction reads segments with it. It walks
// the segment's bytes as Check does (see the package doc, "Recovery").
//
// Every entry's framing, CRC (batch.Batch.ValidateHeader for a v2 batch,
// the CRC-32 of a legacy message) and offsets (increasing, inside the
// segment's relative offsets) are checked: a bad one ends the walk with an
// error wrapping batch.ErrCorrupt (a *batch.CorruptionError naming the file
// and the position of the failing field); so does an I/O error, and a
// file that ends before Size() is ErrFault. The entries are read into a
// window the iterator owns (never an alias of the mapping, so a consumer
// cannot fault on them): each is valid until the next iteration. The walk
// holds a reference-free read lease (AcquireRead) for its duration: the
// caller holds a reference and must not truncate the segment from the loop
// body.
func (s *Segment) Batches(from int64) iter.Seq2[batch.Batch, error] {
	return s.walk(from, false)
}

// Headers returns the first batch.HeaderSize bytes of every RecordBatch v2
// batch of the segment, in file order, checking only the framing (no CRC):
// the cheap walk for a batch's producer fields, offsets and timestamps
// (one read a header; offsets checked as in Batches). Control batches
// (transaction markers) are returned whole, CRC checked, so their one
// record says which marker they hold. Legacy messages are skipped: they
// have no such header. Window and lease as in Batches.
func (s *Segment) Headers() iter.Seq2[batch.Batch, error] {
	return s.walk(s.BaseOffset(), true)
}

// errYieldStop ends the walk under Batches when the consumer stops.
var errYieldStop = errors.New("partlog/segment: iteration stopped")

// walk is Batches (headers false) and Headers (true): the damage walk
// (logSource.walk) over the segment's [0, Size()) from the batch holding
// from, stopping at the first entry that is not valid with its error. The
// bytes are read from the open .log into the walk's window (never the
// mapping), so what is yielded is the iterator's own.
func (s *Segment) walk(from int64, headers bool) iter.Seq2[batch.Batch, error] {
	return func(yield func(batch.Batch, error) bool) {
		s.AcquireRead()
		defer s.ReleaseRead()
		// The lease keeps the files open under a segment budget; use
		// reports a reopen that failed (AcquireRead cannot).
		if err := s.use(); err != nil {
			yield(nil, err)
			return
		}
		defer s.unpin()
		size := s.Size()
		var pos int64
		if from > s.BaseOffset() {
			p, found, err := s.walkStart(from)
			if err != nil {
				yield(nil, err)
				return
			}
			if !found {
				return
			}
			pos = p
		}
		if pos >= size {
			return
		}
		window := windowFor(size - pos)
		if headers {
			window = batch.HeaderSize // a header a read: the rest is skipped
		}
		src := &logSource{path: s.LogPath(), base: s.base, size: size, r: releasedReader{s}, win: make([]byte, 0, window)}
		_, err := src.walk(walkOptions{headers: headers, from: pos, stop: true, control: headers, unguarded: true},
			func(h BatchInfo, b batch.Batch, _ error) error {
				if h.LastOffset < from || (headers && legacy.IsMagic(h.Magic)) {
					return nil // before from; or a legacy message, which has no v2 header
				}
				if !yield(b, nil) {
					return errYieldStop
				}
				return nil
			})
		if err != nil && err != errYieldStop {
			yield(nil, err)
		}
	}
}

// walkStart returns the position of the batch holding from (or the first
// one after it), with the mapping's faults turned into errors.
func (s *Segment) walkStart(from int64) (pos int64, found bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	pos, _, found, err = s.Translate(from, 0)
	return pos, found, err
}

// releasedReader reads the segment's open .log, or fails with ErrClosed
// once the segment is released.
type releasedReader struct{ s *Segment }

// ReadAt is the .log's ReadAt, or ErrClosed after release.
func (r releasedReader) ReadAt(p []byte, off int64) (int, error) {
	if r.s.released.Load() {
		return 0, ErrClosed
	}
	return r.s.logFile.ReadAt(p, off)
}
