package raftlog

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
)

func TestRaftStateFile(t *testing.T) {
	s := raftState{term: 7, vote: 2, commit: 40, snapIndex: 12, snapTerm: 3, snapOffset: 5000, logStart: 5000, applied: 40, voters: []uint64{1, 2, 3}, hasConf: true}
	b := appendRaftState(nil, s)
	assert.Equal(t, "1\n7 2 40\n12 3 5000 5000\n40 1,2,3 -\n", string(b))
	got, err := parseRaftState("f", b)
	require.NoError(t, err)
	assert.Equal(t, s, got)

	for _, tc := range []struct{ name, data string }{
		{"empty", ""},
		{"version", "2\n7 2 40\n12 3 5000\n"},
		{"no final newline", "0\n7 2 40\n12 3 5000"},
		{"extra line", "0\n7 2 40\n12 3 5000\n\n"},
		{"two numbers", "0\n7 2\n12 3 5000\n"},
		{"negative", "0\n7 2 40\n12 3 -1\n"},
		{"not a number", "0\n7 x 40\n12 3 5000\n"},
		{"commit below snapshot", "0\n7 2 11\n12 3 5000\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRaftState("f", []byte(tc.data))
			require.ErrorIs(t, err, ErrState)
			assert.Contains(t, err.Error(), "f:")
		})
	}

	dir := t.TempDir()
	long := filepath.Join(dir, "long")
	require.NoError(t, os.WriteFile(long, make([]byte, 5000), 0o644))
	_, _, err = readRaftState(vfs.Default, long)
	require.ErrorIs(t, err, ErrState)
	_, found, err := readRaftState(vfs.Default, filepath.Join(dir, "missing"))
	require.NoError(t, err)
	assert.False(t, found)
}

// openReplicated opens a partition as cluster mode does.
func openReplicated(t *testing.T, dir string) *log.Partition {
	t.Helper()
	p, err := log.Open(dir, log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err)
	return p
}

// dataEntry returns a normal raft entry carrying a batch of n records at
// base with leader epoch term.
func dataEntry(t *testing.T, index, term uint64, base int64, n int) *pb.Entry {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, PartitionLeaderEpoch: int32(term)})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Value: []byte{byte('a' + i)}, Timestamp: 1000}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: b}
}

// noopEntry returns raft's empty entry.
func noopEntry(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum()}
}

// The raft log is the partition: each entry one batch, rebuilt from the
// batch headers at open; a conflicting suffix is cut; compaction moves the
// snapshot point, and a reopen finishes a compaction a crash interrupted.
func TestRaftStorageIsThePartition(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	state := filepath.Join(root, "t-0.state")
	part := openReplicated(t, dir)
	st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	r := newTestCore(part, st)

	// Term 1: the leader's empty entry, then two batches (3 + 2 records).
	for _, e := range []*pb.Entry{noopEntry(1, 1), dataEntry(t, 2, 1, 1, 3), dataEntry(t, 3, 1, 4, 2)} {
		require.NoError(t, r.persist(e))
	}
	assert.Equal(t, int64(6), part.LogEndOffset())
	// Term 2 replaces entry 3 with its empty entry and a batch.
	other := &proposal{index: 3, res: make(chan Result, 1)}
	r.waiters = append(r.waiters, other)
	for _, e := range []*pb.Entry{noopEntry(3, 2), dataEntry(t, 4, 2, 5, 4)} {
		require.NoError(t, r.persist(e))
	}
	res := <-other.res
	assert.ErrorIs(t, res.Err, ErrReplaced, "the proposal whose entry was replaced is refused")
	assert.Equal(t, int64(9), part.LogEndOffset())
	require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(4))}))
	require.NoError(t, part.Sync())

	check := func(st *Storage) {
		t.Helper()
		last, _ := st.LastIndex()
		assert.Equal(t, uint64(4), last)
		for i, want := range []uint64{1, 1, 2, 2} {
			term, err := st.Term(uint64(i + 1))
			require.NoError(t, err)
			assert.Equal(t, want, term, "term of entry %d", i+1)
		}
		ents, err := st.Entries(1, 5, 1<<20)
		require.NoError(t, err)
		require.Len(t, ents, 4)
		assert.Empty(t, ents[0].GetData(), "entry 1 is raft's empty entry")
		assert.Empty(t, ents[2].GetData(), "entry 3 is raft's empty entry")
		assert.Equal(t, int64(1), batch.Batch(ents[1].GetData()).BaseOffset())
		assert.Equal(t, int64(5), batch.Batch(ents[3].GetData()).BaseOffset())
		assert.Equal(t, int32(4), batch.Batch(ents[3].GetData()).RecordsCount())
		small, err := st.Entries(1, 5, 1)
		require.NoError(t, err)
		assert.Len(t, small, 1, "maxSize: at least one entry, no more than fit")
		assert.Equal(t, uint64(3), st.indexOf(4))
		assert.Equal(t, uint64(4), st.indexOf(8))
		assert.Zero(t, st.indexOf(9))
		_, err = st.Term(5)
		assert.ErrorIs(t, err, raft.ErrUnavailable)
	}
	check(st)
	require.NoError(t, part.Close())

	part = openReplicated(t, dir)
	st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	check(st)
	assert.Equal(t, int64(9), part.HighWatermark(), "the high watermark is the commit index's end")

	// Compaction: a crash after the state file moved the snapshot point but
	// before the records were deleted is finished by the next open.
	st.snapIndex, st.snapTerm, st.snapOffset, st.logStart = 2, 1, 4, 4 // as retention writes it (compact)
	require.NoError(t, st.save())
	require.NoError(t, part.Close())
	part = openReplicated(t, dir)
	defer part.Close()
	st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	assert.Equal(t, int64(4), part.LogStartOffset())
	first, _ := st.FirstIndex()
	assert.Equal(t, uint64(3), first)
	_, err = st.Entries(2, 4, 1<<20)
	assert.ErrorIs(t, err, raft.ErrCompacted)
	term, err := st.Term(2)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), term, "the snapshot point keeps its term")
	snap, err := st.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), snap.GetMetadata().GetIndex())
	assert.Equal(t, uint64(4), binary.BigEndian.Uint64(snap.GetData()), "the snapshot names the offset the log restarts at")
	assert.Equal(t, []uint64{1, 2, 3}, snap.GetMetadata().GetConfState().GetVoters())
}

// producerSnapshotData is a raft snapshot's data without records: the
// offset the log restarts at and producer 7's state below it (its last
// batch: sequences 0-4 at offsets off-5 to off-1).
func producerSnapshotData(off int64) snapshotData {
	entries := []producerSnapEntry{{ProducerID: 7, ProducerEpoch: 0, LastSequence: 4, LastOffset: off - 1,
		OffsetDelta: 4, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}}
	return snapshotData{offset: off, start: off, producers: appendProducerSnapshot(nil, entries)}
}

// producerRetry is producer 7's batch of sequences 0-4 (five records).
func producerRetry(t *testing.T) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: 7, Epoch: 0, BaseSequence: 0}})
	for i := range 5 {
		require.NoError(t, bld.Add(batch.Record{Value: []byte{byte('a' + i)}, Timestamp: time.Now().UnixMilli()}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// assertKnowsProducer checks that the partition answers a retry of
// producer 7's last batch below offset 100 as a duplicate.
func assertKnowsProducer(t *testing.T, part *log.Partition) {
	t.Helper()
	end := part.LogEndOffset()
	info, err := part.AppendBatchInfo(producerRetry(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "a retry of a batch older than the snapshot point is a duplicate")
	assert.Equal(t, int64(95), info.Base)
	assert.Equal(t, end, part.LogEndOffset(), "nothing written")
}

// A follower installs a snapshot from the leader: its log restarts empty
// at the snapshot offset with the leader's producer state (a retry of a
// batch below the point is a duplicate), and the next entry lands at the
// snapshot offset; a reopen in between rebuilds the same state.
func TestRaftStorageInstallsSnapshot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	state := filepath.Join(root, "t-0.state")
	part := openReplicated(t, dir)
	st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	r := newTestCore(part, st)
	// Entries 1-3 (offsets 0-5), committed up to 2 (offset 4).
	for _, e := range []*pb.Entry{noopEntry(1, 1), dataEntry(t, 2, 1, 1, 3), dataEntry(t, 3, 1, 4, 2)} {
		require.NoError(t, r.persist(e))
	}
	require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}))
	require.NoError(t, st.setCommitted(2))

	// The leader's log starts at offset 100, after entry 40 of term 3.
	snap := &pb.Snapshot{
		Data:     appendSnapshotData(nil, producerSnapshotData(100)),
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}},
	}
	require.NoError(t, st.applySnapshot(snap))
	assert.Equal(t, int64(100), part.LogStartOffset())
	assert.Equal(t, int64(100), part.LogEndOffset())
	first, _ := st.FirstIndex()
	assert.Equal(t, uint64(41), first)
	term, err := st.Term(40)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), term)
	assertKnowsProducer(t, part)
	_, err = os.Stat(state + installSuffix)
	assert.ErrorIs(t, err, os.ErrNotExist, "the install file is removed once the install is done")
	require.ErrorIs(t, st.applySnapshot(snap), ErrState, "an older or equal snapshot is refused")

	// A restart before anything else arrived.
	require.NoError(t, part.Close())
	part = openReplicated(t, dir)
	defer part.Close()
	st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	last, _ := st.LastIndex()
	assert.Equal(t, uint64(40), last)
	assertKnowsProducer(t, part)
	r = newTestCore(part, st)

	require.NoError(t, r.persist(dataEntry(t, 41, 3, 100, 2)))
	assert.Equal(t, int64(102), part.LogEndOffset())
	require.NoError(t, st.setCommitted(41))
	assert.Equal(t, int64(102), part.HighWatermark())
	assert.Equal(t, int64(100), part.LogStartOffset())
	ents, err := st.Entries(41, 42, 1<<20)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, int64(100), batch.Batch(ents[0].GetData()).BaseOffset())
}

// A crash after the state file recorded a snapshot's point but before the
// log restarted with the producer state is finished by the next open; an
// install file the state file does not match (a crash before the state
// file) is removed and changes nothing.
func TestRaftStorageFinishesInterruptedInstall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded bool // the state file got the snapshot point
	}{{"after the state file", true}, {"before the state file", false}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "t-0")
			state := filepath.Join(root, "t-0.state")
			part := openReplicated(t, dir)
			st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			r := newTestCore(part, st)
			for _, e := range []*pb.Entry{noopEntry(1, 1), dataEntry(t, 2, 1, 1, 3)} {
				require.NoError(t, r.persist(e))
			}
			require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}))
			require.NoError(t, part.Sync())
			// The install's first steps, then the crash.
			require.NoError(t, st.saveInstall(4, 40, producerSnapshotData(100)))
			if tc.recorded {
				st.snapIndex, st.snapTerm, st.snapOffset = 40, 3, 100
				st.hs = &pb.HardState{Term: new(uint64(3)), Commit: new(uint64(40))}
				require.NoError(t, st.save())
			}
			require.NoError(t, part.Close())

			part = openReplicated(t, dir)
			defer part.Close()
			st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			_, err = os.Stat(state + installSuffix)
			assert.ErrorIs(t, err, os.ErrNotExist)
			if !tc.recorded {
				assert.Equal(t, int64(0), part.LogStartOffset())
				assert.Equal(t, int64(4), part.LogEndOffset(), "the old log, untouched")
				_, known, err := part.ProducerState(7)
				require.NoError(t, err)
				assert.False(t, known)
				return
			}
			assert.Equal(t, int64(100), part.LogStartOffset())
			assert.Equal(t, int64(100), part.LogEndOffset())
			first, _ := st.FirstIndex()
			assert.Equal(t, uint64(41), first)
			assertKnowsProducer(t, part)
		})
	}
}

// The leader's snapshot carries the producer state at its point: the
// partition's producer snapshot file at that offset (written at the
// segment roll there).
func TestRaftSnapshotCarriesProducerState(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	part, err := log.Open(dir, log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 300})
	require.NoError(t, err)
	defer part.Close()
	st, err := OpenStorage(vfs.Default, filepath.Join(root, "t-0.state"), part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	info, err := part.AppendBatchInfo(producerRetry(t))
	require.NoError(t, err)
	require.Equal(t, int64(0), info.Base)
	for part.SegmentInfos()[len(part.SegmentInfos())-1].BaseOffset == 0 {
		_, err := part.AppendBatch(buildBatch(t, "pad", 5, batch.CompressionNone))
		require.NoError(t, err)
	}
	st.snapOffset = part.SegmentInfos()[1].BaseOffset
	snap, err := st.Snapshot()
	require.NoError(t, err)
	d, err := decodeSnapshotData(snap.GetData())
	require.NoError(t, err)
	producers, err := decodeProducerSnapshot(d.producers)
	require.NoError(t, err)
	assert.Equal(t, st.snapOffset, d.offset)
	require.Len(t, producers, 1)
	assert.Equal(t, int64(7), producers[0].ProducerID)
	assert.Equal(t, int32(4), producers[0].LastSequence)
	assert.Equal(t, int64(4), producers[0].LastOffset)

	damaged := append([]byte(nil), snap.GetData()...)
	damaged[snapshotHeaderLen+len(d.producers)-1] ^= 1
	_, err = decodeSnapshotData(damaged)
	assert.ErrorIs(t, err, ErrState, "a damaged producer state is refused")
	_, err = decodeSnapshotData([]byte{1, 2})
	assert.ErrorIs(t, err, ErrState)
}

// The batch of raft's empty entry is a control batch that every replica
// encodes to the same bytes, and only it reads as one.
func TestRaftNoopBatch(t *testing.T) {
	a, err := raftNoopBatch(42, 7)
	require.NoError(t, err)
	b, err := raftNoopBatch(42, 7)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	bt := batch.Batch(a)
	require.NoError(t, bt.Validate())
	assert.True(t, bt.Attributes().IsControl())
	assert.Equal(t, int64(42), bt.BaseOffset())
	assert.Equal(t, int32(7), bt.PartitionLeaderEpoch())
	assert.True(t, isRaftNoop(bt))

	marker, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 1})
	require.NoError(t, err)
	assert.False(t, isRaftNoop(batch.Batch(marker)), "a transaction marker is not raft's")
	data := dataEntry(t, 1, 1, 0, 1).GetData()
	assert.False(t, isRaftNoop(batch.Batch(data)))
}

// A connection the transport accepts or dials while it shuts down is
// closed too, so that no reader goroutine outlives the broker.

// newTestCore returns a replica core over st for tests that drive persist
// by hand (no RawNode).
func newTestCore(part *log.Partition, st *Storage) *replicaCore {
	return &replicaCore{part: part, st: st, prewritten: make(map[uint64]prewrite), logger: slog.New(slog.DiscardHandler)}
}

// buildBatch returns a batch of n records with keys k0... and values
// prefix-0...
func buildBatch(t *testing.T, prefix string, n int, codec batch.Compression) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: codec, PartitionLeaderEpoch: -1})
	now := time.Now().UnixMilli()
	for i := range n {
		err := bld.Add(batch.Record{
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "%s-%d", prefix, i),
			Timestamp: now + int64(i),
		})
		require.NoError(t, err)
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}
