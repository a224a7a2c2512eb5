package log

import (
	"fmt"
	"path/filepath"

	"github.com/partlog/partlog/internal/base"
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
// syncBeforeEpochLocked then makes the log below a new entry durable and
// raises the recovery point to it before the entry is written, so that an
// entry past the end always comes with a recovery point past it.

// syncBeforeEpochLocked, under per-append durability (FlushMessages 1),
// fsyncs the log and raises the recovery point, durably, to start, where a
// leader epoch entry is about to be written (start is the log end): the
// entry then never outlives the batches below it unnoticed. Under the
// other policies it does nothing. A failed fsync fails the partition; a
// failed checkpoint write is returned, and the entry is not written.
// REQUIRES: mu held, ckptMu not held.
func (p *Partition) syncBeforeEpochLocked(start int64) error {
	if !p.dur.syncEveryAppend() {
		return nil
	}
	if err := p.flushLocked(); err != nil {
		return p.failLocked(fmt.Errorf("partlog/log: sync %s before leader epoch entry at offset %d: %w", p.dir, start, err))
	}
	return p.dur.raiseRecoveryPointNowLocked(start)
}

// assignEpochLocked records that epoch starts at start, the log end, in
// the leader epoch cache and writes it (epochs.Cache.Assign), making the
// log below start durable first when the entry is new
// (syncBeforeEpochLocked). REQUIRES: mu held.
func (p *Partition) assignEpochLocked(epoch int32, start int64) error {
	if p.mu.epochs.Changes(epoch, start) {
		if err := p.syncBeforeEpochLocked(start); err != nil {
			return err
		}
	}
	return p.mu.epochs.Assign(epoch, start)
}

// raiseRecoveryPointNowLocked persists offset as the recovery point when
// it raises it, durably before it returns (never deferred, as a Dir's
// store may defer a lazy write), for a writer about to write a file whose
// meaning depends on it. REQUIRES: mu held, ckptMu not held; every batch
// below offset and the directory are durable.
func (d *durability) raiseRecoveryPointNowLocked(offset int64) error {
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()
	if offset <= d.recoveryPoint {
		return nil
	}
	if err := d.ckpt.write(recoveryPointCheckpointFile, offset, false); err != nil {
		return fmt.Errorf("partlog/log: %s: recovery point checkpoint: %w", d.dir, err)
	}
	d.recoveryPoint = offset
	return nil
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
