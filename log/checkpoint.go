package log

import (
	"errors"
	iofs "io/fs"
	"path/filepath"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
)

// LogStartOffsetCheckpointFile is the name of the file, in the partition's
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
// renamed directory keeps its log start offset).
const LogStartOffsetCheckpointFile = "log-start-offset-checkpoint" // frozen: Kafka's name

// errNotExist is fs.ErrNotExist (the name fs is taken by vfs values here).
var errNotExist = iofs.ErrNotExist

// RecoveryPointCheckpointFile is the file, in the partition's directory,
// that records the recovery point: every batch below it was flushed
// (fdatasync of its .log, msync of its indexes), so Open after a crash
// recovers only the segments from the one holding it. Kafka's name and
// format (one file per log directory there, one per partition here, like
// LogStartOffsetCheckpointFile). Written on every full flush, on roll and
// when TruncateTo lowers it.
const RecoveryPointCheckpointFile = checkpoint.RecoveryPointFile // frozen: "recovery-point-offset-checkpoint"

// HighWatermarkCheckpointFile is the file, in the partition's directory,
// that records the high watermark under Config.DisableAutoHighWatermark
// (Kafka's replication-offset-checkpoint): written on Sync, by the
// FlushInterval flusher and on Close; Open starts the high watermark there
// (clamped to [log start, log end]).
const HighWatermarkCheckpointFile = checkpoint.ReplicationFile // frozen: "replication-offset-checkpoint"

// writeLogStartCheckpoint durably records offset (tmp + fsync + rename +
// directory fsync).
func writeLogStartCheckpoint(fs vfs.FS, dir string, offset int64) error {
	return writeOffsetCheckpoint(fs, dir, LogStartOffsetCheckpointFile, offset)
}

// writeOffsetCheckpoint durably records offset in the checkpoint file name
// of dir (tmp + fsync + rename + directory fsync).
func writeOffsetCheckpoint(fs vfs.FS, dir, name string, offset int64) error {
	topic, part := checkpoint.EntryName(dir)
	return checkpoint.WriteOffset(fs, filepath.Join(dir, name), topic, part, offset)
}

// readLogStartCheckpoint returns the recorded log start offset; ok is false
// when there is no checkpoint file or it has no entry for this partition. A
// malformed file is an error wrapping base.ErrCorrupt.
func readLogStartCheckpoint(fs vfs.FS, dir string) (offset int64, ok bool, err error) {
	return readOffsetCheckpoint(fs, dir, LogStartOffsetCheckpointFile)
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

// CleanerCheckpointFile is the compaction cleaner's checkpoint in the
// partition's directory (Kafka's cleaner-offset-checkpoint, one file per
// partition here, same format): the offset below which package compaction
// cleaned the log. Package compaction writes it; TruncateTo lowers it to
// the new log end (Kafka's maybeTruncateCheckpoint), since offsets
// re-appended after a truncation are dirty.
const CleanerCheckpointFile = checkpoint.CleanerOffsetFile // frozen: "cleaner-offset-checkpoint"

// clampCleanerCheckpointLocked lowers this partition's entry of the
// cleaner checkpoint to end when the file exists and its offset is above
// end, durably (tmp + fsync + rename + directory fsync). A file it cannot
// parse is removed (compaction then starts again from the log start,
// which is always safe). REQUIRES: mu held (serializes the file's writers
// through WriteCleanerCheckpoint).
func (p *Partition) clampCleanerCheckpointLocked(end int64) error {
	fs := p.cfg.FS
	path := filepath.Join(p.dir, CleanerCheckpointFile)
	entries, err := checkpoint.ReadOffsets(fs, path)
	switch {
	case errors.Is(err, errNotExist):
		return nil
	case err != nil:
		p.logger.Warn("partlog/log: truncate: unreadable cleaner checkpoint removed", "dir", p.dir, "err", err)
		if rerr := fs.Remove(path); rerr != nil && !errors.Is(rerr, errNotExist) {
			return rerr
		}
		return syncDir(fs, p.dir)
	}
	topic, part := checkpoint.EntryName(p.dir)
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

// Truncations returns how many truncations (TruncateTo calls that cut the
// log) the partition has started since Open. Package compaction reads it
// before a round and passes it to WriteCleanerCheckpoint.
func (p *Partition) Truncations() uint64 { return p.truncations.Load() }

// WriteCleanerCheckpoint records, under the partition's write lock, that
// the log is cleaned below offset (CleanerCheckpointFile), unless a
// truncation started since Truncations returned truncations: the offsets a
// round computed before a truncation may name batches that were cut and
// re-appended (dirty), so the round's checkpoint is then dropped (written
// reports false) and the one TruncateTo clamped stays. offset is also
// clamped to the log end. Serialized with TruncateTo's own update of the
// file.
func (p *Partition) WriteCleanerCheckpoint(offset int64, truncations uint64) (written bool, err error) {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return false, err
	}
	if p.truncations.Load() != truncations {
		return false, nil
	}
	topic, part := checkpoint.EntryName(p.dir)
	path := filepath.Join(p.dir, CleanerCheckpointFile)
	if err := checkpoint.WriteOffset(p.cfg.FS, path, topic, part, min(offset, p.mu.end.Offset)); err != nil {
		return false, err
	}
	return true, nil
}
