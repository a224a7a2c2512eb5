package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// coordinator returns the node that node id names as coordinator of the
// given key type (0 group, 1 transaction), or 0 (none, unreachable).
func (c *testCluster) coordinator(id int, keyType int8, key string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = keyType, key
	req.CoordinatorKeys = []string{key}
	resp, err := c.request(ctx, id, req)
	if err != nil {
		return 0
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	nodeID, code := fc.NodeID, fc.ErrorCode
	if fc.Version >= 4 && len(fc.Coordinators) == 1 {
		nodeID, code = fc.Coordinators[0].NodeID, fc.Coordinators[0].ErrorCode
	}
	if code != 0 || nodeID <= 0 {
		return 0
	}
	return int(nodeID)
}

// waitCoordinator waits until every running node names the same running
// coordinator, other than not, and returns it.
func (c *testCluster) waitCoordinator(keyType int8, key string, not int) int {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		agreed := 0
		for _, np := range c.nodes {
			if !np.running() {
				continue
			}
			co := c.coordinator(np.id, keyType, key)
			if co == 0 || co == not || !c.node(co).running() || (agreed != 0 && co != agreed) {
				agreed = -1
				break
			}
			agreed = co
		}
		if agreed > 0 {
			return agreed
		}
		<-tick.C
	}
	require.Failf(c.t, "no coordinator", "the nodes never agreed on a coordinator within %v", clusterTimeout)
	return 0
}

// fetchCommitted asks node id for a group's committed offset of topic's
// partition 0, retrying while the node loads its state; it returns the
// offset and the final error code.
func (c *testCluster) fetchCommitted(id int, group, topic string) (int64, int16) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := c.request(ctx, id, req)
		cancel()
		require.NoError(c.t, err)
		of := resp.(*kmsg.OffsetFetchResponse)
		code := of.ErrorCode
		var off int64 = -1
		if len(of.Topics) == 1 && len(of.Topics[0].Partitions) == 1 {
			p := of.Topics[0].Partitions[0]
			off = p.Offset
			if code == 0 {
				code = p.ErrorCode
			}
		}
		if code != kerr.CoordinatorLoadInProgress.Code || !time.Now().Before(deadline) {
			return off, code
		}
		<-tick.C
	}
}

// A consumer group commits offsets (answered after the raft commit of
// __consumer_offsets-0) and its coordinator's node is killed with SIGKILL:
// another node becomes the coordinator, loads the offsets from its copy
// of the partition, and a new member of the group resumes exactly at the
// committed offset; the group itself (its generation, from the group
// metadata records) is loaded too. Only the coordinator serves group
// requests: the other nodes answer NOT_COORDINATOR.
func TestClusterGroupOffsetsSurviveCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic, group, n, half = "grouped", "billing", 400, 150
	c := newTestCluster(t, 3)
	var seeds []string
	for id := 1; id <= 3; id++ {
		c.start(id)
		seeds = append(seeds, c.node(id).kafka)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	src := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	for i := range n {
		src.Produce(ctx, kgo.StringRecord(fmt.Sprintf("v-%03d", i)), func(_ *kgo.Record, err error) {
			assert.NoError(t, err)
		})
	}
	require.NoError(t, src.Flush(ctx))
	src.Close()

	coord := c.waitCoordinator(0, group, 0)
	for id := 1; id <= 3; id++ {
		if id == coord {
			continue
		}
		_, code := c.fetchCommitted(id, group, topic)
		assert.Equal(t, kerr.NotCoordinator.Code, code, "OffsetFetch on node %d (coordinator %d)", id, coord)
	}

	consume := func(from []string) (*kgo.Client, []*kgo.Record) {
		cl := newClient(t, from[0], kgo.SeedBrokers(from...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(30*time.Second))
		var got []*kgo.Record
		for len(got) < half {
			fs := cl.PollRecords(ctx, half-len(got))
			require.NoError(t, ctx.Err())
			got = append(got, fs.Records()...)
		}
		return cl, got
	}
	cl, first := consume(seeds)
	require.Equal(t, "v-000", string(first[0].Value))
	require.NoError(t, cl.CommitRecords(ctx, first...))
	cl.Close()
	committed := first[len(first)-1].Offset + 1
	off, code := c.fetchCommitted(coord, group, topic)
	require.Zero(t, code)
	require.Equal(t, committed, off)

	c.kill(coord)
	next := c.waitCoordinator(0, group, coord)
	require.NotEqual(t, coord, next)
	off, code = c.fetchCommitted(next, group, topic)
	require.Zero(t, code)
	assert.Equal(t, committed, off, "the new coordinator %d lost the committed offset", next)

	// The new coordinator loaded the group from its metadata records: a
	// member joining now continues its generations (the first consumer's,
	// then the empty group its leave wrote), where a group rebuilt from
	// nothing would start again at 1.
	rc := dialRaw(t, c.node(next).kafka)
	sub, assign := consumerProtocol(topic)
	member, gen := joinAndSync(t, rc, group, sub, assign)
	assert.GreaterOrEqual(t, gen, int32(2), "the new coordinator %d did not load the group's generation", next)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 2
	leave.Group, leave.MemberID = group, member
	require.Zero(t, rc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode)

	var live []string
	for id := 1; id <= 3; id++ {
		if id != coord {
			live = append(live, c.node(id).kafka)
		}
	}
	cl, second := consume(live)
	defer cl.Close()
	// The first record after the committed ones (a control batch of a
	// leader change may lie in between).
	assert.GreaterOrEqual(t, second[0].Offset, committed)
	assert.Equal(t, fmt.Sprintf("v-%03d", half), string(second[0].Value), "the group resumed at offset %d, committed %d", second[0].Offset, committed)
	require.NoError(t, cl.CommitRecords(ctx, second...))
	off, code = c.fetchCommitted(next, group, topic)
	require.Zero(t, code)
	assert.Equal(t, second[len(second)-1].Offset+1, off)

	// The killed node comes back as a follower of the offsets partition
	// and answers NOT_COORDINATOR.
	c.start(coord)
	if now := c.waitCoordinator(0, group, 0); now != coord {
		_, code = c.fetchCommitted(coord, group, topic)
		assert.Equal(t, kerr.NotCoordinator.Code, code)
	}
}

// The exactly-once copy of TestTxnGroupTransactSessionExactlyOnceAcrossRestart
// on three nodes: in the middle of a transaction (its records written,
// its offsets not yet) the node of the transaction coordinator is killed
// with SIGKILL. Another node takes over __transaction_state-0, loads the
// transactions from it and the loop goes on; the output read at
// read_committed holds every input record exactly once and the group's
// committed offset is the input's end.
func TestClusterTransactSessionCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const in, out, group, n = "eos-in", "eos-out", "eos-group", 240
	c := newTestCluster(t, 3)
	var seeds []string
	for id := 1; id <= 3; id++ {
		c.start(id)
		seeds = append(seeds, c.node(id).kafka)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	src := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation())
	for i := range n {
		require.NoError(t, src.ProduceSync(ctx, &kgo.Record{Topic: in, Value: fmt.Appendf(nil, "v-%03d", i)}).FirstErr())
	}
	// The output topic exists before the session writes to it.
	require.NoError(t, src.ProduceSync(ctx, &kgo.Record{Topic: out, Value: []byte("start")}).FirstErr())
	src.Close()

	newSession := func() (*kgo.GroupTransactSession, error) {
		return kgo.NewGroupTransactSession(
			kgo.SeedBrokers(seeds...),
			kgo.RetryTimeout(60*time.Second),
			kgo.FetchMaxWait(200*time.Millisecond),
			kgo.TransactionalID("eos-copier"),
			kgo.TransactionTimeout(60*time.Second),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.DefaultProduceTopic(out),
		)
	}
	first, err := newSession()
	require.NoError(t, err)
	// The loop replaces the session once if franz-go gives up on the
	// dead node (see below); cur is the one in use.
	var cur atomic.Pointer[kgo.GroupTransactSession]
	cur.Store(first)
	defer func() { cur.Load().Close() }()

	mid := make(chan struct{})
	resumed := make(chan struct{})
	loopDone := make(chan error, 1)
	var txns, commits, aborts, restarts atomic.Int32
	go func() {
		sess := first
		copied := 0
		for copied < n {
			fs := sess.PollRecords(ctx, 25)
			if ctx.Err() != nil {
				loopDone <- fmt.Errorf("copied %d of %d: %w", copied, n, ctx.Err())
				return
			}
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
			if len(recs) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				loopDone <- fmt.Errorf("begin: %w", err)
				return
			}
			for _, r := range recs {
				sess.Produce(ctx, kgo.StringRecord("copy-"+string(r.Value)), nil)
			}
			if txns.Add(1) == 3 {
				if err := sess.Client().Flush(ctx); err != nil {
					loopDone <- fmt.Errorf("flush: %w", err)
					return
				}
				close(mid)
				<-resumed
			}
			committed, err := sess.End(ctx, kgo.TryCommit)
			if ne, ok := errors.AsType[*net.OpError](err); ok && ne.Op == "dial" && restarts.Add(1) == 1 {
				// franz-go v1.22.3 sends FindCoordinator once, to any
				// broker of its metadata, without retrying it
				// (noShardRetryCtx); when that broker is the killed
				// node twice in a row, End aborts the transaction and
				// fails with the dial error, which its documentation
				// calls not retryable. The application's remedy, a new
				// session with the same transactional id (it fences
				// the old one and resumes from the committed offsets),
				// keeps the copy exactly once.
				t.Logf("End failed on the killed node (%v): a new session", err)
				sess.Close()
				if sess, err = newSession(); err != nil {
					loopDone <- fmt.Errorf("new session: %w", err)
					return
				}
				cur.Store(sess)
				aborts.Add(1)
				continue
			}
			if err != nil {
				loopDone <- fmt.Errorf("end: %w", err)
				return
			}
			if committed {
				commits.Add(1)
				copied += len(recs)
			} else {
				aborts.Add(1)
			}
		}
		loopDone <- nil
	}()

	select {
	case <-mid:
	case err := <-loopDone:
		require.Failf(t, "the loop ended before the kill", "%v", err)
	case <-ctx.Done():
		require.Fail(t, "the loop never reached its third transaction")
	}
	victim := c.waitCoordinator(1, "eos-copier", 0)
	c.kill(victim)
	next := c.waitCoordinator(1, "eos-copier", victim)
	t.Logf("killed transaction coordinator %d; node %d took over", victim, next)
	close(resumed)
	select {
	case err := <-loopDone:
		require.NoError(t, err)
	case <-ctx.Done():
		require.Fail(t, "the loop did not finish")
	}
	cur.Load().Close()
	assert.GreaterOrEqual(t, commits.Load(), int32(3), "transactions committed")
	t.Logf("%d transactions: %d committed, %d aborted; sessions replaced after a dial error: %d", txns.Load(), commits.Load(), aborts.Load(), restarts.Load())

	live := c.node(next).kafka
	produceEnd(ctx, t, live, out, 1)
	copies := make(map[string]int)
	for _, vs := range consumeUntilEnd(ctx, t, live, out, 1, true) {
		for _, v := range vs {
			copies[v]++
		}
	}
	delete(copies, "start")
	for i := range n {
		v := fmt.Sprintf("copy-v-%03d", i)
		assert.Equal(t, 1, copies[v], "copies of %s", v)
		delete(copies, v)
	}
	assert.Empty(t, copies, "records in the output that are not copies of input records")

	// The group's committed offset is past the last input record (a new
	// leader's control batch may follow it).
	rd := newClient(t, live, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{in: {0: kgo.NewOffset().AtStart()}}))
	var lastIn *kgo.Record
	for read := 0; read < n; {
		fs := rd.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { lastIn = r; read++ })
	}
	rd.Close()
	hw, err := c.offsets(c.waitLeader(in, victim), in, -1)
	require.NoError(t, err)
	gc := c.waitCoordinator(0, group, victim)
	off, code := c.fetchCommitted(gc, group, in)
	require.Zero(t, code)
	assert.Equal(t, fmt.Sprintf("v-%03d", n-1), string(lastIn.Value))
	assert.True(t, off > lastIn.Offset && off <= hw, "committed offset of %s: %d, the last record at %d, high watermark %d", in, off, lastIn.Offset, hw)
}

// A follower that catches up by a raft snapshot gets the leader's
// producer state at the snapshot point with it: a retry of an idempotent
// producer's last batch, which retention deleted from the leader before
// the follower came back, is a duplicate on the follower too (answered
// with the original offset, nothing written), so the follower would not
// store it twice if it became the leader.
func TestClusterSnapshotCarriesProducerState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "retained-idem"
	c := newTestCluster(t, 3, "-segment-bytes", "4096", "-retention", "1h", "-cleanup-interval", "20ms")
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	oldTime := func() time.Time { return time.Now().Add(-2 * time.Hour) } // past the retention
	old := oldTime().UnixMilli()
	p := startProducer(t, c, topic, oldTime)
	p.waitAcked(t, 10)
	p.stop()
	leader := c.waitLeader(topic, 0)
	follower := leader%3 + 1
	c.kill(follower)

	rc := dialRaw(t, c.node(leader).kafka)
	ip := rc.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	require.Zero(t, ip.ErrorCode)
	var last []byte
	var lastBase int64
	for i := range 3 {
		last = txnBatchAt(t, ip.ProducerID, ip.ProducerEpoch, int32(5*i), false, "idem", 5, old)
		pr := produceRaw(t, rc, 9, topic, 0, last)
		require.Zero(t, pr.ErrorCode)
		lastBase = pr.BaseOffset
	}
	// Old padding until retention deleted the producer's batches from the
	// leader.
	deadline := time.Now().Add(clusterTimeout)
	for i := 0; ; i++ {
		pr := produceRaw(t, rc, 9, topic, 0, txnBatchAt(t, -1, -1, -1, false, fmt.Sprintf("pad%d", i), 10, old))
		require.Zero(t, pr.ErrorCode)
		start, err := c.offsets(leader, topic, -2)
		require.NoError(t, err)
		if start > lastBase {
			break
		}
		require.True(t, time.Now().Before(deadline), "retention never passed offset %d", lastBase)
	}
	pr := produceRaw(t, rc, 9, topic, 0, last)
	require.Zero(t, pr.ErrorCode)
	require.Equal(t, lastBase, pr.BaseOffset, "the leader answers the retry with the original offset")

	c.start(follower)
	c.node(follower).waitLog(t, "installed raft snapshot", 1)
	c.waitCaughtUp(topic, leader)
	c.stopAll()

	part, err := plog.Open(filepath.Join(c.node(follower).dir, topic+"-0"), plog.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err)
	defer part.Close()
	require.Greater(t, part.LogStartOffset(), lastBase, "the follower's log starts past the producer's batches")
	end := part.LogEndOffset()
	info, err := part.AppendBatchInfo(last)
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "the follower knows the producer's last batch from the snapshot")
	assert.Equal(t, lastBase, info.Base)
	assert.Equal(t, end, part.LogEndOffset(), "nothing written")
}

// librdkafka (python3-confluent-kafka) against the three nodes:
// init_transactions, commit, abort, commit through the transaction
// coordinator; a read_committed librdkafka consumer gets the committed
// records only, a read_uncommitted one all of them.
func TestClusterConfluentTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	needConfluent(t)
	c := newTestCluster(t, 3)
	var seeds []string
	for id := 1; id <= 3; id++ {
		c.start(id)
		seeds = append(seeds, c.node(id).kafka)
	}
	var got struct {
		Values      []string `json:"values"`
		Uncommitted []string `json:"uncommitted"`
	}
	ck(t, &got, "txn", strings.Join(seeds, ","), "ck-txn", "ck-tx", "4")
	assert.Equal(t, []string{"c1-0", "c1-1", "c1-2", "c1-3", "c2-0", "c2-1", "c2-2", "c2-3"}, got.Values)
	assert.Equal(t, []string{"c1-0", "c1-1", "c1-2", "c1-3", "a-0", "a-1", "a-2", "a-3", "c2-0", "c2-1", "c2-2", "c2-3"}, got.Uncommitted)
}

// startOneNodeCluster runs, in-process, a cluster of one node (raft with a
// single voter elects it), with adjust applied to its config.
func startOneNodeCluster(t *testing.T, dir, kafka, raft string, adjust func(*config)) *testBroker {
	t.Helper()
	return startBrokerWith(t, dir, 1, func(c *config) {
		c.Addr, c.NodeID = kafka, 1
		c.Cluster = []clusterNode{{id: 1, kafkaAddr: kafka, raftAddr: raft}}
		if adjust != nil {
			adjust(c)
		}
	})
}

// commitWhenCoordinator commits one offset, retrying while the node is
// not yet the coordinator (its election, its load).
func commitWhenCoordinator(t *testing.T, rc *rawConn, group, topic string, offset int64) {
	t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group = group
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		code := rc.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		switch code {
		case 0:
			return
		case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
			require.True(t, time.Now().Before(deadline), "not the coordinator within %v", clusterTimeout)
			<-tick.C
		default:
			require.Failf(t, "commit refused", "%v", kerr.ErrorForCode(code))
		}
	}
}

// In cluster mode the internal topics are raft logs: the node's cleaner
// must not compact them (a compacted log has gaps and is no raft log: the
// node would not open it again) and replicas must not expire them by
// retention (committed offsets would be lost); their replicas compact
// them below the raft snapshot point, as Kafka compacts its internal
// topics. After many commits of one key with the cleanup running every
// few milliseconds, __consumer_offsets-0 is compacted (the snapshot point
// moved, fewer records than commits, nothing expired), the node restarts,
// opens it as a raft log, and still has the last commit.
func TestClusterInternalTopicsCompactedByReplica(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	kafka, raft := freeAddr(t), freeAddr(t)
	cleaned := make(chan struct{}, 1)
	adjust := func(c *config) {
		c.OffsetsSegmentBytes = 1024
		c.Retention = time.Millisecond
		c.CleanupInterval = 5 * time.Millisecond
		c.CleanupDone = func() {
			select {
			case cleaned <- struct{}{}:
			default:
			}
		}
	}
	b := startOneNodeCluster(t, dir, kafka, raft, adjust)
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, "counted")
	const commits = 120
	for i := range commits {
		commitWhenCoordinator(t, rc, "g", "counted", int64(i))
	}
	// At least two full cleanup runs after the last commit (the channel
	// may hold one that ended before it).
	<-cleaned
	<-cleaned
	<-cleaned
	b.stop(t)

	part, err := plog.Open(filepath.Join(dir, offsetsTopic+"-0"), plog.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err)
	assert.Equal(t, int64(0), part.LogStartOffset(), "retention expired nothing")
	st, err := raftlog.OpenStorage(vfs.Default, raftStatePath(dir, offsetsTopic, 0), part, &pb.ConfState{Voters: []uint64{1}})
	require.NoError(t, err, "__consumer_offsets-0 is still a raft log")
	assert.Positive(t, st.SnapshotOffset(), "the replica moved its snapshot point to compact")
	records := 0
	for off := part.LogStartOffset(); off < part.LogEndOffset(); {
		r, err := part.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		b := r.Bytes()
		require.NotEmpty(t, b)
		for len(b) > 0 {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			if !bt.Attributes().IsControl() {
				records += int(bt.RecordsCount())
			}
			off, b = bt.NextOffset(), rest
		}
		require.NoError(t, r.Close())
	}
	assert.Less(t, records, commits, "the replica compacted the commits of one key")
	require.NoError(t, part.Close())

	b = startOneNodeCluster(t, dir, kafka, raft, nil)
	defer b.stop(t)
	rc = dialRaw(t, b.addr)
	commitWhenCoordinator(t, rc, "other", "counted", 0) // waits for the coordinator
	assert.Equal(t, int64(commits-1), fetchCommitted(t, rc, "g", "counted", 0))
}

// lso returns node id's last stable offset of topic's partition 0
// (ListOffsets latest at read_committed, as the debugging replica: a
// follower answers too).
func (c *testCluster) lso(id int, topic string) int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = debugReplicaID, readCommitted
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(ctx, id, req)
	require.NoError(c.t, err)
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	require.Zero(c.t, p.ErrorCode)
	return p.Offset
}

// WriteTxnMarkers, as a transaction coordinator sends it: a node that does
// not lead the partition answers NOT_LEADER_OR_FOLLOWER; the leader writes
// the marker through raft and answers once it is committed, and every
// node's copy follows it (the last stable offset, held by the open
// transaction, moves to the high watermark on the followers too).
func TestClusterWriteTxnMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "marked"
	c := newTestCluster(t, 3)
	var seeds []string
	for id := 1; id <= 3; id++ {
		c.start(id)
		seeds = append(seeds, c.node(id).kafka)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.AllowAutoTopicCreation())
	require.NoError(t, src.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("plain")}).FirstErr())
	src.Close()
	leader := c.waitLeader(topic, 0)
	rc := dialRaw(t, c.node(leader).kafka)
	ip := rc.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	require.Zero(t, ip.ErrorCode)
	pr := produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "open", 3))
	require.Zero(t, pr.ErrorCode)
	open := pr.BaseOffset
	c.waitCaughtUp(topic, leader)
	for id := 1; id <= 3; id++ {
		assert.Equal(t, open, c.lso(id, topic), "node %d: the open transaction holds the last stable offset", id)
	}

	markers := func(id int) int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed = ip.ProducerID, ip.ProducerEpoch, true
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		mk.Topics = append(mk.Topics, mt)
		req.Markers = append(req.Markers, mk)
		resp, err := c.request(ctx, id, req)
		require.NoError(t, err)
		return resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	follower := leader%3 + 1
	assert.Equal(t, kerr.NotLeaderForPartition.Code, markers(follower))
	assert.Equal(t, open, c.lso(leader, topic), "a refused marker changes nothing")
	require.Zero(t, markers(leader))
	hw := c.waitCaughtUp(topic, leader)
	assert.Equal(t, hw, c.lso(leader, topic), "answered after the commit: the leader's last stable offset is its high watermark")
	for id := 1; id <= 3; id++ {
		assert.Equal(t, hw, c.lso(id, topic), "node %d's last stable offset follows the replicated marker", id)
	}
}

// A single broker has no other transaction coordinator: WriteTxnMarkers,
// which only brokers send, is refused with CLUSTER_AUTHORIZATION_FAILED
// and writes nothing.
func TestWriteTxnMarkersRefusedOnOneNode(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, "single")
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.Committed = 1, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "single", []int32{0}
	mk.Topics = append(mk.Topics, mt)
	req.Markers = append(req.Markers, mk)
	resp := rc.do(req).(*kmsg.WriteTxnMarkersResponse)
	assert.Equal(t, kerr.ClusterAuthorizationFailed.Code, resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
	assert.Equal(t, int64(0), listOffsetAt(t, rc, "single", 0, plog.LatestTimestamp, 0), "nothing written")
}
