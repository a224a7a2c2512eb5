package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// raftStateDir is the directory, under -data, holding one raft state file
// per replicated partition ("<topic>-<partition>.state"). It is not a
// valid "<topic>-<partition>" name, so the partlog Dir leaves it alone.
const raftStateDir = "partlog-raft"

// raftStateVersion is the first line of a raft state file.
const raftStateVersion = 0

// raftNoopControlType is the control record type of the batch that stands
// for one of raft's empty entries (the entry a new leader appends at the
// start of its term). Kafka's own types are 0 to 6; clients skip control
// batches, and Kafka's tools print unknown types as UNKNOWN.
const raftNoopControlType batch.ControlType = 100

// errRaftState is wrapped by every error about a damaged raft state file
// or a partition that does not match it.
var errRaftState = errors.New("broker: invalid raft state")

// entryPos is where one raft entry lives in the partition: its batch's
// base offset and the entry's term (the batch's partitionLeaderEpoch).
type entryPos struct {
	base int64
	term uint64
}

// raftStorage is raft.Storage over a partition's own log: raft entry
// snapIndex+1+k is the k-th batch at or after snapOffset. The positions of
// the entries are kept in memory and rebuilt at start by scanning the
// batch headers; the hard state and the snapshot point are kept in a
// small state file written atomically (temporary file, fsync, rename,
// directory fsync).
//
// It is used only by its replica's goroutine (raft calls it from there).
type raftStorage struct {
	fs   vfs.FS
	path string
	part *plog.Partition
	cs   *pb.ConfState

	hs         *pb.HardState
	snapIndex  uint64 // the last entry the log no longer holds
	snapTerm   uint64
	snapOffset int64      // base offset of entry snapIndex+1: the log start
	ents       []entryPos // entries snapIndex+1 ...
	end        int64      // offset after the last entry's batch
	readBuf    []byte
	log        *slog.Logger // nil: discard (raftsnap.go's warnings)
}

// raftState is what the state file holds.
type raftState struct {
	term, vote, commit  uint64
	snapIndex, snapTerm uint64
	snapOffset          int64
}

// appendRaftState encodes the state file:
//
//	0                          version
//	<term> <vote> <commit>     raft's HardState
//	<index> <term> <offset>    the snapshot point: last entry dropped, its
//	                           term, and the base offset of the next one
func appendRaftState(dst []byte, s raftState) []byte {
	return fmt.Appendf(dst, "%d\n%d %d %d\n%d %d %d\n", raftStateVersion,
		s.term, s.vote, s.commit, s.snapIndex, s.snapTerm, s.snapOffset)
}

// parseRaftState decodes a state file.
func parseRaftState(path string, b []byte) (raftState, error) {
	var s raftState
	lines := strings.Split(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return s, fmt.Errorf("%w: %s: want three lines, got %q", errRaftState, path, b)
	}
	if lines[0] != strconv.Itoa(raftStateVersion) {
		return s, fmt.Errorf("%w: %s: version %q, want %d", errRaftState, path, lines[0], raftStateVersion)
	}
	nums := func(line string, field string) ([3]uint64, error) {
		var out [3]uint64
		f := strings.Fields(line)
		if len(f) != 3 {
			return out, fmt.Errorf("%w: %s: %s line %q does not hold three numbers", errRaftState, path, field, line)
		}
		for i := range f {
			v, err := strconv.ParseUint(f[i], 10, 63)
			if err != nil {
				return out, fmt.Errorf("%w: %s: %s field %d %q: %v", errRaftState, path, field, i, f[i], err)
			}
			out[i] = v
		}
		return out, nil
	}
	hs, err := nums(lines[1], "hard state")
	if err != nil {
		return s, err
	}
	sp, err := nums(lines[2], "snapshot")
	if err != nil {
		return s, err
	}
	s.term, s.vote, s.commit = hs[0], hs[1], hs[2]
	s.snapIndex, s.snapTerm, s.snapOffset = sp[0], sp[1], int64(sp[2])
	if s.commit < s.snapIndex {
		return s, fmt.Errorf("%w: %s: commit %d below the snapshot index %d", errRaftState, path, s.commit, s.snapIndex)
	}
	return s, nil
}

// readRaftState reads a state file; a missing one is the zero state.
func readRaftState(fsys vfs.FS, path string) (raftState, bool, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return raftState{}, false, nil
	}
	if err != nil {
		return raftState{}, false, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		return raftState{}, false, fmt.Errorf("%w: %s: longer than %d bytes", errRaftState, path, len(buf)-1)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return raftState{}, false, fmt.Errorf("%s: %w", path, err)
	}
	s, err := parseRaftState(path, buf[:n])
	return s, true, err
}

// openRaftStorage reads the partition's state file and rebuilds the entry
// positions by scanning the batch headers from the snapshot offset to the
// log end (a log end at or below the snapshot offset holds no entry: a
// snapshot was installed and nothing after it copied yet). It finishes
// what a crash interrupted: raft log truncation recorded but not yet
// applied (the records before the snapshot offset are deleted, once the
// high watermark reaches it).
func openRaftStorage(fsys vfs.FS, path string, part *plog.Partition, voters []uint64) (*raftStorage, error) {
	st, found, err := readRaftState(fsys, path)
	if err != nil {
		return nil, err
	}
	s := &raftStorage{
		fs: fsys, path: path, part: part,
		cs: &pb.ConfState{Voters: voters},
		hs: &pb.HardState{Term: new(st.term), Vote: new(st.vote), Commit: new(st.commit)},
	}
	if !found {
		// A partition that existed before cluster mode: its batches
		// become the first entries (term = their leader epoch).
		st.snapOffset = part.LogStartOffset()
	}
	s.snapIndex, s.snapTerm, s.snapOffset = st.snapIndex, st.snapTerm, st.snapOffset
	if err := s.finishInterruptedInstall(); err != nil { // raftsnap.go
		return nil, err
	}
	if part.LogStartOffset() > s.snapOffset {
		return nil, fmt.Errorf("%w: %s: the log starts at %d, above the snapshot offset %d in %s", errRaftState, part.Dir(), part.LogStartOffset(), s.snapOffset, path)
	}
	s.end = s.snapOffset
	for s.end < part.LogEndOffset() {
		r, err := part.ReadFromFollower(s.end, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("scan %s at %d: %w", part.Dir(), s.end, err)
		}
		b := r.Bytes()
		if len(b) == 0 {
			_ = r.Close()
			return nil, fmt.Errorf("%w: %s: no batch at offset %d below the log end %d", errRaftState, part.Dir(), s.end, part.LogEndOffset())
		}
		for len(b) > 0 {
			bt, rest, err := batch.Parse(b)
			if err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("scan %s at %d: %w", part.Dir(), s.end, err)
			}
			if bt.BaseOffset() != s.end {
				_ = r.Close()
				return nil, fmt.Errorf("%w: %s: batch at %d, the previous one ended before %d (a compacted log cannot be a raft log)", errRaftState, part.Dir(), bt.BaseOffset(), s.end)
			}
			s.ents = append(s.ents, entryPos{base: bt.BaseOffset(), term: uint64(max(bt.PartitionLeaderEpoch(), 0))})
			s.end = bt.NextOffset()
			b = rest
		}
		_ = r.Close()
	}
	if c := s.hs.GetCommit(); c > s.lastIndex() {
		// The log lost entries the state says were committed (a torn
		// tail after a machine crash): raft refuses that, and so do we.
		return nil, fmt.Errorf("%w: %s: commit index %d beyond the last entry %d", errRaftState, path, c, s.lastIndex())
	}
	if err := s.setCommitted(s.hs.GetCommit()); err != nil {
		return nil, err
	}
	return s, nil
}

// setCommitted moves the high watermark to the end of committed entry
// index (not past the log end: after a snapshot install the log may end
// below the snapshot offset) and, once it reaches the snapshot offset,
// deletes the records before it (DeleteRecordsBefore: the raft log was
// truncated there, or a snapshot installed).
func (s *raftStorage) setCommitted(index uint64) error {
	hw := min(s.offsetAfter(index), s.part.LogEndOffset())
	if hw > s.part.HighWatermark() {
		if err := s.part.SetHighWatermark(hw); err != nil {
			return err
		}
	}
	if s.part.LogStartOffset() < s.snapOffset && s.part.HighWatermark() >= s.snapOffset {
		if err := s.part.DeleteRecordsBefore(s.snapOffset); err != nil {
			return fmt.Errorf("delete the records of %s before the raft snapshot offset %d: %w", s.part.Dir(), s.snapOffset, err)
		}
	}
	return nil
}

// state returns what the state file should hold now.
func (s *raftStorage) state() raftState {
	return raftState{
		term: s.hs.GetTerm(), vote: s.hs.GetVote(), commit: s.hs.GetCommit(),
		snapIndex: s.snapIndex, snapTerm: s.snapTerm, snapOffset: s.snapOffset,
	}
}

// save writes the state file atomically.
func (s *raftStorage) save() error {
	if err := checkpoint.WriteAtomic(s.fs, s.path, appendRaftState(nil, s.state())); err != nil {
		return fmt.Errorf("write raft state %s: %w", s.path, err)
	}
	return nil
}

// setHardState records raft's hard state durably.
func (s *raftStorage) setHardState(hs *pb.HardState) error {
	old := s.hs
	s.hs = &pb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}
	if err := s.save(); err != nil {
		s.hs = old
		return err
	}
	return nil
}

// lastIndex is the index of the last entry.
func (s *raftStorage) lastIndex() uint64 { return s.snapIndex + uint64(len(s.ents)) }

// pos returns the position of entry i (snapIndex < i <= lastIndex).
func (s *raftStorage) pos(i uint64) entryPos { return s.ents[i-s.snapIndex-1] }

// offsetAfter returns the offset after entry i's batch: the base offset
// of entry i+1, or the log end after the last entry. i may be snapIndex.
func (s *raftStorage) offsetAfter(i uint64) int64 {
	if i >= s.lastIndex() {
		return s.end
	}
	return s.pos(i + 1).base
}

// indexOf returns the index of the entry whose batch holds offset, or 0
// when no entry does.
func (s *raftStorage) indexOf(offset int64) uint64 {
	lo, hi := 0, len(s.ents)
	for lo < hi {
		m := (lo + hi) / 2
		if s.ents[m].base <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || offset >= s.end {
		return 0
	}
	return s.snapIndex + uint64(lo)
}

// InitialState implements raft.Storage.
func (s *raftStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return s.hs, s.cs, nil
}

// Entries implements raft.Storage: it reads the batches of entries
// [lo, hi) from the partition. A batch of raftNoopControlType is an empty
// entry; any other batch is a normal entry whose data is the batch.
func (s *raftStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.snapIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 {
		return nil, raft.ErrUnavailable
	}
	var out []*pb.Entry
	var size uint64
	for i := lo; i < hi; {
		p := s.pos(i)
		r, err := s.part.ReadFromFollower(p.base, int(min(max(maxSize-min(size, maxSize), 1), 8<<20)))
		if err != nil {
			return nil, fmt.Errorf("raft entries %d..%d of %s: %w", lo, hi, s.part.Dir(), err)
		}
		b := r.Bytes()
		if len(b) == 0 {
			_ = r.Close()
			return nil, fmt.Errorf("raft entry %d of %s: no batch at offset %d", i, s.part.Dir(), p.base)
		}
		for len(b) > 0 && i < hi {
			bt, rest, err := batch.Parse(b)
			if err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("raft entry %d of %s: %w", i, s.part.Dir(), err)
			}
			if bt.BaseOffset() != s.pos(i).base {
				_ = r.Close()
				return nil, fmt.Errorf("raft entry %d of %s: batch at %d, want %d", i, s.part.Dir(), bt.BaseOffset(), s.pos(i).base)
			}
			e := &pb.Entry{Index: new(i), Term: new(s.pos(i).term), Type: pb.EntryNormal.Enum()}
			if !isRaftNoop(bt) {
				e.Data = append([]byte(nil), bt...)
			}
			size += uint64(len(e.Data))
			if len(out) > 0 && size > maxSize {
				_ = r.Close()
				return out, nil
			}
			out = append(out, e)
			i++
			b = rest
		}
		_ = r.Close()
	}
	return out, nil
}

// Term implements raft.Storage.
func (s *raftStorage) Term(i uint64) (uint64, error) {
	switch {
	case i < s.snapIndex:
		return 0, raft.ErrCompacted
	case i == s.snapIndex:
		return s.snapTerm, nil
	case i > s.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return s.pos(i).term, nil
}

// LastIndex implements raft.Storage.
func (s *raftStorage) LastIndex() (uint64, error) { return s.lastIndex(), nil }

// FirstIndex implements raft.Storage.
func (s *raftStorage) FirstIndex() (uint64, error) { return s.snapIndex + 1, nil }

// Snapshot implements raft.Storage. The snapshot of a partition is its
// point: the last entry the log no longer holds, and in Data the offset
// the log restarts at (8 bytes, big-endian) followed by the producer state
// of the batches below it (the partition's producer snapshot file at that
// offset, Kafka's format; raftsnap.go). A follower installing it restarts
// its log empty at that offset with that producer state and copies the
// entries after it; the records before it are gone, as retention deleted
// them.
func (s *raftStorage) Snapshot() (*pb.Snapshot, error) {
	return &pb.Snapshot{
		Data: append(binary.BigEndian.AppendUint64(nil, uint64(s.snapOffset)), s.producerSnapshot()...),
		Metadata: &pb.SnapshotMetadata{
			ConfState: s.cs,
			Index:     new(s.snapIndex),
			Term:      new(s.snapTerm),
		},
	}, nil
}

// applySnapshot installs a snapshot from the leader (raft found no entry
// of this log at the snapshot's index and term, so the log after the
// commit point is not the leader's). First the log is cut at its own
// commit point, and not above the snapshot offset (TruncateTo: what stays
// is committed, so the leader's too); then the snapshot's data is written
// beside the state file (raftsnap.go) and the state file records the
// snapshot point; then the log restarts empty at the snapshot offset with
// the leader's producer state (finishInstall). A crash before the state
// file leaves the old state with a log that merely lost uncommitted
// entries raft was discarding; a crash after it is finished by the next
// open (finishInterruptedInstall). The next entry is appended at the
// snapshot offset.
func (s *raftStorage) applySnapshot(snap *pb.Snapshot) error {
	off, producers, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		return err
	}
	md := snap.GetMetadata()
	if md.GetIndex() <= s.snapIndex || off < s.snapOffset {
		return fmt.Errorf("%w: snapshot at index %d, offset %d is not past this log's snapshot at index %d, offset %d", errRaftState, md.GetIndex(), off, s.snapIndex, s.snapOffset)
	}
	keep := min(s.offsetAfter(min(s.hs.GetCommit(), s.lastIndex())), off)
	if s.part.LogEndOffset() > keep {
		if err := s.part.TruncateTo(keep); err != nil {
			return fmt.Errorf("install snapshot at offset %d in %s: %w", off, s.part.Dir(), err)
		}
	}
	if err := s.saveInstall(snap.GetData()); err != nil {
		return err
	}
	old := *s
	s.snapIndex, s.snapTerm, s.snapOffset = md.GetIndex(), md.GetTerm(), off
	if c := s.hs.GetCommit(); c < s.snapIndex {
		s.hs = &pb.HardState{Term: new(s.hs.GetTerm()), Vote: new(s.hs.GetVote()), Commit: new(s.snapIndex)}
	}
	if err := s.save(); err != nil {
		s.snapIndex, s.snapTerm, s.snapOffset, s.hs = old.snapIndex, old.snapTerm, old.snapOffset, old.hs
		return err
	}
	s.ents, s.end = nil, off
	return s.finishInstall(off, producers)
}

// compact drops the entries before the batch at offset (a segment base at
// or below the high watermark) from the raft log and deletes their
// records: the state file records the new snapshot point first.
func (s *raftStorage) compact(offset int64) error {
	i := s.indexOf(offset)
	if i == 0 || s.pos(i).base != offset || i-1 > s.hs.GetCommit() {
		return nil
	}
	prev := i - 1
	if prev <= s.snapIndex {
		return nil
	}
	term := s.pos(prev).term
	k := int(prev - s.snapIndex)
	oldIndex, oldTerm, oldOffset := s.snapIndex, s.snapTerm, s.snapOffset
	s.snapIndex, s.snapTerm, s.snapOffset = prev, term, offset
	if err := s.save(); err != nil {
		s.snapIndex, s.snapTerm, s.snapOffset = oldIndex, oldTerm, oldOffset
		return err
	}
	s.ents = append([]entryPos(nil), s.ents[k:]...)
	return s.part.DeleteRecordsBefore(offset)
}

// isRaftNoop reports whether bt is the control batch of an empty raft
// entry.
func isRaftNoop(bt batch.Batch) bool {
	if !bt.Attributes().IsControl() || bt.RecordsCount() != 1 {
		return false
	}
	for rec, err := range bt.All(nil) {
		if err != nil {
			return false
		}
		cr, err := batch.ParseControlRecord(rec)
		return err == nil && cr.Type == raftNoopControlType
	}
	return false
}

// raftNoopBatch encodes the batch of an empty raft entry at offset with
// the entry's term as its leader epoch: a control batch with one record
// whose key is version 0 and raftNoopControlType, no value and no
// timestamp, so every replica writes the same bytes.
func raftNoopBatch(offset int64, term uint64) ([]byte, error) {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(raftNoopControlType))
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: offset, PartitionLeaderEpoch: int32(term)})
	if err := bld.Add(batch.Record{Key: key, Timestamp: batch.NoTimestamp}); err != nil {
		return nil, err
	}
	b, err := bld.Build()
	if err != nil {
		return nil, err
	}
	b.SetAttributes(b.Attributes() | batch.ControlBit)
	b.SetCRC()
	return b, nil
}

// raftStatePath is the state file of a partition.
func raftStatePath(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, raftStateDir, checkpoint.DirName(topic, partition)+".state")
}
