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
// segment.ErrFault. A legacy message (isLegacy; its CRC-32 checked) is
// passed to fn too, as a Batch whose v2 accessors mean nothing: fn must
// test isLegacy first.
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
		n, legacy, err := entrySize(s, pos, size)
		if err != nil {
			return err
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
		var last int64
		if legacy {
			e := batch.Legacy(raw)
			if err := e.ValidateHeader(); err != nil {
				return fmt.Errorf("partlog/compaction: %s: legacy message at %d: %w", s.LogPath(), pos, err)
			}
			last = e.Offset()
		} else {
			if err := b.ValidateHeader(); err != nil {
				return fmt.Errorf("partlog/compaction: %s: batch at %d: %w", s.LogPath(), pos, err)
			}
			last = b.LastOffset()
		}
		sc.read += n
		if last >= from {
			if err := fn(b, pos); err != nil {
				return err
			}
		}
		pos += n
	}
	return nil
}

// entrySize returns the size of the entry at pos of s (below size) and
// whether it is a legacy message (magic 0 or 1, from Kafka before 0.11),
// reading its first 17 bytes.
func entrySize(s *segment.Segment, pos, size int64) (int64, bool, error) {
	const peek = batch.LogOverhead + 5 // through the magic byte
	if size-pos < peek {
		return 0, false, fmt.Errorf("partlog/compaction: %s: %d bytes at %d do not hold a batch header", s.LogPath(), size-pos, pos)
	}
	var hb [peek]byte
	h, err := s.Bytes(pos, pos+peek, hb[:])
	if err != nil {
		return 0, false, err
	}
	m, _ := batch.PeekMagic(h)
	legacy := batch.IsLegacyMagic(m)
	n := int64(batch.Batch(h).Length()) + batch.LogOverhead
	minSize := int64(batch.HeaderSize)
	if legacy {
		minSize = batch.LegacyMinSize
	}
	if n < minSize || pos+n > size {
		return 0, false, base.CorruptionErrorf(s.LogPath(), pos, "batchLength", "batch of %d bytes in a segment of %d", n, size)
	}
	return n, legacy, nil
}

// isLegacy reports whether b, an entry forEach passed, is a legacy message
// rather than a RecordBatch v2. Compaction keeps legacy messages as they
// are: it copies them verbatim, never renumbers or drops them, and does not
// map their keys (a record they would shadow is kept).
func isLegacy(b batch.Batch) bool {
	m, ok := batch.PeekMagic(b)
	return ok && batch.IsLegacyMagic(m)
}

// forEachHeader calls fn with the header (the first HeaderSize bytes) of
// every batch of s, holding s's read lease; it reads nothing else and
// checks only the framing (no CRC). The header is valid only during fn.
// Legacy messages are skipped: they have no such header.
func (sc *scanner) forEachHeader(s *segment.Segment, fn func(h batch.Batch) error) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	s.AcquireRead()
	defer s.ReleaseRead()
	size := s.Size()
	var hb [batch.HeaderSize]byte
	for pos := int64(0); pos < size; {
		n, legacy, err := entrySize(s, pos, size)
		if err != nil {
			return err
		}
		if legacy {
			// No producer fields before magic 2.
			sc.read += batch.LogOverhead + 5
			pos += n
			continue
		}
		h, err := s.Bytes(pos, pos+batch.HeaderSize, hb[:])
		if err != nil {
			return err
		}
		sc.read += batch.HeaderSize
		if err := fn(batch.Batch(h)); err != nil {
			return err
		}
		pos += n
	}
	return nil
}
