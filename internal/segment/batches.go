package segment

import (
	"fmt"
	"iter"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
)

// Batches returns the entries of the segment whose last offset is at or
// after from, in file order: RecordBatch v2 batches, and legacy messages
// (magic 0 or 1, from Kafka before 0.11) as they are; a consumer tells
// them apart with batch.PeekMagic (a legacy entry's v2 accessors mean
// nothing). It is the one walk over a segment's framing that the packages
// above use (compaction, the partition's rewrite, dumplog).
//
// Every entry's framing and CRC are checked (batch.Batch.ValidateHeader,
// legacy.Entry.ValidateHeader): a bad one ends the walk with an error
// naming the file and the position (wrapping base.ErrCorrupt or
// batch.ErrCorrupt); so does an I/O error. The entries are read into a
// buffer the iterator owns (never an alias of the mapping, so a consumer
// cannot fault on them): each is valid until the next iteration. The walk
// holds a reference-free read lease (AcquireRead) for its duration: the
// caller holds a reference and must not truncate the segment from the loop
// body.
func (s *Segment) Batches(from int64) iter.Seq2[batch.Batch, error] {
	return s.walk(from, false)
}

// Headers returns the first batch.HeaderSize bytes of every RecordBatch v2
// batch of the segment, in file order, checking only the framing (no CRC):
// the cheap walk for a batch's producer fields, offsets and timestamps.
// Control batches (transaction markers) are returned whole, CRC checked, so
// their one record says which marker they hold. Legacy messages are
// skipped: they have no such header. Buffer and lease as in Batches.
func (s *Segment) Headers() iter.Seq2[batch.Batch, error] {
	return s.walk(s.BaseOffset(), true)
}

// walk is Batches (headers false) and Headers (true).
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
		var buf []byte
		for pos < size {
			b, n, last, err := s.readEntry(pos, size, headers, buf)
			if err != nil {
				yield(nil, err)
				return
			}
			buf = b[:0]
			if b != nil && last >= from && !yield(b, nil) {
				return
			}
			pos += n
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

// readEntry reads the entry at pos (below size) into buf: the whole entry,
// or with headers only a v2 batch's header (a control batch whole; a
// legacy entry gives a nil b). It returns the entry's size in the file and
// its last offset.
func (s *Segment) readEntry(pos, size int64, headers bool, buf []byte) (b batch.Batch, n, last int64, err error) {
	const peek = batch.LogOverhead + 5 // through the magic byte
	if size-pos < peek {
		return nil, 0, 0, base.CorruptionErrorf(s.LogPath(), pos, "batchLength", "%d bytes do not hold a batch header", size-pos)
	}
	var hb [peek]byte
	if err := s.readAt(hb[:], pos); err != nil {
		return nil, 0, 0, err
	}
	m, _ := batch.PeekMagic(hb[:])
	isLegacy := legacy.IsMagic(m)
	n = int64(batch.Batch(hb[:]).Size())
	minSize := int64(batch.HeaderSize)
	if isLegacy {
		minSize = legacy.MinSize
	}
	if n < minSize || pos+n > size {
		return nil, 0, 0, base.CorruptionErrorf(s.LogPath(), pos, "batchLength", "batch of %d bytes in a segment of %d", n, size)
	}
	if isLegacy && headers {
		return nil, n, 0, nil
	}
	want := n
	if headers {
		want = batch.HeaderSize
	}
	buf = grow(buf, int(want))
	if err := s.readAt(buf, pos); err != nil {
		return nil, 0, 0, err
	}
	if headers && batch.Batch(buf).Attributes().IsControl() && want < n {
		buf = grow(buf, int(n))
		if err := s.readAt(buf, pos); err != nil {
			return nil, 0, 0, err
		}
		want = n
	}
	b = batch.Batch(buf)
	switch {
	case isLegacy:
		e := legacy.Entry(buf)
		if err := e.ValidateHeader(); err != nil {
			return nil, 0, 0, fmt.Errorf("partlog/segment: %s: legacy message at %d: %w", s.LogPath(), pos, err)
		}
		return b, n, e.Offset(), nil
	case want == n:
		if err := b.ValidateHeader(); err != nil {
			return nil, 0, 0, fmt.Errorf("partlog/segment: %s: batch at %d: %w", s.LogPath(), pos, err)
		}
	}
	return b, n, b.LastOffset(), nil
}

// grow returns buf resized to n bytes.
func grow(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, n)
	}
	return buf[:n]
}

// readAt fills p from the .log at pos with the file's ReadAt (never the
// mapping: the bytes are the caller's, and no fault can reach it).
func (s *Segment) readAt(p []byte, pos int64) error {
	if s.released.Load() {
		return ErrClosed
	}
	if _, err := s.logFile.ReadAt(p, pos); err != nil {
		return fmt.Errorf("partlog/segment: read %s [%d, %d): %w", s.LogPath(), pos, pos+int64(len(p)), err)
	}
	return nil
}
