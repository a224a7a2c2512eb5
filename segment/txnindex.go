package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
)

// The transaction index: Kafka's NNN.txnindex, one file per segment,
// listing the transactions whose ABORT marker lies in the segment, in the
// order their markers were written. Kafka creates it lazily (on the first
// entry) and so does a Segment: a segment without aborted transactions has
// no .txnindex file. Layout, big-endian, entries only (no header), each of
// TxnIndexEntrySize bytes, version 0:
//
//	version int16 (0) | producerId int64 | firstOffset int64 |
//	lastOffset int64 | lastStableOffset int64
//
// firstOffset is the transaction's first offset, lastOffset the offset of
// its ABORT marker, lastStableOffset the partition's last stable offset
// once the marker was written (the first offset of the oldest other open
// transaction, else lastOffset + 1). Kafka's TransactionIndex and
// AbortedTxn.

// TxnIndexEntrySize is the size of a .txnindex entry. Frozen: Kafka's.
const TxnIndexEntrySize = 34

// txnIndexVersion is the only entry version Kafka writes. Frozen.
const txnIndexVersion = 0

// AbortedTxn is one entry of a transaction index: an aborted transaction.
type AbortedTxn struct {
	// ProducerID is the transactional producer's id.
	ProducerID int64
	// FirstOffset is the offset of the transaction's first batch.
	FirstOffset int64
	// LastOffset is the offset of the ABORT marker that ended it.
	LastOffset int64
	// LastStableOffset is the partition's last stable offset right after
	// the marker was written.
	LastStableOffset int64
}

// AppendTxnIndexEntry appends a's 34-byte version-0 encoding to dst.
func AppendTxnIndexEntry(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// DecodeTxnIndex decodes the bytes of a .txnindex file. file names it in
// errors. A length that is not a multiple of TxnIndexEntrySize, or an
// entry whose version is not 0, gives a *batch.CorruptionError (wrapping
// batch.ErrCorrupt) with the byte position; the entries before it are
// returned with it.
func DecodeTxnIndex(file string, data []byte) ([]AbortedTxn, error) {
	n := len(data) / TxnIndexEntrySize
	out := make([]AbortedTxn, 0, n)
	for i := range n {
		b := data[i*TxnIndexEntrySize:]
		if v := int16(binary.BigEndian.Uint16(b)); v != txnIndexVersion {
			return out, base.CorruptionErrorf(file, int64(i*TxnIndexEntrySize), fmt.Sprintf("txnindex entry %d version", i),
				"version %d, want %d", v, txnIndexVersion)
		}
		out = append(out, AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		})
	}
	if r := len(data) % TxnIndexEntrySize; r != 0 {
		return out, base.TornTailErrorf(file, int64(n*TxnIndexEntrySize), "txnindex length",
			"%d bytes after the last whole %d-byte entry", r, TxnIndexEntrySize)
	}
	return out, nil
}

// ErrTxnIndexOrder is returned by AppendAbortedTxn for an entry whose
// marker offset does not follow the last entry's, or lies outside the
// segment: nothing is written.
var ErrTxnIndexOrder = errors.New("partlog/segment: aborted transaction out of order")

// txnIndex is a segment's transaction index: the entries in memory, for
// lock-free readers, and the file. The file fields belong to the writer.
type txnIndex struct {
	// entries is the published list. The writer publishes a new slice
	// header on every change; an append writes the element past every
	// published length into spare capacity (no reader looks there) and a
	// truncation caps the capacity at the new length, so that the next
	// append copies rather than overwrite what an older, longer slice
	// still shows. nil: none.
	entries atomic.Pointer[[]AbortedTxn]
	// f is the open file, nil while the segment has none.
	f vfs.File
	// fileSize is the file's length as the writer knows it (-1 unknown):
	// more than the entries' bytes when a torn entry or trimmed entries
	// are still in it (the next write or truncation cuts them).
	fileSize int64
	// dirty is set when the file was written since its last Sync.
	dirty bool
	// damage is the corruption Open found after the entries it loaded
	// (an entry of an unknown version: a torn, unsynced write looks the
	// same as damage to a synced one), nil when none. A truncation or
	// an append that rewrites the file past the loaded entries clears
	// it; see TxnIndexDamage.
	damage error
	// soundAfterDamage is the smallest marker offset of an entry after
	// the damaged one that reads as a sound entry in its place (version
	// 0, in order after the loaded entries, inside the segment), -1 when
	// none does: the damaged entry lies below it, so a truncation above
	// it does not rewrite the damaged entry (truncateTxn).
	soundAfterDamage int64
}

// list returns the published entries.
func (t *txnIndex) list() []AbortedTxn {
	if p := t.entries.Load(); p != nil {
		return *p
	}
	return nil
}

// publish makes l the entries.
func (t *txnIndex) publish(l []AbortedTxn) {
	if len(l) == 0 {
		t.entries.Store(nil)
		return
	}
	t.entries.Store(&l)
}

// txnPath is the .txnindex path for the segment's current suffix.
func (s *Segment) txnPath() string { return s.path(TxnIndexSuffix, s.w.suffix) }

// openTxnIndex loads the .txnindex when there is one. Entries at or past
// the segment's next offset, or after one that breaks the order (what a
// crash can leave behind the last synced entry), are left out and cut at
// the next write; an entry of another version is corruption.
func (s *Segment) openTxnIndex() error {
	path := s.txnPath()
	if _, err := s.fs.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil // OpenReadWrite would create it
	} else if err != nil {
		return err
	}
	f, err := s.fs.OpenReadWrite(path)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		_ = f.Close()
		return err
	}
	s.txn.f = f
	s.loadTxnEntries(path, data)
	return nil
}

// loadTxnEntries publishes the entries of data, the bytes of the
// .txnindex at path, up to the first that is not valid; damage after
// them is kept for the owner (TxnIndexDamage).
func (s *Segment) loadTxnEntries(path string, data []byte) {
	entries, err := DecodeTxnIndex(path, data)
	switch {
	case err == nil:
	case base.IsTornTail(err):
		s.log.Warn("partlog/segment: torn transaction index entry ignored", "file", path, "err", err)
	default:
		// Kept for the owner to judge: an entry the producer replay
		// rewrites was never synced and goes; one below it is damage.
		s.txn.damage = err
	}
	s.txn.fileSize = int64(len(data))
	valid := s.validTxnPrefix(entries)
	s.txn.publish(valid)
	s.txn.soundAfterDamage = -1
	if s.txn.damage != nil && len(valid) == len(entries) {
		s.txn.soundAfterDamage = s.soundTxnEntryAfter(path, data, valid)
	}
}

// soundTxnEntryAfter returns the smallest marker offset of the entries of
// data after the damaged one that follows valid (the loaded entries) that
// read as sound: version 0, not zeroed, first offset at or below the
// marker, the marker after the loaded ones and inside the segment, the
// last stable offset at most the marker + 1. -1 when none does.
func (s *Segment) soundTxnEntryAfter(path string, data []byte, valid []AbortedTxn) int64 {
	prev := s.base - 1
	if len(valid) > 0 {
		prev = valid[len(valid)-1].LastOffset
	}
	out := int64(-1)
	for at := (len(valid) + 1) * TxnIndexEntrySize; at+TxnIndexEntrySize <= len(data); at += TxnIndexEntrySize {
		e, err := DecodeTxnIndex(path, data[at:at+TxnIndexEntrySize])
		if err != nil || len(e) != 1 {
			continue
		}
		a := e[0]
		if zeroedTxnEntry(a) || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastOffset <= prev ||
			a.LastOffset >= s.NextOffset() || a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 {
			continue
		}
		if out < 0 || a.LastOffset < out {
			out = a.LastOffset
		}
	}
	return out
}

// validTxnPrefix returns the entries up to the first one that is not
// inside the segment's offsets below NextOffset, in increasing marker
// order, with its first offset at or below its marker, and not zeroed
// (zeroedTxnEntry).
func (s *Segment) validTxnPrefix(entries []AbortedTxn) []AbortedTxn {
	next, prev := s.NextOffset(), s.base-1
	for i, a := range entries {
		if a.LastOffset <= prev || a.LastOffset >= next || a.FirstOffset > a.LastOffset || zeroedTxnEntry(a) {
			if a.LastOffset < next {
				s.log.Warn("partlog/segment: transaction index entry out of order; it and the ones after it are ignored",
					"file", s.txnPath(), "entry", i, "lastOffset", a.LastOffset)
			}
			return entries[:i]
		}
		prev = a.LastOffset
	}
	return entries
}

// zeroedTxnEntry reports whether a, whose first offset is at or below its
// marker offset, is what a torn write leaves when the bytes after some
// prefix of an unsynced entry stayed zero and took the marker offset with
// them: a marker offset and a last stable offset of 0. No writer makes
// that entry. An entry whose first offset equals its marker offset is
// otherwise valid: Kafka before 2.8 (KAFKA-10702) wrote one for an ABORT
// marker of a producer with no data in the partition, taking the marker's
// offset as the transaction's first, and for a marker at offset 0 its
// last stable offset is 1, as no other transaction can be open below it.
func zeroedTxnEntry(a AbortedTxn) bool { return a.LastOffset == 0 && a.LastStableOffset == 0 }

// TxnIndexDamage returns the corruption Open found in the .txnindex after
// the entries it loaded (wrapping batch.ErrCorrupt, naming the file and the
// position), or nil. Open keeps the entries before it and leaves the
// decision to the owner: damage in a part of the index that a crash
// recovery rewrites (TruncateAbortedTxns at or below the damaged entry,
// which clears it) is an unsynced write; damage that survives that is
// corruption. Writer side.
func (s *Segment) TxnIndexDamage() error { return s.txn.damage }

// LoadDamage returns the corruption an unclean Open (Open, not OpenClean)
// met in the .log below the end its last offset index entries gave, or
// nil. Open then ends the segment's batches at that damage and rebuilds
// its indexes to there, leaving the decision to the owner: above a
// recovery point it is a write a crash lost (Recover cuts the log there);
// below one, where every batch was synced, it is corruption that no cut
// may hide. Writer side.
func (s *Segment) LoadDamage() error { return s.loadDamage }

// AbortedTxns returns the entries of the transaction index, oldest first.
// The slice is shared: it must not be modified. Safe for concurrent use.
func (s *Segment) AbortedTxns() []AbortedTxn { return s.txn.list() }

// CollectAbortedTxns appends to dst the aborted transactions of this
// segment that overlap the offsets [from, upper) (LastOffset >= from and
// FirstOffset < upper) and reports complete when an entry's
// LastStableOffset is at or past upper: no later segment can hold one that
// overlaps (Kafka's TransactionIndex.collectAbortedTxns). It takes no lock
// and allocates only when it appends.
func (s *Segment) CollectAbortedTxns(dst []AbortedTxn, from, upper int64) (_ []AbortedTxn, complete bool) {
	for _, a := range s.txn.list() {
		if a.LastOffset >= from && a.FirstOffset < upper {
			dst = append(dst, a)
		}
		if a.LastStableOffset >= upper {
			return dst, true
		}
	}
	return dst, false
}

// AppendAbortedTxn adds an aborted transaction whose ABORT marker lies in
// this segment to its transaction index, creating the .txnindex file on the
// first entry (the caller then syncs the directory with its next flush).
// The marker offset must follow the last entry's and lie below
// NextOffset, else the error wraps ErrTxnIndexOrder and nothing changes.
// The entry is published to readers once written; Flush makes it durable.
// Writer side.
func (s *Segment) AppendAbortedTxn(a AbortedTxn) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.w.syncedAtOpen = false
	// The pin keeps a segment budget from closing the .txnindex (with the
	// segment's other files) under this write.
	if err := s.use(); err != nil {
		return err
	}
	defer s.unpin()
	l := s.txn.list()
	if a.LastOffset < s.base || a.LastOffset >= s.NextOffset() || a.FirstOffset > a.LastOffset ||
		(len(l) > 0 && a.LastOffset <= l[len(l)-1].LastOffset) {
		return fmt.Errorf("%w: %+v in segment %s (next offset %d, %d entries)", ErrTxnIndexOrder, a, s.LogPath(), s.NextOffset(), len(l))
	}
	if err := s.txnFile(true); err != nil {
		return err
	}
	at := int64(len(l)) * TxnIndexEntrySize
	if s.txn.fileSize != at {
		if err := s.txn.f.Truncate(at); err != nil {
			s.txn.fileSize = -1
			return err
		}
		s.txn.fileSize = at
		s.txn.damage = nil // the damaged bytes lay past the loaded entries
	}
	var buf [TxnIndexEntrySize]byte
	s.txn.dirty = true
	if _, err := s.txn.f.WriteAt(AppendTxnIndexEntry(buf[:0], a), at); err != nil {
		s.txn.fileSize = -1
		return err
	}
	s.txn.fileSize = at + TxnIndexEntrySize
	s.txn.publish(append(l, a)) // see txnIndex.entries
	return nil
}

// TruncateAbortedTxns removes the entries whose marker offset is at or
// past offset (Kafka's TransactionIndex.truncateTo), from memory and from
// the file. Writer side.
func (s *Segment) TruncateAbortedTxns(offset int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.w.syncedAtOpen = false
	if err := s.use(); err != nil { // see AppendAbortedTxn
		return err
	}
	defer s.unpin()
	return s.truncateTxn(offset)
}

// truncateTxn implements TruncateAbortedTxns.
func (s *Segment) truncateTxn(offset int64) error {
	l := s.txn.list()
	n := len(l)
	for n > 0 && l[n-1].LastOffset >= offset {
		n--
	}
	if n == len(l) && s.txn.damage != nil && s.txn.soundAfterDamage >= 0 && s.txn.soundAfterDamage < offset {
		// A sound entry after the damaged one lies below offset: so
		// does the damaged entry, which was synced and is not rewritten.
		// Kept, with the damage, for the owner (TxnIndexDamage).
		return nil
	}
	if n != len(l) {
		s.txn.publish(l[:n:n])
	}
	if err := s.txnFile(false); err != nil {
		return err
	}
	if s.txn.f == nil || s.txn.fileSize == int64(n)*TxnIndexEntrySize {
		return nil
	}
	s.txn.dirty = true
	if err := s.txn.f.Truncate(int64(n) * TxnIndexEntrySize); err != nil {
		s.txn.fileSize = -1
		return err
	}
	s.txn.fileSize = int64(n) * TxnIndexEntrySize
	s.txn.damage = nil // the damaged bytes lay past the loaded entries
	return nil
}

// FlushTxnIndex makes the transaction index durable (fsync of the
// .txnindex, when it was written since the last flush; Flush does it too).
// Writer side.
func (s *Segment) FlushTxnIndex() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.use(); err != nil { // see AppendAbortedTxn
		return err
	}
	defer s.unpin()
	return s.flushTxn()
}

// flushTxn fsyncs the .txnindex when it was written since the last flush.
func (s *Segment) flushTxn() error {
	if !s.txn.dirty {
		return nil
	}
	if err := s.txnFile(false); err != nil || s.txn.f == nil {
		return err
	}
	if err := s.txn.f.Sync(); err != nil {
		return err
	}
	s.txn.dirty = false
	return nil
}

// txnFile makes s.txn.f the open .txnindex: the file of an earlier open
// when a segment budget closed it while the segment was unused (its
// entries stay in memory), or, with create, a new one when the segment
// has none. Without create and without a file, s.txn.f stays nil.
func (s *Segment) txnFile(create bool) error {
	if s.txn.f != nil {
		return nil
	}
	// The .txnindex is found by its name, which a pending adoption
	// removes (a stale file of the base's name): settle it first.
	if err := s.SettleAdoption(); err != nil {
		return err
	}
	path := s.txnPath()
	st, err := s.fs.Stat(path)
	switch {
	case err == nil:
		f, err := s.fs.OpenReadWrite(path)
		if err != nil {
			return err
		}
		s.txn.f, s.txn.fileSize = f, st.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case create:
		f, err := s.fs.Create(path)
		if err != nil {
			return err
		}
		s.txn.f, s.txn.fileSize = f, 0
	}
	return nil
}

// closeTxn closes the .txnindex file, if open, syncing it first when it
// was written since its last flush (a segment budget may close a segment
// before the flush that would have synced it; the next open finds the
// file by its name).
func (s *Segment) closeTxn() error {
	if s.txn.f == nil {
		return nil
	}
	var err error
	if s.txn.dirty {
		if err = s.txn.f.Sync(); err == nil {
			s.txn.dirty = false
		}
	}
	err = errors.Join(err, s.txn.f.Close())
	s.txn.f = nil
	return err
}
