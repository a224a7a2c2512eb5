package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
)

// keyed is one record's place in a compacted log.
type keyed struct {
	offset int64
	value  string
}

// latestByKey opens a stopped node's partition and returns, for every key
// of its records below upTo, the latest record; and its raft snapshot
// offset with the bytes of its raft entries from there up to upTo.
func latestByKey(t *testing.T, np *nodeProc, topic string, upTo int64) (map[string]keyed, int64, []byte) {
	t.Helper()
	part, err := plog.Open(filepath.Join(np.dir, topic+"-0"), plog.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err, "node %d", np.id)
	defer func() { require.NoError(t, part.Close()) }()
	st, err := openRaftStorage(vfs.Default, raftStatePath(np.dir, topic, 0), part, []uint64{1, 2, 3})
	require.NoError(t, err, "node %d", np.id)
	require.GreaterOrEqual(t, st.offsetAfter(st.hs.GetCommit()), upTo, "node %d committed up to %d", np.id, upTo)
	out := make(map[string]keyed)
	var entries []byte
	for off := part.LogStartOffset(); off < upTo; {
		r, err := part.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		b := r.Bytes()
		require.NotEmpty(t, b, "node %d: no batch at %d below %d", np.id, off, upTo)
		for len(b) > 0 && off < upTo {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			if bt.BaseOffset() >= st.snapOffset {
				entries = append(entries, bt...)
			}
			if !bt.Attributes().IsControl() {
				for rec, err := range bt.All(nil) {
					require.NoError(t, err)
					if rec.Offset < upTo {
						out[string(rec.Key)] = keyed{rec.Offset, string(rec.Value)}
					}
				}
			}
			off, b = bt.NextOffset(), rest
		}
		require.NoError(t, r.Close())
	}
	return out, st.snapOffset, entries
}

// Key compaction on a replicated topic: three nodes with -cleanup-policy
// compact and small segments, a keyed producer with acks=all. A follower
// is down while the others compact (each moves its raft snapshot point up
// to where it cleans); back, it is behind the leader's snapshot point and
// installs a snapshot carrying the leader's compacted records. At the end
// the three committed logs hold the same latest value, at the same
// offset, for every key (the last acknowledged one), and the same raft
// entries from the highest snapshot point on.
func TestClusterKeyCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic, keys = "compacted", 40
	c := newTestCluster(t, 3, "-cleanup-policy", "compact", "-segment-bytes", "4096", "-cleanup-interval", "20ms")
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	cl := newClient(t, c.node(1).kafka,
		kgo.SeedBrokers(c.node(1).kafka, c.node(2).kafka, c.node(3).kafka),
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*clusterTimeout)
	defer cancel()
	want := make(map[string]keyed) // the last acknowledged record of each key
	next := 0
	// produce writes n records, ten per batch (so that segments of
	// 4 KiB hold many batches and roll).
	produce := func(n int) {
		t.Helper()
		for n > 0 {
			var rs []*kgo.Record
			for range min(n, 10) {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%02d", next%keys), Value: fmt.Appendf(nil, "%09d", next)})
				next++
				n--
			}
			res := cl.ProduceSync(ctx, rs...)
			require.NoError(t, res.FirstErr())
			for _, r := range res {
				if k := string(r.Record.Key); r.Record.Offset >= want[k].offset {
					want[k] = keyed{r.Record.Offset, string(r.Record.Value)}
				}
			}
		}
	}
	produce(200)
	leader := c.waitLeader(topic, 0)
	follower := leader%3 + 1
	c.kill(follower)
	c.node(leader).waitLog(t, `msg="key compaction"`, 1)
	produce(400)
	c.node(leader).waitLog(t, `msg="key compaction"`, 3)

	c.start(follower)
	c.node(follower).waitLog(t, "installed raft snapshot", 1)
	produce(200)
	leader = c.waitLeader(topic, 0)
	hw := c.waitCaughtUp(topic, leader)
	c.stopAll()

	var ref map[string]keyed
	var refID int
	var points []int64
	entries := map[int][]byte{}
	for _, np := range c.nodes {
		got, point, ents := latestByKey(t, np, topic, hw)
		assert.Len(t, got, keys, "node %d", np.id)
		points = append(points, point)
		entries[np.id] = ents
		if ref == nil {
			ref, refID = got, np.id
			continue
		}
		assert.Equal(t, ref, got, "node %d's latest record per key differs from node %d's", np.id, refID)
	}
	assert.Equal(t, want, ref, "the latest record of each key is the last acknowledged one")
	// From the highest snapshot point on, the raft entries are the same
	// bytes on every node.
	top := max(points[0], points[1], points[2])
	trim := func(b []byte, from int64) []byte {
		for len(b) > 0 {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			if bt.BaseOffset() >= from {
				return b
			}
			b = rest
		}
		return b
	}
	for id := 2; id <= 3; id++ {
		assert.True(t, bytes.Equal(trim(entries[1], top), trim(entries[id], top)), "node %d's raft entries from %d differ from node 1's", id, top)
	}
	assert.Positive(t, points[follower-1], "the follower's raft log starts past 0 (a snapshot)")
	dl := buildDumplog(t)
	for _, np := range c.nodes {
		dumplogVerify(t, dl, np.dir)
	}
}

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
			lst, err := openRaftStorage(vfs.Default, filepath.Join(root, "leader.state"), lpart, []uint64{1, 2, 3})
			require.NoError(t, err)
			lr := &replica{part: lpart, st: lst, prewritten: make(map[uint64]prewrite)}
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
			st, err := openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
			require.NoError(t, err)
			r := &replica{part: part, st: st, prewritten: make(map[uint64]prewrite)}
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
				st, err = openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
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
			st, err = openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
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
func latestValues(t *testing.T, part *plog.Partition, upTo int64) map[string]string {
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
			cfg := plog.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 400}
			lpart, err := plog.Open(filepath.Join(root, "leader", "t-0"), cfg)
			require.NoError(t, err)
			defer lpart.Close()
			lst, err := openRaftStorage(vfs.Default, filepath.Join(root, "leader.state"), lpart, []uint64{1, 2, 3})
			require.NoError(t, err)
			lr := &replica{part: lpart, st: lst, prewritten: make(map[uint64]prewrite)}
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

			kc, err := newKeyCompactor(config{CleanupPolicy: "compact"})
			require.NoError(t, err)
			res, err := lpart.Compact(context.Background(), raftCleaner{Compactor: kc.c, st: lst})
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
			part, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			st, err := openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
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
			part, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			defer part.Close()
			st, err = openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
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
			part, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			st, err = openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
			require.NoError(t, err)
			retry()

			// The next entry lands at the point, past any gap.
			r := &replica{part: part, st: st, prewritten: make(map[uint64]prewrite)}
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
	st, err := openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
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

	check := func(part *plog.Partition) {
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
	_, err = openRaftStorage(vfs.Default, state, part, []uint64{1, 2, 3})
	require.NoError(t, err)
	check(part)
}
