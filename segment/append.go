package segment

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
)

// Append writes b at the end of the .log and publishes it. b's offsets are
// already assigned: b.BaseOffset() >= NextOffset(), and its last offset
// lies within MaxInt32 of BaseOffset. Append checks b's framing (not its
// CRC: the caller validated it) and that it fits, then writes it at Size(),
// adds an offset index entry (key: b's last offset, value: its position)
// and maybe a time index entry (the largest timestamp so far and the offset
// of the batch that has it) when more than IndexIntervalBytes were
// appended since the last entry, and only then publishes the new size, so
// concurrent readers never see a partial batch. It returns b's position.
//
// On an error nothing is published: the size and next offset stay, no
// index entry is added and the bytes written are truncated away (or, if
// that fails too, cut before the next append). The one exception is a
// failed write of the time index entry after the offset entry is in: the
// batch is then published (see the comment in the code). One writer only.
func (s *Segment) Append(b batch.Batch) (pos int64, err error) {
	return s.appendBatch(b, len(b), nil)
}

// AppendWithHeader is Append of the batch made of the header h (exactly
// batch.HeaderSize bytes) followed by body: what a partition appends when
// it patched a copy of a caller's header (offsets, leader epoch,
// timestamps and CRC) and must not write into the caller's bytes. The two
// parts are written back to back at Size(), with one system call where
// the file offers it (vfs.VectorWriterAt), else with two writes (a crash
// between them leaves a torn tail, which the CRC catches), and published
// together, as Append publishes a batch. Neither h nor body is retained or
// modified.
func (s *Segment) AppendWithHeader(h batch.Batch, body []byte) (pos int64, err error) {
	if len(h) != batch.HeaderSize {
		return 0, base.CorruptionErrorf("", 0, "batch", "append of a %d-byte header, want %d", len(h), batch.HeaderSize)
	}
	return s.appendBatch(h, batch.HeaderSize+len(body), body)
}

// appendBatch appends a batch of n bytes: b is the whole batch (body nil)
// or its header (body the rest). Header fields are read from b only.
func (s *Segment) appendBatch(b batch.Batch, n int, body []byte) (pos int64, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	switch {
	case s.closed.Load():
		return 0, ErrClosed
	case s.sealed.Load():
		if err := s.wake(); err != nil {
			return 0, err
		}
	}
	first, last, batchMaxTs, ok := appendRange(b, n)
	if !ok {
		return 0, base.CorruptionErrorf("", 0, "batch", "append of %d bytes that do not frame as one batch", n)
	}
	pos = s.size.Load()
	if next := s.nextOffset.Load(); first < next {
		return 0, fmt.Errorf("%w: batch at offset %d, segment %s is at %d", ErrOffsetNotIncreasing, first, s.LogPath(), next)
	}
	if first < s.base || last-s.base > math.MaxInt32 {
		return 0, fmt.Errorf("%w: batch [%d, %d] in segment with base %d", ErrOffsetOverflow, first, last, s.base)
	}
	end := pos + int64(n)
	if end > s.window {
		return 0, fmt.Errorf("%w: %s: %d + %d bytes exceed %d", ErrSegmentFull, s.LogPath(), pos, n, s.window)
	}
	indexDue := s.w.bytesSinceIndex > int64(s.cfg.IndexIntervalBytes)
	if indexDue && (s.offIdx.IsFull() || s.timeIdx.IsFull()) {
		return 0, fmt.Errorf("%w: %s: index full", ErrSegmentFull, s.LogPath())
	}
	// The writer's copy of the last entry, not the mapped page: the
	// first entries after a mapping is made never map their page
	// (index.OffsetIndex.LastAppended).
	if indexDue && s.offIdx.Entries() > 0 && last <= s.offIdx.LastAppended().Offset {
		return 0, base.AssertionFailedf("partlog/segment: %s: offset %d not above the last index entry %d", s.LogPath(), last, s.offIdx.LastAppended().Offset)
	}
	if s.w.fileSize != pos {
		// A failed write or a torn tail left bytes past the size.
		if err := s.logFile.Truncate(pos); err != nil {
			return 0, err
		}
		s.w.fileSize = pos
	}

	if err := s.writeBatch(b, body, pos); err != nil {
		s.undoWrite(pos)
		return 0, err
	}
	if err := s.noteWritten(pos, n, last, batchMaxTs, indexDue); err != nil {
		s.undoWrite(pos)
		return 0, err
	}
	s.size.Store(end)
	s.nextOffset.Store(last + 1)
	return pos, nil
}

// noteWritten does the writer's bookkeeping for a batch of n bytes with
// last offset last and largest timestamp batchMaxTs just written at pos:
// the index entries when indexDue, the byte count since the last entry,
// the file size, the largest timestamp and the first batch's. It does not
// publish the batch (size, nextOffset). An error is a failed offset index
// write, with nothing changed.
func (s *Segment) noteWritten(pos int64, n int, last, batchMaxTs int64, indexDue bool) error {
	maxTs, maxOff := s.w.maxTimestamp, s.w.offsetOfMaxTimestamp
	if ts := batchMaxTs; ts > maxTs {
		maxTs, maxOff = ts, last
	}
	if indexDue {
		if err := s.offIdx.Append(last, pos); err != nil {
			return err
		}
		if maxTs >= 0 {
			// The checks above rule out every MaybeAppend failure but
			// an I/O error writing the index file. The offset entry is
			// in (and index entries cannot be taken back while
			// lock-free readers look them up), so the batch is
			// published anyway: a time index that lacks an entry is
			// still right, lookups just scan further.
			if err := s.timeIdx.MaybeAppend(maxTs, maxOff, false); err != nil {
				s.log.Warn("partlog/segment: time index entry not written; lookups by time scan further",
					"segment", s.LogPath(), "timestamp", maxTs, "offset", maxOff, "err", err)
			}
		}
		s.w.bytesSinceIndex = 0
	}
	s.w.bytesSinceIndex += int64(n)
	s.w.fileSize = pos + int64(n)
	s.setMaxTimestamp(maxTs, maxOff)
	if pos == 0 {
		s.firstBatchMaxTs.Store(batchMaxTs)
	}
	return nil
}

// writeBatch writes b, then body when it is not nil, at pos: with one
// vfs.VectorWriterAt call when the file offers it, else one WriteAt
// each. The iovec array lives in the writer state so that the call does
// not allocate; it is cleared afterwards, so no caller memory is kept.
func (s *Segment) writeBatch(b, body []byte, pos int64) error {
	if body == nil {
		_, err := s.logFile.WriteAt(b, pos)
		return err
	}
	if vw, ok := s.logFile.(vfs.VectorWriterAt); ok {
		s.w.iov = [2][]byte{b, body}
		_, err := vw.WriteVAt(s.w.iov[:], pos)
		s.w.iov = [2][]byte{}
		return err
	}
	if _, err := s.logFile.WriteAt(b, pos); err != nil {
		return err
	}
	_, err := s.logFile.WriteAt(body, pos+int64(len(b)))
	return err
}

// undoWrite cuts a failed append's bytes; if that fails too, the next
// Append (or Close) cuts them.
func (s *Segment) undoWrite(pos int64) {
	if err := s.logFile.Truncate(pos); err != nil {
		s.w.fileSize = -1
		return
	}
	s.w.fileSize = pos
}

// RollReason says why the partition should start a new segment before
// appending a batch. It is what ShouldRoll returns.
type RollReason uint8

// Roll reasons, in the order ShouldRoll checks them (Kafka's shouldRoll).
const (
	// RollNone: append to this segment.
	RollNone RollReason = iota
	// RollSize: the batch would take the .log past segment.bytes.
	RollSize
	// RollTime: segment.ms elapsed since the first batch (by batch
	// timestamps, or by the wall clock when the first batch has none).
	RollTime
	// RollOffsetIndexFull: the offset index has no free entry.
	RollOffsetIndexFull
	// RollTimeIndexFull: the time index has no free entry.
	RollTimeIndexFull
	// RollOffsetOverflow: the batch's last offset does not fit the
	// segment's 32-bit relative offsets.
	RollOffsetOverflow
	numRollReasons
)

var rollReasonNames = [...]string{"none", "size", "time", "offset index full", "time index full", "offset overflow"}

func init() {
	if len(rollReasonNames) != int(numRollReasons) {
		panic(base.AssertionFailedf("partlog/segment: %d roll reason names for %d reasons", len(rollReasonNames), numRollReasons))
	}
}

// String names the reason.
func (r RollReason) String() string {
	if r < numRollReasons {
		return rollReasonNames[r]
	}
	return fmt.Sprintf("RollReason(%d)", uint8(r))
}

// ShouldRoll reports whether the partition must roll to a new segment before
// appending incoming, and why (Kafka's LogSegment.shouldRoll), checking in
// this order:
//
//   - size: Size() > segmentBytes - len(incoming), for a non-empty segment
//     (rolling an empty one would not help; the partition rejects a batch
//     larger than segment.bytes);
//   - time: for a non-empty segment and rollAfter > 0 (segment.ms minus the
//     jitter), incoming.MaxTimestamp() - FirstBatchMaxTimestamp() > rollAfter,
//     or, when the first batch has no timestamp, now - Created() > rollAfter
//     (strictly greater, as in Kafka);
//   - either index is full;
//   - incoming's last offset is more than MaxInt32 above the base offset
//     (or below it).
//
// Only incoming's header is read (its size is batchLength + 12), so
// incoming may be just the header of the batch to append, as
// AppendWithHeader takes it.
func (s *Segment) ShouldRoll(incoming batch.Batch, segmentBytes int64, rollAfter time.Duration, now time.Time) RollReason {
	size := s.size.Load()
	if size > 0 && size > segmentBytes-int64(incoming.Size()) {
		return RollSize
	}
	if size > 0 && rollAfter > 0 {
		if first := s.firstBatchMaxTs.Load(); first >= 0 {
			// In milliseconds, as Kafka compares them: a Duration of
			// the difference wraps once it passes about 292 years.
			// An integer count of milliseconds is above rollAfter
			// exactly when it is above rollAfter's whole milliseconds.
			if ts := incoming.MaxTimestamp(); ts > first && ts-first > rollAfter.Milliseconds() {
				return RollTime
			}
		} else if now.Sub(s.Created()) > rollAfter {
			return RollTime
		}
	}
	var offFull, timeFull bool
	if s.dormant.Load() {
		// Its indexes are cut to their entries; the write that unseals
		// it grows them back to MaxIndexBytes (resizeIndexes). The
		// budget may have closed it and a reader may be reopening it:
		// its counts come through IndexEntries, never its index fields.
		off, tim := s.IndexEntries()
		offSlots := max(s.cfg.MaxIndexBytes/index.OffsetEntrySize, off)
		timeSlots := max(s.cfg.MaxIndexBytes/index.TimeEntrySize, tim)
		offFull, timeFull = off >= offSlots, tim >= timeSlots-1
	} else {
		offFull, timeFull = s.offIdx.IsFull(), s.timeIdx.IsFull()
	}
	if offFull {
		return RollOffsetIndexFull
	}
	if timeFull {
		return RollTimeIndexFull
	}
	if rel := incoming.LastOffset() - s.base; rel < 0 || rel > math.MaxInt32 {
		return RollOffsetOverflow
	}
	return RollNone
}

// FreeIndexEntries returns how many more batches the segment can take
// before an index is full: the free slots of its offset index and of its
// time index (whose last slot is kept for the entry a seal writes),
// whichever are fewer, counting the indexes of a segment whose write is
// deferred (UnsealOnWrite) at the size its next write grows them to, as
// ShouldRoll does. An Append adds at most one entry to each index. Writer
// side.
func (s *Segment) FreeIndexEntries() int {
	// A dormant segment's index files are cut to their entries until the
	// write that wakes it.
	var off, offSlots, tim, timeSlots int
	if s.dormant.Load() {
		off, tim = s.IndexEntries()
		offSlots = max(s.cfg.MaxIndexBytes/index.OffsetEntrySize, off)
		timeSlots = max(s.cfg.MaxIndexBytes/index.TimeEntrySize, tim)
	} else {
		off, offSlots = s.offIdx.Entries(), s.offIdx.MaxEntries()
		tim, timeSlots = s.timeIdx.Entries(), s.timeIdx.MaxEntries()
	}
	return max(min(offSlots-off, timeSlots-1-tim), 0)
}

// NewIndexEntries is FreeIndexEntries of an empty segment made with c.
func (c Config) NewIndexEntries() int {
	c.ensureDefaults()
	return max(min(c.MaxIndexBytes/index.OffsetEntrySize, c.MaxIndexBytes/index.TimeEntrySize-1), 0)
}

// Grow lets the .log of the active segment reach n bytes (at most
// MaxSegmentBytesLimit, the largest size 32-bit index positions allow)
// although Config.MaxSegmentBytes is smaller: what a partition does when
// it can no longer roll (its log end offset lies past
// index.MaxBaseOffset, the largest base offset a segment may have) and
// its last segment must take the batches that follow. When n passes the
// window, the window becomes MaxSegmentBytesLimit at once and the .log is
// mapped anew at it, so a segment is remapped at most once; bytes readers
// hold stay valid until the segment is released, as across Unseal. A
// segment whose write is deferred (UnsealOnWrite) is woken first. On an
// error nothing changed. Writer side.
func (s *Segment) Grow(n int64) error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case n <= s.window:
		return nil
	case n > MaxSegmentBytesLimit:
		return fmt.Errorf("%w: %s: %d bytes exceed %d", ErrSegmentFull, s.LogPath(), n, int64(MaxSegmentBytesLimit))
	case s.sealed.Load():
		if err := s.wake(); err != nil {
			return err
		}
	}
	// The old mapping is retired (kept until the segment is released), as
	// Unseal retires one.
	if err := s.mapTo(MaxSegmentBytesLimit); err != nil {
		return fmt.Errorf("partlog/segment: grow the mapping of %s to %d bytes: %w", s.LogPath(), int64(MaxSegmentBytesLimit), err)
	}
	s.window = MaxSegmentBytesLimit
	return nil
}

// Flush makes everything appended durable: fdatasync of the .log, then of
// both indexes and of the .txnindex when it was written. Writer side (it must not overlap Append, TruncateTo,
// Recover or Close).
func (s *Segment) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w.syncedAtOpen {
		// Nothing changed since a clean open: no reopen, no sync.
		return nil
	}
	// The data is durable only under the names a start-up reads.
	if err := s.SettleAdoption(); err != nil {
		return err
	}
	if err := s.use(); err != nil {
		return err
	}
	defer s.unpin()
	if err := s.trimIndexesFirst(); err != nil {
		return err
	}
	if err := s.logFile.Sync(); err != nil {
		return err
	}
	if s.w.syncIndexFiles {
		// Rested since the last flush: the index objects may be new
		// ones (reopened), which did not make the changes to sync.
		if err := s.offIdx.SyncFile(); err != nil {
			return err
		}
		if err := s.timeIdx.SyncFile(); err != nil {
			return err
		}
	}
	if err := s.offIdx.Flush(); err != nil {
		return err
	}
	if err := s.timeIdx.Flush(); err != nil {
		return err
	}
	if err := s.flushTxn(); err != nil {
		return err
	}
	s.w.syncIndexFiles = false
	return nil
}

// SyncedSinceOpen reports whether the segment's files are as a clean open
// found them, synced: nothing written, cut or rebuilt since. Flush then
// has nothing to sync and makes no system call; a caller that syncs the
// filesystem itself (vfs.FilesystemSyncer) may skip it for such segments.
// Writer side.
func (s *Segment) SyncedSinceOpen() bool { return s.w.syncedAtOpen }

// Seal makes the segment read-only when the partition rolls past it
// (Kafka's onBecomeInactiveSegment): the largest timestamp so far is
// appended to the time index (even if it is full), a .log longer than
// Size is cut, and the .log's mapping is cut to its length (the pages
// past it are unmapped). Cutting both index files to their entries is
// left pending for TrimSealedIndexes (Close trims them too). Further Appends
// return ErrSealed. Sealing a sealed segment does nothing. Writer side.
func (s *Segment) Seal() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.sealed.Load() {
		s.dormant.Store(false) // its files are sealed already
		return nil
	}
	if err := s.use(); err != nil {
		return err
	}
	defer s.unpinWriter()
	if err := s.appendFinalTimeEntry(); err != nil {
		return err
	}
	if size := s.size.Load(); s.w.fileSize != size {
		if err := s.logFile.Truncate(size); err != nil {
			return err
		}
		s.w.fileSize = size
	}
	if err := s.mapTo(s.size.Load()); err != nil {
		return err
	}
	s.trim.mu.Lock()
	s.trim.pending.Store(true)
	s.trim.mu.Unlock()
	s.sealed.Store(true)
	return nil
}

// trimState is the deferred index trim of a sealed segment. Seal leaves
// both indexes at their preallocated length (cutting a file that frees
// MaxIndexBytes takes milliseconds, which the partition does not spend
// under its lock); TrimSealedIndexes cuts them later, without the
// writer's lock. Every writer-side method that touches a sealed
// segment's index files settles a pending trim first, under mu, after
// pinning the segment (trimIndexesFirst, dropTrim), so the trim never
// overlaps another change of the index files. Closing the indexes (Close,
// the last Unref, a Budget closing the segment at rest) trims them as
// well. A crash before the trim leaves a sealed segment with
// preallocated indexes: the files a crash after an unsynced trim leaves
// too, which Open recognises (an index longer than its entries; see
// docs/crash-safety.md, "Rolls").
type trimState struct {
	mu sync.Mutex
	// pending is set by Seal and cleared once both files are cut (or
	// grown back by Unseal or TruncateTo). Written under mu.
	pending atomic.Bool
}

// TrimPending reports whether Seal's index trim has not run yet.
func (s *Segment) TrimPending() bool { return s.trim.pending.Load() }

// TrimSealedIndexes cuts a sealed segment's index files to their entries
// (as Kafka trims them at a roll), the half of Seal that Seal leaves
// for later. Unlike the other writer-side methods it may run without the
// writer's lock, concurrently with reads and with the writer's methods
// (those that touch the index files wait for it or do it first). It does
// nothing when no trim is pending or the segment is closed or deleted
// (MarkDeleted: its files go at the last Unref, and under a Budget they
// may be gone already, or replaced by those of a later segment deleted
// with the same base offset). The caller holds a reference (Ref) for the
// call.
func (s *Segment) TrimSealedIndexes() error {
	if !s.trim.pending.Load() || s.closed.Load() || s.deleteOnRelease.Load() {
		return nil
	}
	// A trim may replace the index mappings, which SettleAdoption names.
	if err := s.SettleAdoption(); err != nil {
		return err
	}
	if err := s.use(); err != nil {
		return err
	}
	defer s.unpin()
	s.trim.mu.Lock()
	defer s.trim.mu.Unlock()
	return s.trimIndexesLocked()
}

// trimIndexesFirst runs a pending trim before a writer-side method
// changes or syncs the index files. REQUIRES: writer, the segment pinned.
func (s *Segment) trimIndexesFirst() error {
	if !s.trim.pending.Load() {
		return nil
	}
	s.trim.mu.Lock()
	defer s.trim.mu.Unlock()
	return s.trimIndexesLocked()
}

// dropTrim cancels a pending trim for a writer-side method that grows the
// indexes back to MaxIndexBytes (Unseal, TruncateTo of a sealed segment):
// their files still have that length. REQUIRES: writer, the segment
// pinned.
func (s *Segment) dropTrim() {
	if !s.trim.pending.Load() {
		return
	}
	s.trim.mu.Lock()
	s.trim.pending.Store(false)
	s.trim.mu.Unlock()
}

// trimIndexesLocked cuts both index files to their entries when a trim is
// pending. REQUIRES: trim.mu held, the segment pinned.
func (s *Segment) trimIndexesLocked() error {
	if !s.trim.pending.Load() {
		return nil
	}
	if err := s.offIdx.TrimToValidSize(); err != nil {
		return err
	}
	if err := s.timeIdx.TrimToValidSize(); err != nil {
		return err
	}
	if err := s.releaseReserved(); err != nil {
		return err
	}
	s.trim.pending.Store(false)
	return nil
}

// Unseal makes a sealed segment active again: both indexes grow back to
// MaxIndexBytes, the .log is mapped anew at the full window (the sealed
// mapping stays until the segment is released: readers may hold its
// bytes) and Append is accepted. The partition unseals its last
// segment after opening it (UnsealOnWrite under a Budget). Writer side.
func (s *Segment) Unseal() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !s.sealed.Load() {
		return nil
	}
	if err := s.SettleAdoption(); err != nil { // the mappings change
		return err
	}
	if err := s.use(); err != nil {
		return err
	}
	defer s.unpinWriter()
	s.dropTrim()
	s.w.syncedAtOpen = false
	if err := s.resizeIndexes(); err != nil {
		return err
	}
	if err := s.mapTo(s.window); err != nil {
		return err
	}
	s.sealed.Store(false)
	s.dormant.Store(false)
	return nil
}

// UnsealOnWrite makes a sealed segment its partition's active one and
// defers Unseal to the first Append (or AppendBatches) while its files are
// in the sealed form: the .log exactly Size bytes long, both indexes cut
// to their entries, the time index ending with the segment's largest
// timestamp. Until then the segment stays closable at rest under its
// Budget, so that an idle partition's active segment holds no descriptor
// or mapping beyond what the Budget allows, and reopening it is
// transparent (the first append reopens and unseals it). Sealed keeps
// reporting the files' form (true until then), and Seal or Close of the
// segment need no write. Without a Budget, or when the files are not in
// the sealed form, it is Unseal. Writer side.
func (s *Segment) UnsealOnWrite() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !s.sealed.Load() {
		return nil
	}
	if s.lz.budget == nil {
		return s.Unseal()
	}
	if s.w.openedAtRest && s.w.syncedAtOpen {
		// Opened with its files closed, and unchanged since: in the
		// sealed form, which reopening it to look would only confirm.
		s.dormant.Store(true)
		return nil
	}
	if err := s.use(); err != nil {
		return err
	}
	// The time index's last entry from the writer's copy (LastAppended):
	// reading it through the new mapping would fault its page in only to
	// unmap it when the budget rests the segment (about a tenth of an
	// OpenDir after a crash of idle partitions).
	atRest := s.w.fileSize == s.size.Load() && !s.trim.pending.Load() &&
		(s.w.maxTimestamp < 0 || s.timeIdx.LastAppended().Timestamp >= s.w.maxTimestamp)
	s.unpin()
	if !atRest {
		return s.Unseal()
	}
	s.dormant.Store(true)
	return nil
}

// Rest returns an active segment under a Budget to the form UnsealOnWrite
// leaves: it is sealed as a roll seals it (the time index's final entry,
// the .log cut to Size and its mapping to its length), both indexes are
// cut to their entries, and the segment stays its partition's active one,
// closable at rest until the next Append (or AppendBatches) reopens and
// unseals it. The partition rests the active segment it has not written
// lately, so that its descriptors and mappings return under the Budget.
// Nothing is synced: what was written and not yet flushed is flushed by
// the next Flush, which reopens the files and fdatasyncs all three (the
// index files whole, their lengths included, once after a rest). Without a
// Budget, or on a sealed segment, it does nothing. On an error the
// segment may be left sealed and refusing appends (a failed index trim);
// the partition then fails, as on any failed write of its files.
// Writer side.
func (s *Segment) Rest() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.lz.budget == nil || s.sealed.Load() {
		return nil
	}
	if err := s.use(); err != nil {
		return err
	}
	// Closable only once dormant: the budget may close it at the unpin.
	defer s.unpinWriter()
	if err := s.Seal(); err != nil {
		return err
	}
	if err := s.trimIndexesFirst(); err != nil {
		return err
	}
	// The mappings the last wake replaced (Unseal) are kept for the
	// readers that loaded them. Every reader of the mappings pins the
	// segment while it reads them or holds their bytes (a method's call, a
	// read lease): when this call's pin is the only one, none does, and a
	// reader that pins from now on loads the current ones. Without this a
	// segment the budget never closed grew by three mappings at every
	// rest and wake.
	if s.lz.pins.Load() == 1 {
		if err := s.dropOldMappings(); err != nil {
			return err
		}
	}
	s.w.syncIndexFiles = true
	s.dormant.Store(true)
	return nil
}

// dropOldMappings unmaps the mappings of the .log and of both indexes that
// Unseal replaced. REQUIRES: writer; no reader holds bytes of them (see
// Rest).
func (s *Segment) dropOldMappings() error {
	var first error
	for _, r := range s.retired {
		if err := r.Unmap(); err != nil && first == nil {
			first = err
		}
	}
	clear(s.retired)
	s.retired = s.retired[:0]
	for _, err := range []error{s.offIdx.DropOldMappings(), s.timeIdx.DropOldMappings()} {
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// wake unseals a segment UnsealOnWrite left sealed, for a write; on a
// sealed segment it returns ErrSealed. Writer side.
func (s *Segment) wake() error {
	if !s.dormant.Load() {
		return fmt.Errorf("%w: %s", ErrSealed, s.LogPath())
	}
	return s.Unseal()
}

// GrowIndexes doubles the room of both indexes of an unsealed segment,
// past Config.MaxIndexBytes (up to index.MaxFileBytes): what a compaction
// does when the run it writes into one new segment needs more index
// entries than MaxIndexBytes holds, since a rebuilt batch can be larger
// than the one it replaces and so makes an entry fall due sooner. Writer
// side.
func (s *Segment) GrowIndexes() error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.sealed.Load():
		return fmt.Errorf("%w: %s", ErrSealed, s.LogPath())
	}
	doubled := func(entries, entrySize int) int {
		return int(min(2*int64(max(entries, 1))*int64(entrySize), index.MaxFileBytes))
	}
	if err := s.offIdx.Resize(doubled(s.offIdx.MaxEntries(), index.OffsetEntrySize)); err != nil {
		return err
	}
	return s.timeIdx.Resize(doubled(s.timeIdx.MaxEntries(), index.TimeEntrySize))
}

// resizeIndexes grows both indexes to MaxIndexBytes (never below their
// entries).
func (s *Segment) resizeIndexes() error {
	if err := s.offIdx.Resize(max(s.cfg.MaxIndexBytes, s.offIdx.Entries()*index.OffsetEntrySize)); err != nil {
		return err
	}
	return s.timeIdx.Resize(max(s.cfg.MaxIndexBytes, s.timeIdx.Entries()*index.TimeEntrySize))
}
