package raftlog

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/partlog/partlog/index/vfs/vfstest"
	"github.com/partlog/partlog/log"
)

// testGroup is a hand-driven group of replica cores: messages wait in
// outbox until deliver hands them over (or drops them).
type testGroup struct {
	t      *testing.T
	cores  map[uint64]*replicaCore
	parts  map[uint64]*log.Partition
	outbox []*pb.Message
}

// newTestGroup opens n replica cores on one in-memory filesystem.
func newTestGroup(t *testing.T, n int) *testGroup {
	return newTestGroupWith(t, n, nil)
}

// newTestGroupWith is newTestGroup with prefill (when not nil) called on
// every partition before its raft storage opens.
func newTestGroupWith(t *testing.T, n int, prefill func(part *log.Partition)) *testGroup {
	g := &testGroup{t: t, cores: map[uint64]*replicaCore{}, parts: map[uint64]*log.Partition{}}
	mem := vfstest.NewMem()
	var voters []uint64
	for id := range uint64(n) {
		voters = append(voters, id+1)
	}
	for _, id := range voters {
		dir := fmt.Sprintf("/data/n%d", id)
		require.NoError(t, mem.MkdirAll(dir, 0o755))
		part, err := log.Open(dir+"/g", log.Config{FS: mem, DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 400,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = part.Close() })
		if prefill != nil {
			prefill(part)
		}
		st, err := OpenStorage(mem, dir+"/g.state", part, &pb.ConfState{Voters: voters})
		require.NoError(t, err)
		core, err := newReplicaCore(id, "g", part, st, raftTuning{electionTicks: 10, heartbeatTicks: 1, maxMsgBytes: 1 << 20, maxInflight: 64}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		core.send = func(ms []*pb.Message) {
			for _, m := range ms {
				g.outbox = append(g.outbox, proto.Clone(m).(*pb.Message))
			}
		}
		g.cores[id], g.parts[id] = core, part
	}
	return g
}

// turn runs f on node id's core and handles its Ready.
func (g *testGroup) turn(id uint64, f func()) {
	g.t.Helper()
	require.NoError(g.t, g.cores[id].turn(f))
}

// deliver hands over the queued messages that pass, until none is left;
// the others are dropped.
func (g *testGroup) deliver(pass func(m *pb.Message) bool) {
	for len(g.outbox) > 0 {
		ms := g.outbox
		g.outbox = nil
		for _, m := range ms {
			if pass(m) {
				g.turn(m.GetTo(), func() { g.cores[m.GetTo()].step(m) })
			}
		}
	}
}

// all passes every message.
func all(*pb.Message) bool { return true }

// among passes the messages between the nodes named.
func among(ids ...uint64) func(m *pb.Message) bool {
	in := func(id uint64) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	return func(m *pb.Message) bool { return in(m.GetFrom()) && in(m.GetTo()) }
}

// elect makes node id the leader, with the messages among the nodes
// named, and returns the term.
func (g *testGroup) elect(id uint64, pass func(m *pb.Message) bool) uint64 {
	g.t.Helper()
	g.turn(id, func() { _ = g.cores[id].rn.Campaign() })
	g.deliver(pass)
	require.Equal(g.t, raft.StateLeader, g.cores[id].rn.BasicStatus().RaftState)
	require.NoError(g.t, g.cores[id].leaderCheck(0))
	return g.cores[id].rn.BasicStatus().GetTerm()
}

// propose proposes a batch of n records on node id with AcksAll.
func (g *testGroup) propose(id uint64, n int) *proposal {
	g.t.Helper()
	p := &proposal{records: buildBatch(g.t, "v", n, 0), opts: ProposeOptions{Acks: AcksAll}, res: make(chan Result, 1)}
	g.turn(id, func() { g.cores[id].propose(p) })
	return p
}

// A leader's AcksAll proposal that a majority stored, committed by the
// next leader, is not answered ErrReplaced ("not in the log") when the old
// leader later catches up from a snapshot that covers it: from the
// snapshot's index and term alone the old leader cannot tell whether its
// entry of an older term below the point committed.
func TestSnapshotInstallDoesNotReplaceCommittedProposal(t *testing.T) {
	g := newTestGroup(t, 3)
	g.elect(1, all)

	// Node 1 proposes; node 2 stores the entry, but its answer and every
	// message to node 3 are lost: node 1 never learns the commit.
	p := g.propose(1, 3)
	require.Len(t, p.res, 0)
	g.deliver(func(m *pb.Message) bool { return m.GetFrom() == 1 && m.GetTo() == 2 })
	require.Len(t, p.res, 0)
	base := p.base
	proposed := batches(t, g.parts[1], base, base+1)
	require.Len(t, proposed, 1)

	// Node 1 is cut off; node 2 leads, commits the entry with its own
	// first one, writes on, and retention truncates its raft log past it.
	for range 10 { // node 3's lease on node 1 runs out
		g.turn(3, g.cores[3].rn.Tick)
		g.deliver(among(2, 3))
	}
	g.elect(2, among(2, 3))
	for len(g.parts[2].SegmentInfos()) < 4 {
		q := g.propose(2, 5)
		g.deliver(among(2, 3))
		require.NoError(t, (<-q.res).Err)
	}
	committed := batches(t, g.parts[2], base, base+1)
	require.Len(t, committed, 1)
	require.Equal(t, proposed[0], committed[0], "node 2 committed node 1's batch")
	require.Greater(t, g.parts[2].HighWatermark(), base)
	infos := g.parts[2].SegmentInfos()
	cut := infos[len(infos)-1].BaseOffset
	g.turn(2, func() { require.NoError(t, g.cores[2].retain(cut)) })
	require.Greater(t, g.cores[2].st.snapOffset, base)

	// Node 1 comes back: it follows node 2 and installs its snapshot.
	for range 30 {
		g.turn(2, g.cores[2].rn.Tick)
		g.deliver(all)
	}
	require.Equal(t, g.parts[2].HighWatermark(), g.parts[1].HighWatermark())
	require.Greater(t, g.cores[1].st.snapIndex, uint64(0), "node 1 installed a snapshot")
	res := <-p.res
	require.NotErrorIs(t, res.Err, ErrReplaced, "the entry is committed at offset %d", base)
	require.ErrorIs(t, res.Err, ErrOutcomeUnknown, "node 1 cannot tell whether its entry of an older term below the snapshot commits")
}
