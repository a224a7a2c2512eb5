package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator: Kafka's classic rebalance protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) for consumer groups, kept in memory
// only (a restart forgets memberships; committed offsets are durable, see
// offsetStore). Static membership (group.instance.id) is treated as dynamic.
//
// A rebalance starts when a member joins or leaves or a session expires.
// Every JoinGroup parks until every current member has rejoined or the
// rebalance timeout passed (members that did not rejoin are removed), then
// all get the new generation and the leader gets the member list. Followers'
// SyncGroup calls park until the leader's SyncGroup brings the assignments.

type groupState uint8

const (
	groupEmpty groupState = iota
	groupPreparing
	groupCompleting
	groupStable
)

// sweepInterval is how often expired sessions and rebalance deadlines are
// checked.
const sweepInterval = 200 * time.Millisecond

type member struct {
	id               string
	instanceID       *string // group.instance.id (JoinGroup v5+): a static member (KIP-345)
	clientID         string  // the JoinGroup request header's client id
	clientHost       string  // the client's address, as Kafka writes it: "/ip"
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	lastSeen         time.Time
	joinVersion      int16
	joinCh           chan *kmsg.JoinGroupResponse // set while parked in JoinGroup
	syncCh           chan syncAnswer              // set while parked in SyncGroup
	assignment       []byte
}

type group struct {
	name         string
	state        groupState
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	deadline     time.Time // end of the current rebalance
	// emptySince is when the group last became Empty (zero: unknown, a
	// record before value version 2): its offsets expire from there.
	emptySince time.Time
}

// groupRecords is where the coordinator writes its groups' metadata
// records (the offset store, groupmeta.go).
type groupRecords interface {
	// storeGroup durably writes a group's record at value version v;
	// nil g writes its tombstone.
	storeGroup(name string, g *groupRecord, v int16) error
	// hasGroupOffsets reports whether the group has committed offsets.
	hasGroupOffsets(group string) bool
	// offsetGroups returns the groups with committed offsets.
	offsetGroups() []string
	// deleteOffsets durably tombstones the group's committed offsets
	// that keep does not keep (all for nil keep) and reports whether
	// some are left (groupadmin.go).
	deleteOffsets(group string, keep func(k offsetKey, committedAt int64) bool) (left bool, err error)
}

// coordinator owns every group. mu guards everything; a parked request waits
// on its member's channel without holding it. Writes of group metadata
// records are made under mu, so they are in the log in the order of the
// changes they record; mu is taken before the offset store's lock, never
// after it.
type coordinator struct {
	log          *slog.Logger
	nextID       atomic.Int64
	records      groupRecords // nil: group metadata is not written
	valueVersion int16        // the GroupMetadataValue version written
	// retention is offsets.retention.minutes (negative: never) and
	// retentionCheck its check interval (groupadmin.go).
	retention      time.Duration
	retentionCheck time.Duration

	mu     sync.Mutex
	groups map[string]*group

	stop chan struct{}
	done chan struct{}
}

// newCoordinator starts the coordinator's sweeper; close stops it. It
// writes its groups' metadata records to records at value version v.
func newCoordinator(logger *slog.Logger, records groupRecords, v int16, retention, retentionCheck time.Duration) *coordinator {
	if retention == 0 {
		retention = defaultOffsetsRetention
	}
	if retentionCheck <= 0 {
		retentionCheck = defaultOffsetsRetentionCheck
	}
	c := &coordinator{
		log:            logger,
		records:        records,
		valueVersion:   v,
		retention:      retention,
		retentionCheck: retentionCheck,
		groups:         make(map[string]*group),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	go c.sweep()
	return c
}

// close stops the sweeper.
func (c *coordinator) close() {
	close(c.stop)
	<-c.done
}

// sweep expires sessions and ends overdue rebalances, every sweepInterval.
func (c *coordinator) sweep() {
	defer close(c.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	expiry := time.NewTicker(c.retentionCheck)
	defer expiry.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-expiry.C:
			c.expireOffsets(now) // groupadmin.go
			continue
		case <-t.C:
		}
		now := time.Now()
		c.mu.Lock()
		for _, g := range c.groups {
			for id, m := range g.members {
				if m.joinCh == nil && m.syncCh == nil && now.Sub(m.lastSeen) > m.sessionTimeout {
					c.log.Info("group member session expired", "group", g.name, "member", id)
					delete(g.members, id)
					c.rebalanceLocked(g)
				}
			}
			if (g.state == groupPreparing || g.state == groupCompleting) && now.After(g.deadline) {
				if g.state == groupPreparing {
					c.completeJoinLocked(g, true)
				} else {
					// The leader never synced: start over.
					c.rebalanceLocked(g)
				}
			}
		}
		c.mu.Unlock()
	}
}

// rebalanceLocked moves g to PreparingRebalance (or Empty without members).
// Followers parked in SyncGroup are told to rejoin.
// REQUIRES: c.mu held.
func (c *coordinator) rebalanceLocked(g *group) {
	for _, m := range g.members {
		if m.syncCh != nil {
			m.syncCh <- syncAnswer{} // rejoin
			m.syncCh = nil
		}
	}
	if len(g.members) == 0 {
		c.emptiedLocked(g) // groupmeta.go
		return
	}
	if g.state != groupPreparing {
		g.state = groupPreparing
		var rt time.Duration
		for _, m := range g.members {
			rt = max(rt, m.rebalanceTimeout)
		}
		g.deadline = time.Now().Add(rt)
	}
	c.completeJoinLocked(g, false)
}

// completeJoinLocked ends the join phase when every member is parked in
// JoinGroup (or, with force, removes those that are not).
// REQUIRES: c.mu held.
func (c *coordinator) completeJoinLocked(g *group, force bool) {
	if g.state != groupPreparing {
		return
	}
	for id, m := range g.members {
		if m.joinCh == nil {
			if !force {
				return
			}
			delete(g.members, id)
		}
	}
	if len(g.members) == 0 {
		c.emptiedLocked(g)
		return
	}
	ids := sortedMemberIDs(g)
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ids[0]
	}
	g.protocol = c.chooseProtocol(g, ids)
	g.generation++
	g.state = groupCompleting
	var rt time.Duration
	for _, m := range g.members {
		rt = max(rt, m.rebalanceTimeout)
	}
	g.deadline = time.Now().Add(rt)
	for _, id := range ids {
		m := g.members[id]
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = m.joinVersion
		resp.Generation = g.generation
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.LeaderID = g.leader
		resp.MemberID = id
		if id == g.leader {
			for _, oid := range ids {
				jm := kmsg.NewJoinGroupResponseMember()
				jm.MemberID, jm.InstanceID = oid, g.members[oid].instanceID
				jm.ProtocolMetadata = metadataFor(g.members[oid], g.protocol)
				resp.Members = append(resp.Members, jm)
			}
		}
		m.joinCh <- resp
		m.joinCh = nil
		m.lastSeen = time.Now()
	}
	c.log.Info("group rebalanced", "group", g.name, "generation", g.generation, "members", len(ids), "leader", g.leader, "protocol", g.protocol)
}

// sortedMemberIDs returns g's member ids in order.
func sortedMemberIDs(g *group) []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// chooseProtocol picks the leader's most preferred protocol that every member
// supports (the leader's first when none is common; join refuses a member
// that would make it so, supportsProtocols).
func (c *coordinator) chooseProtocol(g *group, ids []string) string {
	leader := g.members[g.leader]
	for _, p := range leader.protocols {
		ok := true
		for _, id := range ids {
			if metadataFor(g.members[id], p.Name) == nil {
				ok = false
				break
			}
		}
		if ok {
			return p.Name
		}
	}
	return leader.protocols[0].Name
}

// metadataFor returns a member's metadata for protocol, or nil when the
// member does not support it.
func metadataFor(m *member, protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			if p.Metadata == nil {
				return []byte{}
			}
			return p.Metadata
		}
	}
	return nil
}

// join answers JoinGroup: it registers the member (handing out an id first
// for v4+), starts or joins a rebalance and parks until the rebalance ends.
// clientID and clientHost are the request's, recorded in the group's
// metadata.
func (c *coordinator) join(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) kmsg.Response {
		resp.ErrorCode = code
		return resp
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := session
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code)
	case session < time.Second || session > 30*time.Minute:
		return fail(kerr.InvalidSessionTimeout.Code)
	case len(req.Protocols) == 0 || req.ProtocolType == "":
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	rebalance = max(rebalance, session)

	c.mu.Lock()
	g := c.groups[req.Group]
	if g == nil {
		g = &group{name: req.Group, members: make(map[string]*member)}
		c.groups[req.Group] = g
	}
	if len(g.members) > 0 && (g.protocolType != req.ProtocolType || !supportsProtocols(g, req)) {
		c.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	// A static member (group.instance.id, KIP-345) holding the request's
	// instance under another member id: the request is from a fenced
	// instance, or, without a member id, from the instance restarted.
	var static *member
	if req.InstanceID != nil {
		static = staticMember(g, *req.InstanceID)
		if static != nil && req.MemberID != "" && req.MemberID != static.id {
			c.mu.Unlock()
			return fail(kerr.FencedInstanceID.Code)
		}
	}
	if req.MemberID == "" && req.Version >= 4 && req.InstanceID == nil {
		// KIP-394: hand out an id, the client rejoins with it (a static
		// member joins at once, as in Kafka).
		c.mu.Unlock()
		resp.MemberID = fmt.Sprintf("member-%d-%d", time.Now().UnixNano(), c.nextID.Add(1))
		return fail(kerr.MemberIDRequired.Code)
	}
	id := req.MemberID
	switch {
	case id == "" && req.InstanceID != nil:
		// Kafka names a static member after its instance; franz-go
		// tells by the prefix that a restarted member led the group.
		id = fmt.Sprintf("%s-%d-%d", *req.InstanceID, time.Now().UnixNano(), c.nextID.Add(1))
	case id == "":
		id = fmt.Sprintf("member-%d-%d", time.Now().UnixNano(), c.nextID.Add(1))
	}
	if static != nil && static.id != id {
		if r := c.replaceStaticLocked(g, static, id, req, clientID, clientHost); r != nil {
			c.mu.Unlock()
			return r
		}
	}
	m := g.members[id]
	if m == nil {
		m = &member{id: id}
		g.members[id] = m
	}
	if m.joinCh != nil { // a duplicate join replaces the parked one
		close(m.joinCh)
	}
	m.protocols = slices.Clone(req.Protocols)
	m.clientID, m.clientHost, m.instanceID = clientID, clientHost, req.InstanceID
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	m.lastSeen = time.Now()
	m.joinVersion = req.Version
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinCh = ch
	g.protocolType = req.ProtocolType
	c.rebalanceLocked(g)
	c.mu.Unlock()

	select {
	case r, ok := <-ch:
		if !ok {
			return fail(kerr.RebalanceInProgress.Code)
		}
		return r
	case <-ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
}

// supportsProtocols reports whether one of the joining member's protocols
// is supported by every other member of g, as Kafka's classic coordinator
// requires (GroupMetadata.supportsProtocols) before it lets a member in.
// The member's own earlier protocols and those of the member its instance
// id replaces do not count.
func supportsProtocols(g *group, req *kmsg.JoinGroupRequest) bool {
	var static *member
	if req.InstanceID != nil {
		static = staticMember(g, *req.InstanceID)
	}
	for _, p := range req.Protocols {
		all := true
		for id, m := range g.members {
			if id == req.MemberID || m == static {
				continue
			}
			if metadataFor(m, p.Name) == nil {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// staticMember returns g's member of a group.instance.id, or nil.
func staticMember(g *group, instanceID string) *member {
	if g == nil {
		return nil
	}
	for _, m := range g.members {
		if m.instanceID != nil && *m.instanceID == instanceID {
			return m
		}
	}
	return nil
}

// fencedInstance reports a request of a static member whose instance g
// holds under another member id: Kafka answers it FENCED_INSTANCE_ID.
func fencedInstance(g *group, instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	m := staticMember(g, *instanceID)
	return m != nil && m.id != memberID
}

// replaceStaticLocked gives a restarted static member (a JoinGroup with its
// instance id and no member id) the place of old under the new id, as
// Kafka's classic coordinator does: the old id is fenced (a JoinGroup it
// has parked gets FENCED_INSTANCE_ID, a parked SyncGroup too). In a
// Stable group whose protocol stays the same the member gets the current
// generation at once, without a rebalance, and SyncGroup gives it its old
// assignment (the returned answer; the group's record is written first).
// Otherwise it returns nil and the join goes on as a member's rejoin.
// REQUIRES: c.mu held.
func (c *coordinator) replaceStaticLocked(g *group, old *member, id string, req *kmsg.JoinGroupRequest, clientID, clientHost string) kmsg.Response {
	oldID, leader := old.id, g.leader
	if old.joinCh != nil {
		fenced := kmsg.NewPtrJoinGroupResponse()
		fenced.Version = old.joinVersion
		fenced.MemberID, fenced.Generation = oldID, -1
		fenced.ErrorCode = kerr.FencedInstanceID.Code
		old.joinCh <- fenced
		old.joinCh = nil
	}
	if old.syncCh != nil {
		old.syncCh <- syncAnswer{code: kerr.FencedInstanceID.Code}
		old.syncCh = nil
	}
	delete(g.members, oldID)
	old.id = id
	g.members[id] = old
	if g.leader == oldID {
		g.leader = id
	}
	prev := *old
	old.protocols = slices.Clone(req.Protocols)
	old.clientID, old.clientHost = clientID, clientHost
	old.sessionTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	old.rebalanceTimeout = max(time.Duration(req.RebalanceTimeoutMillis)*time.Millisecond, old.sessionTimeout)
	old.lastSeen = time.Now()
	old.joinVersion = req.Version
	if g.state != groupStable || c.chooseProtocol(g, sortedMemberIDs(g)) != g.protocol {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if err := c.storeLocked(g); err != nil {
		c.log.Error("group metadata not written", "group", g.name, "generation", g.generation, "err", err)
		delete(g.members, id)
		prev.id = oldID
		*old = prev
		g.members[oldID] = old
		g.leader = leader
		resp.Generation = -1
		resp.ErrorCode = groupWriteCode(err)
		return resp
	}
	c.log.Info("static member rejoined", "group", g.name, "generation", g.generation, "instance", *old.instanceID, "member", id, "replaces", oldID)
	resp.MemberID, resp.Generation = id, g.generation
	resp.Protocol, resp.ProtocolType = kmsg.StringPtr(g.protocol), kmsg.StringPtr(g.protocolType)
	resp.LeaderID = leader
	if req.Version >= 9 && g.leader == id {
		// KIP-814: the leader learns the members without assigning.
		resp.LeaderID, resp.SkipAssignment = id, true
		for _, oid := range sortedMemberIDs(g) {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.InstanceID = oid, g.members[oid].instanceID
			jm.ProtocolMetadata = metadataFor(g.members[oid], g.protocol)
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

// syncAnswer is what a SyncGroup parked for the leader's assignments
// gets: its assignment, nil to rejoin (the group rebalances), or an error
// code (FENCED_INSTANCE_ID: its static member's instance restarted under
// another member id, as Kafka's replaceStaticMember answers it).
type syncAnswer struct {
	assignment []byte
	code       int16
}

// sync answers SyncGroup: the leader's call distributes the assignments;
// followers park until it comes.
func (c *coordinator) sync(ctx context.Context, req *kmsg.SyncGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	c.mu.Lock()
	g := c.groups[req.Group]
	var m *member
	if g != nil {
		m = g.members[req.MemberID]
	}
	switch {
	case fencedInstance(g, req.InstanceID, req.MemberID):
		c.mu.Unlock()
		resp.ErrorCode = kerr.FencedInstanceID.Code
		return resp
	case m == nil:
		c.mu.Unlock()
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	case req.Generation != g.generation:
		c.mu.Unlock()
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp
	case g.state == groupPreparing:
		c.mu.Unlock()
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	}
	m.lastSeen = time.Now()
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	if g.state == groupStable {
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	// Completing the rebalance.
	if req.MemberID == g.leader {
		for _, mm := range g.members {
			mm.assignment = []byte{}
		}
		for _, a := range req.GroupAssignment {
			if mm := g.members[a.MemberID]; mm != nil {
				mm.assignment = a.MemberAssignment
			}
		}
		// The group's metadata is durable before anyone gets an
		// assignment, as Kafka's SyncGroup does; when it cannot be
		// written the members rejoin.
		if err := c.storeLocked(g); err != nil {
			c.log.Error("group metadata not written", "group", g.name, "generation", g.generation, "err", err)
			for _, mm := range g.members {
				mm.assignment = nil
			}
			c.rebalanceLocked(g)
			c.mu.Unlock()
			resp.ErrorCode = groupWriteCode(err)
			return resp
		}
		g.state = groupStable
		for _, mm := range g.members {
			if mm.syncCh != nil {
				mm.syncCh <- syncAnswer{assignment: mm.assignment}
				mm.syncCh = nil
			}
		}
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	ch := make(chan syncAnswer, 1)
	m.syncCh = ch
	c.mu.Unlock()
	select {
	case a := <-ch:
		switch {
		case a.code != 0:
			resp.ErrorCode = a.code
		case a.assignment == nil:
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
		resp.MemberAssignment = a.assignment
	case <-ctx.Done():
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	return resp
}

// heartbeat answers Heartbeat: it keeps the session alive and tells the
// member when to rejoin (REBALANCE_IN_PROGRESS).
func (c *coordinator) heartbeat(req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	if fencedInstance(c.groups[req.Group], req.InstanceID, req.MemberID) {
		resp.ErrorCode = kerr.FencedInstanceID.Code
		return resp
	}
	resp.ErrorCode = c.checkMemberLocked(req.Group, req.Generation, req.MemberID)
	return resp
}

// checkMemberLocked validates a member's generation and refreshes its
// session. REQUIRES: c.mu held.
func (c *coordinator) checkMemberLocked(groupName string, generation int32, memberID string) int16 {
	g := c.groups[groupName]
	if g == nil || g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	g.members[memberID].lastSeen = time.Now()
	switch {
	case g.state == groupPreparing:
		return kerr.RebalanceInProgress.Code
	case generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// checkCommit validates an OffsetCommit's group membership: a commit with
// generation -1 (a consumer that assigns partitions itself) is accepted
// only while the group has no members, as Kafka does; a static member's
// replaced member id (instanceID: the request's group.instance.id, nil
// without) gets FENCED_INSTANCE_ID.
func (c *coordinator) checkCommit(groupName string, generation int32, memberID string, instanceID *string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fencedInstance(c.groups[groupName], instanceID, memberID) {
		return kerr.FencedInstanceID.Code
	}
	if generation < 0 {
		if g := c.groups[groupName]; g != nil && len(g.members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	code := c.checkMemberLocked(groupName, generation, memberID)
	if code == kerr.RebalanceInProgress.Code {
		// Kafka accepts commits of the previous generation's members
		// during a rebalance only from the same generation.
		if g := c.groups[groupName]; g.generation == generation {
			return 0
		}
	}
	return code
}

// leave answers LeaveGroup (one member before v3, a list from v3) and
// rebalances the rest of the group.
func (c *coordinator) leave(req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := []string{req.MemberID}
	if req.Version >= 3 {
		ids = ids[:0]
		for _, m := range req.Members {
			ids = append(ids, m.MemberID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	left := false
	for i, id := range ids {
		code := int16(0)
		target := id
		if req.Version >= 3 && req.Members[i].InstanceID != nil {
			// A static member leaves by its instance id, with its
			// member id or without one (an admin's removal).
			if sm := staticMember(g, *req.Members[i].InstanceID); sm != nil && id == "" {
				target = sm.id
			} else if sm != nil && id != sm.id {
				code = kerr.FencedInstanceID.Code
			}
		}
		switch {
		case code != 0:
		case g == nil || g.members[target] == nil:
			code = kerr.UnknownMemberID.Code
		default:
			if m := g.members[target]; m.joinCh != nil {
				close(m.joinCh)
			}
			delete(g.members, target)
			left = true
		}
		if req.Version >= 3 {
			lm := kmsg.NewLeaveGroupResponseMember()
			lm.MemberID = id
			lm.InstanceID = req.Members[i].InstanceID
			lm.ErrorCode = code
			resp.Members = append(resp.Members, lm)
		} else {
			resp.ErrorCode = code
		}
	}
	if left {
		c.rebalanceLocked(g)
	}
	return resp
}
