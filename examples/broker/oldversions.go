package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
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
	// The local segments' bases: remote copies have no file here to take
	// a modification time from, so earliest (-2) names the local start.
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

// errZstdDownConversion is a zstd batch asked for by a Fetch version whose
// message format (magic 0 or 1) has no zstd codec.
var errZstdDownConversion = errors.New("broker: zstd records cannot be down-converted to a legacy message format")

// downConvert rewrites a record set read from a partition at magic (0 or
// 1) for an old Fetch version, as Kafka's down-conversion does
// (RecordsUtil.downConvert): entries already at or below magic are sent as
// stored; the records of a newer batch become messages of that magic at
// their offsets (magic 0 drops the timestamp, both drop the headers): one
// uncompressed message per record for an uncompressed batch, one wrapper
// message compressed with the batch's codec for a compressed one (see
// appendLegacyWrapper). Control batches (transaction markers) are left
// out, and so is an entry cut at the end of the set (the read's byte
// limit). A zstd batch is errZstdDownConversion: magic 0 and 1 have no
// zstd codec (Kafka refuses Fetch below v10 on zstd data).
func downConvert(set []byte, magic int8) ([]byte, error) {
	var out []byte
	var dec batch.Decoder
	var recs []batch.Record
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
			codec := b.Attributes().Compression()
			logAppend := b.Attributes().LogAppendTime()
			if codec == batch.CompressionZstd {
				return nil, errZstdDownConversion
			}
			recs = recs[:0]
			for r, err := range b.All(&dec) {
				if err != nil {
					return nil, err
				}
				if codec == batch.CompressionNone {
					out = appendLegacyMessage(out, magic, r.Offset, r.Timestamp, logAppend, r.Key, r.Value)
					continue
				}
				// The records alias the decoder's buffer until the
				// next batch: the wrapper is written before that.
				recs = append(recs, r)
			}
			if codec != batch.CompressionNone && len(recs) > 0 {
				if out, err = appendLegacyWrapper(out, magic, codec, b.BaseOffset(), logAppend, recs); err != nil {
					return nil, err
				}
			}
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// appendLegacyWrapper appends the records of one compressed RecordBatch
// as one legacy wrapper message of magic compressed with codec, as Kafka's
// MemoryRecordsBuilder writes it: the inner messages uncompressed, at
// their absolute offsets under magic 0 and at their offsets relative to
// the batch's base offset under magic 1 (KIP-31); the wrapper at the last
// record's offset with a null key, under magic 1 with the batch's
// timestamp type and, as its timestamp, the largest record timestamp. A
// magic 0 LZ4 value carries the frame header checksum Kafka writes there
// (KAFKA-3160).
func appendLegacyWrapper(dst []byte, magic int8, codec batch.Compression, base int64, logAppend bool, recs []batch.Record) ([]byte, error) {
	var inner []byte
	maxTS := int64(-1)
	for _, r := range recs {
		off := r.Offset
		if magic == 1 {
			off -= base
		}
		inner = appendLegacyMessage(inner, magic, off, r.Timestamp, logAppend, r.Key, r.Value)
		maxTS = max(maxTS, r.Timestamp)
	}
	wrapper := appendLegacyMessage(dst, magic, recs[len(recs)-1].Offset, maxTS, logAppend, nil, nil)
	// The value, null above, is the compressed inner set: the value's
	// length, the size and the CRC-32 are set once it is in place.
	wrapper = wrapper[:len(wrapper)-4]
	lenAt := len(wrapper)
	wrapper = append(wrapper, 0, 0, 0, 0)
	valueAt := len(wrapper)
	wrapper, err := appendLegacyCompressed(wrapper, codec, inner)
	if err != nil {
		return nil, err
	}
	if codec == batch.CompressionLZ4 && magic == 0 {
		setBrokenLZ4HeaderChecksum(wrapper[valueAt:])
	}
	binary.BigEndian.PutUint32(wrapper[lenAt:], uint32(len(wrapper)-valueAt))
	e := wrapper[len(dst):]
	e[legacyAttributesAt] |= byte(codec)
	binary.BigEndian.PutUint32(e[8:], uint32(len(e)-12))
	binary.BigEndian.PutUint32(e[12:], crc32.ChecksumIEEE(e[legacyMagicAt:]))
	return wrapper, nil
}

// setBrokenLZ4HeaderChecksum sets the header checksum of the LZ4 frame at
// the start of frame (magic number, FLG, BD, HC: the writer sets no
// content size nor dictionary id) to the one Kafka writes under magic 0
// (KAFKA-3160): the second byte of the XXH32 of the magic number and the
// descriptor, where the frame format has that of the descriptor alone.
func setBrokenLZ4HeaderChecksum(frame []byte) {
	frame[6] = byte(xxh32(frame[:6]) >> 8)
}

// XXH32's primes.
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 is XXH32 with seed 0 of an input shorter than 16 bytes (the
// 16-byte stripes are not needed for an LZ4 frame descriptor).
func xxh32(b []byte) uint32 {
	h := xxhPrime5 + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}

// xerialHeader starts a snappy value as the Java client (xerial's
// SnappyOutputStream) frames it: magic, version 1, compatible version 1;
// then chunks of at most xerialChunk uncompressed bytes, each a 4-byte
// big-endian length and a raw snappy block.
const (
	xerialHeader = "\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
	xerialChunk  = 32 << 10
)

// appendLegacyCompressed appends src compressed with codec (gzip, snappy
// or lz4) as Kafka's legacy writers compress a wrapper's value: gzip;
// xerial-framed snappy; an LZ4 frame of independent 64 KiB blocks without
// block or content checksums.
func appendLegacyCompressed(dst []byte, codec batch.Compression, src []byte) ([]byte, error) {
	w := &appendWriter{b: dst}
	switch codec {
	case batch.CompressionGzip:
		z := gzip.NewWriter(w)
		if _, err := z.Write(src); err != nil {
			return nil, err
		}
		if err := z.Close(); err != nil {
			return nil, err
		}
	case batch.CompressionSnappy:
		w.b = append(w.b, xerialHeader...)
		for len(src) > 0 {
			chunk := src[:min(len(src), xerialChunk)]
			src = src[len(chunk):]
			enc := snappy.Encode(nil, chunk)
			w.b = binary.BigEndian.AppendUint32(w.b, uint32(len(enc)))
			w.b = append(w.b, enc...)
		}
	case batch.CompressionLZ4:
		z := lz4.NewWriter(w)
		if err := z.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(false),
			lz4.ChecksumOption(false), lz4.ConcurrencyOption(1)); err != nil {
			return nil, err
		}
		if _, err := z.Write(src); err != nil {
			return nil, err
		}
		if err := z.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: codec %s", errLegacyConversion, codec)
	}
	return w.b, nil
}

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

// Write appends p; it never fails.
func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
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
// A partition whose records do not convert gets CORRUPT_MESSAGE, one with
// zstd records UNSUPPORTED_COMPRESSION_TYPE (Kafka's answer to a Fetch below
// v10 on zstd data).
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
			switch {
			case errors.Is(err, errZstdDownConversion):
				p.ErrorCode = kerr.UnsupportedCompressionType.Code
				converted = []byte{}
			case err != nil:
				s.log.Error("fetch down-conversion", "topic", resp.Topics[i].Topic, "partition", p.Partition, "err", err)
				p.ErrorCode = kerr.CorruptMessage.Code
				converted = []byte{}
			}
			p.RecordBatches = converted
		}
	}
}

// produceLegacy answers Produce v0-2: it converts the legacy message sets
// (magic 0 or 1) of the request to one RecordBatch v2 each, as Kafka 3.9
// does before appending (the same records at consecutive offsets, with
// their keys, values and timestamps, -1 under magic 0, compressed with the
// message set's codec), and appends them as any Produce. A partition whose
// message set does not decode gets CORRUPT_MESSAGE, as Kafka's LogValidator
// answers it, and nothing of it is appended (the other partitions of the
// request are).
func (s *server) produceLegacy(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	type refused struct {
		topic     string
		partition int32
		msg       string
	}
	var corrupt []refused
	for i := range req.Topics {
		rt := &req.Topics[i]
		kept := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			m, ok := batch.PeekMagic(rp.Records)
			if ok && m >= 0 && m < batch.Magic {
				b, err := upConvert(rp.Records)
				if err != nil {
					s.log.Debug("produce legacy message set does not decode", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					corrupt = append(corrupt, refused{rt.Topic, rp.Partition, err.Error()})
					continue
				}
				rp.Records = b
			}
			kept = append(kept, rp)
		}
		rt.Partitions = kept
	}
	if len(corrupt) > 0 {
		// A topic left without partitions is not looked at (nor created).
		req.Topics = slices.DeleteFunc(req.Topics, func(rt kmsg.ProduceRequestTopic) bool { return len(rt.Partitions) == 0 })
	}
	resp := s.produce(req)
	for _, c := range corrupt {
		i := slices.IndexFunc(resp.Topics, func(t kmsg.ProduceResponseTopic) bool { return t.Topic == c.topic })
		if i < 0 {
			t := kmsg.NewProduceResponseTopic()
			t.Topic = c.topic
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = c.partition
		p.BaseOffset = -1
		p.ErrorCode = kerr.CorruptMessage.Code
		p.ErrorMessage = &c.msg
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
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
