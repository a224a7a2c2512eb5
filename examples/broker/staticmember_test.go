package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// staticJoin sends JoinGroup v5 for a static member (group.instance.id
// instance) with the given member id ("" for a member that (re)starts).
func staticJoin(t *testing.T, rc *rawConn, group, instance, memberID string, subscription []byte) *kmsg.JoinGroupResponse {
	t.Helper()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 5
	join.Group, join.MemberID, join.InstanceID = group, memberID, kmsg.StringPtr(instance)
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: subscription}}
	return rc.do(join).(*kmsg.JoinGroupResponse)
}

// staticHeartbeat sends Heartbeat v3 (with the instance id) and returns its
// error code.
func staticHeartbeat(t *testing.T, rc *rawConn, group, instance, memberID string, generation int32) int16 {
	t.Helper()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 3
	hb.Group, hb.Generation, hb.MemberID, hb.InstanceID = group, generation, memberID, kmsg.StringPtr(instance)
	return rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode
}

// A static member (KIP-345, JoinGroup v5+ with group.instance.id) that
// restarts joins again with an empty member id: Kafka's classic coordinator
// gives it a new member id at once (no MEMBER_ID_REQUIRED round trip for a
// static member), hands it the instance's place in the Stable group without
// a rebalance (same generation, its old assignment from SyncGroup), and
// fences the old member id: its heartbeat, commit and join get
// FENCED_INSTANCE_ID. LeaveGroup by instance id alone removes the member.
func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	const group, instance = "static", "instance-1"
	sub, assignment := consumerProtocol("orders")

	rc := dialRaw(t, b.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.AllowAutoTopicCreation = 12, true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	require.Equal(t, int16(0), rc.do(md).(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	jr := staticJoin(t, rc, group, instance, "", sub)
	require.Equal(t, codeName(0), codeName(jr.ErrorCode), "first join of a static member")
	first, gen := jr.MemberID, jr.Generation
	require.True(t, strings.HasPrefix(first, instance+"-"), "member id %q: Kafka's static member ids begin with the instance id and a dash (franz-go tells a restarted leader by it)", first)
	require.Equal(t, first, jr.LeaderID)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.Generation, sync.MemberID, sync.InstanceID = group, gen, first, kmsg.StringPtr(instance)
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: first, MemberAssignment: assignment}}
	sr := rc.do(sync).(*kmsg.SyncGroupResponse)
	require.Equal(t, codeName(0), codeName(sr.ErrorCode), "leader's sync")

	// The restart: a new connection, an empty member id, the same instance.
	rc2 := dialRaw(t, b.addr)
	jr = staticJoin(t, rc2, group, instance, "", sub)
	require.Equal(t, codeName(0), codeName(jr.ErrorCode), "rejoin of the static member")
	second := jr.MemberID
	require.True(t, strings.HasPrefix(second, instance+"-"), "member id %q", second)
	require.NotEqual(t, first, second, "the rejoined static member keeps its old member id")
	assert.Equal(t, gen, jr.Generation, "the rejoin started a rebalance")
	assert.Equal(t, first, jr.LeaderID, "JoinGroup before v9 names the leader it had (the new member does not assign again)")
	assert.Empty(t, jr.Members, "a member that does not assign gets no member list")
	sync.MemberID, sync.GroupAssignment = second, nil
	sr = rc2.do(sync).(*kmsg.SyncGroupResponse)
	require.Equal(t, codeName(0), codeName(sr.ErrorCode), "sync of the rejoined member")
	assert.Equal(t, assignment, sr.MemberAssignment, "the rejoined member lost its assignment")
	assert.Equal(t, codeName(0), codeName(staticHeartbeat(t, rc2, group, instance, second, gen)))

	// The old member id is fenced.
	assert.Equal(t, codeName(kerr.FencedInstanceID.Code), codeName(staticHeartbeat(t, rc, group, instance, first, gen)), "heartbeat of the replaced member id")
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 7
	commit.Group, commit.Generation, commit.MemberID, commit.InstanceID = group, gen, first, kmsg.StringPtr(instance)
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "orders"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cr := rc.do(commit).(*kmsg.OffsetCommitResponse)
	assert.Equal(t, codeName(kerr.FencedInstanceID.Code), codeName(cr.Topics[0].Partitions[0].ErrorCode), "commit of the replaced member id")
	jr = staticJoin(t, rc, group, instance, first, sub)
	assert.Equal(t, codeName(kerr.FencedInstanceID.Code), codeName(jr.ErrorCode), "join of the replaced member id")
	assert.Equal(t, codeName(0), codeName(staticHeartbeat(t, rc2, group, instance, second, gen)), "the fenced member's join disturbed the group")

	// LeaveGroup by instance id (an admin's removal: no member id).
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 3
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr(instance)}}
	lr := rc.do(leave).(*kmsg.LeaveGroupResponse)
	require.Len(t, lr.Members, 1)
	assert.Equal(t, codeName(0), codeName(lr.Members[0].ErrorCode), "leave by instance id")
	assert.Equal(t, codeName(kerr.UnknownMemberID.Code), codeName(staticHeartbeat(t, rc2, group, instance, second, gen)), "the member is still in the group")
}

// The leader's member list carries each member's group.instance.id
// (JoinGroup v5+), as Kafka's classic coordinator sends it: assignors read
// it to keep a static member's partitions.
func TestJoinGroupMembersCarryInstanceID(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	sub, _ := consumerProtocol("orders")
	jr := staticJoin(t, dialRaw(t, b.addr), "instances", "instance-1", "", sub)
	require.Equal(t, codeName(0), codeName(jr.ErrorCode))
	require.Len(t, jr.Members, 1)
	require.NotNil(t, jr.Members[0].InstanceID, "the leader's member list has no instance id")
	assert.Equal(t, "instance-1", *jr.Members[0].InstanceID)
}

// A franz-go consumer with a group.instance.id that closes (a static member
// does not leave) and starts again takes its place at once: it consumes
// what was produced meanwhile in the same generation, the group's only
// member. Before, its join waited for the closed instance's session to
// expire (30 s here) and then rebalanced.
func TestStaticMemberRestartKgo(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 2)
	const topic, group = "static-kgo", "static-kgo-group"
	p := newClient(t, b.addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	produce := func(n int) {
		for i := range n {
			require.NoError(t, p.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v"), Partition: int32(i % 2)}).FirstErr())
		}
	}
	consumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.InstanceID("instance-1"), kgo.SessionTimeout(30*time.Second), kgo.RebalanceTimeout(30*time.Second),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		require.NoError(t, err)
		return cl
	}
	members := func() int {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(context.Background(), p)
		require.NoError(t, err)
		require.Len(t, resp.Groups, 1)
		return len(resp.Groups[0].Members)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	produce(10)
	c1 := consumer()
	got := consume(ctx, t, c1, 10)
	require.NoError(t, c1.CommitRecords(ctx, got...))
	_, before := c1.GroupMetadata()
	c1.Close()

	produce(4)
	c2 := consumer()
	defer c2.Close()
	got = consume(ctx, t, c2, 4)
	require.Len(t, got, 4)
	_, after := c2.GroupMetadata()
	assert.Equal(t, before, after, "the restarted static member rebalanced the group")
	assert.Equal(t, 1, members())
}

// A member none of whose protocols every member of the group supports is
// refused with INCONSISTENT_GROUP_PROTOCOL, as Kafka's classic coordinator
// refuses it (GroupMetadata.supportsProtocols), without disturbing the
// group: before, it joined and the leader got a member without metadata
// for the chosen protocol.
func TestJoinGroupRefusesUnsupportedProtocol(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	const group = "protocols"
	sub, assignment := consumerProtocol("orders")
	rc := dialRaw(t, b.addr)
	id, gen := joinAndSync(t, rc, group, sub, assignment) // protocol "range"

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group = group
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 2000, 3000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin", Metadata: sub}}
	jr := dialRaw(t, b.addr).do(join).(*kmsg.JoinGroupResponse)
	assert.Equal(t, codeName(kerr.InconsistentGroupProtocol.Code), codeName(jr.ErrorCode), "a member whose only protocol the group does not support")

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 3
	hb.Group, hb.Generation, hb.MemberID = group, gen, id
	assert.Equal(t, codeName(0), codeName(rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode), "the refused member disturbed the group")

	// One protocol in common is enough: the member joins (alone, once
	// the first member, which does not rejoin, is dropped at the end of
	// the rebalance).
	join.Protocols = append(join.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range", Metadata: sub})
	jr = dialRaw(t, b.addr).do(join).(*kmsg.JoinGroupResponse)
	assert.Equal(t, codeName(0), codeName(jr.ErrorCode), "a member with a protocol in common")
}
