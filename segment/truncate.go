package segment

import (
	"fmt"
	"math"

	"github.com/partlog/partlog/internal/mmap"
)

// TruncateTo removes every batch whose last offset is >= offset: the .log
// is cut at the start of the batch holding offset (or of the first batch
// after it), and index entries at or past that batch are dropped (Kafka's
// LogSegment.truncateTo). An offset past the last batch removes nothing.
// It returns the number of .log bytes removed.
//
// The segment becomes (or stays) the active one: a sealed segment is
// unsealed and its indexes grow back to MaxIndexBytes. TruncateTo first
// waits for every read lease to be released, so a reader never has a
// mapped page cut from under it (DESIGN law 9). Writer side.
func (s *Segment) TruncateTo(offset int64) (removedBytes int64, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.lease.acquireExclusive()
	defer s.lease.releaseExclusive()
	return s.TruncateToLocked(offset)
}

// TruncateToLocked is TruncateTo for a caller that already holds the
// exclusive lease (LockForTruncate), so that it can bound the wait for
// readers and publish its own state between the wait and the cut.
// REQUIRES: the exclusive lease held (LockForTruncate). Writer side.
func (s *Segment) TruncateToLocked(offset int64) (removedBytes int64, err error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if err := s.SettleAdoption(); err != nil { // files change by name
		return 0, err
	}
	if err := s.use(); err != nil {
		return 0, err
	}
	defer s.unpinWriter()
	s.w.syncedAtOpen = false
	oldSize := s.size.Load()
	h, found, err := s.translate(offset, 0, oldSize)
	if err != nil {
		return 0, err
	}
	if found && s.insideBatch(h.Pos, oldSize) {
		// A damaged index entry led translate inside a batch (DESIGN
		// law 5's exception): a cut there would split the batch.
		h, found, err = s.retranslate(offset, 0, h.Pos, oldSize, fmt.Errorf("position %d lies inside a batch", h.Pos))
		if err != nil {
			return 0, err
		}
	}
	if s.sealed.Load() {
		s.dropTrim()
		if err := s.resizeIndexes(); err != nil {
			return 0, err
		}
		if err := s.mapTo(s.window); err != nil {
			return 0, err
		}
		s.sealed.Store(false)
		s.dormant.Store(false)
	}
	if !found {
		return 0, nil
	}
	cut := h.Pos
	if err := s.offIdx.TruncateTo(h.BaseOffset); err != nil {
		return 0, err
	}
	if err := s.timeIdx.TruncateTo(h.BaseOffset); err != nil {
		return 0, err
	}
	if err := s.truncateTxn(h.BaseOffset); err != nil {
		return 0, err
	}
	s.size.Store(cut)
	next := s.base
	if cut > 0 {
		if _, err := s.scanFromIndex(math.MaxInt64, cut, func() { next = s.base }, func(h BatchInfo) { next = h.NextOffset() }); err != nil {
			return 0, err
		}
	}
	s.nextOffset.Store(next)
	maxTs, maxOff, err := s.largestTimestamp(cut, false)
	if err != nil {
		return 0, err
	}
	s.setMaxTimestamp(maxTs, maxOff)
	s.w.bytesSinceIndex = cut - s.offIdx.LastEntry().Position
	if cut == 0 {
		s.firstBatchMaxTs.Store(-1)
		s.mu.Lock()
		s.mu.created = s.cfg.readClock()
		s.mu.Unlock()
	}
	if err := s.logFile.Truncate(cut); err != nil {
		s.w.fileSize = -1
		return oldSize - cut, err
	}
	s.w.fileSize = cut
	return oldSize - cut, nil
}

// insideBatch reports whether pos, below limit, lies inside a batch rather
// than at its start, as the headers read from the offset index entry two
// before the last one below pos (from 0 without one) show: the check
// TruncateTo makes of translate's answer before it cuts there. It is false
// when those headers stop framing before pos: the log is damaged there,
// and translate's answer stands.
func (s *Segment) insideBatch(pos, limit int64) bool {
	from := int64(0)
	if j := s.offIdx.SearchPosition(pos) - 2; j >= 0 {
		from = s.offIdx.Entry(j).Position
	}
	for p := from; p < pos; {
		h, err := s.readHeader(p, limit)
		if err != nil {
			return false
		}
		p = h.End()
		if p > pos {
			return true
		}
	}
	return false
}
