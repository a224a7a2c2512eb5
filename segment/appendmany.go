package segment

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// AppendBatches appends buf, whole RecordBatch v2 batches back to back
// whose offsets are assigned and strictly increase, with one write at
// Size(): what a partition's group commit writes for the batches its
// appenders queued while the previous fdatasync ran. Each batch gets what
// Append checks (framing, offsets, room in the .log and the indexes), all
// before anything is written, and the index entries Append would add for
// it one by one; the batches are published together after the write, so
// concurrent readers see all of them or none.
//
// On an error nothing is published and the bytes written are truncated
// away, as for Append, except when an offset index entry cannot be
// written after earlier batches of buf got theirs: the batches before the
// failing one are then published (index entries cannot be taken back
// while lock-free readers look them up) and the rest is cut. One writer
// only.
func (s *Segment) AppendBatches(buf []byte) (err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.sealed.Load():
		if err := s.wake(); err != nil {
			return err
		}
	}
	if len(buf) == 0 {
		return nil
	}
	pos := s.size.Load()
	if end := pos + int64(len(buf)); end > s.window {
		return fmt.Errorf("%w: %s: %d + %d bytes exceed %d", ErrSegmentFull, s.LogPath(), pos, len(buf), s.window)
	}
	// Check every batch and count the index entries they will add.
	next, since, entries := s.nextOffset.Load(), s.w.bytesSinceIndex, 0
	for at, rest := pos, buf; len(rest) > 0; {
		n, first, last, ok := nextAppended(rest)
		if !ok {
			return base.CorruptionErrorf("", 0, "batch", "append of %d bytes at byte %d of %d queued that do not frame as a batch", len(rest), at-pos, len(buf))
		}
		if first < next {
			return fmt.Errorf("%w: batch at offset %d, segment %s is at %d", ErrOffsetNotIncreasing, first, s.LogPath(), next)
		}
		if first < s.base || last-s.base > math.MaxInt32 {
			return fmt.Errorf("%w: batch [%d, %d] in segment with base %d", ErrOffsetOverflow, first, last, s.base)
		}
		if since > int64(s.cfg.IndexIntervalBytes) {
			entries, since = entries+1, 0
		}
		since += int64(n)
		next, at, rest = last+1, at+int64(n), rest[n:]
	}
	if entries > s.offIdx.MaxEntries()-s.offIdx.Entries() || entries > s.timeIdx.MaxEntries()-s.timeIdx.Entries() {
		return fmt.Errorf("%w: %s: index full", ErrSegmentFull, s.LogPath())
	}
	if s.w.fileSize != pos {
		// A failed write or a torn tail left bytes past the size.
		if err := s.logFile.Truncate(pos); err != nil {
			return err
		}
		s.w.fileSize = pos
	}

	if _, err := s.logFile.WriteAt(buf, pos); err != nil {
		s.undoWrite(pos)
		return err
	}
	at, last := pos, int64(-1)
	for rest := buf; len(rest) > 0; {
		b := batch.Batch(rest)
		n := b.Size()
		indexDue := s.w.bytesSinceIndex > int64(s.cfg.IndexIntervalBytes)
		if err := s.noteWritten(at, n, b.LastOffset(), b.MaxTimestamp(), indexDue); err != nil {
			s.undoWrite(at)
			if at > pos {
				s.size.Store(at)
				s.nextOffset.Store(last + 1)
			}
			return err
		}
		last, at, rest = b.LastOffset(), at+int64(n), rest[n:]
	}
	s.size.Store(at)
	s.nextOffset.Store(last + 1)
	return nil
}

// nextAppended frames the first batch of rest for AppendBatches: its size
// and offsets, ok false when rest does not start with a whole v2 batch.
func nextAppended(rest []byte) (n int, first, last int64, ok bool) {
	if len(rest) < batch.HeaderSize {
		return 0, 0, 0, false
	}
	b := batch.Batch(rest)
	n = b.Size()
	if n < batch.HeaderSize || n > len(rest) || b.Magic() != batch.Magic {
		return 0, 0, 0, false // legacy messages are appended one by one (Append)
	}
	first, last, _, ok = appendRange(b[:n], n)
	return n, first, last, ok
}

// IndexRoom returns how many more entries both indexes can take: a bound
// on the batches that can still be appended without an index filling up
// (each adds at most one entry to each). Writer side. A segment at rest
// (Rest) has none: its indexes are cut to their entries, and the budget
// may close it while a reader reopens it, so they are not read here; the
// write that unseals it (Append, AppendBatches) grows them back.
func (s *Segment) IndexRoom() int {
	if s.dormant.Load() {
		return 0
	}
	return min(s.offIdx.MaxEntries()-s.offIdx.Entries(), s.timeIdx.MaxEntries()-s.timeIdx.Entries())
}
