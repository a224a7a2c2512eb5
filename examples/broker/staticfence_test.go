package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// parked sends req on rc and reads its answer in the background: for a
// request the coordinator parks (a JoinGroup during a rebalance, a
// follower's SyncGroup).
func parked(rc *rawConn, req kmsg.Request) <-chan []byte {
	rc.send(req)
	ch := make(chan []byte, 1)
	go func() {
		b, err := rc.readFrameWithin(20 * time.Second)
		if err != nil {
			b = nil
		}
		ch <- b
	}()
	return ch
}

// answer decodes a frame parked returned as req's response.
func answer(t *testing.T, req kmsg.Request, ch <-chan []byte) kmsg.Response {
	t.Helper()
	var b []byte
	select {
	case b = <-ch:
	case <-time.After(25 * time.Second):
		t.Fatalf("no answer to %s", kmsg.NameForKey(req.Key()))
	}
	require.NotNil(t, b, "no answer to %s", kmsg.NameForKey(req.Key()))
	require.GreaterOrEqual(t, len(b), 4)
	resp := req.ResponseKind()
	require.NoError(t, resp.ReadFrom(b[4:]))
	return resp
}

// A static member's SyncGroup parked while the group waits for its
// leader's assignments, when the member's instance restarts (JoinGroup
// with the instance id and no member id): Kafka's classic coordinator
// answers the parked SyncGroup of the replaced member id with
// FENCED_INSTANCE_ID (GroupMetadata.replaceStaticMember fences the join
// and the sync waiting for the old member), so the zombie instance learns
// at once that it is fenced. It was answered REBALANCE_IN_PROGRESS, which
// sends the zombie to rejoin as if it were still a member.
func TestStaticMemberRestartFencesParkedSync(t *testing.T) {
	b := startBroker(t, t.TempDir(), 1)
	const group = "static-fence"
	sub, assignment := consumerProtocol("orders")

	rcA := dialRaw(t, b.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	require.Equal(t, int16(0), rcA.do(md).(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	jr := staticJoin(t, rcA, group, "instance-a", "", sub)
	require.Equal(t, codeName(0), codeName(jr.ErrorCode))
	a, gen := jr.MemberID, jr.Generation
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.Generation, sync.MemberID, sync.InstanceID = group, gen, a, kmsg.StringPtr("instance-a")
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: a, MemberAssignment: assignment}}
	require.Equal(t, codeName(0), codeName(rcA.do(sync).(*kmsg.SyncGroupResponse).ErrorCode))

	// Member b joins: a rebalance, which a's rejoin completes.
	rcB := dialRaw(t, b.addr)
	joinB := kmsg.NewPtrJoinGroupRequest()
	joinB.Version = 5
	joinB.Group, joinB.InstanceID = group, kmsg.StringPtr("instance-b")
	joinB.SessionTimeoutMillis, joinB.RebalanceTimeoutMillis = 30000, 30000
	joinB.ProtocolType = "consumer"
	joinB.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub}}
	bJoined := parked(rcB, joinB)
	require.Eventually(t, func() bool {
		return staticHeartbeat(t, rcA, group, "instance-a", a, gen) == kerr.RebalanceInProgress.Code
	}, 10*time.Second, 20*time.Millisecond, "b's join started no rebalance")
	jr = staticJoin(t, rcA, group, "instance-a", a, sub)
	require.Equal(t, codeName(0), codeName(jr.ErrorCode), "a's rejoin")
	gen = jr.Generation
	jb := answer(t, joinB, bJoined).(*kmsg.JoinGroupResponse)
	require.Equal(t, codeName(0), codeName(jb.ErrorCode), "b's join")
	require.Equal(t, gen, jb.Generation)
	bID := jb.MemberID

	// b's SyncGroup waits for the leader's assignments.
	syncB := kmsg.NewPtrSyncGroupRequest()
	syncB.Version = 3
	syncB.Group, syncB.Generation, syncB.MemberID, syncB.InstanceID = group, gen, bID, kmsg.StringPtr("instance-b")
	bSynced := parked(rcB, syncB)
	// No answer shows the SyncGroup parked, so the test gives it time to
	// park. A restart that came first would meet b's SyncGroup with a
	// replaced member id, which gets FENCED_INSTANCE_ID too: the checks
	// below hold either way, and only which path they cover depends on
	// the pause.
	time.Sleep(300 * time.Millisecond)

	// Instance b restarts.
	rcB2 := dialRaw(t, b.addr)
	joinB2 := kmsg.NewPtrJoinGroupRequest()
	*joinB2 = *joinB
	parked(rcB2, joinB2)
	sb := answer(t, syncB, bSynced).(*kmsg.SyncGroupResponse)
	assert.Equal(t, codeName(kerr.FencedInstanceID.Code), codeName(sb.ErrorCode), "the parked SyncGroup of the replaced member id")
}
