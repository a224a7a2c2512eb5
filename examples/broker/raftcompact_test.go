package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
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
	st, err := raftlog.OpenStorage(vfs.Default, raftStatePath(np.dir, topic, 0), part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err, "node %d", np.id)
	require.GreaterOrEqual(t, st.CommittedOffset(), upTo, "node %d committed up to %d", np.id, upTo)
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
			if bt.BaseOffset() >= st.SnapshotOffset() {
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
	return out, st.SnapshotOffset(), entries
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
