package raftlog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The state file keeps the membership (version 1); a version 0 file (no
// membership line) is still read, with the commit index as applied.
func TestRaftStateFileMembership(t *testing.T) {
	s := raftState{term: 7, vote: 2, commit: 40, snapIndex: 12, snapTerm: 3, snapOffset: 5000, logStart: 4000,
		applied: 39, voters: []uint64{1, 2, 4}, learners: []uint64{5}, hasConf: true}
	b := appendRaftState(nil, s)
	assert.Equal(t, "1\n7 2 40\n12 3 5000 4000\n39 1,2,4 5\n", string(b))
	got, err := parseRaftState("f", b)
	require.NoError(t, err)
	assert.Equal(t, s, got)

	got, err = parseRaftState("f", []byte("1\n7 2 40\n12 3 5000 5000\n40 1 -\n"))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, got.voters)
	assert.Empty(t, got.learners)

	got, err = parseRaftState("f", []byte("0\n7 2 40\n12 3 5000\n"))
	require.NoError(t, err)
	assert.False(t, got.hasConf)
	assert.Equal(t, uint64(40), got.applied)
	assert.Equal(t, int64(5000), got.logStart, "version 0: the log starts at the snapshot offset")

	for _, tc := range []struct{ name, data string }{
		{"version 1 without membership", "1\n7 2 40\n12 3 5000\n"},
		{"version 0 with membership", "0\n7 2 40\n12 3 5000\n40 1 -\n"},
		{"applied beyond commit", "1\n7 2 40\n12 3 5000 5000\n41 1 -\n"},
		{"voter 0", "1\n7 2 40\n12 3 5000 5000\n40 0 -\n"},
		{"voter not a number", "1\n7 2 40\n12 3 5000 5000\n40 1,x -\n"},
		{"two fields", "1\n7 2 40\n12 3 5000 5000\n40 1\n"},
		{"version 1 snapshot line of three", "1\n7 2 40\n12 3 5000\n40 1 -\n"},
		{"log start above the snapshot offset", "1\n7 2 40\n12 3 5000 5001\n40 1 -\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRaftState("f", []byte(tc.data))
			require.ErrorIs(t, err, ErrState)
		})
	}
}

// A configuration change entry is stored as a control batch of type 101
// whose value is the encoded ConfChangeV2, and Entries gives it back as an
// EntryConfChangeV2 with that data.
func TestRaftConfChangeBatch(t *testing.T) {
	cc := []byte("encoded change")
	b, err := raftConfChangeBatch(42, 7, cc)
	require.NoError(t, err)
	ct, value := raftControl(b)
	assert.Equal(t, ConfChangeControlType, ct)
	assert.Equal(t, cc, value)
	assert.False(t, isRaftNoop(b))
	b2, err := raftConfChangeBatch(42, 7, cc)
	require.NoError(t, err)
	assert.Equal(t, b, b2, "every replica writes the same bytes")
	assert.Equal(t, pb.EntryConfChangeV2, pb.EntryConfChangeV2) // the entry type Entries uses
}

// A node that joins after retention moved the leader's log start copies
// nothing from before it: raft sends it a snapshot (the point, and the
// membership), it restarts its log at the leader's log start and copies
// the rest, ending with the leader's committed bytes from there on.

// A membership change that would leave the group without a voter (the
// removal of the last one) is not proposed: raft panics when it applies
// one, and every replica would apply it again at each restart.
func TestConfChangeRemovingLastVoterRefused(t *testing.T) {
	g := newTestGroup(t, 1)
	g.elect(1, all)
	end := g.parts[1].LogEndOffset()
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(uint64(1))}}}
	require.NotPanics(t, func() {
		g.turn(1, func() { g.cores[1].proposeConf(cc) })
		for range 3 {
			g.turn(1, g.cores[1].rn.Tick)
		}
	})
	require.Equal(t, []uint64{1}, g.cores[1].st.cs.GetVoters())
	require.Equal(t, end, g.parts[1].LogEndOffset(), "nothing proposed")
}

// A membership change that is not exactly one change with raft's
// automatic transition is not proposed. Raft makes several changes a joint
// configuration, left by an empty change raft proposes itself: the state
// file holds no joint configuration, and the replica does not apply raft's
// empty change, so raft would stay joint and propose another empty change
// after every one applied, without end. Raft panics applying a transition
// it does not know.
func TestConfChangeJointRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		cc   *pb.ConfChangeV2
	}{
		{"two changes", &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{
			{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))},
			{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(5))},
		}}},
		{"an unknown transition", &pb.ConfChangeV2{Transition: pb.ConfChangeTransition(7).Enum(), Changes: []*pb.ConfChangeSingle{
			{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGroup(t, 3)
			g.elect(1, all)
			end := g.parts[1].LogEndOffset()
			require.NotPanics(t, func() {
				g.turn(1, func() { g.cores[1].proposeConf(tc.cc) })
				for range 50 { // one round of messages a tick
					g.turn(1, g.cores[1].rn.Tick)
					ms := g.outbox
					g.outbox = nil
					for _, m := range ms {
						if m.GetTo() <= 3 {
							g.turn(m.GetTo(), func() { g.cores[m.GetTo()].step(m) })
						}
					}
				}
			})
			require.Equal(t, end, g.parts[1].LogEndOffset(), "nothing proposed")
			require.Empty(t, g.cores[1].rn.Status().Config.Voters[1], "not joint")
		})
	}
}

// A membership change of a type raft does not know is not proposed: raft
// panics when it applies one, on every replica and at each restart.
func TestConfChangeUnknownTypeRefused(t *testing.T) {
	g := newTestGroup(t, 1)
	g.elect(1, all)
	end := g.parts[1].LogEndOffset()
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeType(9).Enum(), NodeId: new(uint64(2))}}}
	require.NotPanics(t, func() {
		g.turn(1, func() { g.cores[1].proposeConf(cc) })
		for range 3 {
			g.turn(1, g.cores[1].rn.Tick)
		}
	})
	require.Equal(t, end, g.parts[1].LogEndOffset(), "nothing proposed")
}
