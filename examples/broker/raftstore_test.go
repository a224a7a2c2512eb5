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
	pb "go.etcd.io/raft/v3/raftpb"
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
