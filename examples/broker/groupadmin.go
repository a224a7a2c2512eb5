package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// The group coordinator's admin side: DescribeGroups, ListGroups,
// DeleteGroups, and the expiry of an empty group's committed offsets
// (offsets.retention.minutes), as Kafka 3.9's classic group coordinator
// does them.

const (
	// defaultOffsetsRetention is offsets.retention.minutes' default
	// (Kafka 2.0+, KIP-186): 7 days.
	defaultOffsetsRetention = 7 * 24 * time.Hour
	// defaultOffsetsRetentionCheck is offsets.retention.check.interval.ms'
	// default: 10 minutes.
	defaultOffsetsRetentionCheck = 10 * time.Minute
	// classicGroupType is the only group type (ListGroups v5) the broker
	// has: Kafka's classic protocol, no KIP-848 groups.
	classicGroupType = "classic"
	// deadState is what DescribeGroups says of a group the coordinator
	// does not know, as Kafka answers before DescribeGroups v6.
	deadState = "Dead"
)

// String is the state's name as Kafka's DescribeGroups and ListGroups
// name it.
func (s groupState) String() string {
	switch s {
	case groupPreparing:
		return "PreparingRebalance"
	case groupCompleting:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	}
	return "Empty"
}

// describe answers DescribeGroups: each group's state, protocol type, and
// members (client id, host; with the subscription and assignment when the
// group is Stable, as Kafka's group summary). A group with committed
// offsets only (a consumer that assigns partitions itself) is Empty with
// no protocol type; an unknown one is Dead.
func (c *coordinator) describe(req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = name
		d.AuthorizedOperations = -2147483648 // not asked for, or no ACLs
		g := c.groups[name]
		switch {
		case name == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
			d.State = deadState
		case g != nil:
			d.State = g.state.String()
			d.ProtocolType = g.protocolType
			if g.state == groupStable {
				d.Protocol = g.protocol
			}
			for _, id := range sortedMemberIDs(g) {
				m := g.members[id]
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = id, m.instanceID, m.clientID, m.clientHost
				dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
				if g.state == groupStable {
					if md := metadataFor(m, g.protocol); md != nil {
						dm.ProtocolMetadata = md
					}
					if m.assignment != nil {
						dm.MemberAssignment = m.assignment
					}
				}
				d.Members = append(d.Members, dm)
			}
		case c.records != nil && c.records.hasGroupOffsets(name):
			d.State = groupEmpty.String()
		default:
			d.State = deadState
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// list answers ListGroups: every group the coordinator knows, and every
// group with committed offsets only (protocol type "", Empty), with its
// state (v4+) and type (v5+), kept by the request's states filter (v4+,
// case-insensitive, as Kafka matches it) and types filter (v5+).
func (c *coordinator) list(req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	type entry struct{ protocolType, state string }
	groups := make(map[string]entry)
	if c.records != nil {
		for _, name := range c.records.offsetGroups() {
			groups[name] = entry{"", groupEmpty.String()}
		}
	}
	c.mu.Lock()
	for name, g := range c.groups {
		groups[name] = entry{g.protocolType, g.state.String()}
	}
	c.mu.Unlock()
	keep := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e := groups[name]
		if (req.Version >= 4 && !keep(req.StatesFilter, e.state)) || (req.Version >= 5 && !keep(req.TypesFilter, classicGroupType)) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, e.protocolType, e.state, classicGroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// deleteGroups answers DeleteGroups as Kafka's coordinator does: a group
// with members is NON_EMPTY_GROUP and stays; an unknown one (no members,
// no offsets) GROUP_ID_NOT_FOUND; an empty one is deleted: a tombstone for
// each of its committed offsets and for its group metadata record, then
// it is forgotten.
func (c *coordinator) deleteGroups(req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range req.Groups {
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group = name
		g := c.groups[name]
		hasOffsets := c.records != nil && c.records.hasGroupOffsets(name)
		switch {
		case name == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
		case g != nil && g.state != groupEmpty:
			d.ErrorCode = kerr.NonEmptyGroup.Code
		case g == nil && !hasOffsets:
			d.ErrorCode = kerr.GroupIDNotFound.Code
		default:
			if err := c.removeGroupLocked(name, nil); err != nil {
				d.ErrorCode = groupWriteCode(err)
				c.log.Error("group not deleted", "group", name, "err", err)
			} else {
				c.log.Info("group deleted", "group", name)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// removeGroupLocked tombstones the group's committed offsets (those keep
// selects, all when keep is nil) and, when none is left, its group
// metadata record, and then forgets the group.
// REQUIRES: c.mu held.
func (c *coordinator) removeGroupLocked(name string, keep func(offsetKey, int64) bool) error {
	if c.records == nil {
		delete(c.groups, name)
		return nil
	}
	left, err := c.records.deleteOffsets(name, keep)
	if err != nil || left {
		return err
	}
	if err := c.records.storeGroup(name, nil, c.valueVersion); err != nil {
		return err
	}
	delete(c.groups, name)
	return nil
}

// expireOffsets tombstones the committed offsets that retention expired,
// as Kafka's coordinator does every offsets.retention.check.interval.ms:
// those of an Empty group once retention passed since it became Empty
// (since their commit when that time is unknown: a record written before
// value version 2), and those of a group the coordinator has no members
// for (a consumer that assigns its partitions itself) once retention
// passed since their commit. Offsets pending in an open transaction stay.
// A group left empty without offsets is deleted (group metadata
// tombstoned). Negative retention: never.
func (c *coordinator) expireOffsets(now time.Time) {
	if c.records == nil || c.retention < 0 {
		return
	}
	cutoff := now.Add(-c.retention).UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.records.offsetGroups() {
		g := c.groups[name]
		var keep func(offsetKey, int64) bool
		switch {
		case g == nil || (g.state == groupEmpty && g.emptySince.IsZero()):
			keep = func(_ offsetKey, committedAt int64) bool { return committedAt > cutoff }
		case g.state == groupEmpty:
			if g.emptySince.UnixMilli() > cutoff {
				continue
			}
		case g.state == groupStable && g.protocolType == consumerProtocolType:
			// KIP-211 (Kafka 2.1+): a Stable consumer group keeps the
			// offsets of the topics its members subscribe to; those of
			// other topics expire retention after their commit.
			subscribed, ok := g.subscribedTopics()
			if !ok {
				continue
			}
			keep = func(k offsetKey, committedAt int64) bool { return subscribed[k.topic] || committedAt > cutoff }
			if _, err := c.records.deleteOffsets(name, keep); err != nil {
				c.logUndeleted(name, err)
			}
			continue
		default:
			continue // a rebalance in progress: its offsets stay
		}
		if err := c.removeGroupLocked(name, keep); err != nil {
			c.logUndeleted(name, err)
			continue
		}
		if c.groups[name] == nil {
			c.log.Info("group removed (empty, its offsets expired)", "group", name)
		}
	}
}

// logUndeleted logs expired offsets a write failed to delete: at debug
// level when another node coordinates the group (cluster mode: it expires
// them).
func (c *coordinator) logUndeleted(group string, err error) {
	level := slog.LevelError
	if groupWriteCode(err) == kerr.NotCoordinator.Code {
		level = slog.LevelDebug
	}
	c.log.Log(context.Background(), level, "expired offsets not deleted", "group", group, "err", err)
}

// consumerProtocolType is the protocol type of Kafka's consumer groups,
// whose member metadata is ConsumerProtocol's subscription.
const consumerProtocolType = "consumer"

// subscribedTopics returns the topics the group's members subscribe to,
// decoded from their ConsumerProtocol subscriptions for the group's
// protocol; ok is false when one does not decode (Kafka then expires
// nothing of a Stable group).
func (g *group) subscribedTopics() (topics map[string]bool, ok bool) {
	topics = make(map[string]bool)
	for _, m := range g.members {
		var meta []byte
		found := false
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				meta, found = p.Metadata, true
				break
			}
		}
		if !found {
			return nil, false
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return nil, false
		}
		for _, t := range sub.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// dropTopicOffsets tombstones every group's committed offsets of deleted
// topics, as Kafka's coordinator drops the offsets of deleted partitions;
// an Empty group (or one with offsets only) left without offsets is
// deleted with its group metadata.
func (c *coordinator) dropTopicOffsets(topics []string) {
	if c.records == nil {
		return
	}
	keep := func(k offsetKey, _ int64) bool { return !slices.Contains(topics, k.topic) }
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.records.offsetGroups() {
		var err error
		if g := c.groups[name]; g == nil || g.state == groupEmpty {
			err = c.removeGroupLocked(name, keep)
		} else {
			_, err = c.records.deleteOffsets(name, keep)
		}
		if err != nil {
			c.log.Error("offsets of deleted topics not deleted", "group", name, "topics", topics, "err", err)
		}
	}
}

// offsetGroups returns the groups with committed offsets.
func (o *offsetStore) offsetGroups() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := make(map[string]bool)
	var out []string
	for k := range o.mu.m {
		if !seen[k.group] {
			seen[k.group] = true
			out = append(out, k.group)
		}
	}
	return out
}

// deleteOffsets durably writes a tombstone for each of the group's
// committed offsets that keep does not keep (every one when keep is nil;
// keep gets the offset's commit time in milliseconds), in one batch,
// leaving out those pending in an open transaction, and applies them. It
// reports whether the group has offsets left.
func (o *offsetStore) deleteOffsets(group string, keep func(k offsetKey, committedAt int64) bool) (left bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	pending := func(k offsetKey) bool {
		for _, pend := range o.mu.pending {
			if _, ok := pend[k]; ok {
				return true
			}
		}
		return false
	}
	var gone []offsetKey
	for k := range o.mu.m {
		if k.group != group {
			continue
		}
		if pending(k) || (keep != nil && keep(k, o.mu.commitTime[k])) {
			left = true
			continue
		}
		gone = append(gone, k)
	}
	for _, pend := range o.mu.pending {
		for k := range pend {
			if k.group == group {
				left = true
			}
		}
	}
	if len(gone) == 0 {
		return left, nil
	}
	now := time.Now().UnixMilli()
	o.mu.bld.Reset(batch.BuilderOptions{})
	for _, k := range gone {
		if err := o.mu.bld.Add(batch.Record{Key: encodeOffsetKey(nil, k), Timestamp: now}); err != nil {
			return true, err
		}
	}
	b, err := o.mu.bld.Build()
	if err != nil {
		return true, err
	}
	if err := o.w.appendBatch(b); err != nil {
		return true, err
	}
	for _, k := range gone {
		delete(o.mu.m, k)
		delete(o.mu.commitTime, k)
		o.mu.seq++
		o.mu.at[k] = o.mu.seq
	}
	return left, nil
}
