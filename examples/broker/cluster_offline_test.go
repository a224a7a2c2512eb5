package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// inProcCluster is a cluster of brokers running in the test process (not
// child processes), so a test can reach into a node: inject faults
// through config hooks, look at its replicas.
type inProcCluster struct {
	nodes   []clusterNode
	brokers []*testBroker
	servers []*server
}

// startInProcCluster starts n nodes in-process; adjust, when set, changes
// node id's config before it starts.
func startInProcCluster(t *testing.T, n int, adjust func(id int, cfg *config)) *inProcCluster {
	t.Helper()
	ic := &inProcCluster{servers: make([]*server, n)}
	for i := 1; i <= n; i++ {
		ic.nodes = append(ic.nodes, clusterNode{id: uint64(i), kafkaAddr: freeAddr(t), raftAddr: freeAddr(t)})
	}
	for i := 1; i <= n; i++ {
		b := startBrokerWith(t, t.TempDir(), 1, func(cfg *config) {
			cfg.Addr = ic.nodes[i-1].kafkaAddr
			cfg.NodeID, cfg.Cluster = uint64(i), ic.nodes
			cfg.onServer = func(s *server) { ic.servers[i-1] = s }
			if adjust != nil {
				adjust(i, cfg)
			}
		})
		ic.brokers = append(ic.brokers, b)
	}
	return ic
}

// seeds returns every node's Kafka address.
func (ic *inProcCluster) seeds() []string {
	var out []string
	for _, n := range ic.nodes {
		out = append(out, n.kafkaAddr)
	}
	return out
}

// request sends req to node id alone.
func (ic *inProcCluster) request(ctx context.Context, id int, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(ic.nodes[id-1].kafkaAddr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata returns node id's Metadata answer for topic's partition 0.
func (ic *inProcCluster) metadata(t *testing.T, id int, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := ic.request(ctx, id, req)
	require.NoError(t, err)
	mr := resp.(*kmsg.MetadataResponse)
	require.Len(t, mr.Topics, 1)
	require.NotEmpty(t, mr.Topics[0].Partitions)
	return mr.Topics[0].Partitions[0]
}

// waitLeader waits until node id names a leader of topic's partition 0
// other than not, and returns it.
func (ic *inProcCluster) waitLeader(t *testing.T, id int, topic string, not int) int {
	t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if l := int(ic.metadata(t, id, topic).Leader); l > 0 && l != not {
			return l
		}
		<-tick.C
	}
	require.Failf(t, "no leader", "node %d names no leader of %s other than %d within %v", id, topic, not, clusterTimeout)
	return 0
}

// errInjectedRead is the read error the offline test injects.
var errInjectedRead = errors.New("injected read error")

// A read error raft meets in Storage.Entries (here: the leader reading
// committed entries back to apply them) used to panic the node (raft's
// contract: such errors are fatal). Now the partition goes offline on that
// node only: its raft group stops, Produce to it there gets
// KAFKA_STORAGE_ERROR, Metadata names the node as an offline replica, the
// other two nodes elect a leader and take the produces, and the node keeps
// serving its other partitions.
func TestClusterEntriesReadErrorTakesPartitionOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const bad, good = "bad", "good"
	var faulty [3]atomic.Bool
	var injected atomic.Int64
	ic := startInProcCluster(t, 3, func(id int, cfg *config) {
		cfg.wrapRaftRead = func(topic string, partition int32, read readFunc) readFunc {
			if topic != bad {
				return read
			}
			return func(offset int64, maxBytes int) (plog.Records, error) {
				if faulty[id-1].Load() {
					injected.Add(1)
					return plog.Records{}, fmt.Errorf("read %s-%d at %d: %w", topic, partition, offset, errInjectedRead)
				}
				return read(offset, maxBytes)
			}
		}
	})
	cl := newClient(t, ic.nodes[0].kafkaAddr,
		kgo.SeedBrokers(ic.seeds()...),
		kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.RecordRetries(1000),
		kgo.RetryTimeout(clusterTimeout),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterTimeout)
	defer cancel()
	produce := func(topic string, n int) {
		t.Helper()
		for i := range n {
			r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", topic, i)}
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr(), "produce to %s", topic)
		}
	}
	produce(bad, 5)
	produce(good, 5)

	leader := ic.waitLeader(t, 1, bad, 0)
	faulty[leader-1].Store(true)
	// The next commit on the leader makes raft read the entry back.
	produce(bad, 5)
	require.Positive(t, injected.Load(), "the fault was never hit")

	r := ic.servers[leader-1].cluster.replica(bad, 0)
	require.NotNil(t, r)
	<-r.done
	assert.True(t, r.failed.Load(), "node %d's replica of %s is offline", leader, bad)
	other := leader%3 + 1
	next := ic.waitLeader(t, other, bad, leader)
	assert.NotEqual(t, leader, next)

	md := ic.metadata(t, leader, bad)
	assert.Equal(t, []int32{int32(leader)}, md.OfflineReplicas, "Metadata from node %d", leader)
	assert.NotEqual(t, int32(leader), md.Leader)

	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = bad
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = buildBatch(t, "direct", 1, batch.CompressionNone)
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	resp, err := ic.request(ctx, leader, preq)
	require.NoError(t, err)
	assert.Equal(t, kerr.KafkaStorageError.Code, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)

	// The cluster goes on: the partition on the two other nodes, and
	// every other partition on all three.
	produce(bad, 5)
	produce(good, 5)
	g := ic.servers[leader-1].cluster.replica(good, 0)
	require.NotNil(t, g)
	assert.False(t, g.failed.Load(), "node %d's replica of %s still runs", leader, good)
	for i, b := range ic.brokers {
		select {
		case err := <-b.done:
			require.Failf(t, "node stopped", "node %d stopped: %v", i+1, err)
		default:
		}
	}
}
