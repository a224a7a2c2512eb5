package log

import (
	"errors"
	iofs "io/fs"
	"log/slog"
	"path/filepath"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/checkpoint"
)

// logStartOffsetCheckpointFile is the name of the file, in the partition's
// directory, that records the log start offset after DeleteRecordsBefore
// moved it. Kafka keeps one such file per log directory for all its
// partitions; partlog keeps one per partition, in the same text format
// (package internal/checkpoint), with its one entry:
//
//	0                          version
//	1                          number of entries
//	<topic> <partition> <offset>
//
// The topic and partition come from the directory name when it has Kafka's
// "<topic>-<partition>" form (else the whole name and 0). Open reads the
// offset of the file's entry for this partition, or of its only entry (so a
// renamed directory keeps its log start offset). The partitions of a Dir
// keep their entries in one such file at the root of the log directory,
// as Kafka does (and the same for the other offset checkpoints below).
const logStartOffsetCheckpointFile = "log-start-offset-checkpoint" // frozen: Kafka's name

// errNotExist is fs.ErrNotExist (the name fs is taken by vfs values here).
var errNotExist = iofs.ErrNotExist

// recoveryPointCheckpointFile is the file, in the partition's directory,
// that records the recovery point: every batch below it was flushed
// (fdatasync of its .log, msync of its indexes), so Open after a crash
// recovers only the segments from the one holding it. Kafka's name and
// format (one file per log directory there, one per partition here, like
// logStartOffsetCheckpointFile). Written on every full flush, on roll and
// when TruncateTo lowers it.
const recoveryPointCheckpointFile = checkpoint.RecoveryPointFile // frozen: "recovery-point-offset-checkpoint"

// highWatermarkCheckpointFile is the file, in the partition's directory,
// that records the high watermark under Config.DisableAutoHighWatermark
// (Kafka's replication-offset-checkpoint): written on Sync, by the
// FlushInterval flusher and on Close; Open starts the high watermark there
// (clamped to [log start, log end]).
const highWatermarkCheckpointFile = checkpoint.ReplicationFile // frozen: "replication-offset-checkpoint"

// checkpointStore is where a Partition keeps its entries of the offset
// checkpoints (recoveryPointCheckpointFile, logStartOffsetCheckpointFile,
// highWatermarkCheckpointFile, cleanerCheckpointFile). A partition opened
// alone keeps them in files of its own directory (partitionFiles); a
// partition of a Dir keeps them in the log directory's root files, one for
// all its partitions, as Kafka does (dirEntries, dir.go). Every method is
// called under the partition's mu, or by Open before the partition is
// shared.
type checkpointStore interface {
	// path names the file holding the partition's entry of checkpoint
	// name (for errors and logs).
	path(name string) string
	// read returns the partition's offset in checkpoint name; ok is false
	// when there is none. A malformed file is an error wrapping
	// base.ErrCorrupt (a *base.CorruptionError naming the file).
	read(name string) (offset int64, ok bool, err error)
	// write records offset as the partition's entry of checkpoint name
	// and returns once it is durable, except when lazy (a value whose
	// loss in a crash is safe: a raised recovery point, a high
	// watermark), which the Dir's store may defer while the Dir opens or
	// closes and writes with the other partitions' entries.
	write(name string, offset int64, lazy bool) error
	// lower lowers the partition's entry of checkpoint name to end when
	// it is above, durably; an entry it cannot read is dropped.
	lower(name string, end int64) error
}

// partitionFiles is the checkpointStore of a partition opened alone: one
// file per checkpoint in its own directory, with the one entry of the
// partition (named by checkpoint.EntryName of the directory).
type partitionFiles struct {
	fs     vfs.FS
	dir    string
	logger *slog.Logger
}

func (f partitionFiles) path(name string) string { return filepath.Join(f.dir, name) }

func (f partitionFiles) read(name string) (int64, bool, error) {
	return readOffsetCheckpoint(f.fs, f.dir, name)
}

func (f partitionFiles) write(name string, offset int64, _ bool) error {
	return writeOffsetCheckpoint(f.fs, f.dir, name, offset)
}

// lower lowers this partition's entry when the file exists and its offset
// is above end. A file it cannot parse is removed (for the cleaner
// checkpoint: compaction then starts again from the log start, which is
// always safe).
func (f partitionFiles) lower(name string, end int64) error {
	fs := f.fs
	path := filepath.Join(f.dir, name)
	entries, err := checkpoint.ReadOffsets(fs, path)
	switch {
	case errors.Is(err, errNotExist):
		return nil
	case err != nil:
		f.logger.Warn("partlog/log: truncate: unreadable checkpoint removed", "dir", f.dir, "file", path, "err", err)
		if rerr := fs.Remove(path); rerr != nil && !errors.Is(rerr, errNotExist) {
			return rerr
		}
		return syncDir(fs, f.dir)
	}
	topic, part := checkpoint.EntryName(f.dir)
	changed := false
	for i, e := range entries {
		if e.Topic == topic && e.Partition == part && e.Offset > end {
			entries[i].Offset = end
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return checkpoint.WriteOffsets(fs, path, entries)
}

// writeOffsetCheckpoint durably records offset in the checkpoint file name
// of dir (tmp + fsync + rename + directory fsync).
func writeOffsetCheckpoint(fs vfs.FS, dir, name string, offset int64) error {
	topic, part := checkpoint.EntryName(dir)
	return checkpoint.WriteOffset(fs, filepath.Join(dir, name), topic, part, offset)
}

// readOffsetCheckpoint returns the offset recorded for this partition in
// the checkpoint file name of dir; ok is false when there is no file or no
// entry for this partition. A malformed file is an error wrapping
// base.ErrCorrupt (a *batch.CorruptionError naming the file).
func readOffsetCheckpoint(fs vfs.FS, dir, name string) (offset int64, ok bool, err error) {
	path := filepath.Join(dir, name)
	entries, err := checkpoint.ReadOffsets(fs, path)
	switch {
	case errors.Is(err, errNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	case len(entries) == 0:
		return 0, false, nil
	case len(entries) == 1:
		return entries[0].Offset, true, nil
	}
	topic, part := checkpoint.EntryName(dir)
	for _, e := range entries {
		if e.Topic == topic && e.Partition == part {
			return e.Offset, true, nil
		}
	}
	return 0, false, nil
}

// syncDir makes the directory's entries durable.
func syncDir(fs vfs.FS, dir string) error { return checkpoint.SyncDir(fs, dir) }

// cleanerCheckpointFile is the compaction cleaner's checkpoint in the
// partition's directory (Kafka's cleaner-offset-checkpoint, one file per
// partition here, same format): the offset below which a compaction
// (Compact) cleaned the log. Compact writes it; TruncateTo lowers it to
// the new log end (Kafka's maybeTruncateCheckpoint), since offsets
// re-appended after a truncation are dirty.
const cleanerCheckpointFile = checkpoint.CleanerOffsetFile // frozen: "cleaner-offset-checkpoint"

// checkpoints is the part of a Partition that keeps its entries of the
// log start and cleaner checkpoints (Partition.ckpts; the recovery point
// and the high watermark are the durability part's) and their rules: the
// log start is written durably, never deferred; the cleaner checkpoint is
// clamped to the log end, dropped when a truncation came after the round
// that computed it, written only once what it covers is durable, and
// lowered by truncations; a partition alone reads only its own entry of
// its cleaner checkpoint file. Its fields are set by init and never
// change; every method is called under the partition's mu (writeCleaner
// also under flushMu), or by Open before the partition is shared.
type checkpoints struct {
	// store is the partition's checkpoint store (Partition.ckpt).
	store checkpointStore
}

// cleanerFlusher is the core as the cleaner checkpoint's write sees it:
// the flushes that make durable what the checkpoint covers. *Partition
// implements it (flush.go). REQUIRES of both: flushMu and mu held.
type cleanerFlusher interface {
	// fullFlushLocked flushes everything, as Sync does.
	fullFlushLocked() error
	// flushSealedBelowLocked makes every segment below off durable and
	// raises the recovery point to off.
	flushSealedBelowLocked(off int64) error
}

// init sets the part up over the partition's checkpoint store.
func (c *checkpoints) init(store checkpointStore) { c.store = store }

// writeLogStart durably records offset as the log start: never a lazy
// write (a Dir's store defers those while it opens or closes), since Open
// relies on it to tell a first segment gone missing (checkDir) and a
// restart of the log that a crash interrupted (settleEmptyTail).
// REQUIRES: mu held, or Open.
func (c *checkpoints) writeLogStart(offset int64) error {
	return c.store.write(logStartOffsetCheckpointFile, offset, false)
}

// clampCleanerLocked lowers the partition's entry of the cleaner
// checkpoint to end when it is above end, durably (see
// checkpointStore.lower): offsets appended again after a truncation are
// dirty. REQUIRES: mu held (serializes the entry's writers).
func (c *checkpoints) clampCleanerLocked(end int64) error {
	return c.store.lower(cleanerCheckpointFile, end)
}

// writeCleanerLocked records that the log is cleaned below offset, unless
// a truncation happened since a round computed it (truncationsThen, the
// count before the round's snapshot, differs from truncationsNow): the
// offsets it covers may name batches that were cut and re-appended
// (dirty), so the round's checkpoint is dropped (written is false) and the
// one the truncation clamped stays. offset is clamped to the log end end.
// What it covers is made durable first (f): Open takes a segment that ends
// before the next one's base at or below the checkpoint for a
// compaction's, not for a crash's lost tail (compactedGap), so the
// checkpoint must never cover a segment whose unsynced tail a crash can
// lose. The sealed segments below it are flushed, and everything when it
// reaches past the active segment's base activeBase (the next roll seals
// the active segment where the checkpoint may be). REQUIRES: flushMu and
// mu held.
func (c *checkpoints) writeCleanerLocked(offset int64, truncationsThen, truncationsNow uint64, end, activeBase int64, f cleanerFlusher) (written bool, err error) {
	if truncationsNow != truncationsThen {
		return false, nil
	}
	at := min(offset, end)
	if at > activeBase {
		if err := f.fullFlushLocked(); err != nil {
			return false, err
		}
	} else if err := f.flushSealedBelowLocked(at); err != nil {
		return false, err
	}
	if err := c.store.write(cleanerCheckpointFile, at, false); err != nil {
		return false, err
	}
	return true, nil
}

// readCleaner returns the offset below which the partition's cleaner
// checkpoint says the log is cleaned; found is false when there is none.
// For a partition opened alone it reads the partition directory's file and
// only its entry for the directory's topic-partition (not, as Open's
// reads of the other checkpoints do, the file's only entry whatever it
// names); for a partition of a Dir it reads the Dir's entry (kept in
// memory, the root file's). View.CleanerCheckpoint reads it.
func (c *checkpoints) readCleaner() (offset int64, found bool, err error) {
	if f, ok := c.store.(partitionFiles); ok {
		topic, part := checkpoint.EntryName(f.dir)
		off, found, err := checkpoint.ReadOffset(f.fs, filepath.Join(f.dir, cleanerCheckpointFile), topic, part)
		if errors.Is(err, errNotExist) {
			return 0, false, nil
		}
		return off, found, err
	}
	return c.store.read(cleanerCheckpointFile)
}

// writeCleanerCheckpoint records, under flushMu and mu, that the log is
// cleaned below offset (checkpoints.writeCleanerLocked has the rules),
// unless a truncation came after the count truncations a round read.
// Serialized with TruncateTo's own update of the file.
func (p *Partition) writeCleanerCheckpoint(offset int64, truncations uint64) (written bool, err error) {
	p.flushMu.Lock() // for fullFlushLocked (flushMu before mu)
	defer p.flushMu.Unlock()
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return false, err
	}
	return p.ckpts.writeCleanerLocked(offset, truncations, p.truncations.Load(), p.mu.end.Offset,
		p.segs.Load().active().BaseOffset(), p)
}
