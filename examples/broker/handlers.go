package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/compaction"
	plog "github.com/partlog/partlog/log"
)

// versionRange is the versions of one API the broker implements end to end.
type versionRange struct{ min, max int16 }

// supported lists the APIs and versions the broker handles, each for every
// version in its range, and ApiVersions advertises them: from the lowest
// version Kafka 3.9 accepts (version 0 everywhere; Kafka 4.0 removed some,
// KIP-896, which old clients and tools such as Burrow 1.2.1 still send).
// Produce v0-2 and Fetch v0-3 carry legacy message sets, converted to and
// from RecordBatch v2 (oldversions.go). librdkafka (before 2.8.1) decides
// whether a broker takes gzip, snappy and lz4 by asking whether it supports
// Produce v0 (librdkafka issue 4956; Kafka 4 advertises v0 for that reason,
// KAFKA-18659).
var supported = map[kmsg.Key]versionRange{
	kmsg.Produce:         {0, 9},
	kmsg.Fetch:           {0, 12},
	kmsg.ListOffsets:     {0, 8},
	kmsg.Metadata:        {0, 12},
	kmsg.OffsetCommit:    {0, 8},
	kmsg.OffsetFetch:     {0, 7},
	kmsg.FindCoordinator: {0, 4},
	kmsg.JoinGroup:       {0, 9},
	kmsg.Heartbeat:       {0, 4},
	kmsg.LeaveGroup:      {0, 5},
	kmsg.SyncGroup:       {0, 5},
	kmsg.ApiVersions:     {0, 4},
	// Group administration (groupadmin.go).
	kmsg.DescribeGroups: {0, 5},
	kmsg.ListGroups:     {0, 5},
	kmsg.DeleteGroups:   {0, 2},
	// Topic administration (topicadmin.go).
	kmsg.CreateTopics:   {0, 7},
	kmsg.DeleteTopics:   {0, 6},
	kmsg.InitProducerID: {0, 4},
	// Transactions (txn*.go). AddPartitionsToTxn v4+ is the brokers'
	// batched form; clients use v3 and below.
	kmsg.AddPartitionsToTxn: {0, 3},
	kmsg.AddOffsetsToTxn:    {0, 3},
	kmsg.EndTxn:             {0, 3},
	kmsg.TxnOffsetCommit:    {0, 3},
	// Cluster membership (membership.go; KIP-853's requests).
	kmsg.AddRaftVoter:    {0, 1},
	kmsg.RemoveRaftVoter: {0, 0},
	// Sent by a transaction coordinator to a partition's leader (cluster
	// mode, coordstate.go); v0 is what the nodes send each other.
	kmsg.WriteTxnMarkers: {0, 0},
}

// handle decodes and answers one request. A nil response means "send
// nothing" (Produce with acks=0); cleanup, when set, runs after the response
// was written (it releases the fetched Records the response aliases). An
// error closes the connection.
func (s *server) handle(ctx context.Context, hdr requestHeader, body []byte) (kmsg.Response, func(), error) {
	vr, ok := supported[kmsg.Key(hdr.key)]
	if !ok || hdr.version < vr.min || hdr.version > vr.max {
		if hdr.key == int16(kmsg.ApiVersions) {
			// Kafka answers an ApiVersions it does not know with a v0
			// response carrying UNSUPPORTED_VERSION and its versions, so
			// the client can retry with one it shares.
			resp := s.apiVersions(0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp, nil, nil
		}
		return nil, nil, fmt.Errorf("%w: api %d version %d not supported", errCloseConn, hdr.key, hdr.version)
	}
	req := kmsg.RequestForKey(hdr.key)
	req.SetVersion(hdr.version)
	if err := req.ReadFrom(body); err != nil {
		return nil, nil, fmt.Errorf("%w: malformed request: %v", errCloseConn, err)
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		client := ""
		if hdr.clientID != nil {
			client = *hdr.clientID
		}
		s.log.Debug("request", "api", kmsg.NameForKey(hdr.key), "version", hdr.version, "correlation", hdr.correlationID, "client", client)
	}
	if resp := s.coordinatorCheck(req); resp != nil { // coordstate.go
		return resp, nil, nil
	}
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return s.apiVersions(r.Version), nil, nil
	case *kmsg.MetadataRequest:
		return s.metadata(r), nil, nil
	case *kmsg.ProduceRequest:
		var resp *kmsg.ProduceResponse
		if r.Version < 3 {
			resp = s.produceLegacy(r) // oldversions.go
		} else {
			resp = s.produce(r)
		}
		if r.Acks == 0 {
			return nil, nil, acksZeroAnswer(resp)
		}
		return resp, nil, nil
	case *kmsg.FetchRequest:
		resp, cleanup := s.fetch(ctx, r)
		if r.Version < 4 {
			s.downConvertFetch(resp) // oldversions.go
		}
		return resp, cleanup, nil
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(r), nil, nil
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(r), nil, nil
	case *kmsg.OffsetCommitRequest:
		return s.offsetCommit(r), nil, nil
	case *kmsg.OffsetFetchRequest:
		return s.offsetFetch(r), nil, nil
	case *kmsg.JoinGroupRequest:
		client := ""
		if hdr.clientID != nil {
			client = *hdr.clientID
		}
		return s.groups.join(ctx, r, client, hdr.clientHost), nil, nil
	case *kmsg.SyncGroupRequest:
		return s.groups.sync(ctx, r), nil, nil
	case *kmsg.HeartbeatRequest:
		return s.groups.heartbeat(r), nil, nil
	case *kmsg.LeaveGroupRequest:
		return s.groups.leave(r), nil, nil
	case *kmsg.DescribeGroupsRequest:
		return s.groups.describe(r), nil, nil // groupadmin.go
	case *kmsg.ListGroupsRequest:
		return s.groups.list(r), nil, nil
	case *kmsg.DeleteGroupsRequest:
		return s.groups.deleteGroups(r), nil, nil
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(r), nil, nil // topicadmin.go
	case *kmsg.DeleteTopicsRequest:
		return s.deleteTopics(r), nil, nil
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(r), nil, nil
	case *kmsg.AddPartitionsToTxnRequest:
		return s.addPartitionsToTxn(r), nil, nil
	case *kmsg.AddOffsetsToTxnRequest:
		return s.addOffsetsToTxn(r), nil, nil
	case *kmsg.EndTxnRequest:
		return s.endTxn(r), nil, nil
	case *kmsg.TxnOffsetCommitRequest:
		return s.txnOffsetCommit(r), nil, nil
	case *kmsg.AddRaftVoterRequest:
		return s.addRaftVoter(ctx, r), nil, nil // membership.go
	case *kmsg.RemoveRaftVoterRequest:
		return s.removeRaftVoter(ctx, r), nil, nil
	case *kmsg.WriteTxnMarkersRequest:
		return s.writeTxnMarkers(r), nil, nil
	}
	return nil, nil, fmt.Errorf("%w: no handler for api %d", errCloseConn, hdr.key)
}

// apiVersions lists the supported table at the given response version.
func (s *server) apiVersions(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	for k := kmsg.Key(0); k <= kmsg.Key(100); k++ {
		vr, ok := supported[k]
		if !ok {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), vr.min, vr.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}

// metadata describes this one-node cluster and the requested topics,
// creating them when the request allows it.
func (s *server) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = nodeID, s.host, s.port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := clusterID
	resp.ClusterID = &cid
	resp.ControllerID = nodeID

	// nil topics (v1+) or an empty list in v0 means every topic.
	var names []string
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		names = s.store.topicNames()
	}
	var budget *createBudget
	if req.Version < 4 || req.AllowAutoTopicCreation {
		budget = s.newCreateBudget()
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil { // by topic id (v10+): ids are not tracked
			t := kmsg.NewMetadataResponseTopic()
			t.TopicID = rt.TopicID
			t.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		names = append(names, *rt.Topic)
	}
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = kmsg.StringPtr(name)
		t.IsInternal = isInternalTopic(name)
		var ps []*plog.Partition
		var err error
		if isInternalTopic(name) {
			ps, err = s.store.topic(name, false)
		} else {
			ps, err = s.store.topicCreating(name, budget)
		}
		if err != nil {
			s.logCreateLimit(err, name)
			t.ErrorCode = topicErrorCode(err)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		for i := range ps {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition = int32(i)
			p.Leader = nodeID
			p.LeaderEpoch = 0
			p.Replicas = []int32{nodeID}
			p.ISR = []int32{nodeID}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if s.cluster != nil {
		s.cluster.fillMetadata(resp)
	}
	return resp
}

// topicErrorCode maps store.topic's errors to Kafka codes.
func topicErrorCode(err error) int16 {
	switch {
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, errUnknownTopic), errors.Is(err, errCreateLimit):
		// Over the creation limit the client is told the topic does
		// not exist yet; it asks again and the next request creates it.
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, errStoreClosed):
		return kerr.NotLeaderForPartition.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}

// logCreateLimit logs a topic left uncreated by the per-request limit.
func (s *server) logCreateLimit(err error, topic string) {
	if errors.Is(err, errCreateLimit) {
		s.log.Info("not creating topic: the request reached its creation limit", "topic", topic, "limit", s.createPerReq)
	}
}

// appendErrorCode maps AppendBatch's errors to Kafka's codes for a produce
// response, as packages log and batch document them.
func appendErrorCode(err error, records []byte) int16 {
	const magicAt = 16
	switch {
	case errors.Is(err, batch.ErrUnsupportedMagic) && len(records) > magicAt && records[magicAt] < batch.Magic:
		// A legacy MessageSet (magic 0 or 1); other magics are garbage.
		// Kafka refuses it in ProduceRequest's own validation (produce v3+
		// carries only magic 2) with InvalidRecordException: INVALID_RECORD.
		return kerr.InvalidRecord.Code
	case errors.Is(err, plog.ErrOutOfOrderSequence):
		// A gap or a stale sequence, or a new epoch not starting at 0.
		// Kafka 2.5+ (KIP-360) never answers UNKNOWN_PRODUCER_ID on the
		// produce path: an unknown producer is accepted at any sequence.
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, plog.ErrInvalidProducerEpoch):
		// Kafka 2.7+ (KIP-588): INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED.
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, plog.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, batch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, plog.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, plog.ErrInvalidBatch), errors.Is(err, plog.ErrControlBatch):
		return kerr.InvalidRecord.Code
	case errors.Is(err, plog.ErrInvalidBatchTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, plog.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}

// acksZeroAnswer is what an acks=0 Produce gets instead of its answer:
// nothing, or, when a partition of it failed, the connection closed, as
// Kafka closes it (the producer reads no answer, so the closed connection
// is what makes it refresh its metadata and find out).
func acksZeroAnswer(resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("%w: acks=0 produce to %s[%d] failed: %v", errCloseConn, t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return nil
}

// produce appends one batch per partition with Partition.AppendBatch. acks=-1
// syncs the touched partitions before answering; acks=0 is answered by
// handle (acksZeroAnswer). Errors are per partition; nothing is written for
// a refused batch.
func (s *server) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	if s.cluster != nil {
		return s.clusterProduce(req) // cluster.go
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// Request-wide errors are reported on every partition.
	var reqErr int16
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = kerr.InvalidRequiredAcks.Code
	}
	budget := s.newCreateBudget()
	var toSync []*plog.Partition
	var syncIdx [][2]int // response positions of each partition in toSync
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		ps, topicErr := s.produceTopic(rt.Topic, reqErr, budget)
		compacted := topicErr == 0 && s.compactedTopic(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.BaseOffset = -1
			switch {
			case topicErr != 0:
				p.ErrorCode = topicErr
			case rp.Partition < 0 || int(rp.Partition) >= len(ps):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case zstdBeforeV7(req.Version, rp.Records):
				p.ErrorCode = kerr.UnsupportedCompressionType.Code
			case compacted && refuseKeyless(&p, rt.Topic, rp.Records):
				// Refused: a record without a key (p says which).
			default:
				part := ps[rp.Partition]
				// A retry of one of the producer's last five batches is
				// answered as Kafka does: NONE with the original base
				// offset, nothing written. acks=-1 still syncs, since the
				// original may not be durable yet.
				info, err := part.AppendBatchInfo(rp.Records)
				if err != nil {
					p.ErrorCode = appendErrorCode(err, rp.Records)
					msg := err.Error()
					p.ErrorMessage = &msg
					s.log.Debug("produce refused", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				} else {
					p.BaseOffset = info.Base
					if info.Duplicate {
						s.log.Debug("produce retry answered with the original offset", "topic", rt.Topic, "partition", rp.Partition, "base", info.Base)
					}
					p.LogStartOffset = wholeLogStart(part) // tiering.go
					if req.Acks == -1 {
						toSync = append(toSync, part)
						syncIdx = append(syncIdx, [2]int{len(resp.Topics), len(t.Partitions)})
					}
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	// acks=-1: the records are durable before the answer (a single node is
	// its own in-sync replica set). Each partition is synced once.
	synced := make(map[*plog.Partition]error)
	for i, part := range toSync {
		err, done := synced[part]
		if !done {
			err = part.Sync()
			synced[part] = err
		}
		if err != nil {
			rp := &resp.Topics[syncIdx[i][0]].Partitions[syncIdx[i][1]]
			rp.ErrorCode = kerr.KafkaStorageError.Code
		}
	}
	return resp
}

// fetch answers a Fetch, parking it until MinBytes are available or
// MaxWaitMillis passed (clamped to maxFetchWait). The response holds the
// partitions' Records open; the returned cleanup closes them after the write.
//
// A parked fetch waits with Partition.Wait for the high watermark of any of
// its partitions to pass the value its last read saw.
func (s *server) fetch(ctx context.Context, req *kmsg.FetchRequest) (*fetchResponse, func()) {
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		resp, total, hasErr := s.fetchOnce(req)
		cleanup := func() {
			for _, rs := range resp.recs {
				for _, r := range rs {
					if r != nil {
						_ = r.(plog.Records).Close()
					}
				}
			}
		}
		left := time.Until(deadline)
		if hasErr || total >= int(req.MinBytes) || left <= 0 || ctx.Err() != nil {
			return resp, cleanup
		}
		cleanup()
		if s.fetchParked != nil {
			s.fetchParked()
		}
		waitAny(ctx, deadline, resp.waits)
	}
}

// waitTarget is a partition a parked fetch waits on, with the high
// watermark its read saw.
type waitTarget struct {
	part *plog.Partition
	hw   int64
}

// waitAny returns when the high watermark of one of the targets passes the
// value its read saw (or the partition closes, fails or is truncated below
// it: the next read reports that), at the deadline, or when ctx ends.
func waitAny(ctx context.Context, deadline time.Time, targets []waitTarget) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	switch len(targets) {
	case 0:
		<-ctx.Done()
	case 1:
		_ = targets[0].part.Wait(ctx, targets[0].hw)
	default:
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Go(func() {
				_ = t.part.Wait(ctx, t.hw)
				cancel() // the first one to return wakes the fetch
			})
		}
		wg.Wait()
	}
}

// fetchOnce reads every requested partition once. Kafka's rules: each
// partition returns at most PartitionMaxBytes, the response at most MaxBytes,
// except that the first partition with data returns at least one whole batch
// so a consumer always progresses. Data comes from one segment per partition
// per fetch (the client fetches again from the next offset).
func (s *server) fetchOnce(req *kmsg.FetchRequest) (resp *fetchResponse, total int, hasErr bool) {
	resp = &fetchResponse{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
	// The broker's fetch.max.bytes caps the client's limit; a limit of 0
	// still returns one batch (minOneMessage).
	budget := min(int(max(req.MaxBytes, 0)), maxFetchBytes)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		var trecs []recordSet
		ps, terr := s.store.topic(rt.Topic, false)
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			// Kafka answers a partition without records (caught up,
			// over the byte limit, or an error) with an empty records
			// field, never a null one: librdkafka fails to parse a
			// null one ("invalid MessageSetSize -1") and kafka-python
			// crashes on it.
			p.RecordBatches = []byte{}
			var part *plog.Partition
			switch {
			case terr != nil:
				p.ErrorCode = topicErrorCode(terr)
			case rp.Partition < 0 || int(rp.Partition) >= len(ps):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				part = ps[rp.Partition]
			}
			var rec recordSet
			if part != nil {
				rec = s.fetchPartition(rt.Topic, part, rp, req.IsolationLevel == readCommitted, &p, &budget, &total, &resp.waits)
			}
			if p.ErrorCode != 0 {
				hasErr = true
			}
			t.Partitions = append(t.Partitions, p)
			trecs = append(trecs, rec)
		}
		resp.Topics = append(resp.Topics, t)
		resp.recs = append(resp.recs, trecs)
	}
	return resp, total, hasErr
}

// fetchPartition reads one partition into p; it returns the Records the
// response then holds (nil when none).
func (s *server) fetchPartition(topic string, part *plog.Partition, rp kmsg.FetchRequestTopicPartition, committedOnly bool, p *kmsg.FetchResponseTopicPartition, budget, total *int, waits *[]waitTarget) recordSet {
	if s.cluster != nil && !s.cluster.leads(topic, rp.Partition) {
		p.ErrorCode = kerr.NotLeaderForPartition.Code
		return nil
	}
	// The last stable offset first: read before the high watermark it
	// never exceeds it in the answer.
	p.LastStableOffset = part.LastStableOffset()
	hw := part.HighWatermark()
	p.HighWatermark = hw
	*waits = append(*waits, waitTarget{part: part, hw: hw})
	// With tiered storage, the whole log's: ReadFrom serves the offsets
	// below the local start from the remote copies (tiering.go).
	p.LogStartOffset = wholeLogStart(part)
	limit := min(int(rp.PartitionMaxBytes), *budget)
	if limit <= 0 {
		if *total > 0 {
			return nil // the response is full
		}
		limit = 0 // first data: ReadFrom returns one whole batch
	}
	var r plog.Records
	var err error
	if committedOnly {
		// Up to the last stable offset, with the aborted transactions
		// the consumer must skip (txnhandlers.go).
		var aborted []abortedTxn
		r, aborted, err = part.ReadCommitted(rp.FetchOffset, limit)
		if err == nil {
			p.AbortedTransactions = abortedTxns(aborted)
		}
	} else {
		r, err = part.ReadFrom(rp.FetchOffset, limit)
	}
	if err != nil {
		if errors.Is(err, plog.ErrOffsetOutOfRange) {
			p.ErrorCode = kerr.OffsetOutOfRange.Code
		} else {
			p.ErrorCode = kerr.KafkaStorageError.Code
			s.log.Error("fetch", "topic", topic, "partition", rp.Partition, "err", err)
		}
		return nil
	}
	if len(r.Bytes()) == 0 || (*total > 0 && len(r.Bytes()) > limit) {
		// Only the first partition with data may exceed its limit
		// (Kafka's minOneMessage).
		_ = r.Close()
		return nil
	}
	p.RecordBatches = r.Bytes()
	*total += len(r.Bytes())
	*budget -= len(r.Bytes())
	return r
}

// listOffsets answers by timestamp or sentinel with Partition.OffsetForTimestamp
// (listedOffset).
func (s *server) listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	if req.Version == 0 {
		return s.listOffsetsV0(req) // oldversions.go
	}
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		ps, terr := s.store.topic(rt.Topic, false)
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
			switch {
			case terr != nil:
				p.ErrorCode = topicErrorCode(terr)
			case rp.Partition < 0 || int(rp.Partition) >= len(ps):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.cluster != nil && req.ReplicaID != debugReplicaID && !s.cluster.leads(rt.Topic, rp.Partition):
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				to, found, err := listedOffset(ps[rp.Partition], rp.Timestamp, req.Version, req.Version >= 2 && req.IsolationLevel == readCommitted)
				switch {
				case errors.Is(err, plog.ErrInvalidTimestamp):
					p.ErrorCode = kerr.InvalidRequest.Code
				case err != nil:
					p.ErrorCode = kerr.KafkaStorageError.Code
				case found:
					// LeaderEpoch stays -1: the broker does not stamp
					// epochs (nor answer OffsetForLeaderEpoch).
					p.Timestamp, p.Offset = to.Timestamp, to.Offset
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// listedOffset answers ListOffsets (v1+) for one partition with
// Partition.OffsetForTimestamp (offsetForTimestamp), which answers as Kafka
// with tiered storage: EARLIEST (-2) is the whole log's start, remote
// copies included, EARLIEST_LOCAL (-4) the local log start; -4 is refused
// before v8.
func listedOffset(p *plog.Partition, ts int64, version int16, committedOnly bool) (plog.TimestampOffset, bool, error) {
	if ts == plog.EarliestLocalTimestamp && version < minEarliestLocalVersion {
		// Kafka answers INVALID_REQUEST before v8.
		return plog.TimestampOffset{}, false, fmt.Errorf("%w: %d before ListOffsets v%d", plog.ErrInvalidTimestamp, ts, minEarliestLocalVersion)
	}
	return offsetForTimestamp(p, ts, committedOnly)
}

// findCoordinator names this node for every group and transactional id
// (v4+: every key); in cluster mode the leader of the state topic's
// partition (coordstate.go).
func (s *server) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	id, host, port, code := s.coordinatorNode(req.CoordinatorType)
	var msg *string
	if req.CoordinatorType != 0 && req.CoordinatorType != 1 { // 0: group, 1: transaction
		code = kerr.InvalidRequest.Code
		msg = kmsg.StringPtr("unknown coordinator type")
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = key, id, host, port
			c.ErrorCode, c.ErrorMessage = code, msg
			if code != 0 {
				c.NodeID, c.Host, c.Port = -1, "", -1
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	}
	resp.NodeID, resp.Host, resp.Port = id, host, port
	resp.ErrorCode, resp.ErrorMessage = code, msg
	if code != 0 {
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
	}
	return resp
}

// commitEntry checks one partition of an OffsetCommit or TxnOffsetCommit
// request (reqErr: the request-wide error, terr and ps: the topic lookup)
// and returns its error code, or 0 and the offset to store. leaderEpoch
// is -1 for request versions without the field.
func commitEntry(group, topic string, ps []*plog.Partition, terr error, reqErr int16, partition int32, offset int64, leaderEpoch int32, metadata *string) (offsetCommit, int16) {
	switch {
	case reqErr != 0:
		return offsetCommit{}, reqErr
	case terr != nil:
		return offsetCommit{}, topicErrorCode(terr)
	case partition < 0 || int(partition) >= len(ps):
		return offsetCommit{}, kerr.UnknownTopicOrPartition.Code
	case metadata != nil && len(*metadata) > maxMetadataSize:
		return offsetCommit{}, kerr.OffsetMetadataTooLarge.Code
	case offset < 0:
		return offsetCommit{}, kerr.InvalidCommitOffsetSize.Code
	}
	c := offsetCommit{
		key:       offsetKey{group: group, topic: topic, partition: partition},
		committed: committed{offset: offset, leaderEpoch: leaderEpoch},
	}
	if metadata != nil {
		c.metadata = *metadata
	}
	return c, 0
}

// zstdBeforeV7 reports a Produce request of version 3 to 6 whose record
// batch is zstd-compressed: Kafka's ProduceRequest.validateRecords refuses
// it with UNSUPPORTED_COMPRESSION_TYPE (zstd came with Produce v7, KIP-110),
// before looking at the batch's CRC.
func zstdBeforeV7(version int16, records []byte) bool {
	return version >= 3 && version < 7 && len(records) >= batch.HeaderSize &&
		batch.Batch(records).Magic() == batch.Magic &&
		batch.Batch(records).Attributes().Compression() == batch.CompressionZstd
}

// compactedTopic reports whether a topic's cleanup.policy (its own from
// CreateTopics, else -cleanup-policy) includes compact: Kafka's
// LogConfig.compact, under which a produced record needs a key.
func (s *server) compactedTopic(topic string) bool {
	policy, ok := s.store.topicConfigOf(topic)["cleanup.policy"]
	if !ok {
		policy = s.cleanupPolicy
	}
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == compaction.PolicyCompact {
			return true
		}
	}
	return false
}

// refuseKeyless answers a produced batch for a compacted topic that holds
// records without a key (a null key; an empty one is a key) as Kafka's
// LogValidator does: INVALID_RECORD, each such record named by its index in
// the batch, nothing written (the cleaner would drop them). It reports
// whether it refused the batch; one that does not decode is left to the
// append, which refuses it with its own code.
func refuseKeyless(p *kmsg.ProduceResponseTopicPartition, topic string, records []byte) bool {
	if len(records) < batch.HeaderSize || batch.Batch(records).Magic() != batch.Magic {
		return false
	}
	var dec batch.Decoder
	var keyless []kmsg.ProduceResponseTopicPartitionErrorRecord
	i := int32(0)
	for rec, err := range batch.Batch(records).All(&dec) {
		if err != nil {
			return false
		}
		if rec.Key == nil {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			e.RelativeOffset = i
			e.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, p.Partition))
			keyless = append(keyless, e)
		}
		i++
	}
	if len(keyless) == 0 {
		return false
	}
	p.ErrorCode = kerr.InvalidRecord.Code
	p.ErrorRecords = keyless
	p.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("%d record(s) without a key, refused by a compacted topic; the first: %s", len(keyless), *keyless[0].ErrorMessage))
	return true
}

// produceTopic returns the partitions of a topic a Produce request writes
// to, creating it when auto-creation allows (budget: what this request
// may still create), or the topic's error code: reqErr when the whole
// request failed, INVALID_TOPIC_EXCEPTION for an internal topic.
func (s *server) produceTopic(topic string, reqErr int16, budget *createBudget) ([]*plog.Partition, int16) {
	if reqErr != 0 {
		return nil, reqErr
	}
	if isInternalTopic(topic) {
		return nil, kerr.InvalidTopicException.Code
	}
	ps, err := s.store.topicCreating(topic, budget)
	if err != nil {
		s.logCreateLimit(err, topic)
		return nil, topicErrorCode(err)
	}
	return ps, 0
}

// offsetCommit checks the group membership and stores the offsets durably
// in __consumer_offsets.
func (s *server) offsetCommit(req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	var reqErr int16
	switch {
	case req.Group == "":
		reqErr = kerr.InvalidGroupID.Code
	default:
		reqErr = s.groups.checkCommit(req.Group, req.Generation, req.MemberID, req.InstanceID)
	}
	var commits []offsetCommit
	var where [][2]int
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		ps, terr := s.store.topic(rt.Topic, false)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = rp.LeaderEpoch
			}
			c, code := commitEntry(req.Group, rt.Topic, ps, terr, reqErr, rp.Partition, rp.Offset, epoch, rp.Metadata)
			p.ErrorCode = code
			if code == 0 {
				commits = append(commits, c)
				where = append(where, [2]int{len(resp.Topics), len(t.Partitions)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(commits) > 0 {
		if err := s.offsets.commit(commits); err != nil {
			s.log.Error("offset commit", "group", req.Group, "err", err)
			for _, w := range where {
				resp.Topics[w[0]].Partitions[w[1]].ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		}
	}
	return resp
}

// offsetFetch returns committed offsets (-1 when none); nil topics (v2+)
// means every partition the group committed.
func (s *server) offsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	fill := func(p *kmsg.OffsetFetchResponseTopicPartition, k offsetKey) {
		p.Offset, p.LeaderEpoch = -1, -1
		p.Metadata = kmsg.StringPtr("")
		if req.RequireStable && s.offsets.hasPending(k) {
			// An open transaction holds an offset for it (KIP-447).
			p.ErrorCode = kerr.UnstableOffsetCommit.Code
			return
		}
		if c, ok := s.offsets.get(k); ok {
			p.Offset, p.LeaderEpoch = c.offset, c.leaderEpoch
			p.Metadata = kmsg.StringPtr(c.metadata)
		}
	}
	if req.Topics == nil && req.Version >= 2 { // every committed partition
		byTopic := make(map[string]int)
		for _, k := range s.offsets.groupKeys(req.Group) {
			i, ok := byTopic[k.topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[k.topic] = i
				t := kmsg.NewOffsetFetchResponseTopic()
				t.Topic = k.topic
				resp.Topics = append(resp.Topics, t)
			}
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition = k.partition
			fill(&p, k)
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
		}
		return resp
	}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = rt.Topic
		for _, part := range rt.Partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition = part
			fill(&p, offsetKey{group: req.Group, topic: rt.Topic, partition: part})
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// initProducerID hands an idempotent producer a fresh id, epoch 0, from
// the durable allocator (producerIDs: never reused, across restarts too);
// a transactional id goes to the transaction coordinator. When the next block of ids cannot be
// reserved the answer is COORDINATOR_LOAD_IN_PROGRESS, which clients
// retry, as Kafka answers when its ProducerIdManager has no block yet.
func (s *server) initProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return s.txnInitProducerID(req, resp)
	}
	id, err := s.prodIDPool.allocate()
	if err != nil {
		s.log.Error("no producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	if s.cluster != nil {
		id = s.cluster.producerID(id)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
