package log

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// Producer state snapshots: Kafka's <offset>.snapshot files in the
// partition's directory (package internal/producer encodes, decodes, names
// and reads them). The part (producerSnapshots, Partition.snaps) owns the
// files, the snapshots rolls took and have not written yet, the marks of
// the snapshot last loaded and of the one known durable at the log end
// (so that an idle partition's Close writes nothing), and the replay of
// the log through the producer state after the newest snapshot. The core
// decides when: a snapshot is taken at each roll and written once the
// segments below it are durable (the roll's background flush or a full
// flush, flush.go), written at Close and after a recovery, removed below
// the log start and past a truncation's new end; Open and TruncateTo load
// the newest that decodes and replay the log after it. DESIGN.md, "Parts of
// a Partition: producer snapshots", has the contract.

// rollSnapshot is a producer state snapshot a roll took, waiting to be
// written once the segments below offset are durable. It is written only
// while the truncation count and the snapshot removal count are still
// those of the roll, and while offset is not below the log start a
// removal of the snapshots below it was made for (floor).
type rollSnapshot struct {
	offset      int64
	data        []byte
	truncations uint64
	removals    uint64
}

// producerSnapshots is the producer snapshot part of a Partition. Its
// methods never take the partition's flushMu or mu: the core holds what each
// method's REQUIRES line names. Fields are grouped by the lock that guards
// them.
type producerSnapshots struct {
	// dirs, truncations, fs, dir and logger are set by init and never
	// change. dirs syncs the partition directory (the durability part,
	// which settles a roll's adoptions first).
	dirs dirSyncer
	// truncations is the core's truncation count (Partition.truncations,
	// read lock-free; a truncation counts itself before it cuts): a roll
	// snapshot is written only while the count is the one it was taken
	// at.
	truncations *atomic.Uint64
	fs          vfs.FS
	dir         string
	logger      *slog.Logger
	// ckptMu is the core's checkpoint lock (Partition.rolled.ckptMu): a
	// removal and a roll snapshot's write hold it, so that a snapshot the
	// roll's background flush writes never lands after a removal it should
	// have been part of. Lock order: flushMu, mu, then ckptMu.
	ckptMu *sync.Mutex
	// removals counts remove calls and producer state replacements
	// (discardPendingLocked); written under *ckptMu. A roll snapshot
	// taken before either is never written.
	removals atomic.Uint64
	// floor is the highest log start dropBelowLocked removed the
	// snapshots below; written under *ckptMu. A roll snapshot below it is
	// never written (its file would outlive the removal), one at or
	// above it still is: the log start moving changes no producer state.
	floor atomic.Int64

	// pending are the snapshots rolls took, not yet written. Guarded by
	// the core's mu.
	pending []rollSnapshot
	// taken are the snapshots a roll's background flush took
	// (takePendingLocked) and has not written yet (writeRolled): a
	// truncation carries them as it carries pending ones
	// (validPendingLocked), since the flush drops them once the
	// truncation count changed. Guarded by *ckptMu.
	taken []rollSnapshot
	// loaded is the offset of the snapshot the last load of the producer
	// state read (restoreLocked), -1 for none; kept marks the snapshot at
	// the log end known to be durable and the state it holds for (see
	// closeLocked). Guarded by the core's mu.
	loaded int64
	kept   keptSnapshot

	// listed holds the snapshot offsets of a clean open's one listing of
	// the directory (checkDir's, useListing) while listedOK: remove and
	// newest use it instead of listing the directory again, remove keeps
	// it current, and newest ends it (so do write and dropListing).
	// Open's goroutine only, before the partition is published.
	listed   []int64
	listedOK bool
}

// useListing takes the directory's listing names (a clean open's,
// read by checkDir) as the snapshot files until newest has run.
func (s *producerSnapshots) useListing(names []string) {
	s.listed, s.listedOK = producer.SnapshotOffsets(names), true
}

// dropListing ends the use of the open's listing.
func (s *producerSnapshots) dropListing() { s.listed, s.listedOK = nil, false }

// list returns the offsets of the snapshot files, ascending: the open's
// listing while it is in use, else the directory's.
func (s *producerSnapshots) list() ([]int64, error) {
	if s.listedOK {
		return slices.Clone(s.listed), nil
	}
	return producer.ListSnapshots(s.fs, s.dir)
}

// init sets the part up for the partition in dir: dirs syncs its
// directory, truncations is its truncation count, ckptMu its checkpoint
// lock.
func (s *producerSnapshots) init(dirs dirSyncer, truncations *atomic.Uint64, fs vfs.FS, dir string, logger *slog.Logger, ckptMu *sync.Mutex) {
	s.dirs, s.truncations = dirs, truncations
	s.fs, s.dir, s.logger, s.ckptMu = fs, dir, logger, ckptMu
	s.loaded = -1
}

// write writes data as the snapshot file at offset, fsyncing it when sync
// is set. The caller marks the directory dirty.
func (s *producerSnapshots) write(offset int64, data []byte, sync bool) error {
	s.dropListing()
	if err := producer.WriteSnapshotFile(s.fs, s.dir, offset, data, sync); err != nil {
		return fmt.Errorf("partlog/log: write producer snapshot %s: %w", producer.SnapshotPath(s.dir, offset), err)
	}
	return nil
}

// writeOwn is write for a caller that holds the core's mu and not
// ckptMu (durableLocked, writeUnsyncedLocked): it takes ckptMu, as a roll
// snapshot's background write does, so that the two never write the
// listing fields or the same file at once (a DeleteRecordsBefore's
// durable snapshot racing the roll's flush, TestProducerSnapshotLifecycle
// under the race detector). REQUIRES: ckptMu not held.
func (s *producerSnapshots) writeOwn(offset int64, data []byte, sync bool) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.write(offset, data, sync)
}

// remove removes the snapshot files whose offset satisfies drop, and
// returns the offsets of those it kept, ascending, and whether it removed
// any. The caller syncs the directory. It holds
// ckptMu and counts the removal (removals), so that a roll's snapshot the
// background flush writes never lands after a removal it should have been
// part of.
func (s *producerSnapshots) remove(drop func(int64) bool) (kept []int64, removed bool, err error) {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.removals.Add(1)
	// Every roll snapshot taken so far is void now; one taken later lies
	// at or above the log start then (a restart may have lowered it).
	s.floor.Store(0)
	return s.removeFiles(drop)
}

// removeFiles is remove's work without the count. REQUIRES: ckptMu held.
func (s *producerSnapshots) removeFiles(drop func(int64) bool) (kept []int64, removed bool, err error) {
	offs, err := s.list()
	if err != nil {
		return nil, false, err
	}
	for i, off := range offs {
		if !drop(off) {
			continue
		}
		if err := producer.RemoveSnapshotFile(s.fs, s.dir, off); err != nil {
			s.dropListing()
			return nil, removed, err
		}
		removed = true
		offs[i] = -1
	}
	kept = slices.DeleteFunc(offs, func(off int64) bool { return off < 0 })
	if s.listedOK && removed {
		s.listed = slices.Clone(kept)
	}
	return kept, removed, nil
}

// dropBelowLocked removes the snapshots below the log start offset start
// (retention and DeleteRecordsBefore dropped their segments). It raises
// floor instead of counting a removal: the roll snapshots at or above
// start, taken and not yet written, describe the producers as they still
// are, and are written as usual. Failures are logged. REQUIRES: mu held;
// the caller syncs the directory.
func (s *producerSnapshots) dropBelowLocked(start int64) {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	if start > s.floor.Load() {
		s.floor.Store(start)
	}
	if _, _, err := s.removeFiles(func(off int64) bool { return off < start }); err != nil {
		s.logger.Warn("partlog/log: removing producer snapshots failed", "dir", s.dir, "below", start, "err", err)
	}
}

// discardPendingLocked drops the roll snapshots not yet written, for a
// writer that replaces the producer state they were taken from
// (RestoreProducers): it counts as a removal (removals, under ckptMu), so
// a background flush that took them already writes none of them after
// this, and one writing under ckptMu now finishes first. REQUIRES: mu
// held, ckptMu not held.
func (s *producerSnapshots) discardPendingLocked() {
	s.ckptMu.Lock()
	s.removals.Add(1)
	s.ckptMu.Unlock()
	s.pending = nil
}

// takeOnRollLocked takes the producer state at a new segment's base,
// newBase, as snapshot bytes, in memory: the roll's background flush
// writes the file once the segments below newBase are durable (a snapshot
// at X must never be on disk before the batches and .txnindex entries
// below X, see docs/crash-safety.md), and a full flush (Sync, a periodic
// flush, Close) writes what is still pending. Expired producers are
// removed first. REQUIRES: mu held.
func (s *producerSnapshots) takeOnRollLocked(state *producer.State, newBase int64) {
	state.Expire()
	s.pending = append(s.pending, rollSnapshot{
		offset: newBase, data: state.AppendSnapshot(nil),
		truncations: s.truncations.Load(), removals: s.removals.Load()})
}

// validPendingLocked returns the roll snapshots not yet written that may
// still be written now (taken since the last truncation and the last
// counted removal, at or above floor), for a truncation to carry across
// its counts (writeCarriedLocked). REQUIRES: mu held.
func (s *producerSnapshots) validPendingLocked() []rollSnapshot {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var out []rollSnapshot
	for _, r := range slices.Concat(s.taken, s.pending) {
		if r.truncations == s.truncations.Load() && r.removals == s.removals.Load() && r.offset >= s.floor.Load() {
			out = append(out, r)
		}
	}
	return out
}

// writeCarriedLocked writes carried (validPendingLocked's answer before a
// truncation), fsynced, once the truncation left the log ending at end and
// made it durable: those at or below end describe batches the log still
// holds, and the reload that follows loads the newest of them; those past
// it go. The pending snapshots left are void (taken before the
// truncation's counts changed), and go too. It reports whether it wrote
// any (the caller marks the directory dirty); a failed write is logged, as
// a roll snapshot's is. REQUIRES: mu held; the log below end durable; no
// roll since validPendingLocked.
func (s *producerSnapshots) writeCarriedLocked(carried []rollSnapshot, end int64) bool {
	s.pending = s.pending[:0]
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.writeEach(carried, func(r rollSnapshot) bool { return r.offset <= end })
}

// takePendingLocked takes the roll snapshots not yet written, keeping
// those of rolls since the last truncation (truncations is the count now).
// REQUIRES: flushMu and mu held.
func (s *producerSnapshots) takePendingLocked(truncations uint64) []rollSnapshot {
	var out []rollSnapshot
	for _, r := range s.pending {
		if r.truncations == truncations {
			out = append(out, r)
		}
	}
	s.pending = nil
	s.ckptMu.Lock()
	s.taken = out
	s.ckptMu.Unlock()
	return out
}

// writeRolled writes the roll snapshots snaps, fsynced, under ckptMu,
// while the truncation count is still truncations (the count they were
// taken at, takePendingLocked) and no snapshot was removed since each was
// taken; it reports whether it wrote any. Failures are logged: a snapshot
// only shortens a replay. REQUIRES: flushMu held, mu not held; the
// segments below each offset are durable.
func (s *producerSnapshots) writeRolled(snaps []rollSnapshot, truncations uint64) bool {
	if len(snaps) == 0 {
		return false
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.taken = nil
	if s.truncations.Load() != truncations {
		return false // a truncation carried those it kept
	}
	return s.writeValid(snaps)
}

// dropTaken forgets the snapshots a roll's background flush took, which it
// does not write (its sync failed).
func (s *producerSnapshots) dropTaken() {
	s.ckptMu.Lock()
	s.taken = nil
	s.ckptMu.Unlock()
}

// writePendingLocked writes the pending roll snapshots, fsynced, and
// reports whether it wrote any (the caller syncs the directory): a full
// flush's part of the rolls' work, after every segment was flushed.
// REQUIRES: flushMu and mu held.
func (s *producerSnapshots) writePendingLocked() bool {
	snaps := s.pending
	s.pending = nil
	return s.writeValid(snaps)
}

// writeValid writes each of snaps taken since the last truncation and the
// last removal, fsynced, and reports whether it wrote any. A write failure
// is logged: a snapshot only shortens a replay.
func (s *producerSnapshots) writeValid(snaps []rollSnapshot) bool {
	return s.writeEach(snaps, func(r rollSnapshot) bool {
		return r.truncations == s.truncations.Load() && r.removals == s.removals.Load() && r.offset >= s.floor.Load()
	})
}

// writeEach writes each of snaps that keep reports true for, fsynced, and
// reports whether it wrote any. A write failure is logged: a snapshot only
// shortens a replay.
func (s *producerSnapshots) writeEach(snaps []rollSnapshot, keep func(rollSnapshot) bool) bool {
	wrote := false
	for _, r := range snaps {
		if !keep(r) {
			continue
		}
		if err := s.write(r.offset, r.data, true); err != nil {
			s.logger.Warn("partlog/log: producer snapshot not written", "dir", s.dir, "offset", r.offset, "err", err)
			continue
		}
		wrote = true
	}
	return wrote
}

// atLocked returns the snapshot at offset: a roll snapshot not yet
// written, from memory, else the file's bytes once they decode. An offset
// with no snapshot gives an error wrapping fs.ErrNotExist, a file that
// does not decode one wrapping ErrCorrupt. REQUIRES: flushMu and mu held
// (a roll's background flush is not between taking a snapshot and writing
// it, and no writer rewrites the file).
func (s *producerSnapshots) atLocked(offset int64) ([]byte, error) {
	for _, r := range s.pending {
		if r.offset == offset && r.truncations == s.truncations.Load() && r.removals == s.removals.Load() && r.offset >= s.floor.Load() {
			return bytes.Clone(r.data), nil
		}
	}
	data, err := producer.ReadSnapshotFile(s.fs, s.dir, offset)
	if err != nil {
		return nil, fmt.Errorf("partlog/log: producer snapshot at offset %d: %w", offset, err)
	}
	if _, err := producer.DecodeSnapshot(data); err != nil {
		return nil, fmt.Errorf("partlog/log: producer snapshot %s: %w", producer.SnapshotPath(s.dir, offset), err)
	}
	return data, nil
}

// newest removes (durably) every snapshot past end, which describes
// batches the log no longer holds, and returns the newest snapshot at or
// below end that decodes (skipping, with a warning, any that does not):
// its offset and entries, or -1 and none. REQUIRES: mu held (or Open,
// before the partition is published).
func (s *producerSnapshots) newest(end int64) (from int64, entries []producer.Entry, err error) {
	defer s.dropListing()
	// The listing remove took, less what it removed: the snapshots at or
	// below end.
	offs, removed, err := s.remove(func(off int64) bool { return off > end })
	if err != nil {
		return -1, nil, fmt.Errorf("remove producer snapshots past %d: %w", end, err)
	}
	if removed {
		if err := s.dirs.syncDir(); err != nil {
			return -1, nil, err
		}
	}
	for i := len(offs) - 1; i >= 0; i-- {
		path := producer.SnapshotPath(s.dir, offs[i])
		data, err := producer.ReadSnapshotFile(s.fs, s.dir, offs[i])
		if err != nil {
			return -1, nil, fmt.Errorf("read producer snapshot %s: %w", path, err) // I/O: reported
		}
		if entries, err = producer.DecodeSnapshot(data); err != nil {
			s.logger.Warn("partlog/log: skipping a producer snapshot", "dir", s.dir, "file", path, "err", err)
			continue
		}
		return offs[i], entries, nil
	}
	return -1, nil, nil
}

// replay feeds the producer batches of list in [from, end) to state,
// reading only batch headers (and a control batch's first record). from <
// 0 replays everything. It rebuilds the transaction indexes as it goes:
// each segment it walks loses its entries for markers at or past from (a
// crash may have kept some and lost others), and every ABORT marker that
// ends a transaction adds its entry again, with the last stable offset the
// replayed state gives (Kafka rebuilds them the same way when it recovers a
// segment). Entries below from were made durable by the flush that
// preceded the snapshot at from. dirty reports that it added an entry (the
// caller marks the directory dirty). REQUIRES: mu held (or Open).
func (s *producerSnapshots) replay(state *producer.State, list []*segment.Segment, from, end int64) (dirty bool, err error) {
	for i, seg := range list {
		if i+1 < len(list) && list[i+1].BaseOffset() <= from {
			continue // every batch of seg lies below from
		}
		if err := seg.TruncateAbortedTxns(max(from, 0)); err != nil {
			return dirty, fmt.Errorf("replay producers: segment %d: transaction index: %w", seg.BaseOffset(), err)
		}
		if derr := seg.TxnIndexDamage(); derr != nil {
			// The cut kept it: a sound entry after the damaged one lies
			// below from, so the damaged entry was synced and is not
			// rewritten. Refused before anything is written over it.
			return dirty, fmt.Errorf("%w: replay producers: transaction index of segment %d: %w", ErrRecoveryRefused, seg.BaseOffset(), derr)
		}
		// The entries left lie below from: only they need the control
		// batches below from (dropUnmarkedTxns).
		done, checked := false, len(seg.AbortedTxns()) == 0
		var markers []markerAt // the control batches below from
		err := walkHeaders(seg, func(pos int64, h []byte, legacy bool) (bool, error) {
			if legacy {
				return true, nil // no producer ids before magic 2
			}
			bt := batch.Batch(h)
			if bt.BaseOffset() < from {
				if !checked && bt.ProducerID() >= 0 && bt.Attributes().IsControl() {
					markers = append(markers, markerAt{bt.BaseOffset(), bt.ProducerID()})
				}
				return true, nil
			}
			if !checked {
				checked = true
				if err := s.dropUnmarkedTxns(seg, markers, from, &dirty); err != nil {
					return false, err
				}
			}
			if bt.BaseOffset() >= end {
				done = true
				return false, nil
			}
			if bt.ProducerID() < 0 {
				return true, nil
			}
			if bt.Attributes().IsControl() {
				whole, err := seg.Bytes(pos, pos+int64(bt.Size()), nil)
				if err != nil {
					return false, err
				}
				bt = batch.Batch(whole)
			}
			if ended, ok := state.Replay(bt); ok && ended.Abort {
				if err := seg.AppendAbortedTxn(abortedTxn(ended)); err != nil {
					return false, fmt.Errorf("transaction index: %w", err)
				}
				dirty = true
			}
			return true, nil
		})
		if err == nil && !checked {
			err = s.dropUnmarkedTxns(seg, markers, from, &dirty)
		}
		if err == nil {
			// Durable before the snapshot that will say it was replayed.
			err = seg.FlushTxnIndex()
		}
		if err != nil {
			return dirty, fmt.Errorf("replay producers: segment %d: %w", seg.BaseOffset(), err)
		}
		if done {
			return dirty, nil
		}
	}
	return dirty, nil
}

// markerAt is a control batch's offset and producer id.
type markerAt struct{ offset, pid int64 }

// dropUnmarkedTxns removes from seg's transaction index the entries below
// from that name no control batch of their producer at their marker
// offset and that come after every entry that does; markers are seg's
// control batches below from, in offset order. Such an entry is an
// unsynced one a crash tore: the entries the replay rewrites (at or past
// from) go anyway, but a torn write can leave a marker offset below from,
// inside the transaction's own range (its low bytes zeroed or garbage),
// while the marker it named was lost from the .log; the transaction is
// then open again, and the entry would report its records aborted even
// once it commits. Torn entries are the last ones: every entry before
// them was written before them, and their marker offsets still grow. A
// sound entry names its ABORT marker, and no marker of the same producer
// lies inside its transaction, so no sound entry is taken for a torn one;
// an entry whose marker compaction removed (KIP-534 removes it once the
// transaction's data is gone) names nothing either, and goes only when no
// entry after it names its marker. REQUIRES: mu held (or Open).
func (s *producerSnapshots) dropUnmarkedTxns(seg *segment.Segment, markers []markerAt, from int64, dirty *bool) error {
	entries := seg.AbortedTxns()
	n := 0 // the entries below from
	for n < len(entries) && entries[n].LastOffset < from {
		n++
	}
	keep := n
	for ; keep > 0; keep-- {
		a := entries[keep-1]
		i, found := slices.BinarySearchFunc(markers, a.LastOffset, func(m markerAt, off int64) int { return cmp.Compare(m.offset, off) })
		if found && markers[i].pid == a.ProducerID {
			break
		}
	}
	if keep == n {
		return nil
	}
	a := entries[keep]
	s.logger.Warn("partlog/log: transaction index entries name no marker after a crash; they are dropped",
		"dir", s.dir, "segment", seg.BaseOffset(), "entries", n-keep, "producerId", a.ProducerID, "lastOffset", a.LastOffset)
	*dirty = true
	return seg.TruncateAbortedTxns(a.LastOffset)
}

// keptSnapshot marks a durable producer snapshot at the log end: its
// offset, and the write number, truncation count and snapshot removal
// count at which the partition's producer state was the one it holds.
type keptSnapshot struct {
	ok          bool
	offset      int64
	writeSeq    uint64
	truncations uint64
	removals    uint64
}

// keptAt returns the mark of a snapshot taken now at the log end end, the
// core's write count being writeSeq.
func (s *producerSnapshots) keptAt(end int64, writeSeq uint64) keptSnapshot {
	return keptSnapshot{ok: true, offset: end, writeSeq: writeSeq,
		truncations: s.truncations.Load(), removals: s.removals.Load()}
}

// keepLocked records that the snapshot at the log end end is durable and
// holds the producer state now (writeSeq is the core's write count).
// REQUIRES: mu held (or Open).
func (s *producerSnapshots) keepLocked(end int64, writeSeq uint64) { s.kept = s.keptAt(end, writeSeq) }

// keepLoadedLocked records that the snapshot the load read is durable and
// holds the producer state now when it lies at the log end end: after a
// clean shutdown (the Close before wrote and synced it), and after the
// Dir's filesystem sync of a partition an OpenDir recovered (the sync
// made it durable; nothing was replayed after it).
// REQUIRES: mu held (or Open), after restoreLocked and before any write.
func (s *producerSnapshots) keepLoadedLocked(end int64, writeSeq uint64) {
	if s.loaded == end {
		s.keepLocked(end, writeSeq)
	}
}

// durableLocked writes state as the snapshot at the log end end, fsynced,
// syncs the directory and records it kept (writeSeq is the core's write
// count): Close, Open after a recovery or a replay (whose one directory
// sync this is, covering the recovered segments too), and
// RestoreProducers call it. dirDirty is the core's directory flag: set
// once the file is written, cleared by the directory sync. REQUIRES: mu
// held (or Open).
func (s *producerSnapshots) durableLocked(state *producer.State, end int64, writeSeq uint64, dirDirty *bool) error {
	s.kept = keptSnapshot{}
	if err := s.writeOwn(end, state.AppendSnapshot(nil), true); err != nil {
		return err
	}
	*dirDirty = true
	if err := s.dirs.syncDir(); err != nil {
		return err
	}
	s.syncedLocked(end, writeSeq, dirDirty)
	return nil
}

// writeUnsyncedLocked is durableLocked without its syncs, for an open or
// a close whose Dir syncs the whole filesystem after it (the batches below
// end durable already): it writes the snapshot of state at end and marks
// the directory dirty; syncedLocked, after the filesystem sync, keeps it.
// REQUIRES: mu held.
func (s *producerSnapshots) writeUnsyncedLocked(state *producer.State, end int64, dirDirty *bool) error {
	s.kept = keptSnapshot{}
	if err := s.writeOwn(end, state.AppendSnapshot(nil), false); err != nil {
		return err
	}
	*dirDirty = true
	return nil
}

// syncedLocked ends writeUnsyncedLocked once the filesystem that holds the
// snapshot and the directory was synced: the directory is clean and the
// snapshot at end is kept, as durableLocked leaves them. REQUIRES: mu held.
func (s *producerSnapshots) syncedLocked(end int64, writeSeq uint64, dirDirty *bool) {
	*dirDirty = false
	s.keepLocked(end, writeSeq)
}

// onDiskFromLocked reports whether a whole snapshot file at an offset in
// [from, end] is on disk (a roll snapshot's write holds ckptMu until the
// file is synced); its directory entry is the caller's to sync. A
// listing that fails counts as none. REQUIRES: mu held, ckptMu not held.
func (s *producerSnapshots) onDiskFromLocked(from, end int64) bool {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	offs, err := s.list()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(offs, func(off int64) bool { return off >= from && off <= end })
}

// closeLocked is durableLocked for Close, which skips the write when the
// snapshot at the log end is kept and nothing was written, truncated or
// removed since it was taken or loaded, and no directory entry is
// unsynced, as Kafka's takeSnapshot skips a snapshot at the offset of the
// last one: an idle partition's Close then writes and syncs nothing.
// REQUIRES: mu held.
func (s *producerSnapshots) closeLocked(state *producer.State, end int64, writeSeq uint64, dirDirty *bool) error {
	if s.keptCurrentLocked(end, writeSeq, *dirDirty) {
		return nil
	}
	return s.durableLocked(state, end, writeSeq, dirDirty)
}

// keptCurrentLocked reports whether the snapshot at the log end end is
// kept and nothing was written, truncated or removed since it was taken
// or loaded, with no directory entry unsynced: closeLocked's skip.
// REQUIRES: mu held.
func (s *producerSnapshots) keptCurrentLocked(end int64, writeSeq uint64, dirDirty bool) bool {
	return s.kept.ok && !dirDirty && s.kept == s.keptAt(end, writeSeq)
}

// restoreLocked empties state and restores into it the newest snapshot at
// or below end that decodes (newest, which first removes those past end),
// and returns its offset, -1 for none (the replay then starts from
// nothing). REQUIRES: mu held (or Open, before the partition is
// published).
func (s *producerSnapshots) restoreLocked(state *producer.State, end int64) (from int64, err error) {
	state.Reset()
	from, entries, err := s.newest(end)
	if err != nil {
		return -1, err
	}
	s.loaded = from
	state.Restore(entries)
	return from, nil
}

// replayAfterLocked replays into state the batches of list in [from, end)
// (from the first segment when from lies below it; replay), then expires
// idle producers. replayed reports that there was anything to replay,
// dirty that a .txnindex entry was added (the core marks the directory
// dirty). REQUIRES: mu held (or Open), after restoreLocked returned from.
func (s *producerSnapshots) replayAfterLocked(state *producer.State, list []*segment.Segment, from, end int64) (replayed, dirty bool, err error) {
	if len(list) > 0 && from < list[0].BaseOffset() {
		from = list[0].BaseOffset() // nothing below the first segment
	}
	if from >= end {
		return false, false, nil
	}
	dirty, err = s.replay(state, list, from, end)
	if err != nil {
		return true, dirty, err
	}
	state.Expire()
	return true, dirty, nil
}

// removeAllLocked removes every snapshot, durably: the whole log went
// (a truncation that restarts it). REQUIRES: mu held.
func (s *producerSnapshots) removeAllLocked() error {
	if _, _, err := s.remove(func(int64) bool { return true }); err != nil {
		return err
	}
	return s.dirs.syncDir()
}

// The core's side: the loads that replace the producer state. They hold mu
// and hand the part the producer state.

// loadProducersLocked rebuilds the producer state for the segments in list
// ending at end: it restores the newest snapshot at or below end that
// decodes (restoreLocked) and replays the batches from there
// (replayAfterLocked), then publishes the last stable offset and notes the
// aborted transactions of list. It returns whether anything had to be
// replayed. REQUIRES: mu held (or Open, before the partition is
// published).
func (p *Partition) loadProducersLocked(list []*segment.Segment, end int64) (replayed bool, err error) {
	from, err := p.snaps.restoreLocked(p.mu.producers, end)
	if err != nil {
		return false, err
	}
	defer p.txn.noteAbortedIn(list)
	defer p.publishUnstableLocked()
	replayed, dirty, err := p.snaps.replayAfterLocked(p.mu.producers, list, from, end)
	if dirty {
		p.mu.dirDirty = true
	}
	return replayed, err
}

// resetProducersLocked forgets every producer and open transaction, and
// publishes the last stable offset that leaves (the high watermark).
// REQUIRES: mu held.
func (p *Partition) resetProducersLocked() {
	p.mu.producers.Reset()
	p.publishUnstableLocked()
}
