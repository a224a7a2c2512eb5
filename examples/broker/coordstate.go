package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// The coordinators' state in cluster mode. __consumer_offsets-0 and
// __transaction_state-0 are raft-replicated partitions like any other;
// the group coordinator (every group) is the leader of
// __consumer_offsets-0 and the transaction coordinator (every
// transactional id) the leader of __transaction_state-0. Their state in
// memory (committed offsets, transactions) is rebuilt from the partition
// when the node becomes leader and the first entry of its term is
// committed (so the log up to the high watermark holds every entry of the
// earlier terms that will ever commit), and it is valid for that term
// only: every write is a raft proposal that may be appended in that term
// alone (proposal.inTerm) and is answered after its commit. Other nodes
// answer NOT_COORDINATOR; FindCoordinator names the leader.
//
// Transaction markers go to each partition through its raft leader: a
// marker is a batch the leader appends (AppendMarker) and proposes, and
// the followers append it with AppendAssigned like any entry, so their
// producer state, last stable offset and transaction index follow. The
// coordinator writes a marker itself when it leads the partition and
// otherwise sends Kafka's WriteTxnMarkers to the leader.

// stateWriter writes a coordinator's batches durably.
type stateWriter interface {
	// appendBatch appends a batch built with offsets from 0 and returns
	// once it is durable (synced; committed by raft in cluster mode).
	appendBatch(b []byte) error
	// appendMarker appends a transaction marker, durably.
	appendMarker(m batch.TxnMarker) error
}

// localWriter is the single node's stateWriter: AppendBatch, then Sync.
type localWriter struct{ p *plog.Partition }

func (w localWriter) appendBatch(b []byte) error {
	if _, err := w.p.AppendBatch(b); err != nil {
		return err
	}
	return w.p.Sync()
}

func (w localWriter) appendMarker(m batch.TxnMarker) error {
	if _, err := w.p.AppendMarker(m); err != nil {
		return err
	}
	return w.p.Sync()
}

// coordWriteTimeout bounds a coordinator's wait for the raft commit of
// one of its writes, and for a marker written through another node.
const coordWriteTimeout = 10 * time.Second

// errNotCoordinator is a coordinator write made when the state it was
// decided on is no longer this node's (leadership lost, term changed).
var errNotCoordinator = errors.New("broker: not the coordinator (leadership of the state partition changed)")

// codeError is a Kafka error code with the error behind it (Unwrap keeps
// errors.Is working on the log package's sentinels).
type codeError struct {
	code int16
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return kerr.ErrorForCode(e.code).Error()
	}
	return fmt.Sprintf("%v (%v)", e.err, kerr.ErrorForCode(e.code))
}

func (e *codeError) Unwrap() error { return e.err }

// coordGate tracks whether this node may serve as the coordinator whose
// state lives in partition 0 of topic: it leads it, and the state was
// loaded in the current term.
type coordGate struct {
	c     *cluster
	topic string
	// load rebuilds the state from the partitions; under the state's
	// lock it first calls mark, which records the term as loaded (so no
	// request reads the state between the record and the rebuild).
	load func(mark func()) error

	loaded atomic.Uint64 // the term the state was loaded in, 0: none
	mu     sync.Mutex    // serializes loads
}

// ensure returns 0 when this node is the coordinator with its state
// loaded (loading it first when the term changed), NOT_COORDINATOR when
// another node is, COORDINATOR_LOAD_IN_PROGRESS while it cannot load yet.
func (g *coordGate) ensure() int16 {
	r := g.c.replica(g.topic, 0)
	if r == nil || r.failed.Load() || r.lead.Load() != g.c.self {
		return kerr.NotCoordinator.Code
	}
	term := r.ready.Load()
	if term == 0 {
		return kerr.CoordinatorLoadInProgress.Code
	}
	if g.loaded.Load() == term {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded.Load() == term {
		return 0
	}
	if r.part.HighWatermark() != r.part.LogEndOffset() {
		// A write of an earlier term of this node may still commit:
		// load once it did (or was cut).
		return kerr.CoordinatorLoadInProgress.Code
	}
	// Writes from now on are made in this term only; the load sees what
	// every earlier one left.
	if err := g.load(func() { g.loaded.Store(term) }); err != nil {
		g.loaded.Store(0)
		g.c.log.Error("coordinator state not loaded", "topic", g.topic, "err", err)
		return kerr.CoordinatorLoadInProgress.Code
	}
	g.c.log.Info("coordinator state loaded", "topic", g.topic, "term", term, "highWatermark", r.part.HighWatermark())
	return 0
}

// raftWriter is cluster mode's stateWriter for partition 0 of a state
// topic: a proposal valid in the term the gate loaded the state in,
// answered after the raft commit. A failed write drops the loaded state
// (the entry may still commit): the next request loads it again.
type raftWriter struct {
	g *coordGate
}

func (w raftWriter) appendBatch(b []byte) error {
	return w.propose(&proposal{records: b})
}

func (w raftWriter) appendMarker(m batch.TxnMarker) error {
	return w.propose(&proposal{marker: &m})
}

func (w raftWriter) propose(p *proposal) error {
	term := w.g.loaded.Load()
	if term == 0 {
		return errNotCoordinator
	}
	p.inTerm = term
	r := w.g.c.replica(w.g.topic, 0)
	if r == nil {
		return errNotCoordinator
	}
	if _, err := w.g.c.proposeWait(r, p); err != nil {
		w.g.loaded.CompareAndSwap(term, 0)
		return err
	}
	return nil
}

// proposeWait hands p (acks=-1) to the replica's loop and waits for its
// commit: it returns the batch's base offset, or an error (a *codeError
// when the replica answered with a Kafka code).
func (c *cluster) proposeWait(r *replica, p *proposal) (int64, error) {
	p.acks = -1
	p.res = make(chan proposeResult, 1)
	t := time.NewTimer(coordWriteTimeout)
	defer t.Stop()
	select {
	case r.propc <- p:
	case <-r.done:
		return -1, &codeError{code: kerr.NotLeaderForPartition.Code, err: errors.New("broker: replica stopped")}
	case <-t.C:
		return -1, &codeError{code: kerr.RequestTimedOut.Code}
	}
	select {
	case res := <-p.res:
		if res.code != 0 {
			return -1, &codeError{code: res.code, err: res.err}
		}
		return res.base, nil
	case <-r.done:
		return -1, &codeError{code: kerr.NotLeaderForPartition.Code, err: errors.New("broker: replica stopped")}
	case <-t.C:
		return -1, &codeError{code: kerr.RequestTimedOut.Code}
	}
}

// coordinators is cluster mode's coordinator wiring on the server.
type coordinators struct {
	groups *coordGate // __consumer_offsets-0
	txns   *coordGate // __transaction_state-0
}

// setupClusterCoordinators makes the offset store and the transaction
// coordinator write through raft and load their state when this node
// becomes their partition's leader.
func (s *server) setupClusterCoordinators() {
	c := s.cluster
	o := s.offsets
	s.coord = &coordinators{
		groups: &coordGate{c: c, topic: offsetsTopic, load: func(mark func()) error {
			ps, err := s.store.topic(offsetsTopic, false)
			if err != nil {
				return err
			}
			// The coordinator's lock before the store's, as every
			// group metadata write takes them.
			s.groups.mu.Lock()
			defer s.groups.mu.Unlock()
			o.mu.Lock()
			defer o.mu.Unlock()
			mark()
			o.resetLocked()
			for i := range ps {
				// Partition 0, where this broker writes, last (as at
				// a single node's start).
				if err := o.replayLocked(ps[(i+1)%len(ps)]); err != nil {
					return err
				}
			}
			// The groups as the log has them (groupmeta.go).
			s.groups.loadLocked(o.groupRecordsLocked())
			return nil
		}},
	}
	t := s.txns
	s.coord.txns = &coordGate{c: c, topic: txnStateTopic, load: func(mark func()) error {
		ps, err := s.store.topic(txnStateTopic, false)
		if err != nil {
			return err
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		mark()
		return t.loadLocked(ps)
	}}
	o.w = raftWriter{g: s.coord.groups}
	t.w = raftWriter{g: s.coord.txns}
	t.spread = c.producerID
	t.active = func() bool { return s.coord.txns.ensure() == 0 }
	t.markers = s.writeMarker
}

// replayLocked is replay under o.mu.
// REQUIRES: o.mu held.
func (o *offsetStore) replayLocked(p *plog.Partition) error {
	var dec batch.Decoder
	return readToHighWatermark(p, func(rest []byte, off int64) error {
		return o.replayBatches(rest, off, &dec)
	})
}

// coordinatorCheck answers a coordinator request that this node must not
// serve now (cluster mode): NOT_COORDINATOR when another node coordinates,
// COORDINATOR_LOAD_IN_PROGRESS while this one loads. nil: serve it.
func (s *server) coordinatorCheck(req kmsg.Request) kmsg.Response {
	if s.coord == nil {
		return nil
	}
	var g *coordGate
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest, *kmsg.HeartbeatRequest, *kmsg.LeaveGroupRequest,
		*kmsg.OffsetCommitRequest, *kmsg.OffsetFetchRequest, *kmsg.TxnOffsetCommitRequest,
		*kmsg.DescribeGroupsRequest, *kmsg.ListGroupsRequest, *kmsg.DeleteGroupsRequest:
		g = s.coord.groups
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID == nil {
			return nil
		}
		g = s.coord.txns
	case *kmsg.AddPartitionsToTxnRequest, *kmsg.AddOffsetsToTxnRequest, *kmsg.EndTxnRequest:
		g = s.coord.txns
	default:
		return nil
	}
	code := g.ensure()
	if code == 0 {
		return nil
	}
	return coordinatorError(req, code)
}

// coordinatorError returns req's answer carrying code everywhere it has
// an error code.
func coordinatorError(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, name := range r.Groups {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = name, code
			resp.Groups = append(resp.Groups, d)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		// A node that coordinates no group lists none, as Kafka's.
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		if code != kerr.NotCoordinator.Code {
			resp.ErrorCode = code
		}
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, name := range r.Groups {
			d := kmsg.NewDeleteGroupsResponseGroup()
			d.Group, d.ErrorCode = name, code
			resp.Groups = append(resp.Groups, d)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = rt.Topic
			for _, part := range rt.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = part, -1, -1, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewTxnOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.AddPartitionsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, rt := range r.Topics {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.Topic
			for _, part := range rt.Partitions {
				p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				p.Partition, p.ErrorCode = part, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}

// coordinatorNode returns the node FindCoordinator names for a key type
// (0 group, 1 transaction): in cluster mode the leader of the state
// topic's partition 0 (COORDINATOR_NOT_AVAILABLE while there is none),
// else this broker.
func (s *server) coordinatorNode(keyType int8) (id int32, host string, port int32, code int16) {
	if s.cluster == nil {
		return s.selfID(), s.host, s.port, 0
	}
	topic := offsetsTopic
	if keyType == 1 {
		topic = txnStateTopic
	}
	r := s.cluster.replica(topic, 0)
	var lead uint64
	if r != nil && !r.failed.Load() {
		lead = r.lead.Load()
	}
	if n, ok := s.cluster.knownNode(lead); ok && lead != 0 {
		h, p, _ := net.SplitHostPort(n.kafkaAddr) // checked by parseCluster
		pn, _ := strconv.ParseInt(p, 10, 32)
		return int32(n.id), h, int32(pn), 0
	}
	return -1, "", -1, kerr.CoordinatorNotAvailable.Code
}

// writeMarker writes a transaction marker to a partition through its raft
// leader, and returns once the leader's raft committed it: on this node
// when it leads the partition, else through WriteTxnMarkers to the
// leader. A partition that no longer exists needs no marker (nil).
func (s *server) writeMarker(tp topicPartition, m batch.TxnMarker) error {
	c := s.cluster
	ps, err := s.store.topic(tp.topic, false)
	if errors.Is(err, errUnknownTopic) || errors.Is(err, errInvalidTopic) || (err == nil && (tp.partition < 0 || int(tp.partition) >= len(ps))) {
		s.log.Warn("transaction partition no longer exists; no marker written", "topic", tp.topic, "partition", tp.partition, "producer_id", m.ProducerID)
		return nil
	}
	if err != nil {
		return err
	}
	r := c.replica(tp.topic, tp.partition)
	if r == nil {
		return fmt.Errorf("broker: %s-%d is not replicated on this node", tp.topic, tp.partition)
	}
	lead := r.lead.Load()
	switch lead {
	case 0:
		return &codeError{code: kerr.NotLeaderForPartition.Code, err: errors.New("broker: the partition has no leader")}
	case c.self:
		if code, err := s.writeMarkerLocal(tp, m); code != 0 {
			return &codeError{code: code, err: err}
		}
		return nil
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Type == batch.ControlCommit, m.CoordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = tp.topic, []int32{tp.partition}
	mk.Topics = append(mk.Topics, mt)
	req.Markers = append(req.Markers, mk)
	ctx, cancel := context.WithTimeout(context.Background(), coordWriteTimeout)
	defer cancel()
	resp, err := c.requestNode(ctx, lead, req)
	if err != nil {
		return fmt.Errorf("broker: WriteTxnMarkers to node %d: %w", lead, err)
	}
	wr := resp.(*kmsg.WriteTxnMarkersResponse)
	if len(wr.Markers) != 1 || len(wr.Markers[0].Topics) != 1 || len(wr.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("broker: WriteTxnMarkers to node %d: malformed answer", lead)
	}
	return markerCodeError(wr.Markers[0].Topics[0].Partitions[0].ErrorCode)
}

// markerCodeError turns a WriteTxnMarkers partition code back into the
// error the coordinator acts on (nil for NONE).
func markerCodeError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidProducerEpoch.Code:
		return &codeError{code: code, err: plog.ErrInvalidProducerEpoch}
	case kerr.TransactionCoordinatorFenced.Code:
		return &codeError{code: code, err: plog.ErrTransactionCoordinatorFenced}
	}
	return &codeError{code: code}
}

// markerCode is the WriteTxnMarkers code of a failed marker write.
func markerCode(err error) int16 {
	var ce *codeError
	switch {
	case errors.Is(err, plog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, plog.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, errNotCoordinator):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.KafkaStorageError.Code
}

// writeMarkerLocal writes a marker to a partition this node leads: a
// proposal of the marker, answered after its commit; for
// __consumer_offsets-0 through the offset store (it publishes or drops the
// producer's transactional offsets), which must be loaded here.
func (s *server) writeMarkerLocal(tp topicPartition, m batch.TxnMarker) (int16, error) {
	if tp.topic == offsetsTopic {
		if tp.partition != 0 {
			return kerr.UnknownTopicOrPartition.Code, errors.New("broker: offsets are written to partition 0 only")
		}
		if code := s.coord.groups.ensure(); code != 0 {
			return kerr.NotLeaderForPartition.Code, kerr.ErrorForCode(code)
		}
		if err := s.offsets.endTxn(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Type == batch.ControlCommit); err != nil {
			return markerCode(err), err
		}
		return 0, nil
	}
	r := s.cluster.replica(tp.topic, tp.partition)
	if r == nil {
		return kerr.UnknownTopicOrPartition.Code, errors.New("broker: unknown partition")
	}
	if _, err := s.cluster.proposeWait(r, &proposal{marker: &m}); err != nil {
		return markerCode(err), err
	}
	return 0, nil
}

// writeTxnMarkers answers WriteTxnMarkers, which a transaction
// coordinator sends to a partition's leader (cluster mode; a single node
// has no other coordinator: CLUSTER_AUTHORIZATION_FAILED, as Kafka
// answers a client).
func (s *server) writeTxnMarkers(req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, mk := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = mk.ProducerID
		m := batch.TxnMarker{Type: batch.ControlAbort, CoordinatorEpoch: mk.CoordinatorEpoch,
			ProducerID: mk.ProducerID, ProducerEpoch: mk.ProducerEpoch, Timestamp: time.Now().UnixMilli()}
		if mk.Committed {
			m.Type = batch.ControlCommit
		}
		for _, mt := range mk.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, part := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				tp := topicPartition{topic: mt.Topic, partition: part}
				switch {
				case s.cluster == nil:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case !s.cluster.leads(mt.Topic, part):
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
				default:
					var err error
					rp.ErrorCode, err = s.writeMarkerLocal(tp, m)
					if err != nil {
						s.log.Warn("transaction marker not written", "topic", mt.Topic, "partition", part, "producer_id", mk.ProducerID, "err", err)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// requestNode sends one request (a version every node of this broker
// takes, no flexible header: WriteTxnMarkers v0) to node id's Kafka
// listener on a connection of its own and returns the answer.
func (c *cluster) requestNode(ctx context.Context, id uint64, req kmsg.Request) (kmsg.Response, error) {
	node, ok := c.knownNode(id)
	if !ok {
		return nil, fmt.Errorf("broker: no node %d", id)
	}
	addr := node.kafkaAddr
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	req.SetVersion(0)
	const correlation = 1
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("partlog-node-%d", c.self)))
	if _, err := conn.Write(f.AppendRequest(nil, req, correlation)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("broker: answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != correlation {
		return nil, fmt.Errorf("broker: answer to correlation id %d, want %d", got, correlation)
	}
	resp := req.ResponseKind()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, err
	}
	return resp, nil
}
