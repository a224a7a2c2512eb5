package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/partlog/partlog/log"
)

// The request versions Kafka 3.9 still answers and Kafka 4.0 removed
// (KIP-896), which old clients and operators' tools still send.

// consumerReplicaID is Kafka's CONSUMER_REPLICA_ID: a ListOffsets from a
// client (not a follower, not the debugging replica).
const consumerReplicaID = -1

// listOffsetsV0 answers ListOffsets version 0 as Kafka 3.9 does
// (UnifiedLog.legacyFetchOffsetsBefore): the candidate offsets are every
// segment's base offset (at least the log start), each with its .log file's
// modification time, and the log end offset with the current time when the
// last segment holds data. Latest (-1) starts from the last candidate,
// earliest (-2) from the first, any other timestamp from the last one
// modified at or before it; up to max_num_offsets candidates are returned
// from there towards the log start, in descending order. A consumer's
// answer never names an offset past the high watermark: such offsets are
// replaced by the high watermark.
func (s *server) listOffsetsV0(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		ps, terr := s.store.topic(rt.Topic, false)
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.OldStyleOffsets = []int64{}
			switch {
			case terr != nil:
				p.ErrorCode = topicErrorCode(terr)
			case rp.Partition < 0 || int(rp.Partition) >= len(ps):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.cluster != nil && req.ReplicaID != debugReplicaID && !s.cluster.leads(rt.Topic, rp.Partition):
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				offs, err := legacyOffsetsBefore(ps[rp.Partition], rp.Timestamp, rp.MaxNumOffsets, req.ReplicaID == consumerReplicaID)
				if err != nil {
					p.ErrorCode = kerr.KafkaStorageError.Code
					s.log.Error("list offsets v0", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					break
				}
				p.OldStyleOffsets = offs
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// legacyOffsetsBefore is ListOffsets v0's answer for one partition (see
// listOffsetsV0). A max of 0 or less gives no offsets.
func legacyOffsetsBefore(p *plog.Partition, timestamp int64, maxOffsets int32, fromConsumer bool) ([]int64, error) {
	segs := p.SegmentInfos()
	if segs == nil {
		return nil, fmt.Errorf("broker: %s: %w", p.Dir(), plog.ErrClosed)
	}
	type candidate struct{ offset, modified int64 }
	start := p.LogStartOffset()
	cands := make([]candidate, 0, len(segs)+1)
	for _, seg := range segs {
		modified := time.Now().UnixMilli()
		if fi, err := os.Stat(filepath.Join(p.Dir(), fmt.Sprintf("%020d.log", seg.BaseOffset))); err == nil {
			modified = fi.ModTime().UnixMilli()
		}
		cands = append(cands, candidate{offset: max(seg.BaseOffset, start), modified: modified})
	}
	if last := segs[len(segs)-1]; last.Size > 0 {
		cands = append(cands, candidate{offset: p.LogEndOffset(), modified: time.Now().UnixMilli()})
	}
	var from int
	switch timestamp {
	case -1: // latest
		from = len(cands) - 1
	case -2: // earliest
		from = 0
	default:
		from = len(cands) - 1
		for from >= 0 && cands[from].modified > timestamp {
			from--
		}
	}
	n := min(int(max(maxOffsets, 0)), from+1)
	offs := make([]int64, 0, n)
	for i := from; i > from-n; i-- {
		offs = append(offs, cands[i].offset)
	}
	slices.Sort(offs)
	slices.Reverse(offs)
	if fromConsumer {
		hw := p.HighWatermark()
		if len(offs) > 0 && offs[0] > hw {
			i := 0
			for i < len(offs) && offs[i] > hw {
				i++
			}
			offs = append([]int64{hw}, offs[i:]...)
		}
	}
	return offs, nil
}
