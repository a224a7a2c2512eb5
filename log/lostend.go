package log

import (
	"fmt"
	"path/filepath"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/epochs"
	"github.com/partlog/partlog/internal/producer"
)

// A lost log end (docs/crash-safety.md, "A lost log end"): after a crash,
// files other than the segments may name offsets past the end recovery
// finds. Two of them can only be there when batches below that offset were
// synced, so the batches are missing, not merely unsynced:
//
//   - the recovery point: every batch below it was synced (opencheck.go);
//   - a producer snapshot: it is written only once the batches below its
//     offset are durable (snapshot.go).
//
// A leader epoch entry is written before the first batch of its epoch; the
// batches below it need not be durable, so an entry past the end is what a
// crash normally leaves under the default flush policy (Open drops it).
// Under per-append durability every acknowledged batch was synced:
// durability.syncBeforeEpochLocked then makes the log below a new entry
// durable and raises the recovery point to the log end before the entry
// is written, so that an entry at the log end always comes with a
// recovery point at it. A follower's batch after an offset gap starts its
// epoch past the log end: the recovery point stops at the log end, as
// nothing below the batch's base is written yet, and a crash before the
// batch lands leaves an entry past the end that Open drops.

// assignEpochLocked records that epoch starts at start in the leader epoch
// cache and writes it (epochs.Cache.Assign), making the log durable first
// when the entry is new (durability.syncBeforeEpochLocked). start is the
// log end, or past it for a follower's batch after an offset gap.
// REQUIRES: mu held.
func (p *Partition) assignEpochLocked(epoch int32, start int64) error {
	if p.mu.epochs.Changes(epoch, start) {
		dirSynced, err := p.dur.syncBeforeEpochLocked(p.segs.Load(), min(start, p.mu.end.Offset), p.mu.dirDirty)
		if dirSynced {
			p.mu.dirDirty = false
		}
		if err != nil {
			return err
		}
	}
	return p.mu.epochs.Assign(epoch, start)
}

// restoreEpochsLocked puts the leader epoch cache back to entries, what it
// held before assignEpochLocked changed it for a batch whose write then
// failed (the partition stays writable: nothing of the batch is
// published), and writes it: neither the cache nor its file may keep the
// entry of a batch the log does not have, nor the cut a follower's lower
// epoch made for it, which takes the epochs of batches still there. A
// failed write of the file fails the partition, as a truncation's does.
// REQUIRES: mu held.
func (p *Partition) restoreEpochsLocked(entries []epochs.Entry) {
	p.mu.epochs.Restore(entries)
	if err := p.mu.epochs.Persist(); err != nil {
		p.failLocked(fmt.Errorf("partlog/log: %s: leader epochs after a failed append: %w", p.dir, err))
	}
}

// checkSnapshotsPastEnd reports a producer snapshot past end, the log end
// Open found, to the policy: the batches below it were synced and are
// missing (the active segment removed or cut?). After a clean shutdown it
// is no torn tail; after a crash it is treated as one, as a recovery point
// past the end is (a restart of the log, TruncateFullyAndStartAt, that a
// crash interrupted removes the old segments before their snapshots). On
// acceptance it logs an error; loading the producer state then removes the
// snapshot. active names the last segment's file for the message.
func (o *opening) checkSnapshotsPastEnd(end int64, clean bool, active string) error {
	last, ok, err := o.newestSnapshot()
	if err != nil {
		return fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
	}
	if !ok || last <= end {
		return nil
	}
	path := filepath.Join(o.dir, producer.SnapshotFileName(last))
	cause := base.CorruptionErrorf(path, 0, "offset",
		"producer snapshot at offset %d is past the log end %d: a snapshot is written once the batches below it are synced, and they are missing (the active segment %s removed or cut?)",
		last, end, active)
	if err := o.askPolicy(path, true, !clean, cause); err != nil {
		return err
	}
	o.logger.Error("partlog/log: a producer snapshot is past the log end; synced batches are missing. Opening at the log end",
		"dir", o.dir, "file", path, "snapshot", last, "logEnd", end)
	return nil
}
