package raftlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
)

// keyedEntry returns a normal raft entry carrying a batch at base with
// one record per key, values "<key>@<offset>".
func keyedEntry(t *testing.T, index, term uint64, base int64, keys ...string) *pb.Entry {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, PartitionLeaderEpoch: int32(term)})
	for i, k := range keys {
		require.NoError(t, bld.Add(batch.Record{Key: []byte(k), Value: fmt.Appendf(nil, "%s@%d", k, base+int64(i)), Timestamp: 1000}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: b}
}

// A snapshot of a compacted leader carries the records below its point;
// a follower behind it keeps its own committed records, appends the
// leader's past them (gaps allowed), and Entries answers ErrCompacted
// below the point. A crash in the middle of the install (the marker
// written, some records appended, the state file not yet) is undone by
// the next open: the log is cut back and the old state stands.
func TestRaftStorageInstallsCompactedSnapshot(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			root := t.TempDir()
			// The leader: six entries of keys a and b (offsets 0-5),
			// committed; the snapshot point moves to offset 4 and the
			// records below it are compacted.
			lpart := openReplicated(t, filepath.Join(root, "leader", "t-0"))
			defer lpart.Close()
			lst, err := OpenStorage(vfs.Default, filepath.Join(root, "leader.state"), lpart, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			lr := newTestCore(lpart, lst)
			for i, k := range []string{"a", "b", "a", "b", "a", "b"} {
				require.NoError(t, lr.persist(keyedEntry(t, uint64(i+1), 1, int64(i), k)))
			}
			require.NoError(t, lpart.Sync())
			require.NoError(t, lst.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(6))}))
			require.NoError(t, lst.setCommitted(6))
			lst.applied = 6
			ok, err := lst.moveSnapshot(4)
			require.NoError(t, err)
			require.True(t, ok)
			_, err = lst.Entries(3, 5, 1<<20)
			require.ErrorIs(t, err, raft.ErrCompacted, "below the point raft's log is compacted")
			snap, err := lst.Snapshot()
			require.NoError(t, err)
			require.Greater(t, len(snap.GetData()), 16, "the snapshot carries the records below its point")
			assert.Equal(t, uint64(4), binary.BigEndian.Uint64(snap.GetData()))
			assert.Equal(t, uint64(0), binary.BigEndian.Uint64(snap.GetData()[8:]))

			// The follower has entry 1 committed, entry 2 not.
			dir := filepath.Join(root, "follower", "t-0")
			state := filepath.Join(root, "follower.state")
			part := openReplicated(t, dir)
			st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			r := newTestCore(part, st)
			require.NoError(t, r.persist(keyedEntry(t, 1, 1, 0, "a")))
			require.NoError(t, r.persist(keyedEntry(t, 2, 1, 1, "x")))
			require.NoError(t, part.Sync())
			require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}))

			if crash {
				// What applySnapshot does up to the state file.
				d, err := decodeSnapshotData(snap.GetData())
				require.NoError(t, err)
				require.NoError(t, st.saveInstall(1, 4, d))
				require.NoError(t, part.TruncateTo(1))
				require.NoError(t, st.appendRegion(d.records, 4))
				require.NoError(t, part.Close())
				part = openReplicated(t, dir)
				st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
				require.NoError(t, err)
				assert.Equal(t, int64(1), part.LogEndOffset(), "the partial install is cut back")
				last, _ := st.LastIndex()
				assert.Equal(t, uint64(1), last)
				_, err = os.Stat(st.installPath())
				assert.ErrorIs(t, err, os.ErrNotExist)
			}
			require.NoError(t, st.applySnapshot(snap))
			_, err = os.Stat(st.installPath())
			assert.ErrorIs(t, err, os.ErrNotExist, "the marker goes once the state file holds the snapshot")
			require.NoError(t, part.Close())

			part = openReplicated(t, dir)
			defer part.Close()
			st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			first, _ := st.FirstIndex()
			assert.Equal(t, uint64(5), first)
			var offsets []int64
			for off := part.LogStartOffset(); off < part.LogEndOffset(); {
				rs, err := part.ReadFromFollower(off, 1<<20)
				require.NoError(t, err)
				bt, _, err := batch.Parse(rs.Bytes())
				require.NoError(t, err)
				offsets = append(offsets, bt.BaseOffset())
				off = bt.NextOffset()
				require.NoError(t, rs.Close())
			}
			assert.Equal(t, []int64{0, 1, 2, 3}, offsets, "its own committed entry 1, then the leader's batches below the point")
		})
	}
}

// producerKeyedEntry returns a normal raft entry carrying a batch of
// idempotent producer 7 (epoch 0) at base with one record of key, the
// producer's sequence equal to the offset, value "<key>@<offset>".
func producerKeyedEntry(t *testing.T, index, term uint64, base int64, key string) *pb.Entry {
	t.Helper()
	b := producerKeyedBatch(t, base, term, key)
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: b}
}

// producerKeyedBatch is producerKeyedEntry's batch.
func producerKeyedBatch(t *testing.T, base int64, term uint64, key string) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, PartitionLeaderEpoch: int32(term), Producer: &batch.Producer{ID: 7, Epoch: 0, BaseSequence: int32(base)}})
	require.NoError(t, bld.Add(batch.Record{Key: []byte(key), Value: fmt.Appendf(nil, "%s@%d", key, base), Timestamp: time.Now().UnixMilli()}))
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// latestValues returns the latest value of every key in the partition's
// records below upTo.
func latestValues(t *testing.T, part *log.Partition, upTo int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for off := part.LogStartOffset(); off < min(upTo, part.LogEndOffset()); {
		r, err := part.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		b := r.Bytes()
		require.NotEmpty(t, b, "no batch at %d", off)
		for len(b) > 0 && off < upTo {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			for rec, err := range bt.All(nil) {
				require.NoError(t, err)
				if rec.Key != nil && rec.Offset < upTo && !bt.Attributes().IsControl() {
					out[string(rec.Key)] = string(rec.Value)
				}
			}
			off, b = bt.NextOffset(), rest
		}
		require.NoError(t, r.Close())
	}
	return out
}

// A follower catches up by a snapshot of a key-compacted leader that
// carries both the compacted records below the point and the leader's
// producer state at the point: the follower holds the latest value of
// every key below the point, at the leader's offsets, and answers a retry
// of the producer's last batch below the point as a duplicate (its
// original offset, nothing written), also after a reopen. A crash after
// the install file (records appended, the state file not yet) is undone
// by the next open; one after the state file is finished by it.
func TestRaftStorageInstallsCompactedSnapshotWithProducerState(t *testing.T) {
	for _, crash := range []string{"none", "before the state file", "after the state file"} {
		t.Run(crash, func(t *testing.T) {
			root := t.TempDir()
			cfg := log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 400}
			lpart, err := log.Open(filepath.Join(root, "leader", "t-0"), cfg)
			require.NoError(t, err)
			defer lpart.Close()
			lst, err := OpenStorage(vfs.Default, filepath.Join(root, "leader.state"), lpart, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			lr := newTestCore(lpart, lst)
			const n = 40
			keys := []string{"a", "b", "c"}
			for i := range n {
				require.NoError(t, lr.persist(producerKeyedEntry(t, uint64(i+1), 1, int64(i), keys[i%len(keys)])))
			}
			require.NoError(t, lpart.Sync())
			require.NoError(t, lst.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(n))}))
			require.NoError(t, lst.setCommitted(n))
			lst.applied = n
			require.Greater(t, len(lpart.SegmentInfos()), 3, "several segments")
			before := latestValues(t, lpart, n)

			kc, err := newTestCompactor()
			require.NoError(t, err)
			res, err := lpart.Compact(context.Background(), Cleaner{Cleaner: kc, st: lst})
			require.NoError(t, err)
			require.Positive(t, res.RecordsRemoved, "the round compacted")
			point := lst.snapOffset
			require.Positive(t, point, "the round moved the snapshot point")

			snap, err := lst.Snapshot()
			require.NoError(t, err)
			d, err := decodeSnapshotData(snap.GetData())
			require.NoError(t, err)
			producers, err := decodeProducerSnapshot(d.producers)
			require.NoError(t, err)
			require.Equal(t, point, d.offset)
			require.Equal(t, int64(0), d.start)
			require.NotEmpty(t, d.records, "the compacted records below the point")
			require.Len(t, producers, 1, "the producer state at the point")
			assert.Equal(t, point-1, producers[0].LastOffset)

			// The follower has nothing yet.
			dir := filepath.Join(root, "follower", "t-0")
			state := filepath.Join(root, "follower.state")
			part, err := log.Open(dir, cfg)
			require.NoError(t, err)
			st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			md := snap.GetMetadata()
			switch crash {
			case "none":
				require.NoError(t, st.applySnapshot(snap))
			default:
				// applySnapshot's steps up to the crash.
				require.NoError(t, st.saveInstall(0, md.GetIndex(), d))
				require.NoError(t, st.appendRegion(d.records, d.offset))
				if crash == "after the state file" {
					st.snapIndex, st.snapTerm, st.snapOffset, st.logStart = md.GetIndex(), md.GetTerm(), d.offset, d.start
					st.hs = &pb.HardState{Term: new(uint64(1)), Commit: new(md.GetIndex())}
					require.NoError(t, st.save())
				}
			}
			require.NoError(t, part.Close())
			part, err = log.Open(dir, cfg)
			require.NoError(t, err)
			defer part.Close()
			st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			_, err = os.Stat(st.installPath())
			require.ErrorIs(t, err, os.ErrNotExist, "the install file is gone")
			if crash == "before the state file" {
				assert.Equal(t, int64(0), part.LogEndOffset(), "the partial install is undone")
				_, known, err := part.ProducerState(7)
				require.NoError(t, err)
				assert.False(t, known)
				require.NoError(t, st.applySnapshot(snap), "the leader sends it again")
			}

			first, _ := st.FirstIndex()
			assert.Equal(t, md.GetIndex()+1, first)
			assert.LessOrEqual(t, part.LogEndOffset(), point)
			got := latestValues(t, part, point)
			want := latestValues(t, lpart, point)
			assert.Equal(t, want, got, "the compacted records below the point, the leader's")
			for _, k := range keys {
				assert.Contains(t, got, k, "key %s survives compaction", k)
			}
			for k, v := range before {
				var off int64
				_, err := fmt.Sscanf(v, k+"@%d", &off)
				require.NoError(t, err)
				if off < point {
					assert.Equal(t, v, got[k], "key %s's latest value below the point", k)
				}
			}
			retry := func() {
				t.Helper()
				end := part.LogEndOffset()
				info, err := part.AppendBatchInfo(producerKeyedBatch(t, point-1, 1, keys[(point-1)%int64(len(keys))]))
				require.NoError(t, err)
				assert.True(t, info.Duplicate, "a retry of the producer's last batch below the point")
				assert.Equal(t, point-1, info.Base)
				assert.Equal(t, end, part.LogEndOffset(), "nothing written")
			}
			retry()
			require.NoError(t, part.Close())
			part, err = log.Open(dir, cfg)
			require.NoError(t, err)
			st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
			retry()

			// The next entry lands at the point, past any gap.
			r := newTestCore(part, st)
			require.NoError(t, r.persist(producerKeyedEntry(t, md.GetIndex()+1, 1, point, "z")))
			assert.Equal(t, point+1, part.LogEndOffset())
		})
	}
}

// A snapshot sent without producer state (the leader had no producer
// snapshot file at its point that reads: producerSnapshot's warning) must
// not wipe what the follower knows: it keeps the producers of its own
// batches and of the leader's batches it copied, before and after a
// reopen, and answers a retry of the producer's last copied batch as a
// duplicate.
func TestRaftStorageInstallsSnapshotWithoutProducerState(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	state := filepath.Join(root, "t-0.state")
	part := openReplicated(t, dir)
	st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)

	// The leader's batches of producer 7 at offsets 0-3 (sequence =
	// offset), below its snapshot point 4; no producer state.
	var records []byte
	for off, k := range []string{"a", "b", "a", "b"} {
		records = append(records, producerKeyedBatch(t, int64(off), 1, k)...)
	}
	snap := &pb.Snapshot{
		Data:     appendSnapshotData(nil, snapshotData{offset: 4, start: 0, records: records}),
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(4)), Term: new(uint64(1)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}},
	}
	require.NoError(t, st.applySnapshot(snap))

	check := func(part *log.Partition) {
		t.Helper()
		ps, ok, err := part.ProducerState(7)
		require.NoError(t, err)
		require.True(t, ok, "the producer of the copied batches is known")
		require.NotEmpty(t, ps.Batches)
		assert.Equal(t, int64(3), ps.Batches[len(ps.Batches)-1].LastOffset)
		info, err := part.AppendBatchInfo(producerKeyedBatch(t, 3, 1, "b"))
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "a retry of the producer's last copied batch")
		assert.Equal(t, int64(3), info.Base)
		assert.Equal(t, int64(4), part.LogEndOffset(), "nothing written")
	}
	check(part)
	require.NoError(t, part.Close())
	part = openReplicated(t, dir)
	defer part.Close()
	_, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	check(part)
}

// newTestCompactor returns the key compactor of cleanup policy compact.
func newTestCompactor() (*compaction.Compactor, error) {
	policies, err := compaction.Policies(compaction.Config{CleanupPolicy: "compact"})
	if err != nil {
		return nil, err
	}
	for _, p := range policies {
		if c, ok := p.(*compaction.Compactor); ok {
			return c, nil
		}
	}
	return nil, errors.New("no compactor in policy compact")
}
