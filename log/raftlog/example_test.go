package raftlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// localNet is an in-process Transport: each node's messages go straight to
// the Receive of the node they are for.
type localNet struct {
	mu    sync.Mutex
	nodes map[uint64]*raftlog.Node
}

// Send implements raftlog.Transport.
func (n *localNet) Send(group raftlog.GroupID, msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if to := n.nodes[m.GetTo()]; to != nil {
			to.Receive(group, m)
		}
	}
}

// A partition replicated on three nodes in one process: each node opens
// its partition and starts its replica of group "events-0"; a batch
// proposed to the leader is acknowledged once a quorum holds it, and every
// node's high watermark then covers it.
func Example() {
	root, err := os.MkdirTemp("", "raftlog-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	net := &localNet{nodes: make(map[uint64]*raftlog.Node)}
	peers := []uint64{1, 2, 3}
	var replicas []*raftlog.Replica
	for _, id := range peers {
		dir := filepath.Join(root, fmt.Sprint("node", id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			panic(err)
		}
		// A replicated partition: its high watermark is the raft commit
		// point, and its batches carry the raft term as leader epoch.
		part, err := log.Open(filepath.Join(dir, "events-0"), log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
		if err != nil {
			panic(err)
		}
		defer part.Close()
		node, err := raftlog.NewNode(raftlog.Config{ID: id, Transport: net, StateDir: dir, Tick: 10 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		defer node.Close()
		net.mu.Lock()
		net.nodes[id] = node
		net.mu.Unlock()
		r, err := node.Start("events-0", part, raftlog.Membership{Voters: peers})
		if err != nil {
			panic(err)
		}
		replicas = append(replicas, r)
	}

	bld := batch.NewBuilder(batch.BuilderOptions{})
	if err := bld.Add(batch.Record{Key: []byte("k"), Value: []byte("hello")}); err != nil {
		panic(err)
	}
	records, err := bld.Build()
	if err != nil {
		panic(err)
	}
	// Propose to whichever replica leads; the others answer ErrNotLeader.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var base int64
	for {
		r := replicas[0]
		if lead := r.Leader(); lead != 0 {
			r = replicas[lead-1]
		}
		base, err = r.Propose(ctx, records, raftlog.ProposeOptions{Acks: raftlog.AcksAll})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			panic(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every node's high watermark comes to cover it (a follower learns
	// the commit point with the leader's next message); below it, a
	// node's partition reads the batch as any partition does.
	for _, r := range replicas {
		for r.Partition().HighWatermark() <= base {
			time.Sleep(10 * time.Millisecond)
		}
		rs, err := r.Partition().ReadFrom(base, 1<<20)
		if err != nil {
			panic(err)
		}
		bt, _, err := batch.Parse(rs.Bytes())
		if err != nil {
			panic(err)
		}
		for rec, err := range bt.All(nil) {
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s=%s\n", rec.Key, rec.Value)
		}
		_ = rs.Close()
	}
	// Output:
	// k=hello
	// k=hello
	// k=hello
}
