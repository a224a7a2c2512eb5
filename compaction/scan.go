package compaction

import (
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/segment"
)

// scanner reads the batches of sealed segments one at a time. Not safe for
// concurrent use.
type scanner struct {
	scratch []byte
	read    int64 // bytes read so far
}

// forEach calls fn with every batch of s whose last offset is >= from, in
// order, holding s's read lease across the scan (one lease at a time:
// callers never nest scans). The batch aliases s's mapping or the
// scanner's buffer and is valid only during fn. It checks framing and the
// CRC: a bad batch is a corruption error naming the file and position. A
// fault reading the mapping (in the scan or in fn) is an error wrapping
// segment.ErrFault.
func (sc *scanner) forEach(s *segment.Segment, from int64, fn func(b batch.Batch, pos int64) error) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	s.AcquireRead()
	defer s.ReleaseRead()
	size := s.Size()
	var pos int64
	if from > s.BaseOffset() {
		p, _, found, err := s.Translate(from, 0)
		if err != nil {
			return err
		}
		if !found {
			return nil
		}
		pos = p
	}
	for pos < size {
		if size-pos < batch.HeaderSize {
			return fmt.Errorf("partlog/compaction: %s: %d bytes at %d do not hold a batch header", s.LogPath(), size-pos, pos)
		}
		var hb [batch.LogOverhead]byte
		h, err := s.Bytes(pos, pos+batch.LogOverhead, hb[:])
		if err != nil {
			return err
		}
		n := int64(batch.Batch(h).Length()) + batch.LogOverhead
		if n < batch.HeaderSize || pos+n > size {
			return base.CorruptionErrorf(s.LogPath(), pos, "batchLength", "batch of %d bytes in a segment of %d", n, size)
		}
		raw, err := s.Bytes(pos, pos+n, sc.scratch)
		if err != nil {
			return err
		}
		if !s.Mapped() {
			// raw is the scratch buffer (or a bigger one Bytes
			// allocated): keep it. A mapped alias is never kept.
			sc.scratch = raw[:0]
		}
		b := batch.Batch(raw)
		if err := b.ValidateHeader(); err != nil {
			return fmt.Errorf("partlog/compaction: %s: batch at %d: %w", s.LogPath(), pos, err)
		}
		sc.read += n
		if b.LastOffset() >= from {
			if err := fn(b, pos); err != nil {
				return err
			}
		}
		pos += n
	}
	return nil
}

// forEachHeader calls fn with the header (the first HeaderSize bytes) of
// every batch of s, holding s's read lease; it reads nothing else and
// checks only the framing (no CRC). The header is valid only during fn.
func (sc *scanner) forEachHeader(s *segment.Segment, fn func(h batch.Batch) error) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	s.AcquireRead()
	defer s.ReleaseRead()
	size := s.Size()
	var hb [batch.HeaderSize]byte
	for pos := int64(0); pos < size; {
		if size-pos < batch.HeaderSize {
			return fmt.Errorf("partlog/compaction: %s: %d bytes at %d do not hold a batch header", s.LogPath(), size-pos, pos)
		}
		h, err := s.Bytes(pos, pos+batch.HeaderSize, hb[:])
		if err != nil {
			return err
		}
		n := int64(batch.Batch(h).Length()) + batch.LogOverhead
		if n < batch.HeaderSize || pos+n > size {
			return base.CorruptionErrorf(s.LogPath(), pos, "batchLength", "batch of %d bytes in a segment of %d", n, size)
		}
		sc.read += batch.HeaderSize
		if err := fn(batch.Batch(h)); err != nil {
			return err
		}
		pos += n
	}
	return nil
}
