package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// scan reads batch headers from pos while they frame below limit, with
// offsets above the previous batch's and within the segment's relative
// offsets, calling fn (if not nil) for each. It returns the position after
// the last batch it accepted and the error that stopped it: nil at limit,
// an error wrapping batch.ErrCorrupt where the bytes stop framing, or an
// I/O error (a file shorter than limit: ErrFault). It is the damage walk
// (logSource.walk) over the headers of [pos, limit), stopping at the first
// entry that is not valid: the framing rules are the walk's. Only headers
// are read (a compressed legacy wrapper whole, for its first offset), one
// read each when the .log is not mapped.
func (s *Segment) scan(pos, limit int64, fn func(h BatchInfo)) (int64, error) {
	if pos >= limit {
		return pos, nil
	}
	src := &logSource{path: s.LogPath(), base: s.base, size: limit, m: s.mapping(), r: s.logFile}
	if src.m == nil || int64(len(src.m)) < limit {
		src.win = make([]byte, 0, batch.HeaderSize) // a header a read
	}
	w, err := src.walk(walkOptions{headers: true, from: pos, stop: true, wrapperBase: true},
		func(h BatchInfo, _ batch.Batch, _ error) error {
			if fn != nil {
				fn(h)
			}
			return nil
		})
	if err != nil && !base.IsCorruption(err) {
		return pos, err
	}
	return w.valid, err
}

// indexBuilder adds index entries the way Kafka's append and recover do:
// an offset entry (the batch's last offset, its position) when more than
// IndexIntervalBytes were appended since the last entry, and with it a
// time entry for the largest timestamp so far, if that grew.
type indexBuilder struct {
	s              *Segment
	off, time      bool // which indexes to fill
	lastEntryPos   int64
	maxTs, maxOff  int64
	firstMaxTs     int64
	next           int64
	err            error
	offFull, tFull bool
}

func newIndexBuilder(s *Segment, off, time bool) *indexBuilder {
	return &indexBuilder{s: s, off: off, time: time, maxTs: batch.NoTimestamp, maxOff: -1,
		firstMaxTs: batch.NoTimestamp, next: s.base}
}

// add accounts for the batch h (in position order from 0).
func (ib *indexBuilder) add(h BatchInfo) {
	if h.Pos == 0 {
		ib.firstMaxTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > ib.maxTs {
		ib.maxTs, ib.maxOff = h.MaxTimestamp, h.LastOffset
	}
	ib.next = h.NextOffset()
	if ib.err != nil || h.Pos-ib.lastEntryPos <= int64(ib.s.cfg.IndexIntervalBytes) {
		return
	}
	ib.lastEntryPos = h.Pos
	if ib.off && !ib.offFull {
		if ib.s.offIdx.IsFull() {
			// A smaller MaxIndexBytes than the segment was written
			// with: later lookups scan further.
			ib.offFull = true
		} else if err := ib.s.offIdx.Append(h.LastOffset, h.Pos); err != nil {
			ib.err = err
		}
	}
	if ib.time && !ib.tFull && ib.maxTs >= 0 {
		if ib.s.timeIdx.IsFull() {
			ib.tFull = true
		} else if err := ib.s.timeIdx.MaybeAppend(ib.maxTs, ib.maxOff, false); err != nil {
			ib.err = err
		}
	}
}

// finish appends the final time entry (Kafka's recover and seal do).
func (ib *indexBuilder) finish() error {
	if ib.err != nil {
		return ib.err
	}
	if ib.time && ib.maxTs >= 0 && ib.s.timeIdx.Entries() < ib.s.timeIdx.MaxEntries() {
		return ib.s.timeIdx.MaybeAppend(ib.maxTs, ib.maxOff, true)
	}
	return nil
}

// rebuild resets the chosen indexes and refills them from a scan of the
// batch headers in [0, limit) (no CRC check). It returns where the batches
// stop framing and the next offset. REQUIRES: no concurrent reader.
func (s *Segment) rebuild(limit int64, off, time bool) (end, next int64, err error) {
	if off {
		if err := s.offIdx.Reset(); err != nil {
			return 0, 0, err
		}
	}
	if time {
		if err := s.timeIdx.Reset(); err != nil {
			return 0, 0, err
		}
	}
	ib := newIndexBuilder(s, off, time)
	end, serr := s.scan(0, limit, ib.add)
	if serr != nil && !base.IsCorruption(serr) {
		return 0, 0, serr
	}
	if err := ib.finish(); err != nil {
		return 0, 0, err
	}
	s.log.Info("partlog/segment: rebuilt index from the log", "segment", s.LogPath(),
		"offsetIndex", off, "timeIndex", time, "entries", s.offIdx.Entries(), "timeEntries", s.timeIdx.Entries())
	return end, ib.next, nil
}

// restoreFinalTimeEntry appends the final entry (appendFinalTimeEntry,
// from the largest timestamp a scan of the batches below end found) to a
// time index whose last entry is smaller. An index that cannot take it
// (full, or its last entry at a later offset: entries that passed their
// checks yet do not describe the log) is rebuilt from the log, which ends
// it with that entry.
func (s *Segment) restoreFinalTimeEntry(end int64) error {
	err := s.appendFinalTimeEntry()
	if !errors.Is(err, index.ErrIndexFull) && !errors.Is(err, index.ErrNotIncreasing) {
		return err
	}
	_, _, err = s.rebuild(end, false, true)
	return err
}

// checkOffsetIndex checks the offset index against a .log of fileSize
// bytes without reading the log beyond the last entry's batch header:
// SanityCheck, then every entry's offset and position strictly increasing
// and every position below fileSize, then a batch starting at the last
// entry's position and ending at or below its offset.
func (s *Segment) checkOffsetIndex(fileSize int64) error {
	if err := s.offIdx.SanityCheck(); err != nil {
		return err
	}
	n := s.offIdx.Entries()
	prevOff, prevPos := s.base-1, int64(-1)
	for i := range n {
		e := s.offIdx.Entry(i)
		if e.Offset <= prevOff || e.Position <= prevPos || e.Position >= fileSize {
			return base.CorruptionErrorf(s.offIdx.Path(), int64(i)*index.OffsetEntrySize, fmt.Sprintf("entry %d", i),
				"entry (%d, %d) after (%d, %d) in a log of %d bytes", e.Offset, e.Position, prevOff, prevPos, fileSize)
		}
		prevOff, prevPos = e.Offset, e.Position
	}
	if n == 0 {
		return nil
	}
	last := s.offIdx.Entry(n - 1)
	h, err := s.readHeader(last.Position, fileSize)
	if err != nil {
		return err
	}
	if h.LastOffset > last.Offset {
		return base.CorruptionErrorf(s.offIdx.Path(), int64(n-1)*index.OffsetEntrySize, fmt.Sprintf("entry %d", n-1),
			"entry (%d, %d) points at batch [%d, %d]", last.Offset, last.Position, h.BaseOffset, h.LastOffset)
	}
	return nil
}

// checkTimeIndex checks the time index against the batches below end
// (whose next offset is next): SanityCheck, Check, and the batch holding
// the last entry's offset having the entry's timestamp as maxTimestamp.
func (s *Segment) checkTimeIndex(end, next int64) error {
	if err := s.timeIdx.SanityCheck(); err != nil {
		return err
	}
	if err := s.timeIdx.Check(next); err != nil {
		return err
	}
	if s.timeIdx.Entries() == 0 {
		return nil
	}
	if first := s.timeIdx.Entry(0); first.Timestamp < 0 {
		return base.CorruptionErrorf(s.timeIdx.Path(), 0, "entry 0",
			"negative timestamp %d (entries are only written for timestamps >= 0)", first.Timestamp)
	}
	te := s.timeIdx.LastEntry()
	h, ok, err := s.translate(te.Offset, 0, end)
	if err != nil {
		return err
	}
	if !ok || h.BaseOffset > te.Offset || h.MaxTimestamp != te.Timestamp {
		return base.CorruptionErrorf(s.timeIdx.Path(), int64(s.timeIdx.Entries()-1)*index.TimeEntrySize, "last entry",
			"entry (%d, %d) does not match batch [%d, %d] with max timestamp %d", te.Timestamp, te.Offset, h.BaseOffset, h.LastOffset, h.MaxTimestamp)
	}
	return nil
}

// checkLastBatchTime checks that the last batch below end (whose next
// offset is next) has a maxTimestamp at or below the time index's last
// entry, the running maximum every seal and close leaves there (-1 when
// the index has no entry). A time index cut short by whole entries, or
// emptied, after a clean shutdown passes every other check, and a clean
// open takes its last entry for the segment's largest timestamp; this
// catches it whenever the last batch holds a later timestamp than what is
// left, as it does while timestamps grow (DESIGN law 5 names what it
// misses). One lookup, as the last entry's check. An open after a crash
// needs no such check: it scans from the last entry for the largest
// timestamp.
func (s *Segment) checkLastBatchTime(end, next int64) error {
	if next <= s.base {
		return nil
	}
	limit := int64(batch.NoTimestamp)
	n := s.timeIdx.Entries()
	if n > 0 {
		limit = s.timeIdx.LastEntry().Timestamp
	}
	h, ok, err := s.translate(next-1, 0, end)
	if err != nil {
		return err
	}
	if ok && h.MaxTimestamp > limit {
		return base.CorruptionErrorf(s.timeIdx.Path(), int64(n)*index.TimeEntrySize, "last entry",
			"the last batch [%d, %d] has max timestamp %d, above the last entry's %d: entries are missing", h.BaseOffset, h.LastOffset, h.MaxTimestamp, limit)
	}
	return nil
}

// load sets up an opened segment's state from its files: it checks the
// indexes (rebuilding the ones that fail, or that the caller found
// missing), finds where the batches stop framing, the next offset and the
// largest timestamp. An offset index without entries is valid when no
// batch starts more than IndexIntervalBytes into the .log (what the index
// builder leaves for a small segment); the scan that finds the log's end
// checks that. clean trusts the time index's last entry as the largest
// timestamp (OpenClean); otherwise a time index without the final entry
// gets it (restoreFinalTimeEntry). rebuilt reports whether an index was
// rebuilt or given that entry (its file then differs from what was
// synced). REQUIRES: no concurrent reader.
func (s *Segment) load(fileSize int64, rebuildOff, rebuildTime, clean bool) (rebuilt bool, err error) {
	rebuildIdx := func(limit int64, off, time bool) (int64, int64, error) {
		rebuilt = true
		return s.rebuild(limit, off, time)
	}
	warn := func(what string, err error) {
		s.log.Warn("partlog/segment: index fails its check; rebuilding it from the log",
			"segment", s.LogPath(), "index", what, "err", err)
	}
	if !rebuildOff {
		if err := s.checkOffsetIndex(fileSize); err != nil {
			if !base.IsCorruption(err) {
				return rebuilt, err
			}
			warn("offset", err)
			rebuildOff = true
		}
	}
	if !rebuildTime {
		if err := s.timeIdx.SanityCheck(); err != nil {
			warn("time", err)
			rebuildTime = true
		}
	}
	var end, next int64
	timeDone := false
	if rebuildOff {
		var err error
		if end, next, err = rebuildIdx(fileSize, true, rebuildTime); err != nil {
			return rebuilt, err
		}
		timeDone = rebuildTime
	} else {
		// The scan that finds the log's end starts one entry before the
		// last (at 0 with fewer than two entries), so that it also
		// proves the last entry's position a batch boundary: a damaged
		// position can point inside a batch at bytes that frame as a
		// header (a batch stored in a record's value), and the scan from
		// there would take where those stop framing for the log's end.
		n := s.offIdx.Entries()
		last := s.offIdx.LastEntry()
		from := int64(0)
		if n > 1 {
			from = s.offIdx.Entry(n - 2).Position
		}
		next = s.base
		// An empty offset index must stay empty over the whole log:
		// a batch past the first index interval would have an entry.
		empty, missed, boundary := n == 0, false, last.Position == 0
		var serr error
		end, serr = s.scan(from, fileSize, func(h BatchInfo) {
			next = h.NextOffset()
			boundary = boundary || h.Pos == last.Position
			if empty && h.Pos > int64(s.cfg.IndexIntervalBytes) {
				missed = true
			}
		})
		if serr != nil && !base.IsCorruption(serr) {
			return rebuilt, serr
		}
		if !boundary && end < last.Position {
			// The batches stop framing before the last entry's
			// position: the log is damaged there (or the entry before
			// the last is), which reads and recovery report, not the
			// index. The log's end is found from the last entry, as
			// without the check, and only a last entry whose batch
			// does not frame makes the index fail.
			next = s.base
			end, serr = s.scan(last.Position, fileSize, func(h BatchInfo) { next = h.NextOffset() })
			if serr != nil && !base.IsCorruption(serr) {
				return rebuilt, serr
			}
			boundary = end > last.Position
		}
		if missed {
			if end, next, serr = rebuildIdx(fileSize, true, rebuildTime); serr != nil {
				return rebuilt, serr
			}
			timeDone = rebuildTime
		} else if !boundary {
			// No batch starts at the last entry's position: it points
			// past what can be read, or inside a batch.
			if serr == nil {
				serr = base.CorruptionErrorf(s.offIdx.Path(), int64(n-1)*index.OffsetEntrySize, fmt.Sprintf("entry %d", n-1),
					"entry (%d, %d) is not at a batch boundary", last.Offset, last.Position)
			}
			warn("offset", serr)
			if end, next, serr = rebuildIdx(fileSize, true, rebuildTime); serr != nil {
				return rebuilt, serr
			}
			timeDone = rebuildTime
		}
	}
	switch {
	case timeDone:
	case rebuildTime:
		// Missing, or failing its sanity check, next to an offset index
		// that passed: rebuilt alone. (Checking the empty index made in
		// its place would pass, leaving the segment without time
		// entries, and a clean open without its largest timestamp.)
		if _, _, err := rebuildIdx(end, false, true); err != nil {
			return rebuilt, err
		}
	default:
		err := s.checkTimeIndex(end, next)
		if err == nil && clean {
			// largestTimestamp trusts the last entry then.
			err = s.checkLastBatchTime(end, next)
		}
		if err != nil {
			if !base.IsCorruption(err) {
				return rebuilt, err
			}
			warn("time", err)
			if _, _, err := rebuildIdx(end, false, true); err != nil {
				return rebuilt, err
			}
		}
	}
	if end < fileSize {
		s.log.Warn("partlog/segment: bytes at the end of the log do not frame as batches; left out until recovery",
			"segment", s.LogPath(), "size", end, "fileSize", fileSize)
	}
	maxTs, maxOff, err := s.largestTimestamp(end, clean)
	if err == nil && end > 0 {
		_, err = s.readHeader(0, end)
	}
	if err != nil && base.IsCorruption(err) && !clean {
		// Bytes below end do not frame as batches, where the scan that
		// found end, from the last offset entries, did not read: a crash
		// kept later writes and lost an earlier one (unsynced writes reach
		// the disk in any order). The batches end at the first damage, as
		// a scan from the start finds it; the indexes, which point past
		// it, are rebuilt from that scan, and recovery decides about the
		// rest.
		warn("offset", err)
		s.loadDamage = err
		if end, next, err = rebuildIdx(fileSize, true, true); err != nil {
			return rebuilt, err
		}
		maxTs, maxOff, err = s.largestTimestamp(end, clean)
	}
	if err != nil {
		return rebuilt, err
	}
	s.w.maxTimestamp, s.w.offsetOfMaxTimestamp = maxTs, maxOff
	if !clean && maxTs > s.timeIdx.LastEntry().Timestamp {
		// The time index lacks the final entry that a clean open
		// trusts: a crash lost the seal's entry (or the entries after
		// some point) while the .log kept the batches. A sealed
		// segment gets no other: without it, the next clean open would
		// take the index's last entry for the largest timestamp.
		if err := s.restoreFinalTimeEntry(end); err != nil {
			return rebuilt, err
		}
		rebuilt = true
	}
	if s.indexSuspect.Load() {
		// A check above (the time index's, or the search for the
		// largest timestamp) met an offset entry that points inside a
		// batch: rebuilt now, while no reader looks, rather than left
		// suspect for every lookup until a recovery.
		warn("offset", errors.New("an entry points inside a batch"))
		if _, _, err := rebuildIdx(end, true, false); err != nil {
			return rebuilt, err
		}
		s.indexSuspect.Store(false)
	}
	first := batch.NoTimestamp
	if end > 0 {
		h, err := s.readHeader(0, end)
		if err != nil {
			return rebuilt, err
		}
		first = h.MaxTimestamp
	}
	s.w.bytesSinceIndex = end - s.offIdx.LastEntry().Position
	s.mu.Lock()
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp = maxTs, maxOff
	s.firstBatchMaxTs.Store(first)
	s.mu.Unlock()
	s.size.Store(end)
	s.nextOffset.Store(next)
	return rebuilt, nil
}

// largestTimestamp returns the largest batch maxTimestamp below end and the
// last offset of the first batch with it (Kafka's readLargestTimestamp):
// the last time index entry, then, unless clean, a header scan from its
// batch to end.
//
// After a clean shutdown (clean) the last entry is the final entry every
// close, seal, recovery and rebuild appends for the segment's largest
// timestamp, and load has checked it against the batch holding its offset:
// it is the answer, and nothing after it is read. An empty time index then
// means no batch has a timestamp >= 0 (the final entry is written for
// every such timestamp), which the scan would also answer.
//
// Otherwise the scan starts at te's batch, not at the last offset entry: a
// time index cut short (damaged, yet passing its O(1) sanity check) must
// not hide a larger timestamp (indexes are hints, DESIGN law 5). When
// timestamps stop growing, te stays early and this reads every header
// after it.
func (s *Segment) largestTimestamp(end int64, clean bool) (ts, offset int64, err error) {
	te := s.timeIdx.LastEntry()
	ts, offset = batch.NoTimestamp, int64(-1)
	if te.Timestamp >= 0 {
		ts, offset = te.Timestamp, te.Offset
	}
	if clean {
		return ts, offset, nil
	}
	target := int64(-1) // no entry: scan from the start
	if te.Timestamp >= 0 {
		target = te.Offset
	}
	from, fromOffset := ts, offset
	_, serr := s.scanFromIndex(target, end, func() { ts, offset = from, fromOffset }, func(h BatchInfo) {
		if h.MaxTimestamp > ts {
			ts, offset = h.MaxTimestamp, h.LastOffset
		}
	})
	if serr != nil {
		return 0, 0, serr
	}
	return ts, offset, nil
}

// scanFromIndex is scan below limit from the offset index's floor for
// target (the start for a target below the segment's base), calling fn
// for each batch. When that scan meets bytes that frame as no batch (a
// corruption error), it scans again from the start, after calling reset
// (fn's state back to what it was before the first call): if the second
// scan does not meet them, the entry pointed inside a batch and the index
// is marked suspect. It returns the second scan's result, as translate
// does.
func (s *Segment) scanFromIndex(target, limit int64, reset func(), fn func(h BatchInfo)) (int64, error) {
	pos := int64(0)
	if target >= s.base {
		pos = s.indexFloor(target, limit)
	}
	end, err := s.scan(pos, limit, fn)
	if (err == nil && end == limit) || pos == 0 || (err != nil && !base.IsCorruption(err)) {
		return end, err
	}
	reset()
	end2, err2 := s.scan(0, limit, fn)
	if err2 == nil && end2 == limit {
		s.suspect("the scan from offset index position %d stopped at %d (%v)", pos, end, err)
	}
	return end2, err2
}

// RecoverResult reports what Recover kept and cut.
type RecoverResult struct {
	// ValidBytes is the size of the .log after recovery: the end of the
	// last valid batch.
	ValidBytes int64
	// TruncatedBytes is how many bytes were cut from the end of the .log.
	TruncatedBytes int64
	// NextOffset is the offset after the last valid batch (BaseOffset
	// when none); the last valid offset is NextOffset-1.
	NextOffset int64
	// Cause is why the scan stopped before the end of the file, nil if
	// every byte was valid. It is a *batch.CorruptionError naming the .log
	// and the position; errors.Is(Cause, ErrTornTail) tells an incomplete
	// write at the end of the file (a short or zeroed tail, or a last
	// batch that fails its checks: what a crash leaves) from damage
	// followed by more data (corruption).
	Cause error
	// Kept is true when Cause is data recovery cannot prove torn (DESIGN
	// law 12): a legacy message (magic 0 or 1) that frames but fails its
	// CRC-32 or offsets in a sealed segment or with data after it, or
	// damage followed by a valid legacy message. Nothing is cut then
	// (TruncatedBytes is 0, the file keeps every byte); the segment serves
	// the batches before ValidBytes, and the caller must refuse to go on
	// (package log's Open fails, naming the file and position).
	Kept bool
}

// Recover checks every batch of the .log from the start (Kafka's
// LogSegment.recover): framing, size (at most maxBatchSize when > 0),
// magic and CRC-32C (batch.ValidateHeader; it does not decompress), offsets strictly increasing
// and inside the segment's relative offsets. It rebuilds both indexes as it
// goes, cuts the .log after the last valid batch and reports what it cut.
// An I/O error is returned as err; invalid data is not an error but the
// result's Cause. It waits for read leases and must not overlap other
// writer-side calls.
//
// Legacy messages (magic 0 or 1, from Kafka before 0.11) are checked as
// Kafka checks them (framing, CRC-32 IEEE, offsets; a compressed wrapper
// covers its inner messages' offsets) and kept. Invalid bytes at the end
// of the file are cut as a torn tail whatever their magic (a crash can
// zero the magic of a batch being written); a legacy message that frames
// but fails its checks with data after it is never cut (RecoverResult.Kept).
// Recover is for the last segment of a log; use RecoverSealed for the
// others.
func (s *Segment) Recover(maxBatchSize int) (RecoverResult, error) {
	return s.recover(maxBatchSize, false)
}

// RecoverSealed is Recover for a segment that is not the last of its log:
// it was flushed before the next segment existed, so nothing at its end is
// a torn tail, and a legacy message there that frames but fails its checks
// is kept (RecoverResult.Kept), never cut.
func (s *Segment) RecoverSealed(maxBatchSize int) (RecoverResult, error) {
	return s.recover(maxBatchSize, true)
}

// recover is Recover; sealed says the segment is not the last.
func (s *Segment) recover(maxBatchSize int, sealed bool) (_ RecoverResult, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if s.closed.Load() {
		return RecoverResult{}, ErrClosed
	}
	if err := s.SettleAdoption(); err != nil { // the mappings change
		return RecoverResult{}, err
	}
	if err := s.use(); err != nil {
		return RecoverResult{}, err
	}
	defer s.unpinWriter()
	s.w.syncedAtOpen = false
	s.lease.acquireExclusive()
	defer s.lease.releaseExclusive()
	st, err := s.logFile.Stat()
	if err != nil {
		return RecoverResult{}, err
	}
	fileSize := st.Size()
	if err := s.offIdx.Reset(); err != nil {
		return RecoverResult{}, err
	}
	if err := s.timeIdx.Reset(); err != nil {
		return RecoverResult{}, err
	}
	ib := newIndexBuilder(s, true, true)
	w, err := s.sourceOf(fileSize).walk(walkOptions{maxBatchSize: maxBatchSize, sealed: sealed},
		func(h BatchInfo, _ batch.Batch, _ error) error { ib.add(h); return nil })
	if err != nil {
		return RecoverResult{}, err
	}
	pos, cause, kept := w.valid, w.cause, w.kept
	if ib.err != nil {
		return RecoverResult{}, ib.err
	}
	res := w.result(fileSize)
	if kept {
		// Law 12: data recovery cannot prove torn is never cut. The
		// segment serves what lies before it; the caller refuses.
		res.TruncatedBytes = 0
		s.log.Warn("partlog/segment: recovery found legacy data it cannot prove torn; nothing cut", "segment", s.LogPath(),
			"position", pos, "cause", cause)
	} else if cause != nil {
		s.log.Warn("partlog/segment: recovery cut the log", "segment", s.LogPath(),
			"validBytes", pos, "truncatedBytes", res.TruncatedBytes, "cause", cause)
	}
	s.size.Store(pos)
	s.nextOffset.Store(ib.next)
	if err := s.truncateTxn(ib.next); err != nil { // markers cut with the tail
		return res, err
	}
	if fileSize != pos && !kept {
		if err := s.logFile.Truncate(pos); err != nil {
			s.w.fileSize = -1
			return res, err
		}
	}
	if !kept {
		s.w.fileSize = pos
	}
	if err := ib.finish(); err != nil {
		return res, err
	}
	if s.sealed.Load() {
		if err := s.offIdx.TrimToValidSize(); err != nil {
			return res, err
		}
		if err := s.timeIdx.TrimToValidSize(); err != nil {
			return res, err
		}
		if err := s.mapTo(pos); err != nil {
			return res, err
		}
	}
	s.w.bytesSinceIndex = pos - ib.lastEntryPos
	s.indexSuspect.Store(false)
	s.setMaxTimestamp(ib.maxTs, ib.maxOff)
	s.firstBatchMaxTs.Store(ib.firstMaxTs)
	if pos == 0 {
		s.mu.Lock()
		s.mu.created = s.cfg.readClock()
		s.mu.Unlock()
	}
	return res, nil
}

// peek returns n bytes of the .log at pos (below the file's end): the
// mapping, or a read into *buf. A file that ends before them lost bytes
// the segment holds: a fault (mmap.ReadFault), as on the mapping.
func (s *Segment) peek(pos int64, n int, buf *[]byte) ([]byte, error) {
	if m := s.mapping(); m != nil && pos+int64(n) <= int64(len(m)) {
		return m[pos : pos+int64(n) : pos+int64(n)], nil
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if got, err := s.logFile.ReadAt(b, pos); err != nil && !(errors.Is(err, io.EOF) && got == n) {
		if errors.Is(err, io.EOF) {
			return nil, mmap.ReadFault(s.LogPath(), pos+int64(got))
		}
		return nil, fmt.Errorf("partlog/segment: read %s at %d: %w", s.LogPath(), pos, err)
	}
	return b, nil
}
