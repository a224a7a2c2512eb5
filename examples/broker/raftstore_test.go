package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
)

func TestParseCluster(t *testing.T) {
	good, err := parseCluster("2=127.0.0.1:9093/127.0.0.1:19093,1=127.0.0.1:9092/127.0.0.1:19092")
	require.NoError(t, err)
	assert.Equal(t, []clusterNode{
		{id: 1, kafkaAddr: "127.0.0.1:9092", raftAddr: "127.0.0.1:19092"},
		{id: 2, kafkaAddr: "127.0.0.1:9093", raftAddr: "127.0.0.1:19093"},
	}, good, "sorted by id")
	for _, tc := range []struct{ name, spec string }{
		{"empty", ""},
		{"no id", "127.0.0.1:9092/127.0.0.1:19092"},
		{"id 0", "0=127.0.0.1:9092/127.0.0.1:19092"},
		{"id not a number", "x=127.0.0.1:9092/127.0.0.1:19092"},
		{"one address", "1=127.0.0.1:9092"},
		{"bad kafka address", "1=127.0.0.1/127.0.0.1:19092"},
		{"bad raft address", "1=127.0.0.1:9092/19092"},
		{"id twice", "1=127.0.0.1:9092/127.0.0.1:19092,1=127.0.0.1:9093/127.0.0.1:19093"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCluster(tc.spec)
			require.ErrorIs(t, err, errClusterFlag)
		})
	}
}

// A connection the transport accepts or dials while it shuts down is
// closed too, so that no reader goroutine outlives the broker.
func TestTransportClosesLateConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr, err := newTransport(ctx, 1, "127.0.0.1:0", map[uint64]string{1: "127.0.0.1:0"}, slog.New(slog.DiscardHandler), func(string, int32, *pb.Message) {})
	require.NoError(t, err)
	tr.start(ctx)
	cancel()
	tr.wait()
	a, b := net.Pipe()
	defer b.Close()
	// Without the fix the write would block (nobody reads b): the
	// deadline turns that into a failure instead of a hang.
	require.NoError(t, a.SetWriteDeadline(time.Now().Add(5*time.Second)))
	tr.track(a, true)
	_, err = a.Write([]byte{1})
	require.ErrorIs(t, err, io.ErrClosedPipe, "the late connection was closed")
}

// Each node hands out producer ids from its own durable allocator; in a
// cluster they are spread apart so that no two nodes give the same id (a
// producer keeps its id when it moves to another leader).
func TestClusterProducerIDsNeverCollide(t *testing.T) {
	nodes := []clusterNode{{id: 1}, {id: 2}, {id: 3}}
	seen := make(map[int64]uint64)
	for i := range nodes {
		c := &cluster{nodes: nodes, selfIdx: i, self: nodes[i].id}
		for raw := range int64(1000) {
			id := c.producerID(raw)
			prev, dup := seen[id]
			require.False(t, dup, "id %d from node %d and node %d", id, prev, c.self)
			seen[id] = c.self
		}
	}
}

// raftStatePath is the raft state file of a partition (raftlog's
// "<group>.state" under raftStateDir).
func raftStatePath(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, raftStateDir, string(groupID(topic, partition))+".state")
}

// A Produce whose batch for one partition cannot even be queued within
// the request's timeout (the replica's queue stays full) answers that
// partition REQUEST_TIMED_OUT, and every partition it queued before and
// that has no answer yet too: the timeout holds for the whole request.
// Before, the one deadline was spent on the queueing, and the request
// then waited for the queued partition's answer without a bound (a
// leader that lost its followers never answers an acks=-1 batch).
func TestClusterProduceTimeoutCoversQueuedPartitions(t *testing.T) {
	var s *server
	startBrokerWith(t, t.TempDir(), 2, func(cfg *config) {
		kafka := freeAddr(t)
		cfg.Addr, cfg.NodeID = kafka, 1
		cfg.Cluster = []clusterNode{{id: 1, kafkaAddr: kafka, raftAddr: freeAddr(t)}}
		cfg.onServer = func(sv *server) { s = sv }
	})
	const topic = "stuck"
	_, err := s.store.topic(topic, true)
	require.NoError(t, err)
	// Partition 0's replica takes the batch and never answers; partition
	// 1's never takes it.
	silent := &replica{propc: make(chan *proposal, 1), done: make(chan struct{}), failed: func() bool { return false }}
	full := &replica{propc: make(chan *proposal), done: make(chan struct{}), failed: func() bool { return false }}
	c := s.cluster
	c.mu.Lock()
	real0, real1 := c.replicas[tpKey{topic, 0}], c.replicas[tpKey{topic, 1}]
	c.replicas[tpKey{topic, 0}], c.replicas[tpKey{topic, 1}] = silent, full
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.replicas[tpKey{topic, 0}], c.replicas[tpKey{topic, 1}] = real0, real1
		c.mu.Unlock()
	}()

	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range int32(2) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, buildBatch(t, "v", 1, batch.CompressionNone)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	out := make(chan *kmsg.ProduceResponse, 1)
	go func() { out <- s.clusterProduce(req) }()
	var resp *kmsg.ProduceResponse
	select {
	case resp = <-out:
	case <-time.After(30 * time.Second):
		// Hung: the replica stopping ends the wait (with another code).
		close(silent.done)
		resp = <-out
	}
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 2)
	for _, p := range resp.Topics[0].Partitions {
		assert.Equal(t, kerr.RequestTimedOut.Code, p.ErrorCode, "partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
	}
}

// A node's producer ids continue at its allocator's next block after a
// restart, spread by node id, as on a single node: the floor the
// partitions give the allocator (one past the largest id they hold) is
// taken back to the allocator's own numbering. Before, a spread id
// (block*1024 + node) was used as the allocator's next raw id, so every
// restart after an idempotent producer wrote multiplied the ids by 1024,
// and after five such restarts they overflowed int64.
func TestClusterProducerIDsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	kafka, raft := freeAddr(t), freeAddr(t)
	var ids []int64
	for range 3 {
		b := startOneNodeCluster(t, dir, kafka, raft, nil)
		rc := dialRaw(t, b.addr)
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 1
		resp := rc.do(req).(*kmsg.InitProducerIDResponse)
		require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		ids = append(ids, resp.ProducerID)
		// A partition now holds the producer's state.
		tick := time.NewTicker(20 * time.Millisecond)
		for {
			p := produceRaw(t, rc, 9, "pids", 0, idemBatch(t, resp.ProducerID, 0, 0, 1, false))
			if p.ErrorCode == kerr.NotLeaderForPartition.Code {
				<-tick.C // the partition's first election
				continue
			}
			require.Zero(t, p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
			break
		}
		tick.Stop()
		b.stop(t)
	}
	for i, id := range ids {
		assert.Equal(t, int64(1), id%producerIDStride, "id %d is node 1's", id)
		assert.Equal(t, int64(i*producerIDBlock), id/producerIDStride, "start %d: id %d is not at its allocator's block %d", i, id, i)
	}
}
