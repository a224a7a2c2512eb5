package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/index/vfs"
)

// Membership changes (KIP-853's AddRaftVoter and RemoveRaftVoter, API keys
// 80 and 81): each partition is its own raft group, so adding or removing
// a node is one raft configuration change (ConfChangeV2, one voter) per
// partition, proposed by the node the request reached to each partition's
// leader and answered once this node applied it in every partition. The
// change's Context carries the node's addresses ("id=kafka/raft"), so
// every node learns how to reach a node it did not start with; the nodes
// file keeps what each node learnt.

// membersFile, under raftStateDir, holds the nodes this node knows and
// the membership new partitions start with:
//
//	0                      version
//	<id>=<kafka>/<raft> member
//	<id>=<kafka>/<raft> removed
const membersFile = "nodes"

// membersFileVersion is the first line of membersFile.
const membersFileVersion = 0

// errMembersFile is wrapped by every error about a damaged nodes file.
var errMembersFile = errors.New("broker: invalid nodes file")

// membersPath is the nodes file of a data directory.
func membersPath(dataDir string) string { return dataDir + "/" + raftStateDir + "/" + membersFile }

// loadMembers sets the known nodes and the membership: the nodes file's
// when there is one (-cluster adds the addresses of nodes it does not
// name), else -cluster's nodes, all members but this node when it joins.
func (c *cluster) loadMembers(join bool) error {
	c.known = make(map[uint64]clusterNode)
	c.members = make(map[uint64]bool)
	path := membersPath(c.dataDir)
	b, err := c.readMembersFile(path)
	if err != nil {
		return err
	}
	if b == nil {
		for _, n := range c.nodes {
			c.known[n.id] = n
			c.members[n.id] = !join || n.id != c.self
		}
		return c.saveMembersLocked()
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(membersFileVersion) || lines[len(lines)-1] != "" {
		return fmt.Errorf("%w: %s: want version %d and one line per node", errMembersFile, path, membersFileVersion)
	}
	for i, line := range lines[1 : len(lines)-1] {
		spec, state, ok := strings.Cut(line, " ")
		ns, err := parseCluster(spec)
		if !ok || err != nil || len(ns) != 1 || (state != "member" && state != "removed") {
			return fmt.Errorf("%w: %s: line %d %q is not \"id=kafka/raft member|removed\" (%v)", errMembersFile, path, i+2, line, err)
		}
		c.known[ns[0].id] = ns[0]
		c.members[ns[0].id] = state == "member"
	}
	for _, n := range c.nodes {
		c.known[n.id] = n // -cluster's addresses win
	}
	return nil
}

// readMembersFile returns the nodes file's bytes, nil when it does not
// exist.
func (c *cluster) readMembersFile(path string) ([]byte, error) {
	f, err := c.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		return nil, fmt.Errorf("%w: %s: longer than %d bytes", errMembersFile, path, len(buf)-1)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return buf[:n], nil
}

// saveMembersLocked writes the nodes file atomically.
// REQUIRES: c.mu held, or no other goroutine yet.
func (c *cluster) saveMembersLocked() error {
	ids := make([]uint64, 0, len(c.known))
	for id := range c.known {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := fmt.Appendf(nil, "%d\n", membersFileVersion)
	for _, id := range ids {
		n := c.known[id]
		state := "removed"
		if c.members[id] {
			state = "member"
		}
		b = fmt.Appendf(b, "%d=%s/%s %s\n", n.id, n.kafkaAddr, n.raftAddr, state)
	}
	if err := vfs.WriteFileAtomic(c.fs, membersPath(c.dataDir), b); err != nil {
		return fmt.Errorf("write %s: %w", membersPath(c.dataDir), err)
	}
	return nil
}

// bootConf is the membership a partition this node has no raft state for
// starts with: the members as voters, and this node as a learner when it
// is not one (it joins: it copies the log, and never campaigns, until a
// configuration change in that log makes it a voter).
func (c *cluster) bootConf() *pb.ConfState {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := &pb.ConfState{}
	for id, m := range c.members {
		if m {
			cs.Voters = append(cs.Voters, id)
		}
	}
	slices.Sort(cs.Voters)
	if !c.members[c.self] {
		cs.Learners = []uint64{c.self}
	}
	return cs
}

// brokers returns the nodes Metadata names: the members, every node some
// partition here still counts as a voter or learner, and this node.
func (c *cluster) brokers() []clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[uint64]bool{c.self: true}
	for id, m := range c.members {
		want[id] = want[id] || m
	}
	for _, r := range c.replicas {
		cs := r.conf.Load()
		for _, id := range cs.GetVoters() {
			want[id] = true
		}
		for _, id := range cs.GetLearners() {
			want[id] = true
		}
	}
	var out []clusterNode
	for id, w := range want {
		if n, ok := c.known[id]; ok && w {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b clusterNode) int { return int(a.id) - int(b.id) })
	return out
}

// knownNode returns the addresses of node id: -cluster's, or those a
// membership change named (learn).
func (c *cluster) knownNode(id uint64) (clusterNode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.known[id]
	return n, ok
}

// learn records the addresses of the node a membership change adds (its
// Context) and makes it reachable.
func (c *cluster) learn(cc *pb.ConfChangeV2) {
	if len(cc.GetContext()) == 0 {
		return
	}
	ns, err := parseCluster(string(cc.GetContext()))
	if err != nil || len(ns) != 1 {
		c.log.Warn("membership change with unreadable addresses", "context", string(cc.GetContext()), "err", err)
		return
	}
	n := ns[0]
	c.mu.Lock()
	old, ok := c.known[n.id]
	if !ok || old != n {
		c.known[n.id] = n
		if err := c.saveMembersLocked(); err != nil {
			c.log.Error("nodes file", "err", err)
		}
	}
	c.mu.Unlock()
	c.tr.addPeer(n.id, n.raftAddr)
}

// membershipApplied updates the membership new partitions start with
// after a partition applied a change.
func (c *cluster) membershipApplied(cc *pb.ConfChangeV2) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, ch := range cc.GetChanges() {
		id := ch.GetNodeId()
		switch ch.GetType() {
		case pb.ConfChangeAddNode:
			changed = changed || !c.members[id]
			c.members[id] = true
		case pb.ConfChangeRemoveNode:
			changed = changed || c.members[id]
			c.members[id] = false
		}
	}
	if changed {
		if err := c.saveMembersLocked(); err != nil {
			c.log.Error("nodes file", "err", err)
		}
	}
}

// changeMembership adds (add) or removes node n as a voter of every
// replicated partition: it proposes the change to each partition whose
// replica on this node has not applied it yet (the replica forwards it to
// the leader), again every 200 ms, until all have applied it or the
// timeout passes. It returns a Kafka error code and message.
func (c *cluster) changeMembership(ctx context.Context, add bool, n clusterNode, timeout time.Duration) (int16, string) {
	ch := &pb.ConfChangeSingle{NodeId: new(n.id)}
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{ch}}
	if add {
		ch.Type = pb.ConfChangeAddNode.Enum()
		cc.Context = fmt.Appendf(nil, "%d=%s/%s", n.id, n.kafkaAddr, n.raftAddr)
		c.learn(cc)
	} else {
		ch.Type = pb.ConfChangeRemoveNode.Enum()
	}
	done := func(r *replica) bool {
		cs := r.conf.Load()
		if add {
			return slices.Contains(cs.GetVoters(), n.id)
		}
		return !slices.Contains(cs.GetVoters(), n.id) && !slices.Contains(cs.GetLearners(), n.id)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		rs := make([]*replica, 0, len(c.replicas))
		for _, r := range c.replicas {
			rs = append(rs, r)
		}
		c.mu.Unlock()
		var pending []string
		for _, r := range rs {
			if done(r) {
				continue
			}
			if !add && slices.Equal(r.conf.Load().GetVoters(), []uint64{n.id}) {
				return kerr.InvalidRequest.Code, fmt.Sprintf("node %d is the only voter of %s-%d", n.id, r.topic, r.partition)
			}
			pending = append(pending, fmt.Sprintf("%s-%d", r.topic, r.partition))
			if r.failed.Load() {
				continue
			}
			select {
			case r.confc <- cc:
			default: // the replica is busy: next round
			}
		}
		if len(pending) == 0 {
			c.membershipApplied(cc) // also when there is no partition yet
			return 0, ""
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code, "broker shutting down"
		case <-deadline.C:
			slices.Sort(pending)
			return kerr.RequestTimedOut.Code, fmt.Sprintf("not applied within %v in %s", timeout, strings.Join(pending, ", "))
		}
	}
}

// voterListeners returns the node an AddRaftVoter request names: its two
// listeners "kafka" and "raft" (any case) give its addresses.
func voterListeners(id int32, ls []kmsg.AddRaftVoterRequestListener) (clusterNode, error) {
	n := clusterNode{id: uint64(id)}
	if id <= 0 || id >= producerIDStride {
		return n, fmt.Errorf("voter id %d is not in [1, %d]", id, producerIDStride-1)
	}
	for _, l := range ls {
		addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		switch strings.ToLower(l.Name) {
		case "kafka":
			n.kafkaAddr = addr
		case "raft":
			n.raftAddr = addr
		}
	}
	if n.kafkaAddr == "" || n.raftAddr == "" {
		return n, errors.New("the request must name two listeners, \"kafka\" and \"raft\"")
	}
	return n, nil
}

// membershipTimeout is how long an admin request waits when it names no
// timeout (RemoveRaftVoter has none): AddRaftVoter's default.
const membershipTimeout = 15 * time.Second

// addRaftVoter handles AddRaftVoter: node VoterID, at the addresses of
// its "kafka" and "raft" listeners, becomes a voter of every replicated
// partition. The answer comes once this node applied the change in every
// partition (so it is committed), whatever AckWhenCommitted says.
func (s *server) addRaftVoter(ctx context.Context, req *kmsg.AddRaftVoterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	if s.cluster == nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("not a cluster: start the broker with -node and -cluster")
		return resp
	}
	n, err := voterListeners(req.VoterID, req.Listeners)
	if err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp
	}
	timeout := membershipTimeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	code, msg := s.cluster.changeMembership(ctx, true, n, timeout)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// removeRaftVoter handles RemoveRaftVoter: node VoterID stops being a
// voter of every replicated partition.
func (s *server) removeRaftVoter(ctx context.Context, req *kmsg.RemoveRaftVoterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if s.cluster == nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("not a cluster: start the broker with -node and -cluster")
		return resp
	}
	if req.VoterID <= 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("voter id %d is not a node id", req.VoterID))
		return resp
	}
	code, msg := s.cluster.changeMembership(ctx, false, clusterNode{id: uint64(req.VoterID)}, membershipTimeout)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// runAdmin is the broker command's client mode (-add-voter, -remove-voter):
// it sends AddRaftVoter or RemoveRaftVoter to the node at bootstrap and
// reports the answer.
func runAdmin(ctx context.Context, bootstrap, addVoter string, removeVoter uint64, out io.Writer) error {
	var req kmsg.Request
	var what string
	switch {
	case addVoter != "":
		ns, err := parseCluster(addVoter)
		if err != nil || len(ns) != 1 {
			return fmt.Errorf("-add-voter %q: want one id=kafka-address/raft-address (%v)", addVoter, err)
		}
		n := ns[0]
		r := kmsg.NewPtrAddRaftVoterRequest()
		r.ClusterID = kmsg.StringPtr(clusterID)
		r.VoterID = int32(n.id)
		r.TimeoutMillis = int32(membershipTimeout / time.Millisecond)
		r.AckWhenCommitted = true
		for _, l := range []struct{ name, addr string }{{"kafka", n.kafkaAddr}, {"raft", n.raftAddr}} {
			host, port, _ := net.SplitHostPort(l.addr)
			p, _ := strconv.ParseUint(port, 10, 16)
			rl := kmsg.NewAddRaftVoterRequestListener()
			rl.Name, rl.Host, rl.Port = l.name, host, uint16(p)
			r.Listeners = append(r.Listeners, rl)
		}
		req, what = r, fmt.Sprintf("node %d added as a voter of every partition", n.id)
	default:
		r := kmsg.NewPtrRemoveRaftVoterRequest()
		r.ClusterID = kmsg.StringPtr(clusterID)
		r.VoterID = int32(removeVoter)
		req, what = r, fmt.Sprintf("node %d removed from every partition", removeVoter)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, membershipTimeout+10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return err
	}
	var code int16
	var msg *string
	switch r := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	case *kmsg.RemoveRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if msg != nil {
			return fmt.Errorf("%w: %s", err, *msg)
		}
		return err
	}
	_, err = fmt.Fprintln(out, what)
	return err
}
