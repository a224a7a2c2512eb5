package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/mmap"
)

// restOpenMaxIndexBytes is the longest index file a clean open reads whole
// to open its segment at rest (8,192 offset entries, 5,461 time entries):
// a segment with a longer index is opened in full, its indexes mapped
// rather than read.
const restOpenMaxIndexBytes = 64 << 10

// errNotAtRest says why openCleanAtRest left a segment to the full open.
var errNotAtRest = errors.New("partlog/segment: not opened at rest")

// openCleanAtRest is OpenClean of a segment under a Budget that leaves its
// files closed, as the budget leaves a segment it closed while unused:
// the first method that reads the files reopens them (openAtRestLocked),
// so that a directory of many idle segments opens without a descriptor
// or a mapping for each.
//
// It reads what the full open reads, in the same order of trust, without
// mapping anything: the .log's length; both indexes, whole
// (index.ReadOffsetIndex, index.ReadTimeIndex: the checks load makes of
// the mapped files' entries); the batch headers from the offset index
// entry before the last to the end of the .log (which must frame exactly,
// one of them starting at the last entry's position and ending at or
// below its offset, as load and checkOffsetIndex want); the first batch's
// header (FirstBatchMaxTimestamp); and the
// header of the batch holding the time index's last entry, which must
// have that entry's timestamp as its maxTimestamp (checkTimeIndex). As
// after any clean open that entry is the largest timestamp.
//
// Anything it cannot vouch for (a missing or damaged index, one longer
// than restOpenMaxIndexBytes, bytes past the last batch, a reservation
// past the end, an I/O error) returns an error wrapping errNotAtRest,
// and the caller opens the segment in full, which rebuilds or reports
// what it finds. The .txnindex is read and closed too (its entries stay
// in memory, as for a segment the budget closed).
func openCleanAtRest(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	s, err := newSegment(fsys, dir, baseOffset, "", cfg)
	if err != nil {
		return nil, err
	}
	notAtRest := func(format string, args ...any) error {
		err := fmt.Errorf("%w: %s: %s", errNotAtRest, s.LogPath(), fmt.Sprintf(format, args...))
		s.log.Debug("partlog/segment: opening the segment in full after a clean shutdown", "segment", s.LogPath(), "err", err)
		return err
	}
	f, err := fsys.Open(s.LogPath())
	if err != nil {
		return nil, notAtRest("%v", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, notAtRest("%v", err)
	}
	size := st.Size()
	if size > MaxSegmentBytesLimit || reservedPastEnd(st) {
		return nil, notAtRest("%d bytes, or blocks reserved past them", size)
	}
	offs, err := index.ReadOffsetIndex(fsys, s.path(IndexSuffix, ""), baseOffset, restOpenMaxIndexBytes)
	if err != nil {
		return nil, notAtRest("%v", err)
	}
	times, err := index.ReadTimeIndex(fsys, s.path(TimeIndexSuffix, ""), baseOffset, restOpenMaxIndexBytes)
	if err != nil {
		return nil, notAtRest("%v", err)
	}
	// Whether the reopen will map the .log (as openFiles decides).
	mapped := f.Fd() != vfs.InvalidFd && !s.cfg.DisableMmap && mmap.Supported
	// Header reads go through the file: s has no mapping.
	s.logFile = f
	t, err := s.restTail(offs, times, size)
	s.logFile, closed = nil, true
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, notAtRest("%v", err)
	}

	s.window = max(cfg.MaxSegmentBytes, size)
	s.w.fileSize = size
	s.w.bytesSinceIndex = size - t.lastOff.Position
	s.w.maxTimestamp, s.w.offsetOfMaxTimestamp = t.maxTs, t.maxOff
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp = t.maxTs, t.maxOff
	s.firstBatchMaxTs.Store(t.firstMaxTs)
	s.mu.created = s.cfg.readClock()
	s.size.Store(size)
	s.nextOffset.Store(t.next)
	if err := s.readTxnIndex(); err != nil { // its entries are checked against NextOffset
		return nil, notAtRest("%v", err)
	}
	// The state the budget keeps of a segment it closed, which the
	// reopen checks the files against.
	s.lz.offEntries.Store(int64(len(offs)))
	s.lz.timeEntries.Store(int64(len(times)))
	s.lz.restLen = size
	s.lz.fileID, s.lz.idKnown = fileIdentity(st)
	s.lz.mapped.Store(mapped)
	s.lz.resident.Store(false)
	s.sealed.Store(true)
	s.w.syncedAtOpen = true
	s.w.openedAtRest = true
	s.updateClosable()
	return s, nil
}

// restTail is what openCleanAtRest learns from the .log.
type restTail struct {
	// next is the offset after the last batch; lastOff the offset
	// index's last entry ({base, 0} when none).
	next    int64
	lastOff index.OffsetEntry
	// maxTs, maxOff: the largest timestamp and its offset; firstMaxTs
	// the first batch's maxTimestamp (-1 when none).
	maxTs, maxOff, firstMaxTs int64
}

// restTail checks the indexes offs and times, read from their files,
// against the .log of size bytes (read through s.logFile, which has no
// mapping) and returns the next offset, the largest timestamp and the
// first batch's, as load would for a clean open. Any disagreement is an
// error: the full open decides.
func (s *Segment) restTail(offs []index.OffsetEntry, times []index.TimeEntry, size int64) (restTail, error) {
	t := restTail{next: s.base, lastOff: index.OffsetEntry{Offset: s.base}, maxTs: batch.NoTimestamp, maxOff: -1,
		firstMaxTs: batch.NoTimestamp}
	if n := len(offs); n > 0 {
		t.lastOff = offs[n-1]
		if t.lastOff.Position >= size {
			return t, fmt.Errorf("offset index entry %d at position %d, the log has %d bytes", n-1, t.lastOff.Position, size)
		}
	}
	te := index.TimeEntry{Timestamp: batch.NoTimestamp}
	if n := len(times); n > 0 {
		te = times[n-1]
	}
	// The scan starts one entry before the last (at 0 with fewer than
	// two), as load's does, so that it proves the last entry's position
	// a batch boundary: a damaged position can point inside a batch at
	// bytes that frame as batches to the end of the .log (a batch stored
	// in a record's value), and the scan from there would take the last
	// of those for the log's last batch.
	from := int64(0)
	if n := len(offs); n > 1 {
		from = offs[n-2].Position
	}
	var (
		boundary, firstSeen, missed bool
		headLast                    int64 // the last offset of the batch at lastOff
		teFound                     bool  // the batch holding te.Offset: teMaxTs, teBase
		teMaxTs, teBase             int64
		lastMaxTs                   int64 // the last batch's maxTimestamp
	)
	_, err := s.scan(from, size, func(h BatchInfo) {
		if h.Pos == t.lastOff.Position {
			boundary, headLast = true, h.LastOffset
		}
		if h.Pos == 0 {
			firstSeen, t.firstMaxTs = true, h.MaxTimestamp
		}
		if len(offs) == 0 && h.Pos > int64(s.cfg.IndexIntervalBytes) {
			missed = true // a batch this far in would have an entry
		}
		if te.Timestamp >= 0 && !teFound && h.BaseOffset <= te.Offset && te.Offset <= h.LastOffset {
			teFound, teMaxTs, teBase = true, h.MaxTimestamp, h.BaseOffset
		}
		t.next, lastMaxTs = h.NextOffset(), h.MaxTimestamp
	})
	switch {
	case err != nil: // bytes past the last batch among them: the walk ends at size or errs
		return t, err
	case size > 0 && !boundary:
		return t, fmt.Errorf("no batch starts at the last offset index entry (%d, %d)", t.lastOff.Offset, t.lastOff.Position)
	case len(offs) > 0 && headLast > t.lastOff.Offset:
		return t, fmt.Errorf("the batch at the last offset index entry (%d, %d) ends at offset %d", t.lastOff.Offset, t.lastOff.Position, headLast)
	case missed:
		return t, errors.New("an offset index without entries over batches past the index interval")
	}
	if !firstSeen && size > 0 {
		h, err := s.readHeader(0, size)
		if err != nil {
			return t, err
		}
		t.firstMaxTs = h.MaxTimestamp
	}
	if size > 0 && lastMaxTs > te.Timestamp {
		// A time index cut short or emptied (checkLastBatchTime).
		return t, fmt.Errorf("the last batch has max timestamp %d, above the time index's last entry %d", lastMaxTs, te.Timestamp)
	}
	if te.Timestamp < 0 {
		return t, nil // no batch has a timestamp: the final entry is written for every one that does
	}
	if !teFound {
		// Before the tail (or past the end: not found): from the offset
		// index's floor of its offset.
		pos := int64(0)
		if i := sort.Search(len(offs), func(i int) bool { return offs[i].Offset > te.Offset }); i > 0 {
			pos = offs[i-1].Position
		}
		for pos < size {
			h, err := s.readHeader(pos, size)
			if err != nil {
				return t, err
			}
			if h.LastOffset >= te.Offset {
				teFound, teMaxTs, teBase = true, h.MaxTimestamp, h.BaseOffset
				break
			}
			pos = h.End()
		}
	}
	if !teFound || teBase > te.Offset || teMaxTs != te.Timestamp {
		return t, fmt.Errorf("time index entry (%d, %d) does not match its batch", te.Timestamp, te.Offset)
	}
	t.maxTs, t.maxOff = te.Timestamp, te.Offset
	return t, nil
}

// readTxnIndex reads the .txnindex, if there is one, into memory and
// leaves the file closed (txnFile opens it again for a write), as
// openTxnIndex does but without keeping it open.
func (s *Segment) readTxnIndex() error {
	path := s.txnPath()
	f, err := s.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	s.loadTxnEntries(path, data)
	return nil
}
