package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// listOffsetsV0 asks ListOffsets version 0 for one partition.
func listOffsetsV0(t *testing.T, rc *rawConn, topic string, ts int64, maxNum int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 0
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.MaxNumOffsets = ts, maxNum
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.ListOffsetsResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsV0 sends ListOffsets version 0 (Burrow 1.2.1's request for
// end offsets) and gets Kafka 3.9's old-style answers: the segments' base
// offsets and the log end offset, newest first, at most max_num_offsets.
func TestListOffsetsV0(t *testing.T) {
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.SegmentBytes = 200 })
	rc := dialRaw(t, b.addr)
	// Each batch is over 200 bytes, so each after the first starts a segment.
	for i := range 3 {
		p := produceRaw(t, rc, 7, "old", 0, buildBatch(t, "r", 5, batch.CompressionNone))
		require.Equal(t, int16(0), p.ErrorCode)
		require.Equal(t, int64(5*i), p.BaseOffset)
	}

	latest := listOffsetsV0(t, rc, "old", -1, 1)
	require.Equal(t, int16(0), latest.ErrorCode)
	require.Equal(t, []int64{15}, latest.OldStyleOffsets)

	all := listOffsetsV0(t, rc, "old", -1, 100)
	require.Equal(t, []int64{15, 10, 5, 0}, all.OldStyleOffsets)

	earliest := listOffsetsV0(t, rc, "old", -2, 1)
	require.Equal(t, []int64{0}, earliest.OldStyleOffsets)

	// A timestamp before every segment was written: no offsets. One
	// after: from the last candidate (the log end) down.
	require.Empty(t, listOffsetsV0(t, rc, "old", 1, 10).OldStyleOffsets)
	require.Equal(t, []int64{15, 10}, listOffsetsV0(t, rc, "old", time.Now().Add(time.Hour).UnixMilli(), 2).OldStyleOffsets)

	require.Empty(t, listOffsetsV0(t, rc, "old", -1, 0).OldStyleOffsets)

	unknown := listOffsetsV0(t, rc, "nosuch", -1, 1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, unknown.ErrorCode)
}
