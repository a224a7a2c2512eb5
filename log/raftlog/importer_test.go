package raftlog_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// importerMain is a program of a module outside this repository that
// replicates one partition on three nodes in process, with its own
// Transport, and checks that 20 acknowledged batches are committed on
// every node.
const importerMain = `package main

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

type network struct {
	mu    sync.Mutex
	nodes map[uint64]*raftlog.Node
}

func (n *network) Send(group raftlog.GroupID, msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if to := n.nodes[m.GetTo()]; to != nil {
			to.Receive(group, m)
		}
	}
}

func main() {
	root, err := os.MkdirTemp("", "raftlog-importer")
	check(err)
	defer os.RemoveAll(root)
	net := &network{nodes: map[uint64]*raftlog.Node{}}
	peers := []uint64{1, 2, 3}
	var replicas []*raftlog.Replica
	for _, id := range peers {
		dir := filepath.Join(root, fmt.Sprint(id))
		check(os.MkdirAll(dir, 0o755))
		part, err := log.Open(filepath.Join(dir, "t-0"), log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
		check(err)
		defer part.Close()
		node, err := raftlog.NewNode(raftlog.Config{ID: id, Transport: net, StateDir: dir})
		check(err)
		defer node.Close()
		net.mu.Lock()
		net.nodes[id] = node
		net.mu.Unlock()
		r, err := node.Start("t-0", part, raftlog.Membership{Voters: peers})
		check(err)
		replicas = append(replicas, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last int64
	for i := 0; i < 20; {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		check(bld.Add(batch.Record{Value: []byte(fmt.Sprint("v", i))}))
		b, err := bld.Build()
		check(err)
		r := replicas[0]
		if l := r.Leader(); l != 0 {
			r = replicas[l-1]
		}
		base, err := r.Propose(ctx, b, raftlog.ProposeOptions{Acks: raftlog.AcksAll})
		if err != nil {
			check(ctx.Err())
			time.Sleep(20 * time.Millisecond)
			continue
		}
		last = base
		i++
	}
	for _, r := range replicas {
		for r.Partition().HighWatermark() <= last {
			check(ctx.Err())
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println("committed on 3 replicas up to", last)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
`

// TestImporterModule builds and runs, in a module of its own outside this
// repository (offline: GOPROXY=off, every module from the cache the
// repository's build filled; replace directives point at this checkout),
// a program that imports raftlog and replicates a partition on three
// nodes in process. It also checks that the library's own module does not
// require etcd raft: only importers of raftlog get it.
func TestImporterModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program in a module of its own")
	}
	here, err := filepath.Abs(".")
	require.NoError(t, err)
	root := filepath.Join(here, "..", "..")
	rootSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	assert.NotContains(t, string(rootSum), "go.etcd.io/raft", "the library's go.sum names etcd raft")
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	assert.NotContains(t, string(rootMod), "go.etcd.io/raft", "the library's go.mod requires etcd raft")

	dir := t.TempDir()
	gomod := "module example.com/raftimporter\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/partlog/partlog v0.0.0\n\tgithub.com/partlog/partlog/log/raftlog v0.0.0\n\tgo.etcd.io/raft/v3 v3.7.0\n)\n\n" +
		"replace github.com/partlog/partlog => " + root + "\n\n" +
		"replace github.com/partlog/partlog/log/raftlog => " + here + "\n"
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(importerMain)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	goOffline(t, dir, "mod", "tidy")
	out := goOffline(t, dir, "run", ".")
	assert.Contains(t, string(out), "committed on 3 replicas up to")
}

// goOffline runs the go command in dir outside any workspace, offline,
// and returns its combined output.
func goOffline(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s: %v\n%s", strings.Join(args, " "), err, out)
	return out
}
