package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// In raft mode the leader appends a transaction marker before raft commits
// it, and the high watermark is the commit index. Kafka's
// ProducerStateManager keeps a transaction whose marker lies at or above
// the high watermark unstable ("decided, but may not have been replicated",
// firstUnstableOffset), so a read_committed fetch stops at the
// transaction's first offset until the high watermark passes the marker:
// a leader change may still cut it. Here the followers stop, the leader
// appends a COMMIT marker that cannot commit, and its last stable offset
// (in the partition, in a read_committed Fetch while it still leads, and in
// ListOffsets) stays at the transaction's first offset. The partition used
// to end the transaction at the marker: its last stable offset became the
// high watermark (the marker's offset) and the fetch returned the
// transaction's records (issue 27 case 2).
func TestClusterReadCommittedStopsBelowUncommittedMarker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	const topic = "uncommitted"
	ic := startInProcCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterTimeout)
	defer cancel()
	src := newClient(t, ic.nodes[0].kafkaAddr, kgo.SeedBrokers(ic.seeds()...), kgo.AllowAutoTopicCreation())
	require.NoError(t, src.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("plain")}).FirstErr())
	src.Close()
	leader := ic.waitLeader(t, 1, topic, 0)
	rc := dialRaw(t, ic.nodes[leader-1].kafkaAddr)
	ip := rc.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	require.Zero(t, ip.ErrorCode)
	pr := produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "open", 3))
	require.Zero(t, pr.ErrorCode, "acks=-1: answered once committed")
	open := pr.BaseOffset
	r := ic.servers[leader-1].cluster.replica(topic, 0)
	require.NotNil(t, r)
	part := r.part
	require.Eventually(t, func() bool { return part.HighWatermark() == open+3 }, clusterTimeout, 5*time.Millisecond)
	require.Equal(t, open, part.LastStableOffset(), "the open transaction holds the last stable offset")

	for id := 1; id <= 3; id++ {
		if id != leader {
			ic.brokers[id-1].stop(t)
		}
	}
	// The marker cannot commit now; the request waits (until the leader
	// steps down or the test ends).
	go func() {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed = ip.ProducerID, ip.ProducerEpoch, true
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		mk.Topics = append(mk.Topics, mt)
		req.Markers = append(req.Markers, mk)
		_, _ = ic.request(ctx, leader, req)
	}()
	marker := open + 3
	require.Eventually(t, func() bool { return part.LogEndOffset() == marker+1 }, clusterTimeout, time.Millisecond,
		"the leader appends the marker at %d", marker)
	fc := dialRaw(t, ic.nodes[leader-1].kafkaAddr)
	fp := fetchAt(t, fc, topic, 0, 0, readCommitted)
	assert.Equal(t, marker, part.HighWatermark(), "the marker is not committed")
	assert.Equal(t, open, part.LastStableOffset(), "the marker at %d is not below the high watermark %d", marker, marker)
	if fp.ErrorCode == 0 {
		assert.Equal(t, open, fp.LastStableOffset)
		for rest := fp.RecordBatches; len(rest) > 0; {
			bt, r, err := batch.Parse(rest)
			require.NoError(t, err)
			assert.Less(t, bt.LastOffset(), open, "read_committed returned a batch of the transaction whose marker is not committed")
			rest = r
		}
	} else {
		t.Logf("the leader stepped down before the fetch (error %d); the partition's last stable offset was checked", fp.ErrorCode)
	}
	// ListOffsets read_committed (as the debugging replica: answered
	// whether or not the node still leads).
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = debugReplicaID, readCommitted
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	req.Topics = append(req.Topics, lt)
	resp, err := ic.request(ctx, leader, req)
	require.NoError(t, err)
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	assert.Equal(t, open, p.Offset, "ListOffsets read_committed latest")
}
