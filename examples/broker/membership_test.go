package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// addProc prepares one more node (not started) that joins the cluster
// (newJoiner) and adds it to c.
func (c *testCluster) addProc() *nodeProc {
	np := c.newJoiner()
	c.nodes = append(c.nodes, np)
	return np
}

// newJoiner prepares node len(c.nodes)+1 to join the cluster: its
// -cluster names the cluster's nodes and itself, and it starts with
// -join. It is not one of c.nodes yet.
func (c *testCluster) newJoiner() *nodeProc {
	id := len(c.nodes) + 1
	np := &nodeProc{id: id, dir: filepath.Join(filepath.Dir(c.nodes[0].dir), fmt.Sprintf("node%d", id)), kafka: freeAddr(c.t), raft: freeAddr(c.t)}
	np.spec = fmt.Sprintf("%s,%d=%s/%s", c.spec, id, np.kafka, np.raft)
	np.args = []string{"-join"}
	return np
}

// admin runs the broker command in client mode (a child process of the
// test binary, as a node is) and returns its output; it must succeed.
func admin(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), brokerChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "broker %v:\n%s", args, out)
	return string(out)
}

// replicas returns the brokers and topic's partition-0 replicas node id's
// Metadata names.
func (c *testCluster) replicas(id int, topic string) (brokers, replicas []int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(ctx, id, req)
	require.NoError(c.t, err)
	mr := resp.(*kmsg.MetadataResponse)
	for _, b := range mr.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	replicas = slices.Clone(mr.Topics[0].Partitions[0].Replicas)
	slices.Sort(replicas)
	return brokers, replicas
}

// waitReplicas waits until node id's Metadata names want as the brokers
// and as topic's partition-0 replicas (a node applies a membership change
// when it learns that it committed, a moment after the node that was
// asked).
func (c *testCluster) waitReplicas(id int, topic string, want []int32) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var brokers, replicas []int32
	for time.Now().Before(deadline) {
		if brokers, replicas = c.replicas(id, topic); slices.Equal(brokers, want) && slices.Equal(replicas, want) {
			return
		}
		<-tick.C
	}
	require.Failf(c.t, "membership not applied", "node %d names brokers %v and replicas %v, want %v", id, brokers, replicas, want)
}

// waitHighWatermark waits until node id's high watermark of topic reaches
// at least hw.
func (c *testCluster) waitHighWatermark(id int, topic string, hw int64) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var got int64
	for time.Now().Before(deadline) {
		var err error
		if got, err = c.offsets(id, topic, -1); err == nil && got >= hw {
			return
		}
		<-tick.C
	}
	require.Failf(c.t, "not caught up", "node %d's high watermark %d never reached %d within %v", id, got, hw, clusterTimeout)
}

// A fourth node joins a running cluster while an idempotent producer writes
// with acks=all: started with -join, it copies the partition, and
// `broker -add-voter` makes it a voter (a raft configuration change);
// Metadata then names four replicas. The running leader is removed with
// `broker -remove-voter` (it hands its leadership over), then another old
// node is killed and removed: the new node and the last old one go on. At
// the end every acknowledged record is in both remaining nodes' committed
// logs once and in order, and their committed logs are the same bytes.
func TestClusterMembershipChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "members"
	c := newTestCluster(t, 3)
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	p := startProducer(t, c, topic, time.Now)
	p.waitAcked(t, 200)

	np := c.addProc()
	c.start(np.id)
	out := admin(t, "-add-voter", fmt.Sprintf("%d=%s/%s", np.id, np.kafka, np.raft), "-bootstrap", c.node(1).kafka)
	assert.Contains(t, out, "node 4 added as a voter of every partition")
	for _, id := range []int{1, 4} {
		c.waitReplicas(id, topic, []int32{1, 2, 3, 4})
	}
	before := p.acked.Load()
	p.waitAcked(t, before+200)
	leaderHW, err := c.offsets(c.waitLeader(topic, 0), topic, -1)
	require.NoError(t, err)
	c.waitHighWatermark(np.id, topic, leaderHW)

	// A running leader is removed: it hands its leadership over, and
	// the producer goes on with the new leader.
	live := c.waitLeader(topic, np.id)
	out = admin(t, "-remove-voter", strconv.Itoa(live), "-bootstrap", c.node(np.id).kafka)
	assert.Contains(t, out, fmt.Sprintf("node %d removed from every partition", live))
	c.waitLeader(topic, live)
	before = p.acked.Load()
	p.waitAcked(t, before+200)
	c.signal(live, syscall.SIGINT)

	// An old node is killed, then removed.
	old := 1
	for old == live {
		old++
	}
	c.kill(old)
	out = admin(t, "-remove-voter", strconv.Itoa(old), "-bootstrap", c.node(np.id).kafka)
	assert.Contains(t, out, fmt.Sprintf("node %d removed from every partition", old))
	var want []int32
	for id := 1; id <= 4; id++ {
		if id != old && id != live {
			want = append(want, int32(id))
		}
	}
	for _, id := range want {
		c.waitReplicas(int(id), topic, want)
	}
	before = p.acked.Load()
	p.waitAcked(t, before+200)
	p.stop()
	p.mu.Lock()
	for _, err := range p.errs {
		assert.NoError(t, err, "a record was not acknowledged")
	}
	acked := p.values
	p.mu.Unlock()

	leader := c.waitLeader(topic, old)
	hw := c.waitCaughtUp(topic, leader)
	require.Len(t, want, 2)
	c.stopAll()

	var ref []byte
	for _, id := range want {
		_, got := committedLog(t, c.node(int(id)), topic, hw)
		if ref == nil {
			ref = got
			continue
		}
		require.True(t, bytes.Equal(ref, got), "node %d's committed log (%d bytes) differs from node %d's (%d bytes)", id, len(got), want[0], len(ref))
	}
	values := recordValues(t, ref)
	seen := make(map[string]bool, len(values))
	for i, v := range values {
		require.False(t, seen[v], "value %s stored twice", v)
		seen[v] = true
		if i > 0 {
			require.Less(t, values[i-1], v, "values out of order at record %d", i)
		}
	}
	for v := range acked {
		require.True(t, seen[v], "acknowledged value %s is not in the committed log", v)
	}
	t.Logf("%d records acknowledged, %d committed; node %d removed while leading, node %d killed and removed", len(acked), len(values), live, old)
	dl := buildDumplog(t)
	for _, id := range want {
		dumplogVerify(t, dl, c.node(int(id)).dir)
	}
}

// A node that joins after retention moved the leader's log start copies
// nothing from before it: raft sends it a snapshot (the point, and the
// membership), it restarts its log at the leader's log start and copies
// the rest, ending with the leader's committed bytes from there on.
func TestClusterJoinBehindLogStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	const topic = "retained"
	c := newTestCluster(t, 3, "-segment-bytes", "4096", "-retention", "1h", "-cleanup-interval", "20ms")
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	old := func() time.Time { return time.Now().Add(-2 * time.Hour) } // past the retention
	p := startProducer(t, c, topic, old)
	p.waitAcked(t, 50)
	leader := c.waitLeader(topic, 0)
	deadline := time.Now().Add(clusterTimeout)
	for {
		p.waitAcked(t, p.acked.Load()+100)
		start, err := c.offsets(leader, topic, -2)
		require.NoError(t, err)
		if start > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "retention never moved the leader's log start")
	}
	p.stop()

	np := c.addProc()
	c.start(np.id)
	admin(t, "-add-voter", fmt.Sprintf("%d=%s/%s", np.id, np.kafka, np.raft), "-bootstrap", c.node(leader).kafka)
	np.waitLog(t, "installed raft snapshot", 1)
	leader = c.waitLeader(topic, 0)
	hw := c.waitCaughtUp(topic, leader)
	c.stopAll()

	nStart, nData := committedLog(t, np, topic, hw)
	lStart, lData := committedLog(t, c.node(leader), topic, hw)
	require.Positive(t, nStart, "the new node's log starts above 0")
	skip := func(data []byte, from, to int64) []byte {
		for from < to {
			bt, rest, err := batch.Parse(data)
			require.NoError(t, err)
			from, data = bt.NextOffset(), rest
		}
		return data
	}
	if nStart > lStart {
		lData = skip(lData, lStart, nStart)
	} else {
		nData = skip(nData, nStart, lStart)
	}
	require.NotEmpty(t, nData)
	require.True(t, bytes.Equal(lData, nData), "the new node's committed log (%d bytes) differs from the leader's (%d bytes)", len(nData), len(lData))
	dumplogVerify(t, buildDumplog(t), np.dir)
}

// A node a membership change added is reachable as a coordinator from
// the nodes that learnt it from the change, not only from those whose
// -cluster names it: node 1 starts alone, nodes 2 and 3 join, node 1
// restarts while the other two elect a leader of the state partitions.
// Node 1's FindCoordinator then names that leader, with its address, and
// node 1 reaches it with a request of its own (WriteTxnMarkers, which
// a transaction coordinator sends a partition's leader).
func TestClusterCoordinatorOnJoinedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	var ns []clusterNode
	for i := 1; i <= 3; i++ {
		ns = append(ns, clusterNode{id: uint64(i), kafkaAddr: freeAddr(t), raftAddr: freeAddr(t)})
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	servers := make([]*server, 3)
	start := func(id int, cluster []clusterNode, join bool) *testBroker {
		return startBrokerWith(t, dirs[id-1], 1, func(cfg *config) {
			cfg.Addr = ns[id-1].kafkaAddr
			cfg.NodeID, cfg.Cluster, cfg.Join = uint64(id), cluster, join
			cfg.onServer = func(s *server) { servers[id-1] = s }
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*clusterTimeout)
	defer cancel()
	b1 := start(1, ns[:1], false)
	for id := 2; id <= 3; id++ {
		start(id, ns[:id], true)
		n := ns[id-1]
		require.NoError(t, runAdmin(ctx, ns[0].kafkaAddr, fmt.Sprintf("%d=%s/%s", n.id, n.kafkaAddr, n.raftAddr), 0, io.Discard))
	}
	ic := &inProcCluster{nodes: ns}

	// Node 1 restarts with its -cluster of one node while nodes 2 and 3
	// elect a leader of the state partitions among themselves.
	b1.stop(t)
	lead := ic.waitLeader(t, 2, offsetsTopic, 1)
	start(1, ns[:1], false)
	require.Equal(t, lead, ic.waitLeader(t, 1, offsetsTopic, 0))

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"g"}
	resp, err := ic.request(ctx, 1, req)
	require.NoError(t, err)
	fc := resp.(*kmsg.FindCoordinatorResponse)
	require.Len(t, fc.Coordinators, 1)
	co := fc.Coordinators[0]
	require.Equal(t, int16(0), co.ErrorCode, "FindCoordinator on node 1: %v", kerr.ErrorForCode(co.ErrorCode))
	assert.Equal(t, int32(lead), co.NodeID)
	assert.Equal(t, ns[lead-1].kafkaAddr, net.JoinHostPort(co.Host, strconv.Itoa(int(co.Port))))

	wreq := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "no-such-topic", []int32{0}
	mk.Topics = append(mk.Topics, mt)
	wreq.Markers = append(wreq.Markers, mk)
	wresp, err := servers[0].cluster.requestNode(ctx, uint64(lead), wreq)
	require.NoError(t, err, "node 1 reaching node %d", lead)
	require.Len(t, wresp.(*kmsg.WriteTxnMarkersResponse).Markers, 1)
}
