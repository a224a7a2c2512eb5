package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// Kafka's group metadata records in __consumer_offsets: key version 2
// (GroupMetadataKey: the group), value GroupMetadataValue versions 0-3.
// Kafka writes one on every completed rebalance (the leader's SyncGroup
// brings the assignments) and when the group becomes empty, and a
// tombstone (null value) when the group is deleted, or is empty with no
// committed offsets left. Operators' tools such as Burrow read the members'
// client ids, hosts and assignments from them; the coordinator reloads
// its groups from them on start and when it takes over the partition.

const (
	// groupKeyVersion is GroupMetadataKey's version.
	groupKeyVersion = 2
	// defaultGroupValueVersion is the GroupMetadataValue version Kafka 3.9
	// writes (MetadataVersion.groupMetadataValueVersion from 2.3 on: the
	// highest non-flexible version).
	defaultGroupValueVersion = 3
	// maxGroupValueVersion is the highest value version written or read.
	maxGroupValueVersion = 3
)

// errGroupValueVersion is a configured group metadata value version the
// broker does not write.
var errGroupValueVersion = errors.New("broker: unsupported group metadata value version")

// errGroupRecord is a group metadata record that does not decode.
var errGroupRecord = errors.New("broker: malformed group metadata record")

// groupRecord is one GroupMetadataValue.
type groupRecord struct {
	protocolType string
	generation   int32
	protocol     *string // nil: no protocol (an empty group)
	leader       *string // nil: no leader (an empty group)
	stateTime    int64   // current_state_timestamp (v2+), -1: unknown
	members      []memberRecord
}

// memberRecord is one member of a GroupMetadataValue.
type memberRecord struct {
	memberID         string
	instanceID       *string // v3+
	clientID         string
	clientHost       string
	rebalanceTimeout int32 // v1+ (v0: the session timeout)
	sessionTimeout   int32
	subscription     []byte
	assignment       []byte
}

// encodeGroupKey appends a group metadata key (version 2).
func encodeGroupKey(dst []byte, group string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, groupKeyVersion)
	return appendInt16String(dst, group)
}

// appendNullableString appends a Kafka nullable string (length -1: null).
func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	return appendInt16String(dst, *s)
}

// appendBytes appends Kafka bytes: int32 length, bytes.
func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// encodeGroupValue appends g as GroupMetadataValue at version v (0-3):
// v1 adds each member's rebalance timeout, v2 the current state timestamp,
// v3 each member's group instance id.
func encodeGroupValue(dst []byte, g groupRecord, v int16) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(v))
	dst = appendInt16String(dst, g.protocolType)
	dst = binary.BigEndian.AppendUint32(dst, uint32(g.generation))
	dst = appendNullableString(dst, g.protocol)
	dst = appendNullableString(dst, g.leader)
	if v >= 2 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.stateTime))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(g.members)))
	for _, m := range g.members {
		dst = appendInt16String(dst, m.memberID)
		if v >= 3 {
			dst = appendNullableString(dst, m.instanceID)
		}
		dst = appendInt16String(dst, m.clientID)
		dst = appendInt16String(dst, m.clientHost)
		if v >= 1 {
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.rebalanceTimeout))
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.sessionTimeout))
		dst = appendBytes(dst, m.subscription)
		dst = appendBytes(dst, m.assignment)
	}
	return dst
}

// nullableString reads a Kafka nullable string.
func (r *reader) nullableString() *string {
	n := r.int16()
	if n == -1 {
		return nil
	}
	s := string(r.take(int(n)))
	return &s
}

// bytes reads Kafka bytes (a null is read as empty).
func (r *reader) bytes() []byte {
	n := r.int32()
	if n == -1 {
		return []byte{}
	}
	return append([]byte{}, r.take(int(n))...)
}

// decodeGroupKey reads a group metadata key: ok is false for other keys.
func decodeGroupKey(b []byte) (string, bool) {
	r := reader{b: b}
	if r.int16() != groupKeyVersion {
		return "", false
	}
	g := r.string()
	return g, !r.bad && len(r.b) == 0
}

// decodeGroupValue reads GroupMetadataValue versions 0-3.
func decodeGroupValue(b []byte) (groupRecord, error) {
	r := reader{b: b}
	v := r.int16()
	if r.bad || v < 0 || v > maxGroupValueVersion {
		return groupRecord{}, fmt.Errorf("%w: value version %d", errGroupRecord, v)
	}
	g := groupRecord{stateTime: -1}
	g.protocolType = r.string()
	g.generation = r.int32()
	g.protocol = r.nullableString()
	g.leader = r.nullableString()
	if v >= 2 {
		g.stateTime = r.int64()
	}
	n := r.int32()
	if r.bad || n < 0 || int(n) > len(r.b) {
		return groupRecord{}, fmt.Errorf("%w: %d members", errGroupRecord, n)
	}
	for range n {
		var m memberRecord
		m.memberID = r.string()
		if v >= 3 {
			m.instanceID = r.nullableString()
		}
		m.clientID = r.string()
		m.clientHost = r.string()
		if v >= 1 {
			m.rebalanceTimeout = r.int32()
		}
		m.sessionTimeout = r.int32()
		if v == 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.subscription = r.bytes()
		m.assignment = r.bytes()
		g.members = append(g.members, m)
	}
	if r.bad {
		return groupRecord{}, fmt.Errorf("%w: truncated", errGroupRecord)
	}
	return g, nil
}

// applyGroupLocked applies a record whose key is a group metadata key: the
// latest value for a group wins, a null value deletes it. ok is false when
// key is not a group metadata key. A value that does not decode is skipped
// (the latest good one stays), as a record of a kind this broker does not
// know.
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) applyGroupLocked(key, value []byte) (ok bool) {
	group, ok := decodeGroupKey(key)
	if !ok {
		return false
	}
	if value == nil {
		delete(o.mu.groups, group)
		return true
	}
	if g, err := decodeGroupValue(value); err == nil {
		o.mu.groups[group] = g
	}
	return true
}

// groupRecordsLocked returns the groups the log holds (the latest record
// of each, tombstoned ones left out).
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) groupRecordsLocked() map[string]groupRecord {
	out := make(map[string]groupRecord, len(o.mu.groups))
	for name, g := range o.mu.groups {
		out[name] = g
	}
	return out
}

// storeGroup durably writes a group metadata record (nil g: a tombstone)
// at value version v, in one batch, and applies it.
func (o *offsetStore) storeGroup(name string, g *groupRecord, v int16) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now().UnixMilli()
	rec := batch.Record{Key: encodeGroupKey(nil, name), Timestamp: now}
	if g != nil {
		rec.Value = encodeGroupValue(nil, *g, v)
	}
	o.mu.bld.Reset(batch.BuilderOptions{})
	if err := o.mu.bld.Add(rec); err != nil {
		return err
	}
	b, err := o.mu.bld.Build()
	if err != nil {
		return err
	}
	if err := o.w.appendBatch(b); err != nil {
		return err
	}
	if g == nil {
		delete(o.mu.groups, name)
	} else {
		o.mu.groups[name] = *g
	}
	return nil
}

// hasGroupOffsets reports whether the group has committed offsets, or
// offsets pending in an open transaction.
func (o *offsetStore) hasGroupOffsets(group string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.mu.m {
		if k.group == group {
			return true
		}
	}
	for _, pend := range o.mu.pending {
		for k := range pend {
			if k.group == group {
				return true
			}
		}
	}
	return false
}

// groupWriteCode maps a failed group metadata write to the error code
// Kafka's coordinator answers with (GroupMetadataManager.storeGroup): the
// partition's leadership moved: NOT_COORDINATOR; a write that timed out:
// REBALANCE_IN_PROGRESS (the members rejoin); anything else:
// COORDINATOR_NOT_AVAILABLE.
func groupWriteCode(err error) int16 {
	var ce *codeError
	switch {
	case errors.Is(err, errNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.As(err, &ce) && ce.code == kerr.NotLeaderForPartition.Code:
		return kerr.NotCoordinator.Code
	case errors.As(err, &ce) && ce.code == kerr.RequestTimedOut.Code:
		return kerr.RebalanceInProgress.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// recordLocked is g's GroupMetadataValue now: every member with its
// subscription to the group's protocol and its assignment.
// REQUIRES: c.mu held.
func (c *coordinator) recordLocked(g *group) groupRecord {
	rec := groupRecord{protocolType: g.protocolType, generation: g.generation, stateTime: time.Now().UnixMilli()}
	if g.state != groupEmpty {
		rec.protocol = kmsg.StringPtr(g.protocol)
		rec.leader = kmsg.StringPtr(g.leader)
	}
	for _, id := range sortedMemberIDs(g) {
		m := g.members[id]
		sub := metadataFor(m, g.protocol)
		if sub == nil {
			sub = []byte{}
		}
		a := m.assignment
		if a == nil {
			a = []byte{}
		}
		rec.members = append(rec.members, memberRecord{
			memberID:         id,
			instanceID:       m.instanceID,
			clientID:         m.clientID,
			clientHost:       m.clientHost,
			rebalanceTimeout: int32(m.rebalanceTimeout / time.Millisecond),
			sessionTimeout:   int32(m.sessionTimeout / time.Millisecond),
			subscription:     sub,
			assignment:       a,
		})
	}
	return rec
}

// storeLocked writes g's record. REQUIRES: c.mu held.
func (c *coordinator) storeLocked(g *group) error {
	if c.records == nil {
		return nil
	}
	rec := c.recordLocked(g)
	return c.records.storeGroup(g.name, &rec, c.valueVersion)
}

// emptiedLocked makes g Empty after its last member left, as Kafka's
// rebalance does with no member left: a new generation without protocol
// or leader, written to the log. A group without committed offsets is then
// gone: its record is tombstoned and it is forgotten.
// REQUIRES: c.mu held.
func (c *coordinator) emptiedLocked(g *group) {
	g.state = groupEmpty
	g.emptySince = time.Now()
	g.leader, g.protocol = "", ""
	if c.records == nil {
		return
	}
	g.generation++
	if err := c.storeLocked(g); err != nil {
		// Another node coordinates now (cluster mode): it has the
		// group from the log.
		level := slog.LevelError
		if groupWriteCode(err) == kerr.NotCoordinator.Code {
			level = slog.LevelDebug
		}
		c.log.Log(context.Background(), level, "group metadata not written", "group", g.name, "err", err)
		return
	}
	if c.records.hasGroupOffsets(g.name) {
		return
	}
	if err := c.records.storeGroup(g.name, nil, c.valueVersion); err != nil {
		c.log.Error("group metadata tombstone not written", "group", g.name, "err", err)
		return
	}
	delete(c.groups, g.name)
	c.log.Info("group removed (empty, no committed offsets)", "group", g.name)
}

// loadLocked replaces every group with the ones the log holds (start, or a
// coordinator taking over the partition): a group with members is Stable
// in its generation, each member's session starting now (a member that
// does not heartbeat expires as after a rebalance); one without is Empty.
// Requests parked on the groups it replaces are told to rejoin.
// REQUIRES: c.mu held.
func (c *coordinator) loadLocked(recs map[string]groupRecord) {
	for _, g := range c.groups {
		for _, m := range g.members {
			if m.joinCh != nil {
				close(m.joinCh)
				m.joinCh = nil
			}
			if m.syncCh != nil {
				m.syncCh <- syncAnswer{} // rejoin
				m.syncCh = nil
			}
		}
	}
	c.groups = make(map[string]*group, len(recs))
	now := time.Now()
	for name, rec := range recs {
		g := &group{name: name, generation: rec.generation, protocolType: rec.protocolType, members: make(map[string]*member)}
		if rec.protocol != nil {
			g.protocol = *rec.protocol
		}
		if rec.leader != nil {
			g.leader = *rec.leader
		}
		for _, mr := range rec.members {
			g.members[mr.memberID] = &member{
				id:               mr.memberID,
				instanceID:       mr.instanceID,
				clientID:         mr.clientID,
				clientHost:       mr.clientHost,
				protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: mr.subscription}},
				sessionTimeout:   time.Duration(mr.sessionTimeout) * time.Millisecond,
				rebalanceTimeout: time.Duration(mr.rebalanceTimeout) * time.Millisecond,
				lastSeen:         now,
				assignment:       mr.assignment,
			}
		}
		g.state = groupEmpty
		if len(g.members) > 0 {
			g.state = groupStable
		} else if rec.stateTime > 0 {
			g.emptySince = time.UnixMilli(rec.stateTime)
		}
		c.groups[name] = g
	}
}

// load is loadLocked under c.mu.
func (c *coordinator) load(recs map[string]groupRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked(recs)
}

// clientHost is a client's address as Kafka writes it in group metadata
// (Java's InetAddress.toString without a host name: "/" and the IP).
func clientHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return "/" + ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return "/" + a.String()
	}
	return "/" + host
}
