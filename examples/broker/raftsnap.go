package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// Producer state in raft snapshots. A follower that catches up by a
// snapshot restarts its log at the leader's log start; the batches below
// it are gone, and with them what the follower would have learnt of their
// producers. So the snapshot carries the leader's producer state at that
// offset: the partition's producer snapshot file there (Kafka's
// <offset>.snapshot, which the log writes at every segment roll, and
// retention cuts the raft log at segment bases), appended to the snapshot
// offset in the raft snapshot's data. The follower restores it into its
// restarted log (Partition.RestoreProducers), so a retry of a producer's
// last batch older than the snapshot point is still a duplicate there,
// and a transaction open across the point stays open.
//
// The install is made crash-safe by a file beside the state file,
// "<topic>-<partition>.state.install", holding the snapshot's data: it is
// written (atomically) before the state file records the new snapshot
// point, and removed once the log restarted with the producer state. An
// open that finds it with the state file's snapshot offset and a log that
// holds nothing past that offset finishes the install; otherwise it is a
// leftover (a crash before the state file, or after the finish) and is
// removed.

// installSuffix names the install file beside a state file.
const installSuffix = ".install"

// decodeSnapshotData splits a raft snapshot's data into the offset the
// log restarts at and the producer state below it (none when the data is
// the offset alone).
func decodeSnapshotData(data []byte) (int64, []plog.ProducerSnapshotEntry, error) {
	if len(data) < 8 {
		return 0, nil, fmt.Errorf("%w: snapshot data of %d bytes, want at least 8", errRaftState, len(data))
	}
	off := int64(binary.BigEndian.Uint64(data))
	if off < 0 {
		return 0, nil, fmt.Errorf("%w: snapshot offset %d", errRaftState, off)
	}
	if len(data) == 8 {
		return off, nil, nil
	}
	entries, err := plog.DecodeProducerSnapshot(data[8:])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: producer state of the snapshot at offset %d: %w", errRaftState, off, err)
	}
	return off, entries, nil
}

// producerSnapshot returns the bytes of the partition's producer snapshot
// file at the snapshot offset, checked, or nil when there is none that
// reads (the follower then learns only the producers of the batches it
// copies; a warning says so).
func (s *raftStorage) producerSnapshot() []byte {
	path := filepath.Join(s.part.Dir(), plog.SnapshotFileName(s.snapOffset))
	b, err := readSmallFile(s.fs, path, 1<<30)
	if err == nil {
		_, err = plog.DecodeProducerSnapshot(b)
	}
	if err != nil {
		if s.log != nil {
			s.log.Warn("raft snapshot sent without producer state", "file", path, "err", err)
		}
		return nil
	}
	return b
}

// readSmallFile reads a whole file of at most limit bytes.
func readSmallFile(fsys vfs.FS, path string, limit int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// installPath is the install file of the state file.
func (s *raftStorage) installPath() string { return s.path + installSuffix }

// saveInstall writes the snapshot's data to the install file, atomically.
func (s *raftStorage) saveInstall(data []byte) error {
	if err := checkpoint.WriteAtomic(s.fs, s.installPath(), data); err != nil {
		return fmt.Errorf("write raft snapshot %s: %w", s.installPath(), err)
	}
	return nil
}

// finishInstall restarts the log empty at the snapshot offset (unless it
// already is), restores the leader's producer state into it, and removes
// the install file.
func (s *raftStorage) finishInstall(off int64, producers []plog.ProducerSnapshotEntry) error {
	if s.part.LogStartOffset() != off || s.part.LogEndOffset() != off {
		if err := s.part.TruncateFullyAndStartAt(off); err != nil {
			return fmt.Errorf("install snapshot: restart %s at %d: %w", s.part.Dir(), off, err)
		}
	}
	if err := s.part.RestoreProducers(producers); err != nil {
		return fmt.Errorf("install snapshot at offset %d: %w", off, err)
	}
	if err := s.fs.Remove(s.installPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("install snapshot: remove %s: %w", s.installPath(), err)
	}
	return nil
}

// finishInterruptedInstall finishes, at open, an install a crash
// interrupted after the state file recorded its snapshot point, and
// removes a leftover install file.
func (s *raftStorage) finishInterruptedInstall() error {
	data, err := readSmallFile(s.fs, s.installPath(), 1<<30)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", s.installPath(), err)
	}
	off, producers, err := decodeSnapshotData(data)
	if err != nil {
		return fmt.Errorf("%s: %w", s.installPath(), err)
	}
	if off == s.snapOffset && s.part.LogEndOffset() <= off {
		return s.finishInstall(off, producers)
	}
	if err := s.fs.Remove(s.installPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.installPath(), err)
	}
	return nil
}
