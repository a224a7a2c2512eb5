package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// TestGroupValueEncodingMatchesKafka: every value version the broker
// writes decodes with franz-go's generated GroupMetadataValue (Kafka's
// schema) to the same fields, and back to the same bytes.
func TestGroupValueEncodingMatchesKafka(t *testing.T) {
	inst := "static-1"
	g := groupRecord{protocolType: "consumer", generation: 7, protocol: kmsg.StringPtr("range"), leader: kmsg.StringPtr("m1"), stateTime: 1700000000000,
		members: []memberRecord{
			{memberID: "m1", instanceID: &inst, clientID: "c1", clientHost: "/127.0.0.1", rebalanceTimeout: 60000, sessionTimeout: 10000, subscription: []byte{0, 1}, assignment: []byte{0, 2, 3}},
			{memberID: "m2", clientID: "c2", clientHost: "/127.0.0.2", rebalanceTimeout: 30000, sessionTimeout: 30000, subscription: []byte{}, assignment: []byte{}},
		}}
	for v := int16(0); v <= maxGroupValueVersion; v++ {
		b := encodeGroupValue(nil, g, v)
		var kv kmsg.GroupMetadataValue
		require.NoError(t, kv.ReadFrom(b), "v%d", v)
		require.Equal(t, v, kv.Version)
		require.Equal(t, "consumer", kv.ProtocolType)
		require.Equal(t, int32(7), kv.Generation)
		require.Equal(t, "range", *kv.Protocol)
		require.Equal(t, "m1", *kv.Leader)
		require.Len(t, kv.Members, 2)
		require.Equal(t, "c1", kv.Members[0].ClientID)
		require.Equal(t, "/127.0.0.1", kv.Members[0].ClientHost)
		require.Equal(t, []byte{0, 2, 3}, kv.Members[0].Assignment)
		if v >= 1 {
			require.Equal(t, int32(60000), kv.Members[0].RebalanceTimeoutMillis)
		}
		if v >= 2 {
			require.Equal(t, int64(1700000000000), kv.CurrentStateTimestamp)
		}
		if v >= 3 {
			require.Equal(t, "static-1", *kv.Members[0].InstanceID)
			require.Nil(t, kv.Members[1].InstanceID)
		}
		require.Equal(t, b, kv.AppendTo(nil), "v%d: kmsg re-encodes the same bytes", v)
		got, err := decodeGroupValue(b)
		require.NoError(t, err)
		want := g
		if v < 3 {
			want.members = []memberRecord{g.members[0], g.members[1]}
			want.members[0].instanceID = nil
		}
		if v < 2 {
			want.stateTime = -1
		}
		if v == 0 {
			want.members[0].rebalanceTimeout, want.members[1].rebalanceTimeout = 10000, 30000
		}
		require.Equal(t, want, got, "v%d", v)
	}
	empty := groupRecord{protocolType: "consumer", generation: 8, stateTime: 5}
	var kv kmsg.GroupMetadataValue
	require.NoError(t, kv.ReadFrom(encodeGroupValue(nil, empty, 3)))
	require.Nil(t, kv.Protocol)
	require.Nil(t, kv.Leader)
	require.Empty(t, kv.Members)

	var kk kmsg.GroupMetadataKey
	require.NoError(t, kk.ReadFrom(encodeGroupKey(nil, "billing")))
	require.Equal(t, int16(2), kk.Version)
	require.Equal(t, "billing", kk.Group)
}

// groupRecordsIn reads __consumer_offsets-0 through the server's partition
// and returns every group metadata record of group, in log order, decoded
// with franz-go's GroupMetadataValue (nil: a tombstone).
func groupRecordsIn(t *testing.T, s *server, group string) []*kmsg.GroupMetadataValue {
	t.Helper()
	ps, err := s.store.topic(offsetsTopic, false)
	require.NoError(t, err)
	var out []*kmsg.GroupMetadataValue
	var dec batch.Decoder
	require.NoError(t, readToHighWatermark(ps[0], func(rest []byte, off int64) error {
		for len(rest) > 0 {
			b, next, err := batch.Parse(rest)
			require.NoError(t, err)
			rest = next
			if b.Attributes().IsControl() {
				continue
			}
			for rec, err := range b.All(&dec) {
				require.NoError(t, err)
				if rec.Offset < off {
					continue
				}
				var kk kmsg.GroupMetadataKey
				if kk.ReadFrom(rec.Key) != nil || kk.Version != 2 || kk.Group != group {
					continue
				}
				if rec.Value == nil {
					out = append(out, nil)
					continue
				}
				kv := new(kmsg.GroupMetadataValue)
				require.NoError(t, kv.ReadFrom(rec.Value))
				out = append(out, kv)
			}
		}
		return nil
	}))
	return out
}

// joinAndSync makes one member join group over rc (JoinGroup v3: no member
// id round trip) and sync as its leader with assignment; it returns the
// member id and generation.
func joinAndSync(t *testing.T, rc *rawConn, group string, subscription, assignment []byte) (string, int32) {
	t.Helper()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group = group
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 2000, 3000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: subscription}}
	jr := rc.do(join).(*kmsg.JoinGroupResponse)
	require.Equal(t, int16(0), jr.ErrorCode, "join: %v", kerr.ErrorForCode(jr.ErrorCode))
	require.Equal(t, jr.MemberID, jr.LeaderID)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.Generation, sync.MemberID = group, jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: assignment}}
	sr := rc.do(sync).(*kmsg.SyncGroupResponse)
	require.Equal(t, int16(0), sr.ErrorCode, "sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	require.Equal(t, assignment, sr.MemberAssignment)
	return jr.MemberID, jr.Generation
}

// consumerProtocol returns a consumer's subscription to topic and an
// assignment of its partition 0, in Kafka's ConsumerProtocol.
func consumerProtocol(topic string) (subscription, assignment []byte) {
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{topic}
	as := kmsg.NewConsumerMemberAssignment()
	as.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0}}}
	return sub.AppendTo(nil), as.AppendTo(nil)
}

// TestGroupMetadataRecords: a rebalance writes Kafka's group metadata
// record (key v2, value v3) with the member's client id, host, timeouts,
// subscription and assignment; the coordinator reloads the group from it
// after a restart (Stable, same generation, the member's session running
// again); the member's expiry writes the Empty group (next generation, no
// protocol, leader or members), which a group with committed offsets keeps;
// a group without offsets that empties is tombstoned and is gone after a
// restart.
func TestGroupMetadataRecords(t *testing.T) {
	dir := t.TempDir()
	var srv *server
	b := startBrokerWith(t, dir, 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	rc := dialRaw(t, b.addr)
	require.Equal(t, int16(0), produceRaw(t, rc, 7, "orders", 0, buildBatch(t, "o", 5, batch.CompressionNone)).ErrorCode)
	sub, assign := consumerProtocol("orders")

	member, gen := joinAndSync(t, rc, "billing", sub, assign)
	recs := groupRecordsIn(t, srv, "billing")
	require.Len(t, recs, 1)
	r := recs[0]
	require.Equal(t, int16(3), r.Version)
	require.Equal(t, "consumer", r.ProtocolType)
	require.Equal(t, gen, r.Generation)
	require.Equal(t, "range", *r.Protocol)
	require.Equal(t, member, *r.Leader)
	require.Positive(t, r.CurrentStateTimestamp)
	require.Len(t, r.Members, 1)
	m := r.Members[0]
	require.Equal(t, member, m.MemberID)
	require.Nil(t, m.InstanceID)
	require.Equal(t, "raw-test", m.ClientID)
	require.Equal(t, "/127.0.0.1", m.ClientHost)
	require.Equal(t, int32(3000), m.RebalanceTimeoutMillis)
	require.Equal(t, int32(2000), m.SessionTimeoutMillis)
	require.Equal(t, sub, m.Subscription)
	require.Equal(t, assign, m.Assignment)

	// A commit of the member's generation, then a group that never commits.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 8
	oc.Group, oc.Generation, oc.MemberID = "billing", gen, member
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 4, LeaderEpoch: -1}}}}
	require.Equal(t, int16(0), rc.do(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	other, _ := joinAndSync(t, rc, "scratch", sub, assign)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 2
	leave.Group, leave.MemberID = "scratch", other
	require.Equal(t, int16(0), rc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	scratch := groupRecordsIn(t, srv, "scratch")
	require.Len(t, scratch, 3, "rebalance, empty, tombstone")
	require.Equal(t, int32(2), scratch[1].Generation)
	require.Nil(t, scratch[1].Protocol)
	require.Empty(t, scratch[1].Members)
	require.Nil(t, scratch[2])

	// Restart while billing's member is in the group.
	b.stop(t)
	b = startBrokerWith(t, dir, 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	srv.groups.mu.Lock()
	g := srv.groups.groups["billing"]
	require.NotNil(t, g)
	require.Equal(t, groupStable, g.state)
	require.Equal(t, gen, g.generation)
	require.Equal(t, member, g.leader)
	require.Equal(t, "raw-test", g.members[member].clientID)
	require.Equal(t, assign, g.members[member].assignment)
	_, scratchLoaded := srv.groups.groups["scratch"]
	srv.groups.mu.Unlock()
	require.False(t, scratchLoaded, "a tombstoned group is not reloaded")

	// The member does not heartbeat: its session (2 s) expires.
	require.Eventually(t, func() bool {
		recs := groupRecordsIn(t, srv, "billing")
		return len(recs) == 2 && recs[1] != nil && len(recs[1].Members) == 0
	}, 10*time.Second, 50*time.Millisecond)
	recs = groupRecordsIn(t, srv, "billing")
	require.Equal(t, gen+1, recs[1].Generation)
	require.Nil(t, recs[1].Leader)
	rc = dialRaw(t, b.addr)
	require.Equal(t, int64(4), fetchCommitted(t, rc, "billing", "orders", 0), "the offsets stay, and so does the group")
	srv.groups.mu.Lock()
	require.Equal(t, groupEmpty, srv.groups.groups["billing"].state)
	srv.groups.mu.Unlock()

	// The next member continues the generations.
	_, gen2 := joinAndSync(t, rc, "billing", sub, assign)
	require.Equal(t, gen+2, gen2)
}
