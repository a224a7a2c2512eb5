package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// offsetTombstonesIn counts the offset-commit tombstones (key version 1,
// null value) of a group in __consumer_offsets-0.
func offsetTombstonesIn(t *testing.T, s *server, group string) int {
	t.Helper()
	ps, err := s.store.topic(offsetsTopic, false)
	require.NoError(t, err)
	n := 0
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
				var k kmsg.OffsetCommitKey
				if rec.Offset < off || k.ReadFrom(rec.Key) != nil || k.Version > 1 || k.Group != group {
					continue
				}
				if rec.Value == nil {
					n++
				}
			}
		}
		return nil
	}))
	return n
}

// describeGroup sends DescribeGroups v5 for one group.
func describeGroup(t *testing.T, rc *rawConn, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	resp := rc.do(req).(*kmsg.DescribeGroupsResponse)
	require.Len(t, resp.Groups, 1)
	return resp.Groups[0]
}

// listGroups sends ListGroups at version v with filters and returns the
// groups by name.
func listGroups(t *testing.T, rc *rawConn, v int16, states, types []string) map[string]kmsg.ListGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version, req.StatesFilter, req.TypesFilter = v, states, types
	resp := rc.do(req).(*kmsg.ListGroupsResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	out := make(map[string]kmsg.ListGroupsResponseGroup)
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

// deleteGroup sends DeleteGroups v2 for one group and returns its code.
func deleteGroup(t *testing.T, rc *rawConn, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = []string{group}
	resp := rc.do(req).(*kmsg.DeleteGroupsResponse)
	require.Len(t, resp.Groups, 1)
	return resp.Groups[0].ErrorCode
}

// commitRaw commits offset for topic partition 0 in a group, with the
// member's generation (-1 and "" for a consumer without a group).
func commitRaw(t *testing.T, rc *rawConn, group string, gen int32, member, topic string, offset int64) {
	t.Helper()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version = 8
	oc.Group, oc.Generation, oc.MemberID = group, gen, member
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
	require.Equal(t, int16(0), rc.do(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
}

// DescribeGroups, ListGroups and DeleteGroups answer as Kafka 3.9's
// classic coordinator: a Stable group with its member (client id, host,
// subscription, assignment), the states filter (v4+, any case) and types
// filter (v5+); DeleteGroups refuses a group with members
// (NON_EMPTY_GROUP), deletes an empty one (a tombstone for each offset and
// for its group metadata; gone after a restart) and then says
// GROUP_ID_NOT_FOUND; an unknown group is Dead.
func TestGroupAdmin(t *testing.T) {
	dir := t.TempDir()
	var srv *server
	b := startBrokerWith(t, dir, 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	rc := dialRaw(t, b.addr)
	require.Equal(t, int16(0), produceRaw(t, rc, 7, "orders", 0, buildBatch(t, "o", 5, batch.CompressionNone)).ErrorCode)
	sub, assign := consumerProtocol("orders")
	member, gen := joinAndSync(t, rc, "billing", sub, assign)
	commitRaw(t, rc, "billing", gen, member, "orders", 3)
	commitRaw(t, rc, "standalone", -1, "", "orders", 2)

	d := describeGroup(t, rc, "billing")
	require.Equal(t, int16(0), d.ErrorCode)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "consumer", d.ProtocolType)
	require.Equal(t, "range", d.Protocol)
	require.Len(t, d.Members, 1)
	require.Equal(t, member, d.Members[0].MemberID)
	require.Equal(t, "raw-test", d.Members[0].ClientID)
	require.Equal(t, "/127.0.0.1", d.Members[0].ClientHost)
	require.Equal(t, sub, d.Members[0].ProtocolMetadata)
	require.Equal(t, assign, d.Members[0].MemberAssignment)
	d = describeGroup(t, rc, "standalone")
	require.Equal(t, "Empty", d.State)
	require.Equal(t, "", d.ProtocolType)
	require.Empty(t, d.Members)
	require.Equal(t, "Dead", describeGroup(t, rc, "nobody").State)

	all := listGroups(t, rc, 0, nil, nil)
	require.Len(t, all, 2)
	require.Equal(t, "consumer", all["billing"].ProtocolType)
	require.Equal(t, "", all["standalone"].ProtocolType)
	stable := listGroups(t, rc, 4, []string{"stable"}, nil)
	require.Len(t, stable, 1)
	require.Equal(t, "Stable", stable["billing"].GroupState)
	require.Len(t, listGroups(t, rc, 4, []string{"Empty", "Dead"}, nil), 1)
	classic := listGroups(t, rc, 5, nil, []string{"Classic"})
	require.Len(t, classic, 2)
	require.Equal(t, "classic", classic["billing"].GroupType)
	require.Empty(t, listGroups(t, rc, 5, nil, []string{"consumer"}))

	require.Equal(t, kerr.NonEmptyGroup.Code, deleteGroup(t, rc, "billing"))
	require.Equal(t, int64(3), fetchCommitted(t, rc, "billing", "orders", 0))
	require.Equal(t, kerr.GroupIDNotFound.Code, deleteGroup(t, rc, "nobody"))

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 2
	leave.Group, leave.MemberID = "billing", member
	require.Equal(t, int16(0), rc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	require.Equal(t, "Empty", describeGroup(t, rc, "billing").State)
	require.Equal(t, int16(0), deleteGroup(t, rc, "billing"))
	require.Equal(t, int64(-1), fetchCommitted(t, rc, "billing", "orders", 0))
	require.Equal(t, 1, offsetTombstonesIn(t, srv, "billing"))
	recs := groupRecordsIn(t, srv, "billing")
	require.Nil(t, recs[len(recs)-1], "group metadata tombstoned")
	require.Equal(t, "Dead", describeGroup(t, rc, "billing").State)
	require.Equal(t, kerr.GroupIDNotFound.Code, deleteGroup(t, rc, "billing"))
	require.Equal(t, int16(0), deleteGroup(t, rc, "standalone"))

	b.stop(t)
	b = startBrokerWith(t, dir, 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	rc = dialRaw(t, b.addr)
	require.Empty(t, listGroups(t, rc, 4, nil, nil), "deleted groups stay deleted")
	require.Equal(t, int64(-1), fetchCommitted(t, rc, "billing", "orders", 0))
}

// Offset expiry (offsets.retention.minutes, here 2 s): an empty group's
// offsets are tombstoned once retention passed since it became empty, and
// the group with them (group metadata tombstone); a group with members
// keeps the offsets of the topics its members subscribe to, and loses
// those of another topic retention after their commit (KIP-211: a Stable
// consumer group); a consumer without a group loses its offsets
// retention after their commit. The default is Kafka's 7 days.
func TestOffsetExpiry(t *testing.T) {
	const retention = 2 * time.Second
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.onServer = func(s *server) { srv = s }
		c.OffsetsRetention, c.OffsetsRetentionCheck = retention, 100*time.Millisecond
	})
	rc := dialRaw(t, b.addr)
	require.Equal(t, int16(0), produceRaw(t, rc, 7, "orders", 0, buildBatch(t, "o", 5, batch.CompressionNone)).ErrorCode)
	require.Equal(t, int16(0), produceRaw(t, rc, 7, "unsubscribed", 0, buildBatch(t, "u", 5, batch.CompressionNone)).ErrorCode)
	sub, assign := consumerProtocol("orders")

	// "active" keeps a member (heartbeats below) subscribed to orders,
	// with an offset of a topic it no longer subscribes to; "gone"
	// empties.
	active, activeGen := joinAndSync(t, rc, "active", sub, assign)
	commitRaw(t, rc, "active", activeGen, active, "orders", 4)
	commitRaw(t, rc, "active", activeGen, active, "unsubscribed", 3)
	gone, goneGen := joinAndSync(t, rc, "gone", sub, assign)
	commitRaw(t, rc, "gone", goneGen, gone, "orders", 1)
	commitRaw(t, rc, "standalone", -1, "", "orders", 2)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 2
	leave.Group, leave.MemberID = "gone", gone
	require.Equal(t, int16(0), rc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	emptied := time.Now()

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 3
	hb.Group, hb.Generation, hb.MemberID = "active", activeGen, active
	require.Eventually(t, func() bool {
		require.Equal(t, int16(0), rc.do(hb).(*kmsg.HeartbeatResponse).ErrorCode)
		return fetchCommitted(t, rc, "gone", "orders", 0) == -1 && fetchCommitted(t, rc, "standalone", "orders", 0) == -1 &&
			fetchCommitted(t, rc, "active", "unsubscribed", 0) == -1
	}, 10*time.Second, 200*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(emptied), retention, "expired before the retention passed")
	require.Equal(t, int64(4), fetchCommitted(t, rc, "active", "orders", 0), "a Stable group keeps the offsets of its subscribed topics")
	require.Equal(t, 1, offsetTombstonesIn(t, srv, "active"), "the unsubscribed topic's offset tombstoned")
	require.Equal(t, 1, offsetTombstonesIn(t, srv, "gone"))
	require.Equal(t, 1, offsetTombstonesIn(t, srv, "standalone"))
	recs := groupRecordsIn(t, srv, "gone")
	require.Nil(t, recs[len(recs)-1], "the emptied group is deleted with its offsets")
	require.Equal(t, "Dead", describeGroup(t, rc, "gone").State)
	require.Equal(t, "Stable", describeGroup(t, rc, "active").State)

	c := newCoordinator(srv.log, nil, 3, 0, 0)
	defer c.close()
	require.Equal(t, 7*24*time.Hour, c.retention)
}
