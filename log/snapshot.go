package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/internal/logaccess"
	"github.com/partlog/partlog/segment"
)

// Producer state snapshots: Kafka's <offset>.snapshot files (version 1),
// written by ProducerStateManager.writeSnapshot. Layout, big-endian:
//
//	version int16 (1) | crc uint32 (CRC-32C of bytes [6, end)) |
//	count int32 | count entries of 46 bytes:
//	producerId int64 | producerEpoch int16 | lastSequence int32 |
//	lastOffset int64 | offsetDelta int32 | timestamp int64 |
//	coordinatorEpoch int32 | currentTxnFirstOffset int64
//
// The file named by offset X describes the producers of every batch below X.

// snapshotSuffix is the suffix of producer state snapshot files. Frozen:
// Kafka's.
const snapshotSuffix = ".snapshot"

// Snapshot format constants. Frozen: Kafka's.
const (
	snapshotVersion    = 1
	snapshotCRCStart   = 6  // after version and crc
	snapshotHeaderSize = 10 // version, crc, count
	snapshotEntrySize  = 46
)

// producerSnapshotEntry is one entry of a producer state snapshot, field
// for field (the producer's last batch and its transaction state).
type producerSnapshotEntry = logaccess.ProducerSnapshotEntry

// errCorruptSnapshot marks a producer state snapshot that does not decode
// (wraps base.ErrCorrupt). Open skips such a file with a warning and uses an
// older snapshot or replays the log; it is never fatal.
var errCorruptSnapshot = fmt.Errorf("%w: producer state snapshot", base.ErrCorrupt)

// decodeProducerSnapshot decodes a producer state snapshot file's bytes.
// Errors wrap errCorruptSnapshot (and base.ErrCorrupt): a version other
// than 1, a CRC-32C mismatch, a count that disagrees with the length.
func decodeProducerSnapshot(data []byte) ([]producerSnapshotEntry, error) {
	if len(data) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", errCorruptSnapshot, len(data), snapshotHeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errCorruptSnapshot, v, snapshotVersion)
	}
	if want, got := binary.BigEndian.Uint32(data[2:]), crc32c.Update(0, data[snapshotCRCStart:]); want != got {
		return nil, fmt.Errorf("%w: CRC-32C %08x, computed %08x", errCorruptSnapshot, want, got)
	}
	n := int32(binary.BigEndian.Uint32(data[6:]))
	if n < 0 || int64(len(data)-snapshotHeaderSize) != int64(n)*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errCorruptSnapshot, n, len(data))
	}
	out := make([]producerSnapshotEntry, n)
	for i := range out {
		b := data[snapshotHeaderSize+i*snapshotEntrySize:]
		out[i] = producerSnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(b[0:])),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(b[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(b[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(b[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(b[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(b[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(b[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(b[38:])),
		}
	}
	return out, nil
}

// appendProducerSnapshot appends the snapshot file holding entries, in the
// given order, to dst.
func appendProducerSnapshot(dst []byte, entries []producerSnapshotEntry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+2:], crc32c.Update(0, dst[start+snapshotCRCStart:]))
	return dst
}

// snapshotFileName returns the name of the snapshot at offset:
// "<offset, 20 digits>.snapshot".
func snapshotFileName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, snapshotSuffix)
}

// parseSnapshotName returns the offset of a snapshot file name.
func parseSnapshotName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil && off >= 0
}

// decrementSequence returns seq - d, wrapping below 0 to MaxInt32 as
// Kafka's DefaultRecordBatch.decrementSequence.
func decrementSequence(seq, d int32) int32 {
	if seq < d {
		return int32(int64(1<<31-1) - int64(d-seq) + 1)
	}
	return seq - d
}

// snapshotEntries returns the state as snapshot entries, by producer id.
func (s *producerState) snapshotEntries() []producerSnapshotEntry {
	out := make([]producerSnapshotEntry, 0, len(s.m))
	for _, pid := range s.sortedIDs() {
		e := s.m[pid]
		se := producerSnapshotEntry{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: batch.NoSequence,
			LastOffset: -1, Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch,
			CurrentTxnFirstOffset: e.txnFirstOffset}
		if l := e.last(); l != nil {
			se.LastSequence, se.LastOffset = l.LastSequence, l.LastOffset
			se.OffsetDelta = int32(l.LastOffset - l.FirstOffset)
		}
		out = append(out, se)
	}
	return out
}

// load adds snapshot entries, skipping producers expired at nowMs.
func (s *producerState) load(entries []producerSnapshotEntry, nowMs int64, expiration int64) {
	for _, se := range entries {
		if se.CurrentTxnFirstOffset < 0 && expiration > 0 && nowMs-se.Timestamp >= expiration {
			continue
		}
		e := newProducerEntry()
		e.epoch, e.coordinatorEpoch, e.txnFirstOffset = se.ProducerEpoch, se.CoordinatorEpoch, se.CurrentTxnFirstOffset
		if se.LastOffset >= 0 {
			e.add(ProducerBatch{FirstSequence: decrementSequence(se.LastSequence, se.OffsetDelta), LastSequence: se.LastSequence,
				FirstOffset: se.LastOffset - int64(se.OffsetDelta), LastOffset: se.LastOffset, MaxTimestamp: se.Timestamp})
		}
		e.lastTimestamp = se.Timestamp
		s.m[se.ProducerID] = e
		if se.CurrentTxnFirstOffset >= 0 {
			// The start time is unknown: the producer's last timestamp.
			s.beginTxn(OpenTxn{ProducerID: se.ProducerID, FirstOffset: se.CurrentTxnFirstOffset, StartTimestamp: se.Timestamp})
		}
	}
}

// listSnapshots returns the offsets of the snapshot files in the
// partition's directory, ascending.
func (p *Partition) listSnapshots() ([]int64, error) {
	names, err := p.cfg.FS.List(p.dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, n := range names {
		if off, ok := parseSnapshotName(n); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

// writeSnapshotFile writes the producer state as the snapshot at offset,
// fsyncing it when sync is set. A crash may leave a torn file: its CRC then
// fails and Open falls back to an older snapshot. REQUIRES: mu held (or
// Open).
func (p *Partition) writeSnapshotFile(offset int64, sync bool) error {
	data := appendProducerSnapshot(nil, p.mu.producers.snapshotEntries())
	if err := p.writeSnapshotBytes(offset, data, sync); err != nil {
		return err
	}
	p.mu.dirDirty = true
	return nil
}

// writeSnapshotBytes writes data as the snapshot file at offset, fsyncing
// it when sync is set. The caller marks the directory dirty.
func (p *Partition) writeSnapshotBytes(offset int64, data []byte, sync bool) error {
	path := filepath.Join(p.dir, snapshotFileName(offset))
	f, err := p.cfg.FS.Create(path)
	if err != nil {
		return fmt.Errorf("partlog/log: write producer snapshot %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog/log: write producer snapshot %s: %w", path, err)
	}
	return nil
}

// removeSnapshots removes the snapshot files whose offset satisfies drop
// and reports whether it removed any. The caller syncs the directory. It
// holds rolled.ckptMu and counts the removal (rolled.snapshotRemovals), so
// that a roll's snapshot the background flush writes never lands after a
// removal it should have been part of (durability.go).
func (p *Partition) removeSnapshots(drop func(int64) bool) (bool, error) {
	p.rolled.ckptMu.Lock()
	defer p.rolled.ckptMu.Unlock()
	p.rolled.snapshotRemovals.Add(1)
	offs, err := p.listSnapshots()
	if err != nil {
		return false, err
	}
	removed := false
	for _, off := range offs {
		if !drop(off) {
			continue
		}
		if err := p.cfg.FS.Remove(filepath.Join(p.dir, snapshotFileName(off))); err != nil && !errors.Is(err, errNotExist) {
			return removed, err
		}
		removed = true
	}
	return removed, nil
}

// discardRollSnapshotsLocked drops the roll snapshots not yet written,
// for a writer that replaces the producer state they were taken from
// (RestoreProducers): it counts as a removal (rolled.snapshotRemovals,
// under rolled.ckptMu), so a background flush that took them already
// writes none of them after this, and one writing under ckptMu now
// finishes first. REQUIRES: mu held, rolled.ckptMu not held.
func (p *Partition) discardRollSnapshotsLocked() {
	p.rolled.ckptMu.Lock()
	p.rolled.snapshotRemovals.Add(1)
	p.rolled.ckptMu.Unlock()
	p.mu.rollSnapshots = nil
}

// snapshotOnRollLocked takes the producer state at a new segment's base,
// newBase, as snapshot bytes, in memory: the roll's background flush
// writes the file once the segments below newBase are durable (a snapshot
// at X must never be on disk before the batches and .txnindex entries
// below X, see docs/crash-safety.md), and a full flush (Sync, a periodic
// flush, Close) writes what is still pending. Expired producers are
// removed first. REQUIRES: mu held.
func (p *Partition) snapshotOnRollLocked(newBase int64) {
	p.mu.producers.expire(p.nowMs(), p.cfg.ProducerIDExpiration)
	p.mu.rollSnapshots = append(p.mu.rollSnapshots, rollSnapshot{
		offset: newBase, data: appendProducerSnapshot(nil, p.mu.producers.snapshotEntries()),
		truncations: p.truncations.Load(), removals: p.rolled.snapshotRemovals.Load()})
}

// snapshotDurableLocked writes the snapshot at the log end, fsynced, and
// syncs the directory: Close and Open after recovery call it. REQUIRES: mu
// held (or Open).
func (p *Partition) snapshotDurableLocked() error {
	if err := p.writeSnapshotFile(p.mu.end.Offset, true); err != nil {
		return err
	}
	if err := p.syncDirSettled(); err != nil {
		return err
	}
	p.mu.dirDirty = false
	return nil
}

// dropSnapshotsBelowLocked removes the snapshots below the log start
// offset (retention and DeleteRecordsBefore dropped their segments).
// Failures are logged. REQUIRES: mu held; the caller syncs the directory.
func (p *Partition) dropSnapshotsBelowLocked(start int64) {
	if _, err := p.removeSnapshots(func(off int64) bool { return off < start }); err != nil {
		p.logger.Warn("partlog/log: removing producer snapshots failed", "dir", p.dir, "below", start, "err", err)
	}
}

// loadProducersLocked rebuilds the producer state for the segments in list
// ending at end: it removes (durably) every snapshot past end, which
// describes batches the log no longer holds, loads the newest snapshot at
// or below end that decodes (skipping, with a warning, any that does not),
// and replays the batches from there (from the first segment when there is
// none) through the state. It returns whether anything had to be replayed.
// REQUIRES: mu held (or Open, before the partition is published).
func (p *Partition) loadProducersLocked(list []*segment.Segment, end int64) (replayed bool, err error) {
	p.mu.producers.reset()
	removed, err := p.removeSnapshots(func(off int64) bool { return off > end })
	if err != nil {
		return false, fmt.Errorf("remove producer snapshots past %d: %w", end, err)
	}
	if removed {
		if err := p.syncDirSettled(); err != nil {
			return false, err
		}
	}
	offs, err := p.listSnapshots()
	if err != nil {
		return false, err
	}
	from := int64(-1)
	now := p.nowMs()
	for i := len(offs) - 1; i >= 0; i-- {
		path := filepath.Join(p.dir, snapshotFileName(offs[i]))
		entries, err := p.readProducerSnapshot(path)
		if errors.Is(err, errCorruptSnapshot) {
			p.logger.Warn("partlog/log: skipping a producer snapshot", "dir", p.dir, "file", path, "err", err)
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read producer snapshot %s: %w", path, err) // I/O: reported
		}
		p.mu.producers.load(entries, now, p.cfg.ProducerIDExpiration.Milliseconds())
		from = offs[i]
		break
	}
	p.mu.producers.lastSweep = now
	if len(list) > 0 && from < list[0].BaseOffset() {
		from = list[0].BaseOffset() // nothing below the first segment
	}
	defer p.noteAbortedIn(list)
	defer p.publishUnstableLocked()
	if from >= end {
		return false, nil
	}
	if err := p.replayProducers(list, from, end); err != nil {
		return true, err
	}
	p.mu.producers.expire(now, p.cfg.ProducerIDExpiration)
	return true, nil
}

// readProducerSnapshot reads and decodes one snapshot file.
func (p *Partition) readProducerSnapshot(path string) ([]producerSnapshotEntry, error) {
	data, err := p.readSnapshotBytes(path)
	if err != nil {
		return nil, err
	}
	return decodeProducerSnapshot(data)
}

// readSnapshotBytes reads one snapshot file whole (at most 2 GiB).
func (p *Partition) readSnapshotBytes(path string) ([]byte, error) {
	f, err := p.cfg.FS.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<31))
}

// replayProducers feeds the producer batches of list in [from, end) to the
// producer state, reading only batch headers (and a control batch's first
// record). from < 0 replays everything. It rebuilds the transaction
// indexes as it goes: each segment it walks loses its entries for markers
// at or past from (a crash may have kept some and lost others), and every
// ABORT marker that ends a transaction adds its entry again, with the last
// stable offset the replayed state gives (Kafka rebuilds them the same way
// when it recovers a segment). Entries below from were made durable by
// the flush that preceded the snapshot at from.
func (p *Partition) replayProducers(list []*segment.Segment, from, end int64) error {
	for i, seg := range list {
		if i+1 < len(list) && list[i+1].BaseOffset() <= from {
			continue // every batch of seg lies below from
		}
		if err := seg.TruncateAbortedTxns(max(from, 0)); err != nil {
			return fmt.Errorf("replay producers: segment %d: transaction index: %w", seg.BaseOffset(), err)
		}
		done := false
		err := walkHeaders(seg, func(pos int64, h []byte, legacy bool) (bool, error) {
			if legacy {
				return true, nil // no producer ids before magic 2
			}
			bt := batch.Batch(h)
			if bt.BaseOffset() >= end {
				done = true
				return false, nil
			}
			if bt.BaseOffset() < from || bt.ProducerID() < 0 {
				return true, nil
			}
			if bt.Attributes().IsControl() {
				whole, err := seg.Bytes(pos, pos+int64(bt.Size()), nil)
				if err != nil {
					return false, err
				}
				bt = batch.Batch(whole)
			}
			if c := p.mu.producers.update(bt, p.cfg.ProducerIDExpiration, nil); c.ok && c.abort {
				a := AbortedTxn{ProducerID: c.pid, FirstOffset: c.first, LastOffset: c.last,
					LastStableOffset: p.mu.producers.lastStableAfter(c.last)}
				if err := seg.AppendAbortedTxn(a); err != nil {
					return false, fmt.Errorf("transaction index: %w", err)
				}
				p.mu.dirDirty = true
			}
			return true, nil
		})
		if err == nil {
			// Durable before the snapshot that will say it was replayed.
			err = seg.FlushTxnIndex()
		}
		if err != nil {
			return fmt.Errorf("replay producers: segment %d: %w", seg.BaseOffset(), err)
		}
		if done {
			return nil
		}
	}
	return nil
}

// reloadProducersLocked rebuilds the producer state after a truncation
// (Kafka's truncateAndReload). full empties it and removes every snapshot
// (the whole log went). A failure fails the partition: the state would
// recognise retries of cut batches. REQUIRES: mu held.
func (p *Partition) reloadProducersLocked(full bool) error {
	if full {
		if _, err := p.removeSnapshots(func(int64) bool { return true }); err != nil {
			return err
		}
		if err := p.syncDirSettled(); err != nil {
			return err
		}
		p.mu.producers.reset()
		p.publishUnstableLocked()
		return nil
	}
	_, err := p.loadProducersLocked(p.segs.Load().list, p.mu.end.Offset)
	return err
}

func init() {
	logaccess.CheckProducerSnapshot = func(data []byte) error {
		_, err := decodeProducerSnapshot(data)
		return err
	}
	logaccess.DecodeProducerSnapshot = decodeProducerSnapshot
	logaccess.AppendProducerSnapshot = appendProducerSnapshot
}
