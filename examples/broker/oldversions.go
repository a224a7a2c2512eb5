package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
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

// Legacy message sets (magic 0 and 1) for Produce v0-2 and Fetch v0-3:
// Kafka 3.9 converts the first to RecordBatch v2 before appending
// (LogValidator, the only format it writes) and converts stored batches
// down to the magic a Fetch version reads (v0-1: magic 0, v2-3: magic 1).

// Legacy message layout: offset (8), size (4), CRC-32 (4), magic (1),
// attributes (1), timestamp (8, magic 1 only), key, value.
const (
	legacyMagicAt      = 16
	legacyAttributesAt = 17
	legacyCodecMask    = 0x07
	legacyLogAppendBit = 0x08
)

// errLegacyConversion is a message set that cannot be converted.
var errLegacyConversion = errors.New("broker: legacy message set not converted")

// appendLegacyMessage appends one uncompressed legacy message.
func appendLegacyMessage(dst []byte, magic int8, offset, timestamp int64, logAppendTime bool, key, value []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	sizeAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, below
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // CRC-32, below
	var attrs byte
	if magic == 1 && logAppendTime {
		attrs = legacyLogAppendBit
	}
	dst = append(dst, byte(magic), attrs)
	if magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(timestamp))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	binary.BigEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-crcAt))
	binary.BigEndian.PutUint32(dst[crcAt:], crc32.ChecksumIEEE(dst[crcAt+4:]))
	return dst
}

// downConvert rewrites a record set read from a partition at magic (0 or
// 1) for an old Fetch version, as Kafka's down-conversion does: entries
// already at or below magic are sent as stored; every record of a newer
// one becomes an uncompressed message at its offset (magic 0 drops the
// timestamp, both drop the headers); control batches (transaction markers)
// are left out. An entry cut at the end of the set (the read's byte limit)
// is left out as well.
func downConvert(set []byte, magic int8) ([]byte, error) {
	var out []byte
	var dec batch.Decoder
	for len(set) > 0 {
		size, m, _, err := batch.FrameEntry(set)
		if errors.Is(err, batch.ErrTruncated) {
			break
		}
		if err != nil {
			return nil, err
		}
		e := set[:size]
		set = set[size:]
		switch {
		case m <= magic:
			out = append(out, e...)
		case m < batch.Magic:
			recs, err := dec.AppendLegacyRecords(nil, e, true)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				out = appendLegacyMessage(out, magic, r.Offset, r.Timestamp, false, r.Key, r.Value)
			}
		default:
			b, _, err := batch.Parse(e)
			if err != nil {
				return nil, err
			}
			if b.Attributes().IsControl() {
				continue
			}
			for r, err := range b.All(&dec) {
				if err != nil {
					return nil, err
				}
				out = appendLegacyMessage(out, magic, r.Offset, r.Timestamp, b.Attributes().LogAppendTime(), r.Key, r.Value)
			}
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// fetchMagic is the newest message format a Fetch version reads: 0 for
// v0-1, 1 for v2-3, 2 from v4.
func fetchMagic(version int16) int8 {
	switch {
	case version <= 1:
		return 0
	case version <= 3:
		return 1
	}
	return batch.Magic
}

// downConvertFetch converts every partition's records of an old Fetch's
// answer (v0-3) to the version's message format, in the response itself
// (the reads are closed; the response then goes through kmsg's encoding).
// A partition whose records do not convert gets CORRUPT_MESSAGE.
func (s *server) downConvertFetch(resp *fetchResponse) {
	magic := fetchMagic(resp.Version)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			var rs recordSet
			if i < len(resp.recs) && j < len(resp.recs[i]) {
				rs = resp.recs[i][j]
				resp.recs[i][j] = nil
			}
			if rs == nil {
				continue
			}
			converted, err := downConvert(rs.Bytes(), magic)
			_ = rs.(plog.Records).Close()
			if err != nil {
				s.log.Error("fetch down-conversion", "topic", resp.Topics[i].Topic, "partition", p.Partition, "err", err)
				p.ErrorCode = kerr.CorruptMessage.Code
				converted = []byte{}
			}
			p.RecordBatches = converted
		}
	}
}

// upConvertProduce converts the legacy message sets (magic 0 or 1) of an
// old Produce (v0-2) to one RecordBatch v2 each, as Kafka 3.9 does before
// appending: the same records at consecutive offsets, with their keys,
// values and timestamps (-1 under magic 0), compressed with the message
// set's codec. A set that does not decode is left as sent, and the append
// refuses it (INVALID_RECORD, as for a legacy set in Produce v3+).
func (s *server) upConvertProduce(req *kmsg.ProduceRequest) {
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			rp := &req.Topics[i].Partitions[j]
			m, ok := batch.PeekMagic(rp.Records)
			if !ok || m >= batch.Magic || m < 0 {
				continue
			}
			b, err := upConvert(rp.Records)
			if err != nil {
				s.log.Debug("produce legacy message set not converted", "topic", req.Topics[i].Topic, "partition", rp.Partition, "err", err)
				continue
			}
			rp.Records = b
		}
	}
}

// upConvert builds one RecordBatch v2 from a legacy message set.
func upConvert(set []byte) ([]byte, error) {
	var dec batch.Decoder
	var recs []batch.Record
	codec := batch.CompressionNone
	for len(set) > 0 {
		size, m, _, err := batch.FrameEntry(set)
		if err != nil {
			return nil, err
		}
		if m >= batch.Magic {
			return nil, fmt.Errorf("%w: a magic %d entry among legacy messages", errLegacyConversion, m)
		}
		e := set[:size]
		set = set[size:]
		if err := dec.ValidateLegacy(e); err != nil {
			return nil, err
		}
		if c := batch.Compression(e[legacyAttributesAt] & legacyCodecMask); c != batch.CompressionNone {
			codec = c
		}
		if recs, err = dec.AppendLegacyRecords(recs, e, true); err != nil {
			return nil, err
		}
		// The records alias the decoder's buffer: keep copies.
		for k := range recs {
			recs[k].Key = bytes.Clone(recs[k].Key)
			recs[k].Value = bytes.Clone(recs[k].Value)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no message", errLegacyConversion)
	}
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: codec, PartitionLeaderEpoch: -1})
	for _, r := range recs {
		if err := bld.Add(batch.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}); err != nil {
			return nil, err
		}
	}
	return bld.Build()
}
