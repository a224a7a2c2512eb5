package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction APIs' handlers: they decode the request, check what does
// not need the coordinator's state (topics exist, versions), and call the
// transaction coordinator (txncoord.go).

// isInternalTopic reports whether name is one of the broker's own topics,
// which clients may read but never produce to.
func isInternalTopic(name string) bool {
	return name == offsetsTopic || name == txnStateTopic
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for request
// versions from before KIP-588 (Kafka maps it down the same way).
func fencedCode(code int16, version, fencedFrom int16) int16 {
	if code == kerr.ProducerFenced.Code && version < fencedFrom {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// txnInitProducerID answers InitProducerID with a transactional id.
func (s *server) txnInitProducerID(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kmsg.Response {
	if *req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	reqPID, reqEpoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		reqPID, reqEpoch = req.ProducerID, req.ProducerEpoch
	}
	pid, epoch, code := s.txns.initProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, reqPID, reqEpoch)
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	resp.ErrorCode = fencedCode(code, req.Version, 4)
	return resp
}

// addPartitionsToTxn answers AddPartitionsToTxn v0-3: every partition must
// exist (UNKNOWN_TOPIC_OR_PARTITION; the others then get
// OPERATION_NOT_ATTEMPTED, as Kafka answers), then the coordinator's code
// goes to every partition.
func (s *server) addPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []topicPartition
	bad := make(map[topicPartition]int16)
	for _, rt := range req.Topics {
		ps, err := s.store.topic(rt.Topic, false)
		for _, p := range rt.Partitions {
			tp := topicPartition{topic: rt.Topic, partition: p}
			switch {
			case isInternalTopic(rt.Topic):
				bad[tp] = kerr.InvalidTopicException.Code
			case err != nil:
				bad[tp] = topicErrorCode(err)
			case p < 0 || int(p) >= len(ps):
				bad[tp] = kerr.UnknownTopicOrPartition.Code
			}
			parts = append(parts, tp)
		}
	}
	code := int16(0)
	if len(bad) > 0 {
		code = kerr.OperationNotAttempted.Code
	} else {
		code = fencedCode(s.txns.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts), req.Version, 2)
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode = code
			if c, ok := bad[topicPartition{topic: rt.Topic, partition: p}]; ok {
				rp.ErrorCode = c
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// addOffsetsToTxn answers AddOffsetsToTxn: the group's offsets partition,
// __consumer_offsets-0 (the broker keeps every group there), joins the
// transaction.
func (s *server) addOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	code := s.txns.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []topicPartition{{topic: offsetsTopic}})
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	return resp
}

// endTxn answers EndTxn.
func (s *server) endTxn(req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	code := s.txns.endTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	return resp
}

// txnOffsetCommit answers TxnOffsetCommit: v3+ checks the member's
// generation as OffsetCommit does (generation -1 skips it, as Kafka's);
// the producer's transaction must include the group (AddOffsetsToTxn). The offsets
// are written durably to __consumer_offsets-0 in the transaction and
// become visible to OffsetFetch when it commits.
func (s *server) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var reqErr int16
	switch {
	case req.Group == "":
		reqErr = kerr.InvalidGroupID.Code
	case req.Version >= 3 && req.Generation >= 0:
		reqErr = s.groups.checkCommit(req.Group, req.Generation, req.MemberID, req.InstanceID)
	}
	var commits []offsetCommit
	var where [][2]int
	for _, rt := range req.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		ps, terr := s.store.topic(rt.Topic, false)
		for _, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			epoch := int32(-1)
			if req.Version >= 2 {
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
		write := func() error { return s.offsets.commitTxn(req.ProducerID, req.ProducerEpoch, commits) }
		var code int16
		var err error
		if s.cluster != nil {
			// The transaction coordinator is another node's role in
			// cluster mode: as Kafka's group coordinator, this one relies
			// on the partition's producer state (a fenced epoch is
			// refused by the append).
			err = write()
		} else {
			code, err = s.txns.commitOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, write)
		}
		if err != nil {
			s.log.Error("transactional offset commit", "group", req.Group, "transactional_id", req.TransactionalID, "err", err)
			code = kerr.CoordinatorNotAvailable.Code
			if appendErrorCode(err, nil) == kerr.InvalidProducerEpoch.Code {
				code = kerr.ProducerFenced.Code
			}
		}
		for _, w := range where {
			resp.Topics[w[0]].Partitions[w[1]].ErrorCode = fencedCode(code, req.Version, 2)
		}
	}
	return resp
}

// abortedTxns converts a read_committed read's aborted transactions to the
// Fetch response's list (never nil: read_committed answers carry a list,
// empty when none, where read_uncommitted ones carry null).
func abortedTxns(list []abortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(list))
	for _, a := range list {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}
