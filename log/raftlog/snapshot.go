package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
)

// Raft snapshots of a partition. A snapshot is the partition at its raft
// snapshot point: the entries up to the point are no longer raft entries,
// and what a follower needs of them travels in the snapshot's data:
//
//	8 bytes  the offset of the entry after the point (big-endian)
//	8 bytes  the log start the leader keeps: that offset when retention
//	         deleted everything below the point, lower when key compaction
//	         moved the point and kept the compacted records below it
//	4 bytes  the length of the producer state (0: none)
//	...      the producer state at the offset: the partition's producer
//	         snapshot file there (Kafka's <offset>.snapshot, written at
//	         every segment roll; both retention and key compaction move
//	         the point to a segment base)
//	...      the batches from the log start to the offset, as stored
//	         (only when the log start is below the offset)
//
// A follower installing it (Storage.applySnapshot) keeps its own
// committed records below the offset, appends the leader's batches it
// lacks, or, when the snapshot carries no records, restarts its log empty
// at the offset (TruncateFullyAndStartAt); then it restores the leader's
// producer state at the offset (Partition.RestoreProducers), so a retry
// of a producer's batch older than the snapshot point is still a
// duplicate there, and a transaction open across the point stays open.
//
// One file beside the state file, "<state file>.install",
// makes the install crash-safe. It holds the offset the log is cut at
// (keep: the follower's commit point, not above the snapshot offset), the
// snapshot's index, and the snapshot's data without its batches:
//
//	8 bytes  keep
//	8 bytes  the snapshot's raft index
//	...      the snapshot data's header and producer state (above)
//
// It is written (atomically) first; then the log is cut at keep, the
// leader's batches past it are appended and synced, the state file
// records the snapshot point, the log is restarted (no records) and the
// producer state restored, and the file is removed. An open that finds
// the file (finishInterruptedInstall) undoes an install the state file
// does not hold yet (the log is cut back at keep: what the install
// appended goes, and the old state stands, the leader sends the snapshot
// again), finishes one it holds (restart and restore again: both can be
// repeated), and removes a leftover of an older install.

// installSuffix names the install file beside a state file.
const installSuffix = ".install"

// snapshotHeaderLen is the fixed part of a snapshot's data: offset, log
// start and the producer state's length.
const snapshotHeaderLen = 8 + 8 + 4

// snapshotData is a raft snapshot's data, decoded.
type snapshotData struct {
	offset    int64  // the offset of the entry after the point
	start     int64  // the leader's log start, <= offset
	producers []byte // the producer snapshot at offset, nil: none
	records   []byte // the batches from start to offset
}

// appendSnapshotData encodes d after dst.
func appendSnapshotData(dst []byte, d snapshotData) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.offset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.start))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(d.producers)))
	dst = append(dst, d.producers...)
	return append(dst, d.records...)
}

// decodeSnapshotData decodes a raft snapshot's data, checking its producer
// state.
func decodeSnapshotData(b []byte) (snapshotData, error) {
	var d snapshotData
	if len(b) < snapshotHeaderLen {
		return d, fmt.Errorf("%w: snapshot data of %d bytes, want at least %d", ErrState, len(b), snapshotHeaderLen)
	}
	d.offset = int64(binary.BigEndian.Uint64(b))
	d.start = int64(binary.BigEndian.Uint64(b[8:]))
	n := binary.BigEndian.Uint32(b[16:])
	rest := b[snapshotHeaderLen:]
	switch {
	case d.offset < 0:
		return d, fmt.Errorf("%w: snapshot offset %d", ErrState, d.offset)
	case d.start < 0 || d.start > d.offset:
		return d, fmt.Errorf("%w: snapshot log start %d, want 0 to its offset %d", ErrState, d.start, d.offset)
	case uint64(n) > uint64(len(rest)):
		return d, fmt.Errorf("%w: snapshot at offset %d: producer state of %d bytes, %d left", ErrState, d.offset, n, len(rest))
	}
	d.records = rest[n:]
	if len(d.records) == 0 {
		d.records = nil
	}
	if d.records != nil && d.start == d.offset {
		return d, fmt.Errorf("%w: snapshot at offset %d: %d bytes of records, with no log start below it", ErrState, d.offset, len(d.records))
	}
	if n > 0 {
		d.producers = rest[:n]
		if err := checkProducerSnapshot(d.producers); err != nil {
			return d, fmt.Errorf("%w: producer state of the snapshot at offset %d: %w", ErrState, d.offset, err)
		}
	}
	return d, nil
}

// producerSnapshot returns the partition's producer snapshot at the
// snapshot offset (Partition.ProducerSnapshot: the file, or the roll's
// snapshot its background flush has not written yet), or nil when there
// is none that reads (the follower then learns only the producers of the
// batches it copies; a warning says so). records are the batches below
// the offset the snapshot carries: when there is no producer snapshot at
// the offset, the one at the end of the last of them describes the same
// producers, as no batch lies between (this node installed a compacted
// snapshot whose records end below its point: RestoreProducers wrote the
// leader's state at the log end then).
func (s *Storage) producerSnapshot(records []byte) []byte {
	b, err := s.part.ProducerSnapshot(s.snapOffset)
	if err != nil {
		if end := regionEnd(records); end >= 0 && end < s.snapOffset {
			if b, err2 := s.part.ProducerSnapshot(end); err2 == nil {
				return b
			}
		}
	}
	if err != nil {
		if s.logger != nil {
			s.logger.Warn("raft snapshot sent without producer state", "dir", s.part.Dir(), "offset", s.snapOffset, "err", err)
		}
		return nil
	}
	return b
}

// regionEnd returns the offset after the last batch of records (-1 when
// there is none that parses).
func regionEnd(records []byte) int64 {
	end := int64(-1)
	for len(records) > 0 {
		bt, rest, err := batch.Parse(records)
		if err != nil {
			break
		}
		end, records = bt.NextOffset(), rest
	}
	return end
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
func (s *Storage) installPath() string { return s.path + installSuffix }

// saveInstall writes the install file, atomically: keep, the snapshot's
// index, and d without its records.
func (s *Storage) saveInstall(keep int64, index uint64, d snapshotData) error {
	d.records = nil
	b := binary.BigEndian.AppendUint64(nil, uint64(keep))
	b = binary.BigEndian.AppendUint64(b, index)
	if err := vfs.WriteFileAtomic(s.fs, s.installPath(), appendSnapshotData(b, d)); err != nil {
		return fmt.Errorf("write raft snapshot install file %s: %w", s.installPath(), err)
	}
	return nil
}

// finishInstall does what is left of an install once the state file
// holds the snapshot point: a snapshot without records restarts the log
// empty at its offset (unless it already is); the leader's producer state
// at the offset, when the snapshot carries one, is restored; the install
// file is removed. Every step may be repeated.
func (s *Storage) finishInstall(d snapshotData) error {
	if d.start == d.offset && (s.part.LogStartOffset() != d.offset || s.part.LogEndOffset() != d.offset) {
		if err := s.part.TruncateFullyAndStartAt(d.offset); err != nil {
			return fmt.Errorf("install snapshot: restart %s at %d: %w", s.part.Dir(), d.offset, err)
		}
	}
	// A snapshot without producer state (the leader had no snapshot file
	// at its point that reads) restores nothing: RestoreProducers would
	// replace what the log's own and copied batches taught it with no
	// producer at all.
	if d.producers != nil {
		if err := s.part.RestoreProducers(d.offset, d.producers); err != nil {
			return fmt.Errorf("install snapshot at offset %d: %w", d.offset, err)
		}
	}
	if err := s.removeInstall(); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	return nil
}

// removeInstall removes the install file durably: a crash after it must
// not bring the file back, or the next open would undo the install
// again and cut the entries persisted since.
func (s *Storage) removeInstall() error {
	if err := s.fs.Remove(s.installPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.installPath(), err)
	}
	if err := vfs.SyncDir(s.fs, filepath.Dir(s.installPath())); err != nil {
		return fmt.Errorf("sync the directory of %s: %w", s.installPath(), err)
	}
	return nil
}

// finishInterruptedInstall completes or undoes, at open, an install a
// crash interrupted (see the protocol above); st is the state file's
// content.
func (s *Storage) finishInterruptedInstall(st raftState) error {
	b, err := readSmallFile(s.fs, s.installPath(), 1<<30)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", s.installPath(), err)
	}
	if len(b) < 16 {
		return fmt.Errorf("%w: %s: %d bytes, want at least 16", ErrState, s.installPath(), len(b))
	}
	keep, index := int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint64(b[8:])
	d, err := decodeSnapshotData(b[16:])
	if err != nil {
		return fmt.Errorf("%s: %w", s.installPath(), err)
	}
	if d.records != nil || keep < 0 || keep > d.offset {
		return fmt.Errorf("%w: %s: keep %d, snapshot offset %d, %d bytes of records", ErrState, s.installPath(), keep, d.offset, len(d.records))
	}
	switch {
	case st.snapIndex < index:
		// Not recorded: cut back what the install appended.
		if s.part.LogEndOffset() > keep {
			if err := s.part.TruncateTo(keep); err != nil {
				return fmt.Errorf("undo the snapshot install in %s: %w", s.part.Dir(), err)
			}
		}
	case st.snapIndex == index && st.snapOffset == d.offset && s.part.LogEndOffset() <= d.offset:
		return s.finishInstall(d)
	}
	return s.removeInstall()
}
