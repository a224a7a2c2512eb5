package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// clusterNode is one node of -cluster: its Kafka listener and its raft
// peer address.
type clusterNode struct {
	id        uint64
	kafkaAddr string
	raftAddr  string
}

// errClusterFlag is wrapped by every error about the -cluster value.
var errClusterFlag = errors.New("broker: invalid -cluster")

// parseCluster parses "1=127.0.0.1:9092/127.0.0.1:19092,2=...": per node
// its id (>= 1), Kafka address and raft address.
func parseCluster(s string) ([]clusterNode, error) {
	var out []clusterNode
	seen := make(map[uint64]bool)
	for part := range strings.SplitSeq(s, ",") {
		idStr, addrs, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not id=kafka-address/raft-address", errClusterFlag, part)
		}
		id, err := strconv.ParseUint(idStr, 10, 31)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%w: node id %q is not an integer in [1, 2147483647]", errClusterFlag, idStr)
		}
		ka, ra, ok := strings.Cut(addrs, "/")
		if !ok {
			return nil, fmt.Errorf("%w: node %d: %q is not kafka-address/raft-address", errClusterFlag, id, addrs)
		}
		for _, a := range []string{ka, ra} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("%w: node %d: %v", errClusterFlag, id, err)
			}
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: node %d named twice", errClusterFlag, id)
		}
		seen[id] = true
		out = append(out, clusterNode{id: id, kafkaAddr: ka, raftAddr: ra})
	}
	slices.SortFunc(out, func(a, b clusterNode) int { return int(a.id) - int(b.id) })
	return out, nil
}

// debugReplicaID is Kafka's DEBUGGING_REPLICA_ID: a ListOffsets with this
// replica id is answered by a follower too (from its own high watermark),
// as Kafka answers it, so tools and tests can see how far a follower got.
const debugReplicaID = -2

// tpKey names a partition.
type tpKey struct {
	topic     string
	partition int32
}

// cluster is the replicated mode: one replica (raft group member) per
// partition of every user topic, run by a raftlog Node, and the
// transport between the nodes.
type cluster struct {
	self            uint64
	selfIdx         int
	nodes           []clusterNode
	ids             []uint64
	fs              vfs.FS
	dataDir         string
	log             *slog.Logger
	retention       time.Duration
	cleanupInterval time.Duration
	store           *store
	tr              *transport
	node            *raftlog.Node
	wrapRead        func(topic string, partition int32, read readFunc) readFunc
	retain          bool          // cleanup policy delete: retention (raftnode.go)
	compactor       *keyCompactor // cleanup policy compact: nil otherwise (raftcompact.go)
	// internalCompactor compacts the replicated internal topics
	// (__consumer_offsets, __transaction_state), which the node's cleaner
	// leaves alone.
	internalCompactor *keyCompactor
	ctx               context.Context
	wg                sync.WaitGroup

	mu       sync.Mutex
	replicas map[tpKey]*replica
	groups   map[raftlog.GroupID]tpKey
	// known holds every node's addresses: -cluster's, and those
	// membership changes named (kept in the nodes file, membership.go);
	// members is the membership new partitions start with.
	known   map[uint64]clusterNode
	members map[uint64]bool
}

// newCluster checks the configuration and listens on this node's raft
// address; start begins replication.
func newCluster(ctx context.Context, cfg config, st *store) (*cluster, error) {
	c := &cluster{
		self: cfg.NodeID, nodes: cfg.Cluster, fs: vfs.Default, dataDir: cfg.DataDir,
		log: cfg.Logger, retention: cfg.Retention, cleanupInterval: cfg.CleanupInterval,
		store: st, replicas: make(map[tpKey]*replica), groups: make(map[raftlog.GroupID]tpKey), selfIdx: -1,
		wrapRead: cfg.wrapRaftRead,
	}
	if c.retention == 0 {
		c.retention = 7 * 24 * time.Hour
	}
	if c.cleanupInterval == 0 {
		c.cleanupInterval = defaultCleanupInterval
	}
	peers := make(map[uint64]string)
	for i, n := range c.nodes {
		c.ids = append(c.ids, n.id)
		peers[n.id] = n.raftAddr
		if n.id == c.self {
			c.selfIdx = i
		}
	}
	if c.selfIdx < 0 {
		return nil, fmt.Errorf("%w: -node %d is not one of its nodes", errClusterFlag, c.self)
	}
	if c.self >= producerIDStride {
		return nil, fmt.Errorf("%w: -node %d: node ids must be below %d", errClusterFlag, c.self, producerIDStride)
	}
	kc, err := newKeyCompactor(cfg)
	if err != nil {
		return nil, err
	}
	c.compactor = kc
	icfg := cfg
	icfg.CleanupPolicy = "compact"
	if c.internalCompactor, err = newKeyCompactor(icfg); err != nil {
		return nil, err
	}
	c.retain = cfg.CleanupPolicy == "" || strings.Contains(cfg.CleanupPolicy, "delete")
	if err := c.fs.MkdirAll(c.dataDir+"/"+raftStateDir, 0o755); err != nil {
		return nil, err
	}
	if err := c.loadMembers(cfg.Join); err != nil { // membership.go
		return nil, err
	}
	for id, n := range c.known {
		peers[id] = n.raftAddr
	}
	tr, err := newTransport(ctx, c.self, c.nodes[c.selfIdx].raftAddr, peers, c.log, c.deliver)
	if err != nil {
		return nil, err
	}
	c.tr = tr
	rcfg := raftlog.Config{
		ID: c.self, Transport: c, StateDir: c.dataDir + "/" + raftStateDir, FS: c.fs,
		Tick: raftTick, Logger: c.log,
		OnConfChange: func(_ raftlog.GroupID, cc *pb.ConfChangeV2, _ *pb.ConfState) {
			c.learn(cc) // membership.go
			c.membershipApplied(cc)
		},
	}
	if c.wrapRead != nil {
		rcfg.WrapRead = func(g raftlog.GroupID, read readFunc) readFunc {
			c.mu.Lock()
			tp := c.groups[g]
			c.mu.Unlock()
			return c.wrapRead(tp.topic, tp.partition, read)
		}
	}
	if c.node, err = raftlog.NewNode(rcfg); err != nil {
		return nil, err
	}
	return c, nil
}

// groupID is the raft group of a partition: its directory's name, which
// is also its state file's name under raftStateDir.
func groupID(topic string, partition int32) raftlog.GroupID {
	return raftlog.GroupID(topic + "-" + strconv.FormatInt(int64(partition), 10))
}

// Send implements raftlog.Transport: the replicas' way out.
func (c *cluster) Send(group raftlog.GroupID, msgs []*pb.Message) {
	c.mu.Lock()
	tp, ok := c.groups[group]
	c.mu.Unlock()
	if !ok {
		return
	}
	for _, m := range msgs {
		c.tr.send(tp.topic, tp.partition, m)
	}
}

// start starts a replica for every partition of every user topic, now
// and whenever a topic is created, and the transport.
func (c *cluster) start(ctx context.Context) error {
	c.ctx = ctx
	var first error
	c.store.watch(func(topic string, partition int32, p *plog.Partition) {
		if err := c.startReplica(topic, partition, p); err != nil && first == nil {
			first = err
		}
	})
	if first != nil {
		return first
	}
	c.tr.start(ctx)
	return nil
}

// startReplica opens and runs the replica of one partition.
// REQUIRES: the store's lock held (called from its watch callback).
func (c *cluster) startReplica(topic string, partition int32, p *plog.Partition) error {
	g := groupID(topic, partition)
	c.mu.Lock()
	c.groups[g] = tpKey{topic, partition}
	c.mu.Unlock()
	boot := c.bootConf() // membership.go
	rr, err := c.node.Start(g, p, raftlog.Membership{Voters: boot.GetVoters(), Learners: boot.GetLearners()})
	if err != nil {
		c.log.Error("partition not replicated", "topic", topic, "partition", partition, "err", err)
		return fmt.Errorf("replica of %s-%d: %w", topic, partition, err)
	}
	r := newReplica(c, topic, partition, p, rr)
	c.mu.Lock()
	c.replicas[tpKey{topic, partition}] = r
	c.mu.Unlock()
	c.wg.Go(func() { r.run(c.ctx) })
	return nil
}

// stop waits for the replicas and the transport to end (ctx ended).
func (c *cluster) stop() {
	c.wg.Wait()
	_ = c.node.Close()
	_ = c.tr.ln.Close()
	c.tr.wait()
}

// replica returns the replica of a partition, or nil.
func (c *cluster) replica(topic string, partition int32) *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[tpKey{topic, partition}]
}

// deliver hands a peer's message to its partition's replica, creating the
// topic when this node does not have it yet (another node created it).
func (c *cluster) deliver(topic string, partition int32, m *pb.Message) {
	r := c.replica(topic, partition)
	if r == nil {
		if isInternalTopic(topic) {
			return // created at start by every node
		}
		if _, err := c.store.topic(topic, true); err != nil {
			c.log.Warn("raft message for a topic that cannot be created", "topic", topic, "err", err)
			return
		}
		if r = c.replica(topic, partition); r == nil {
			return
		}
	}
	c.node.Receive(groupID(topic, partition), m) // dropped when its queue is full: raft resends
}

// leads reports whether this node leads the partition.
func (c *cluster) leads(topic string, partition int32) bool {
	r := c.replica(topic, partition)
	return r != nil && !r.failed.Load() && r.lead.Load() == c.self
}

// selfID is the broker id this node answers with: its -node id in cluster
// mode, nodeID otherwise.
func (s *server) selfID() int32 {
	if s.cluster != nil {
		return int32(s.cluster.self)
	}
	return nodeID
}

// producerIDStride spreads the producer ids of the nodes apart; node ids
// must be below it in cluster mode.
const producerIDStride = 1 << 10

// producerID spreads the ids of the nodes' allocators apart: node id
// hands out raw*producerIDStride + id, so two nodes never give out the
// same id, whatever the membership (a node added later included).
func (c *cluster) producerID(raw int64) int64 {
	return raw*producerIDStride + int64(c.self)
}

// fillMetadata replaces the one-node answer: the brokers are the nodes of
// the membership (and the nodes still replicating some partition), and
// each partition names the leader this node knows (its raft leader;
// LEADER_NOT_AVAILABLE while there is none), the raft term as leader
// epoch, its voters and learners as replicas, its voters as in-sync
// replicas, and this node as an offline replica when the partition is
// offline here (replica.run).
func (c *cluster) fillMetadata(resp *kmsg.MetadataResponse) {
	resp.Brokers = resp.Brokers[:0]
	for _, n := range c.brokers() {
		b := kmsg.NewMetadataResponseBroker()
		host, portStr, _ := net.SplitHostPort(n.kafkaAddr)
		port, _ := strconv.ParseInt(portStr, 10, 32)
		b.NodeID, b.Host, b.Port = int32(n.id), host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ControllerID = int32(c.self)
	var members []int32
	for _, id := range c.bootConf().GetVoters() {
		members = append(members, int32(id))
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if t.Topic == nil {
			continue
		}
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			p.Replicas, p.ISR = members, members
			r := c.replica(*t.Topic, p.Partition)
			var lead uint64
			if r != nil {
				cs := r.conf.Load()
				p.Replicas, p.ISR = nil, nil
				for _, id := range cs.GetVoters() {
					p.Replicas = append(p.Replicas, int32(id))
					p.ISR = append(p.ISR, int32(id))
				}
				for _, id := range cs.GetLearners() {
					p.Replicas = append(p.Replicas, int32(id))
				}
			}
			if r != nil && r.failed.Load() {
				p.OfflineReplicas = []int32{int32(c.self)}
			}
			if r != nil && !r.failed.Load() {
				lead = r.lead.Load()
				p.LeaderEpoch = int32(r.term.Load())
			}
			if lead == 0 {
				p.Leader = -1
				p.ErrorCode = kerr.LeaderNotAvailable.Code
				continue
			}
			p.Leader = int32(lead)
		}
	}
}

// produce is Produce in cluster mode: each partition's batch goes to its
// replica, which answers NOT_LEADER_OR_FOLLOWER unless it leads; acks=1 is
// answered once the leader appended the batch, acks=-1 once raft committed
// it (a majority of the nodes wrote and synced it), or REQUEST_TIMED_OUT
// after the request's timeout.
func (s *server) clusterProduce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	c := s.cluster
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var reqErr int16
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		reqErr = kerr.InvalidRequiredAcks.Code
	}
	timeout := time.Duration(max(req.TimeoutMillis, 1000)) * time.Millisecond
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	budget := s.newCreateBudget()
	type pending struct {
		t, p int
		prop *proposal
		r    *replica
	}
	var waits []pending
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		ps, topicErr := s.produceTopic(rt.Topic, reqErr, budget) // handlers.go
		compacted := topicErr == 0 && s.compactedTopic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.BaseOffset = -1
			var r *replica
			switch {
			case topicErr != 0:
				p.ErrorCode = topicErr
			case rp.Partition < 0 || int(rp.Partition) >= len(ps):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case zstdBeforeV7(req.Version, rp.Records): // handlers.go
				p.ErrorCode = kerr.UnsupportedCompressionType.Code
			case compacted && refuseKeyless(&p, rt.Topic, rp.Records):
				// Refused: a record without a key (p says which).
			default:
				switch r = c.replica(rt.Topic, rp.Partition); {
				case r == nil:
					p.ErrorCode = kerr.NotLeaderForPartition.Code
				case r.failed.Load():
					// Offline here (see replica.run): the client
					// refreshes its metadata and finds the new
					// leader on another node.
					p.ErrorCode = kerr.KafkaStorageError.Code
				}
			}
			if p.ErrorCode == 0 {
				prop := &proposal{records: rp.Records, acks: req.Acks, res: make(chan proposeResult, 1)}
				select {
				case r.propc <- prop:
					waits = append(waits, pending{len(resp.Topics), len(t.Partitions), prop, r})
				case <-r.done:
					p.ErrorCode = kerr.NotLeaderForPartition.Code
				case <-deadline.C:
					p.ErrorCode = kerr.RequestTimedOut.Code
					// Fired once: every later wait, here and
					// below, times out too.
					deadline.Reset(0)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	for _, w := range waits {
		p := &resp.Topics[w.t].Partitions[w.p]
		select {
		case res := <-w.prop.res:
			p.BaseOffset, p.ErrorCode = res.base, res.code
			if res.err != nil && res.code != 0 {
				msg := res.err.Error()
				p.ErrorMessage = &msg
			}
			if res.code == 0 {
				p.LogStartOffset = w.r.part.LogStartOffset()
			}
		case <-w.r.done:
			p.ErrorCode = kerr.NotLeaderForPartition.Code
		case <-deadline.C:
			p.ErrorCode = kerr.RequestTimedOut.Code
			// The deadline fired once: every later wait times out too.
			deadline.Reset(0)
		}
	}
	return resp
}
