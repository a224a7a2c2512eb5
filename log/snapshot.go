package log

import (
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// Producer state snapshots: Kafka's <offset>.snapshot files in the
// partition's directory (package internal/producer encodes, decodes, names
// and reads them). The partition decides when one is taken, written and
// removed: taken at each roll and written once the segments below it are
// durable (durability.go), written at Close and after a recovery, removed
// below the log start and past a truncation's new end; Open and TruncateTo
// load the newest that decodes and replay the log after it.

// writeSnapshotBytes writes data as the snapshot file at offset, fsyncing
// it when sync is set. The caller marks the directory dirty.
func (p *Partition) writeSnapshotBytes(offset int64, data []byte, sync bool) error {
	if err := producer.WriteSnapshotFile(p.cfg.FS, p.dir, offset, data, sync); err != nil {
		return fmt.Errorf("partlog/log: write producer snapshot %s: %w", producer.SnapshotPath(p.dir, offset), err)
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
	offs, err := producer.ListSnapshots(p.cfg.FS, p.dir)
	if err != nil {
		return false, err
	}
	removed := false
	for _, off := range offs {
		if !drop(off) {
			continue
		}
		if err := producer.RemoveSnapshotFile(p.cfg.FS, p.dir, off); err != nil {
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
	p.mu.producers.Expire()
	p.mu.rollSnapshots = append(p.mu.rollSnapshots, rollSnapshot{
		offset: newBase, data: p.mu.producers.AppendSnapshot(nil),
		truncations: p.truncations.Load(), removals: p.rolled.snapshotRemovals.Load()})
}

// snapshotDurableLocked writes the snapshot at the log end, fsynced, and
// syncs the directory: Close and Open after recovery call it. REQUIRES: mu
// held (or Open).
func (p *Partition) snapshotDurableLocked() error {
	p.mu.snapKept = keptSnapshot{}
	if err := p.writeSnapshotBytes(p.mu.end.Offset, p.mu.producers.AppendSnapshot(nil), true); err != nil {
		return err
	}
	p.mu.dirDirty = true
	if err := p.syncDirSettled(); err != nil {
		return err
	}
	p.mu.dirDirty = false
	p.keepSnapshotLocked()
	return nil
}

// keptSnapshot marks a durable producer snapshot at the log end: its
// offset, and the write number and truncation count at which the
// partition's producer state was the one it holds.
type keptSnapshot struct {
	ok          bool
	offset      int64
	writeSeq    uint64
	truncations uint64
}

// keepSnapshotLocked records that the snapshot at the log end is durable
// and holds the producer state now. REQUIRES: mu held (or Open).
func (p *Partition) keepSnapshotLocked() {
	p.mu.snapKept = keptSnapshot{ok: true, offset: p.mu.end.Offset, writeSeq: p.mu.writeSeq, truncations: p.truncations.Load()}
}

// closeSnapshotLocked is snapshotDurableLocked for Close, which skips the
// write when the snapshot at the log end is durable and nothing was
// written or truncated since it was taken or loaded, as Kafka's
// takeSnapshot skips a snapshot at the offset of the last one: an idle
// partition's Close then writes and syncs nothing. REQUIRES: mu held.
func (p *Partition) closeSnapshotLocked() error {
	k := p.mu.snapKept
	if k.ok && !p.mu.dirDirty && k.offset == p.mu.end.Offset && k.writeSeq == p.mu.writeSeq && k.truncations == p.truncations.Load() {
		return nil
	}
	return p.snapshotDurableLocked()
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
	p.mu.producers.Reset()
	removed, err := p.removeSnapshots(func(off int64) bool { return off > end })
	if err != nil {
		return false, fmt.Errorf("remove producer snapshots past %d: %w", end, err)
	}
	if removed {
		if err := p.syncDirSettled(); err != nil {
			return false, err
		}
	}
	offs, err := producer.ListSnapshots(p.cfg.FS, p.dir)
	if err != nil {
		return false, err
	}
	from := int64(-1)
	var entries []producer.Entry
	for i := len(offs) - 1; i >= 0; i-- {
		path := producer.SnapshotPath(p.dir, offs[i])
		data, err := producer.ReadSnapshotFile(p.cfg.FS, p.dir, offs[i])
		if err != nil {
			return false, fmt.Errorf("read producer snapshot %s: %w", path, err) // I/O: reported
		}
		if entries, err = producer.DecodeSnapshot(data); err != nil {
			p.logger.Warn("partlog/log: skipping a producer snapshot", "dir", p.dir, "file", path, "err", err)
			continue
		}
		from = offs[i]
		break
	}
	p.mu.snapLoaded = from
	p.mu.producers.Restore(entries) // none: the replay starts from nothing
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
	p.mu.producers.Expire()
	return true, nil
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
			if ended, ok := p.mu.producers.Replay(bt); ok && ended.Abort {
				if err := seg.AppendAbortedTxn(abortedTxn(ended)); err != nil {
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
		p.resetProducersLocked()
		return nil
	}
	_, err := p.loadProducersLocked(p.segs.Load().list, p.mu.end.Offset)
	return err
}

// resetProducersLocked forgets every producer and open transaction, and
// publishes the last stable offset that leaves (the high watermark).
// REQUIRES: mu held.
func (p *Partition) resetProducersLocked() {
	p.mu.producers.Reset()
	p.publishUnstableLocked()
}
