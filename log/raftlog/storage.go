package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
)

// raftStateVersion is the first line of a raft state file this package
// writes. Version 0 (three lines, no configuration: the membership was the
// boot configuration) is read too.
const raftStateVersion = 1

// NoopControlType is the control record type of the batch that stands for
// one of raft's empty entries (the entry a new leader appends at the start
// of its term). Kafka's own types are 0 to 6; clients skip control batches,
// and Kafka's tools print unknown types as UNKNOWN. A reader of a
// replicated partition sees these batches, one record each, between the
// data batches.
const NoopControlType batch.ControlType = 100

// ConfChangeControlType is the control record type of the batch that
// stands for a raft configuration change entry (EntryConfChangeV2): its
// one record's value is the entry's data, the encoded ConfChangeV2.
const ConfChangeControlType batch.ControlType = 101

// ErrState is wrapped by every error about a damaged raft state file
// or a partition that does not match it.
var ErrState = errors.New("raftlog: invalid raft state")

// entryPos is where one raft entry lives in the partition: its batch's
// base offset and the entry's term (the batch's partitionLeaderEpoch).
type entryPos struct {
	base int64
	term uint64
}

// Storage is raft.Storage over a partition's own log: every raft entry is
// one batch of the partition, entry FirstIndex+k the k-th batch at or after
// the snapshot point's offset. A normal entry's data is the batch itself
// (the leader appended it with its producer checks and offsets, a follower
// appends the same bytes with AppendAssigned); an empty entry is a control
// batch of NoopControlType, a configuration change one of
// ConfChangeControlType; each batch's partition leader epoch is the
// entry's raft term. The positions of the entries are kept in memory and
// rebuilt at open by scanning the batch headers; the hard state, the
// snapshot point, the log start and the membership are kept in a small
// state file beside the partition, replaced atomically (temporary file,
// fsync, rename, directory fsync).
//
// A Storage is not safe for concurrent use: raft and the Replica that owns
// it call it from the replica's loop only.
type Storage struct {
	fs   vfs.FS
	path string
	part *log.Partition
	cs   *pb.ConfState

	hs         *pb.HardState
	applied    uint64 // entries up to here are applied: cs holds their configuration changes
	snapIndex  uint64 // the last entry the log no longer holds
	snapTerm   uint64
	snapOffset int64 // base offset of entry snapIndex+1
	// logStart is where the partition's log starts once the deletions
	// recorded here are done: snapOffset after retention, lower when key
	// compaction moved the snapshot point (the compacted records below
	// snapOffset stay, as records, not raft entries).
	logStart int64
	ents     []entryPos // entries snapIndex+1 ...
	end      int64      // offset after the last entry's batch
	readBuf  []byte

	// read reads the partition's batches from an offset (the partition's
	// ReadFromFollower; tests wrap it to inject read errors).
	read ReadFunc
	// readErr is the first error Entries met reading the partition (not
	// ErrCompacted or ErrUnavailable). Raft panics with such an error;
	// the replica recovers from that panic only when readErr is set (see
	// replica.guard).
	readErr error
	logger  *slog.Logger // nil: discard (snapshot.go's warnings)
}

// ReadFunc reads a partition's batches from offset, at most maxBytes (at
// least one batch), as Partition.ReadFromFollower does.
type ReadFunc func(offset int64, maxBytes int) (log.Records, error)

// raftState is what the state file holds.
type raftState struct {
	term, vote, commit  uint64
	snapIndex, snapTerm uint64
	snapOffset          int64
	logStart            int64 // version 0: snapOffset
	// applied and the configuration (version 1): the entries up to
	// applied are applied, and voters and learners are the membership
	// after them. hasConf is false for a version 0 file.
	applied          uint64
	voters, learners []uint64
	hasConf          bool
}

// appendRaftState encodes the state file:
//
//	1                            version
//	<term> <vote> <commit>       raft's HardState
//	<index> <term> <offset> <start>
//	                             the snapshot point: last entry dropped, its
//	                             term, and the base offset of the next one;
//	                             the log start (below offset after key
//	                             compaction)
//	<applied> <voters> <learners> the membership after the entries up to
//	                             applied: node ids, comma-separated, "-"
//	                             for none
func appendRaftState(dst []byte, s raftState) []byte {
	dst = fmt.Appendf(dst, "%d\n%d %d %d\n%d %d %d %d\n", raftStateVersion,
		s.term, s.vote, s.commit, s.snapIndex, s.snapTerm, s.snapOffset, s.logStart)
	return fmt.Appendf(dst, "%d %s %s\n", s.applied, formatIDs(s.voters), formatIDs(s.learners))
}

// formatIDs writes node ids as "1,2,3" ("-": none).
func formatIDs(ids []uint64) string {
	if len(ids) == 0 {
		return "-"
	}
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, id, 10)
	}
	return string(b)
}

// parseIDs reads what formatIDs writes.
func parseIDs(path, field, s string) ([]uint64, error) {
	if s == "-" {
		return nil, nil
	}
	var out []uint64
	for f := range strings.SplitSeq(s, ",") {
		id, err := strconv.ParseUint(f, 10, 63)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%w: %s: %s %q: not a node id", ErrState, path, field, f)
		}
		out = append(out, id)
	}
	return out, nil
}

// parseRaftState decodes a state file.
func parseRaftState(path string, b []byte) (raftState, error) {
	var s raftState
	lines := strings.Split(string(b), "\n")
	want := 0
	switch lines[0] {
	case "0":
		want = 3
	case strconv.Itoa(raftStateVersion):
		want = 4
	default:
		return s, fmt.Errorf("%w: %s: version %q, want 0 or %d", ErrState, path, lines[0], raftStateVersion)
	}
	if len(lines) != want+1 || lines[want] != "" {
		return s, fmt.Errorf("%w: %s: want %d lines, got %q", ErrState, path, want, b)
	}
	nums := func(line string, field string, n int) ([4]uint64, error) {
		var out [4]uint64
		f := strings.Fields(line)
		if len(f) != n {
			return out, fmt.Errorf("%w: %s: %s line %q does not hold %d numbers", ErrState, path, field, line, n)
		}
		for i := range f {
			v, err := strconv.ParseUint(f[i], 10, 63)
			if err != nil {
				return out, fmt.Errorf("%w: %s: %s field %d %q: %v", ErrState, path, field, i, f[i], err)
			}
			out[i] = v
		}
		return out, nil
	}
	hs, err := nums(lines[1], "hard state", 3)
	if err != nil {
		return s, err
	}
	sp, err := nums(lines[2], "snapshot", want) // version 1 adds the log start
	if err != nil {
		return s, err
	}
	s.term, s.vote, s.commit = hs[0], hs[1], hs[2]
	s.snapIndex, s.snapTerm, s.snapOffset = sp[0], sp[1], int64(sp[2])
	s.logStart = s.snapOffset
	if want == 4 {
		s.logStart = int64(sp[3])
		if s.logStart > s.snapOffset {
			return s, fmt.Errorf("%w: %s: log start %d above the snapshot offset %d", ErrState, path, s.logStart, s.snapOffset)
		}
	}
	if s.commit < s.snapIndex {
		return s, fmt.Errorf("%w: %s: commit %d below the snapshot index %d", ErrState, path, s.commit, s.snapIndex)
	}
	s.applied = s.commit // version 0: no configuration changes exist
	if want == 4 {
		f := strings.Fields(lines[3])
		if len(f) != 3 {
			return s, fmt.Errorf("%w: %s: configuration line %q does not hold applied, voters and learners", ErrState, path, lines[3])
		}
		a, err := strconv.ParseUint(f[0], 10, 63)
		if err != nil {
			return s, fmt.Errorf("%w: %s: applied %q: %v", ErrState, path, f[0], err)
		}
		if a > s.commit {
			return s, fmt.Errorf("%w: %s: applied %d beyond the commit index %d", ErrState, path, a, s.commit)
		}
		s.applied = a
		if s.voters, err = parseIDs(path, "voter", f[1]); err != nil {
			return s, err
		}
		if s.learners, err = parseIDs(path, "learner", f[2]); err != nil {
			return s, err
		}
		s.hasConf = true
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
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		return raftState{}, false, fmt.Errorf("%w: %s: longer than %d bytes", ErrState, path, len(buf)-1)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return raftState{}, false, fmt.Errorf("%s: %w", path, err)
	}
	s, err := parseRaftState(path, buf[:n])
	return s, true, err
}

// OpenStorage opens the raft storage of part, whose state file is path on
// fsys (created at the first write; its directory must exist). boot is the
// membership of a new group, used when the state file holds none.
//
// It reads the state file and rebuilds the entry positions by scanning the batch headers from the snapshot offset to the
// log end (a log end at or below the snapshot offset holds no entry: a
// snapshot was installed and nothing after it copied yet). It finishes
// what a crash interrupted: a snapshot install (undone or finished,
// finishInterruptedInstall in snapshot.go), and raft log truncation
// recorded but not yet applied (the records before the log start are
// deleted, once the high watermark reaches it). The membership is the state file's, or
// boot when the file has none (a new partition, or a version 0 file).
func OpenStorage(fsys vfs.FS, path string, part *log.Partition, boot *pb.ConfState) (*Storage, error) {
	st, found, err := readRaftState(fsys, path)
	if err != nil {
		return nil, err
	}
	s := &Storage{
		fs: fsys, path: path, part: part,
		cs:   boot,
		hs:   &pb.HardState{Term: new(st.term), Vote: new(st.vote), Commit: new(st.commit)},
		read: part.ReadFromFollower,
	}
	if !found {
		// A partition that existed before cluster mode: its batches
		// become the first entries (term = their leader epoch).
		st.snapOffset = part.LogStartOffset()
		st.logStart = st.snapOffset
	}
	s.snapIndex, s.snapTerm, s.snapOffset, s.logStart = st.snapIndex, st.snapTerm, st.snapOffset, st.logStart
	s.applied = max(st.applied, st.snapIndex)
	if st.hasConf {
		s.cs = &pb.ConfState{Voters: st.voters, Learners: st.learners}
	}
	if err := s.finishInterruptedInstall(st); err != nil { // snapshot.go
		return nil, err
	}
	if part.LogStartOffset() > s.snapOffset {
		return nil, fmt.Errorf("%w: %s: the log starts at %d, above the snapshot offset %d in %s", ErrState, part.Dir(), part.LogStartOffset(), s.snapOffset, path)
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
			return nil, fmt.Errorf("%w: %s: no batch at offset %d below the log end %d", ErrState, part.Dir(), s.end, part.LogEndOffset())
		}
		for len(b) > 0 {
			bt, rest, err := batch.Parse(b)
			if err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("scan %s at %d: %w", part.Dir(), s.end, err)
			}
			if bt.BaseOffset() != s.end {
				_ = r.Close()
				return nil, fmt.Errorf("%w: %s: batch at %d, the previous one ended before %d (a compacted log cannot be a raft log)", ErrState, part.Dir(), bt.BaseOffset(), s.end)
			}
			s.ents = append(s.ents, entryPos{base: bt.BaseOffset(), term: uint64(max(bt.PartitionLeaderEpoch(), 0))})
			s.end = bt.NextOffset()
			b = rest
		}
		_ = r.Close()
	}
	if !found {
		// The batches' leader epochs are the terms of these first
		// entries: raft's own terms start above them, so that terms
		// only grow along every log (raft's election compares last
		// terms; a term below an old epoch would make a log holding only
		// the old batches look more up to date than one holding entries
		// committed since).
		var top uint64
		for _, e := range s.ents {
			top = max(top, e.term)
		}
		s.hs.Term = new(top)
	}
	if c := s.hs.GetCommit(); c > s.lastIndex() {
		// The log lost entries the state says were committed (a torn
		// tail after a machine crash): raft refuses that, and so do we.
		return nil, fmt.Errorf("%w: %s: commit index %d beyond the last entry %d", ErrState, path, c, s.lastIndex())
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
func (s *Storage) setCommitted(index uint64) error {
	hw := min(s.offsetAfter(index), s.part.LogEndOffset())
	if hw > s.part.HighWatermark() {
		if err := s.part.SetHighWatermark(hw); err != nil {
			return err
		}
	}
	if s.part.LogStartOffset() < s.logStart && s.part.HighWatermark() >= s.logStart {
		if err := s.part.DeleteRecordsBefore(s.logStart); err != nil {
			return fmt.Errorf("delete the records of %s before the log start %d: %w", s.part.Dir(), s.logStart, err)
		}
	}
	return nil
}

// state returns what the state file should hold now.
func (s *Storage) state() raftState {
	return raftState{
		term: s.hs.GetTerm(), vote: s.hs.GetVote(), commit: s.hs.GetCommit(),
		snapIndex: s.snapIndex, snapTerm: s.snapTerm, snapOffset: s.snapOffset, logStart: s.logStart,
		applied: min(s.applied, s.hs.GetCommit()), voters: s.cs.GetVoters(), learners: s.cs.GetLearners(), hasConf: true,
	}
}

// save writes the state file atomically.
func (s *Storage) save() error {
	if err := vfs.WriteFileAtomic(s.fs, s.path, appendRaftState(nil, s.state())); err != nil {
		return fmt.Errorf("write raft state %s: %w", s.path, err)
	}
	return nil
}

// setHardState records raft's hard state durably.
func (s *Storage) setHardState(hs *pb.HardState) error {
	old := s.hs
	s.hs = &pb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}
	if err := s.save(); err != nil {
		s.hs = old
		return err
	}
	return nil
}

// setConf records the membership after applying the configuration
// change at index, durably.
func (s *Storage) setConf(cs *pb.ConfState, index uint64) error {
	oldCS, oldApplied := s.cs, s.applied
	s.cs = &pb.ConfState{Voters: cs.GetVoters(), Learners: cs.GetLearners()}
	s.applied = max(s.applied, index)
	if err := s.save(); err != nil {
		s.cs, s.applied = oldCS, oldApplied
		return err
	}
	return nil
}

// SnapshotIndex returns the raft index of the snapshot point: the last
// entry the raft log no longer holds (its batch may still be in the
// partition, below SnapshotOffset).
func (s *Storage) SnapshotIndex() uint64 { return s.snapIndex }

// SnapshotOffset returns the base offset of the first batch that is a
// raft entry (the one after the snapshot point).
func (s *Storage) SnapshotOffset() int64 { return s.snapOffset }

// CommittedOffset returns the offset after the last committed entry's
// batch, as the state file records the commit index.
func (s *Storage) CommittedOffset() int64 { return s.offsetAfter(s.hs.GetCommit()) }

// lastIndex is the index of the last entry.
func (s *Storage) lastIndex() uint64 { return s.snapIndex + uint64(len(s.ents)) }

// pos returns the position of entry i (snapIndex < i <= lastIndex).
func (s *Storage) pos(i uint64) entryPos { return s.ents[i-s.snapIndex-1] }

// offsetAfter returns the offset after entry i's batch: the base offset
// of entry i+1, or the log end after the last entry. i may be snapIndex.
func (s *Storage) offsetAfter(i uint64) int64 {
	if i >= s.lastIndex() {
		return s.end
	}
	return s.pos(i + 1).base
}

// indexOf returns the index of the entry whose batch holds offset, or 0
// when no entry does.
func (s *Storage) indexOf(offset int64) uint64 {
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

// InitialState implements raft.Storage: the hard state and membership of
// the state file.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return s.hs, s.cs, nil
}

// Entries implements raft.Storage: it reads the batches of entries
// [lo, hi) from the partition. A batch of NoopControlType is an empty
// entry; any other batch is a normal entry whose data is the batch.
//
// An error reading the partition is recorded in readErr before it is
// returned: raft panics with it (its contract: storage errors other than
// ErrCompacted and ErrUnavailable are fatal), and the replica, finding
// readErr set, takes the partition offline instead of the node.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	ents, err := s.entries(lo, hi, maxSize)
	if err != nil && !errors.Is(err, raft.ErrCompacted) && !errors.Is(err, raft.ErrUnavailable) && s.readErr == nil {
		s.readErr = err
	}
	return ents, err
}

// entries implements Entries.
func (s *Storage) entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
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
		r, err := s.read(p.base, int(min(max(maxSize-min(size, maxSize), 1), 8<<20)))
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
			switch ct, value := raftControl(bt); ct {
			case NoopControlType:
			case ConfChangeControlType:
				e.Type = pb.EntryConfChangeV2.Enum()
				e.Data = value
			default:
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

// Term implements raft.Storage: the leader epoch of entry i's batch.
func (s *Storage) Term(i uint64) (uint64, error) {
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

// LastIndex implements raft.Storage: the index of the last batch.
func (s *Storage) LastIndex() (uint64, error) { return s.lastIndex(), nil }

// FirstIndex implements raft.Storage: the index after the snapshot point.
func (s *Storage) FirstIndex() (uint64, error) { return s.snapIndex + 1, nil }

// MaxSnapshotRecords bounds the records a snapshot carries (the compacted
// part of the log below the snapshot point), in bytes: a snapshot travels
// whole in one raft message, so a Transport must carry messages of this
// size plus the producer state.
const MaxSnapshotRecords = 32 << 20

// Snapshot implements raft.Storage. The snapshot of a partition is its
// point, the last entry the log no longer holds as a raft entry, and in
// Data the offset of the entry after it, the log start the leader keeps,
// the producer state at the offset, and the batches from the log start to
// the offset (only when key compaction kept records below the point); the
// layout is snapshot.go's. A follower installing it (applySnapshot)
// restarts its log at that offset, below which it keeps its own committed
// records and adds the leader's batches it lacks (retention deleted the
// records below a point with no batches; key compaction kept them
// compacted), with the leader's producer state there. A compacted part
// larger than MaxSnapshotRecords cannot be sent: the snapshot is reported
// temporarily unavailable, and the follower stays behind.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	d := snapshotData{offset: s.snapOffset, start: s.snapOffset}
	if start := max(s.logStart, s.part.LogStartOffset()); start < s.snapOffset {
		region, err := s.region(start, s.snapOffset)
		if errors.Is(err, ErrSnapshotTooLarge) {
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
		if err != nil {
			if s.readErr == nil {
				s.readErr = err
			}
			return nil, err
		}
		d.start, d.records = start, region
	}
	d.producers = s.producerSnapshot(d.records)
	return &pb.Snapshot{
		Data: appendSnapshotData(nil, d),
		Metadata: &pb.SnapshotMetadata{
			ConfState: s.cs,
			Index:     new(s.snapIndex),
			Term:      new(s.snapTerm),
		},
	}, nil
}

// ErrSnapshotTooLarge is region's answer for more than MaxSnapshotRecords
// bytes.
var ErrSnapshotTooLarge = errors.New("raftlog: compacted records too large for a raft snapshot")

// region returns the stored batches of the partition from offset from
// (a batch boundary or a gap) up to offset to.
func (s *Storage) region(from, to int64) ([]byte, error) {
	var out []byte
	for off := from; off < to; {
		r, err := s.read(off, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s at %d: %w", s.part.Dir(), off, err)
		}
		b := r.Bytes()
		if len(b) == 0 {
			_ = r.Close()
			return out, nil
		}
		for len(b) > 0 && off < to {
			bt, rest, err := batch.Parse(b)
			if err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("snapshot of %s at %d: %w", s.part.Dir(), off, err)
			}
			if bt.BaseOffset() >= to {
				off = to
				break
			}
			if len(out)+len(bt) > MaxSnapshotRecords {
				_ = r.Close()
				return nil, fmt.Errorf("%w: %s", ErrSnapshotTooLarge, s.part.Dir())
			}
			out = append(out, bt...)
			off = bt.NextOffset()
			b = rest
		}
		_ = r.Close()
	}
	return out, nil
}

// applySnapshot installs a snapshot from the leader (raft found no entry
// of this log at the snapshot's index and term, so the log after the
// commit point is not the leader's), with the install file of snapshot.go
// written first. The log is cut at its own commit point, and not above
// the snapshot offset (keep; TruncateTo: what stays is committed, so the
// leader's too); when the snapshot carries records (the leader's
// compacted log below the point), those past the cut are appended
// (AppendAssigned, gaps allowed) and synced; then the state file records
// the snapshot point; then finishInstall restarts the log empty at the
// snapshot offset when the snapshot carries no records, restores the
// leader's producer state at the offset and removes the install file. A
// crash before the state file is undone by the next open (the log is cut
// back at keep: it merely lost uncommitted entries raft was discarding),
// one after it is finished (finishInterruptedInstall). The next entry is
// appended at the snapshot offset, at or above the log end
// (AppendAssigned accepts the gap); the records before the log start (the
// snapshot offset without records, the leader's log start with them) are
// deleted once the high watermark reaches it (setCommitted).
func (s *Storage) applySnapshot(snap *pb.Snapshot) error {
	d, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		return err
	}
	off := d.offset
	md := snap.GetMetadata()
	if md.GetIndex() <= s.snapIndex || off < s.snapOffset {
		return fmt.Errorf("%w: snapshot at index %d, offset %d is not past this log's snapshot at index %d, offset %d", ErrState, md.GetIndex(), off, s.snapIndex, s.snapOffset)
	}
	keep := min(s.offsetAfter(min(s.hs.GetCommit(), s.lastIndex())), off)
	if err := s.saveInstall(keep, md.GetIndex(), d); err != nil {
		return err
	}
	if s.part.LogEndOffset() > keep {
		if err := s.part.TruncateTo(keep); err != nil {
			return fmt.Errorf("install snapshot at offset %d in %s: %w", off, s.part.Dir(), err)
		}
	}
	if d.records != nil {
		if err := s.appendRegion(d.records, off); err != nil {
			return fmt.Errorf("install snapshot at offset %d in %s: %w", off, s.part.Dir(), err)
		}
	}
	old := *s
	s.snapIndex, s.snapTerm, s.snapOffset = md.GetIndex(), md.GetTerm(), off
	s.logStart = max(s.logStart, d.start)
	if c := s.hs.GetCommit(); c < s.snapIndex {
		s.hs = &pb.HardState{Term: new(s.hs.GetTerm()), Vote: new(s.hs.GetVote()), Commit: new(s.snapIndex)}
	}
	// The snapshot's membership replaces this node's (raft restores
	// its own from it too); configuration changes after it are applied
	// again as they commit (adding a voter that is one, or removing one
	// that is not, changes nothing).
	if cs := md.GetConfState(); len(cs.GetVoters()) > 0 {
		s.cs = &pb.ConfState{Voters: cs.GetVoters(), Learners: cs.GetLearners()}
	}
	s.applied = max(s.applied, s.snapIndex)
	if err := s.save(); err != nil {
		s.snapIndex, s.snapTerm, s.snapOffset, s.logStart, s.hs, s.cs, s.applied = old.snapIndex, old.snapTerm, old.snapOffset, old.logStart, old.hs, old.cs, old.applied
		return err
	}
	s.ents, s.end = nil, off
	return s.finishInstall(d)
}

// appendRegion appends the batches of a snapshot's records that lie past
// the log end and below off, and syncs them. A batch reaching across the
// log end cannot be split: the install fails.
func (s *Storage) appendRegion(region []byte, off int64) error {
	appended := false
	for len(region) > 0 {
		bt, rest, err := batch.Parse(region)
		if err != nil {
			return fmt.Errorf("%w: snapshot records: %v", ErrState, err)
		}
		region = rest
		end := s.part.LogEndOffset()
		switch {
		case bt.NextOffset() <= end || bt.BaseOffset() >= off:
			continue // this log has it, or past the point
		case bt.BaseOffset() < end:
			return fmt.Errorf("%w: snapshot batch [%d, %d) reaches across the log end %d", ErrState, bt.BaseOffset(), bt.NextOffset(), end)
		}
		if _, err := s.part.AppendAssigned(bt); err != nil {
			return err
		}
		appended = true
	}
	if appended {
		return s.part.Sync()
	}
	return nil
}

// moveSnapshot moves the snapshot point to just before the entry at
// offset (or after the last entry when offset is the end of the entries),
// keeping the records: raft's log then starts there, and the records
// below it may be compacted. The entries dropped must be applied (so
// committed); otherwise, or when offset is not an entry's base, nothing
// moves. It reports whether the point is at offset now.
func (s *Storage) moveSnapshot(offset int64) (bool, error) {
	if offset == s.snapOffset {
		return true, nil
	}
	var i uint64
	if offset == s.end {
		i = s.lastIndex() + 1
	} else if i = s.indexOf(offset); i == 0 || s.pos(i).base != offset {
		return false, nil
	}
	prev := i - 1
	if prev <= s.snapIndex || prev > s.applied || prev > s.hs.GetCommit() {
		return false, nil
	}
	term := s.pos(prev).term
	k := int(prev - s.snapIndex)
	oldIndex, oldTerm, oldOffset := s.snapIndex, s.snapTerm, s.snapOffset
	s.snapIndex, s.snapTerm, s.snapOffset = prev, term, offset
	if err := s.save(); err != nil {
		s.snapIndex, s.snapTerm, s.snapOffset = oldIndex, oldTerm, oldOffset
		return false, err
	}
	s.ents = append([]entryPos(nil), s.ents[k:]...)
	return true, nil
}

// compact applies retention: the records before offset (a segment base
// at or below the high watermark) go. Past the snapshot point the point
// moves there first (moveSnapshot: raft's log is truncated with them);
// then the state file records the new log start, and the records are
// deleted.
func (s *Storage) compact(offset int64) error {
	if offset <= s.logStart {
		return nil
	}
	if offset > s.snapOffset {
		if ok, err := s.moveSnapshot(offset); !ok || err != nil {
			return err
		}
	}
	old := s.logStart
	s.logStart = offset
	if err := s.save(); err != nil {
		s.logStart = old
		return err
	}
	return s.part.DeleteRecordsBefore(offset)
}

// isRaftNoop reports whether bt is the control batch of an empty raft
// entry.
func isRaftNoop(bt batch.Batch) bool {
	ct, _ := raftControl(bt)
	return ct == NoopControlType
}

// raftControl returns the control type and the record value of a control
// batch of one record with one of raft's types (NoopControlType,
// ConfChangeControlType), or -1 for any other batch.
func raftControl(bt batch.Batch) (batch.ControlType, []byte) {
	if !bt.Attributes().IsControl() || bt.RecordsCount() != 1 {
		return -1, nil
	}
	for rec, err := range bt.All(nil) {
		if err != nil {
			return -1, nil
		}
		cr, err := batch.ParseControlRecord(rec)
		if err != nil || (cr.Type != NoopControlType && cr.Type != ConfChangeControlType) {
			return -1, nil
		}
		return cr.Type, append([]byte{}, rec.Value...)
	}
	return -1, nil
}

// raftNoopBatch encodes the batch of an empty raft entry at offset with
// the entry's term as its leader epoch: a control batch with one record
// whose key is version 0 and NoopControlType, no value and no
// timestamp, so every replica writes the same bytes.
func raftNoopBatch(offset int64, term uint64) ([]byte, error) {
	return raftControlBatch(offset, term, NoopControlType, nil)
}

// raftConfChangeBatch encodes the batch of a configuration change entry
// (the encoded ConfChangeV2 cc) at offset with the entry's term as leader
// epoch: a control batch of one record, key version 0 and
// ConfChangeControlType, value cc, no timestamp; every replica writes
// the same bytes.
func raftConfChangeBatch(offset int64, term uint64, cc []byte) ([]byte, error) {
	return raftControlBatch(offset, term, ConfChangeControlType, cc)
}

// controlBit is the attributes bit of a control batch (Kafka's frozen
// format). batch.AppendControlBatch writes transaction markers; raft's own
// control records have control types of this package's, so their batches are
// built as ordinary ones and marked here.
const controlBit batch.Attributes = 0x20

// raftControlBatch encodes one of raft's control batches.
func raftControlBatch(offset int64, term uint64, ct batch.ControlType, value []byte) ([]byte, error) {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(ct))
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: offset, PartitionLeaderEpoch: int32(term)})
	if err := bld.Add(batch.Record{Key: key, Value: value, Timestamp: batch.NoTimestamp}); err != nil {
		return nil, err
	}
	b, err := bld.Build()
	if err != nil {
		return nil, err
	}
	b.SetAttributes(b.Attributes() | controlBit)
	b.SetCRC()
	return b, nil
}
