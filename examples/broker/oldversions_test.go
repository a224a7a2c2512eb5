package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// listOffsetsV0 asks ListOffsets version 0 for one partition.
func listOffsetsV0(t *testing.T, rc *rawConn, topic string, ts int64, maxNum int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 0
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.MaxNumOffsets = ts, maxNum
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.ListOffsetsResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsV0 sends ListOffsets version 0 (Burrow 1.2.1's request for
// end offsets) and gets Kafka 3.9's old-style answers: the segments' base
// offsets and the log end offset, newest first, at most max_num_offsets.
func TestListOffsetsV0(t *testing.T) {
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.SegmentBytes = 200 })
	rc := dialRaw(t, b.addr)
	// Each batch is over 200 bytes, so each after the first starts a segment.
	for i := range 3 {
		p := produceRaw(t, rc, 7, "old", 0, buildBatch(t, "r", 5, batch.CompressionNone))
		require.Equal(t, int16(0), p.ErrorCode)
		require.Equal(t, int64(5*i), p.BaseOffset)
	}

	latest := listOffsetsV0(t, rc, "old", -1, 1)
	require.Equal(t, int16(0), latest.ErrorCode)
	require.Equal(t, []int64{15}, latest.OldStyleOffsets)

	all := listOffsetsV0(t, rc, "old", -1, 100)
	require.Equal(t, []int64{15, 10, 5, 0}, all.OldStyleOffsets)

	earliest := listOffsetsV0(t, rc, "old", -2, 1)
	require.Equal(t, []int64{0}, earliest.OldStyleOffsets)

	// A timestamp before every segment was written: no offsets. One
	// after: from the last candidate (the log end) down.
	require.Empty(t, listOffsetsV0(t, rc, "old", 1, 10).OldStyleOffsets)
	require.Equal(t, []int64{15, 10}, listOffsetsV0(t, rc, "old", time.Now().Add(time.Hour).UnixMilli(), 2).OldStyleOffsets)

	require.Empty(t, listOffsetsV0(t, rc, "old", -1, 0).OldStyleOffsets)

	unknown := listOffsetsV0(t, rc, "nosuch", -1, 1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, unknown.ErrorCode)
}

// fetchV returns one Fetch of topic's partition 0 from offset at version v.
func fetchV(t *testing.T, rc *rawConn, v int16, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MaxWaitMillis = 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.FetchResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// legacyRecords decodes a Fetch answer's legacy message set.
func legacyRecords(t *testing.T, set []byte) (magics []int8, recs []batch.Record) {
	t.Helper()
	var dec batch.Decoder
	for len(set) > 0 {
		size, m, _, err := batch.FrameEntry(set)
		require.NoError(t, err)
		require.NoError(t, dec.ValidateLegacy(set[:size]))
		rs, err := dec.AppendLegacyRecords(nil, set[:size], true)
		require.NoError(t, err)
		for _, r := range rs {
			magics = append(magics, m)
			r.Key, r.Value = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)
			recs = append(recs, r)
		}
		set = set[size:]
	}
	return magics, recs
}

// TestOldProduceAndFetchVersions: Produce v0-2 with a legacy message set
// (magic 0, and magic 1 under gzip) and with a RecordBatch v2 all store
// RecordBatch v2; Fetch v0-3 reads them back as legacy messages of the
// version's magic (0 for v0-1, 1 for v2-3) at their offsets, with keys,
// values and (magic 1) timestamps, transaction markers left out; Fetch v4
// reads the stored batches.
func TestOldProduceAndFetchVersions(t *testing.T) {
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	ts := time.Now().UnixMilli()

	// Produce v0: two plain magic 0 messages.
	var set0 []byte
	set0 = appendLegacyMessage(set0, 0, 0, -1, false, []byte("k0"), []byte("v0"))
	set0 = appendLegacyMessage(set0, 0, 1, -1, false, nil, []byte("v1"))
	p := produceRaw(t, rc, 0, "legacy", 0, set0)
	require.Equal(t, int16(0), p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
	require.Equal(t, int64(0), p.BaseOffset)

	// Produce v2: a gzip wrapper of two magic 1 messages (relative offsets).
	var inner []byte
	inner = appendLegacyMessage(inner, 1, 0, ts, false, []byte("k2"), []byte("v2"))
	inner = appendLegacyMessage(inner, 1, 1, ts+1, false, []byte("k3"), []byte("v3"))
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err := w.Write(inner)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	wrapper := appendLegacyMessage(nil, 1, 1, ts+1, false, nil, gz.Bytes())
	wrapper[legacyAttributesAt] |= byte(batch.CompressionGzip)
	binary.BigEndian.PutUint32(wrapper[12:], crc32.ChecksumIEEE(wrapper[16:]))
	p = produceRaw(t, rc, 2, "legacy", 0, wrapper)
	require.Equal(t, int16(0), p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
	require.Equal(t, int64(2), p.BaseOffset)

	// Produce v1: a RecordBatch v2, as Kafka 3.9 takes it.
	p = produceRaw(t, rc, 1, "legacy", 0, buildBatch(t, "r", 2, batch.CompressionNone))
	require.Equal(t, int16(0), p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
	require.Equal(t, int64(4), p.BaseOffset)

	// What is stored: RecordBatch v2 only, the gzip set still gzip.
	v4 := fetchV(t, rc, 4, "legacy", 0)
	require.Equal(t, int16(0), v4.ErrorCode)
	var codecs []batch.Compression
	for set := v4.RecordBatches; len(set) > 0; {
		bt, next, err := batch.Parse(set)
		require.NoError(t, err)
		codecs = append(codecs, bt.Attributes().Compression())
		set = next
	}
	require.Equal(t, []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionNone}, codecs)

	keys := [][]byte{[]byte("k0"), nil, []byte("k2"), []byte("k3"), []byte("k0"), []byte("k1")}
	values := []string{"v0", "v1", "v2", "v3", "r-0", "r-1"}
	for v := int16(0); v <= 3; v++ {
		f := fetchV(t, rc, v, "legacy", 0)
		require.Equal(t, int16(0), f.ErrorCode, "fetch v%d", v)
		require.Equal(t, int64(6), f.HighWatermark)
		magics, recs := legacyRecords(t, f.RecordBatches)
		require.Len(t, recs, 6, "fetch v%d", v)
		for i, r := range recs {
			require.Equal(t, fetchMagic(v), magics[i], "fetch v%d record %d", v, i)
			require.Equal(t, int64(i), r.Offset)
			require.Equal(t, keys[i], r.Key, "fetch v%d record %d", v, i)
			require.Equal(t, values[i], string(r.Value))
			if v >= 2 && i >= 2 && i < 4 {
				require.Equal(t, ts+int64(i-2), r.Timestamp)
			}
		}
		// From the middle of the gzip batch: the whole batch comes,
		// as in Kafka (the client skips the offsets before its own).
		_, recs = legacyRecords(t, fetchV(t, rc, v, "legacy", 3).RecordBatches)
		require.Equal(t, int64(2), recs[0].Offset)
	}

}

// TestDownConvertLeavesOutMarkers: a transaction marker in a read becomes
// no message of a down-converted answer, and an entry cut at the read's
// end is left out.
func TestDownConvertLeavesOutMarkers(t *testing.T) {
	set := buildBatch(t, "r", 2, batch.CompressionNone)
	marker, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 9, BaseOffset: 2, Timestamp: 1})
	require.NoError(t, err)
	set = append(set, marker...)
	tail := buildBatch(t, "s", 1, batch.CompressionNone)
	set = append(set, tail[:len(tail)-3]...) // cut by the byte limit
	out, err := downConvert(set, 1)
	require.NoError(t, err)
	magics, recs := legacyRecords(t, out)
	require.Equal(t, []int8{1, 1}, magics)
	require.Equal(t, "r-1", string(recs[1].Value))
}

// goldenMessage is one legacy message decoded by hand from the layout in
// KAFKA-LOG-LAYER.md section 12, independently of the broker's encoder.
type goldenMessage struct {
	offset     int64
	magic      int8
	attrs      byte
	timestamp  int64
	key, value []byte
}

// decodeGoldenSet decodes a legacy message set field by field, checking
// each message's size and CRC-32 (IEEE).
func decodeGoldenSet(t *testing.T, set []byte) []goldenMessage {
	t.Helper()
	var out []goldenMessage
	for len(set) > 0 {
		require.GreaterOrEqual(t, len(set), 12)
		off := int64(binary.BigEndian.Uint64(set))
		size := int(binary.BigEndian.Uint32(set[8:]))
		require.GreaterOrEqual(t, len(set), 12+size)
		msg := set[12 : 12+size]
		set = set[12+size:]
		require.Equal(t, binary.BigEndian.Uint32(msg), crc32.ChecksumIEEE(msg[4:]), "message CRC-32")
		m := goldenMessage{offset: off, magic: int8(msg[4]), attrs: msg[5], timestamp: -1}
		rest := msg[6:]
		if m.magic == 1 {
			m.timestamp = int64(binary.BigEndian.Uint64(rest))
			rest = rest[8:]
		}
		field := func() []byte {
			n := int32(binary.BigEndian.Uint32(rest))
			rest = rest[4:]
			if n < 0 {
				return nil
			}
			f := rest[:n]
			rest = rest[n:]
			return f
		}
		m.key, m.value = field(), field()
		require.Empty(t, rest, "bytes after the value")
		out = append(out, m)
	}
	return out
}

// goldenDecompress decompresses a wrapper's value by hand: gzip, xerial
// snappy chunks, or an LZ4 frame (under magic 0 with the header checksum
// Kafka writes there, KAFKA-3160, checked and then set to the frame
// format's so that the LZ4 reader takes it).
func goldenDecompress(t *testing.T, codec batch.Compression, magic int8, v []byte) []byte {
	t.Helper()
	switch codec {
	case batch.CompressionGzip:
		r, err := gzip.NewReader(bytes.NewReader(v))
		require.NoError(t, err)
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		return out
	case batch.CompressionSnappy:
		require.Equal(t, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"), v[:16], "xerial header")
		var out []byte
		for rest := v[16:]; len(rest) > 0; {
			n := binary.BigEndian.Uint32(rest)
			chunk, err := snappy.Decode(nil, rest[4:4+n])
			require.NoError(t, err)
			out = append(out, chunk...)
			rest = rest[4+n:]
		}
		return out
	case batch.CompressionLZ4:
		// Magic number, FLG, BD, HC: the second byte of the XXH32 of
		// the descriptor, under magic 0 of the magic number and the
		// descriptor (KAFKA-3160).
		require.Equal(t, []byte{0x04, 0x22, 0x4d, 0x18}, v[:4], "LZ4 frame magic")
		require.Zero(t, v[4]&0x09, "no content size, no dictionary id")
		want := byte(xxh32(v[4:6]) >> 8)
		if magic == 0 {
			want = byte(xxh32(v[:6]) >> 8)
		}
		require.Equal(t, want, v[6], "LZ4 header checksum of a magic %d wrapper", magic)
		v = bytes.Clone(v)
		v[6] = byte(xxh32(v[4:6]) >> 8) // the frame format's, for the reader
		out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(v)))
		require.NoError(t, err)
		return out
	}
	t.Fatalf("codec %s", codec)
	return nil
}

// A compressed batch read by Fetch v0-3 becomes one wrapper message with
// the batch's codec, as Kafka down-converts it: for each of gzip, snappy
// and lz4 and each legacy magic, the wrapper (at the last offset, null key,
// magic 1: the largest timestamp) and its inner messages (magic 0: absolute
// offsets, magic 1: relative to the batch's base offset) decoded by hand;
// partlog's own legacy reader reads the same records back. A zstd batch
// does not convert (UNSUPPORTED_COMPRESSION_TYPE in Fetch).
func TestDownConvertKeepsCodec(t *testing.T) {
	const base = 100
	for _, codec := range []batch.Compression{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4} {
		for _, magic := range []int8{0, 1} {
			set := buildBatch(t, "r", 3, codec)
			binary.BigEndian.PutUint64(set, base) // outside the CRC-32C
			bt, _, err := batch.Parse(set)
			require.NoError(t, err)
			first := bt.BaseTimestamp()
			out, err := downConvert(set, magic)
			require.NoError(t, err, "%s magic %d", codec, magic)

			wrappers := decodeGoldenSet(t, out)
			require.Len(t, wrappers, 1, "%s magic %d: one wrapper", codec, magic)
			w := wrappers[0]
			require.Equal(t, magic, w.magic)
			require.Equal(t, byte(codec), w.attrs, "%s magic %d: wrapper attributes", codec, magic)
			require.Equal(t, int64(base+2), w.offset, "wrapper at the last offset")
			require.Nil(t, w.key)
			if magic == 1 {
				require.Equal(t, first+2, w.timestamp, "wrapper timestamp: the largest")
			}
			inner := decodeGoldenSet(t, goldenDecompress(t, codec, magic, w.value))
			require.Len(t, inner, 3)
			for i, m := range inner {
				want := int64(base + i)
				if magic == 1 {
					want = int64(i)
				}
				require.Equal(t, want, m.offset, "%s magic %d inner %d offset", codec, magic, i)
				require.Equal(t, magic, m.magic)
				require.Equal(t, byte(0), m.attrs, "inner messages are uncompressed")
				require.Equal(t, fmt.Sprintf("k%d", i), string(m.key))
				require.Equal(t, fmt.Sprintf("r-%d", i), string(m.value))
				if magic == 1 {
					require.Equal(t, first+int64(i), m.timestamp)
				}
			}
			_, recs := legacyRecords(t, out)
			require.Len(t, recs, 3)
			for i, r := range recs {
				require.Equal(t, int64(base+i), r.Offset)
				require.Equal(t, fmt.Sprintf("r-%d", i), string(r.Value))
			}
		}
	}
	_, err := downConvert(buildBatch(t, "z", 2, batch.CompressionZstd), 1)
	require.ErrorIs(t, err, errZstdDownConversion)
}

// Produce v0-2 with a legacy message set that does not decode (a bad CRC,
// a truncated gzip value) gets CORRUPT_MESSAGE for that partition, as Kafka
// answers, and nothing is appended; a good partition of the same request
// is appended.
func TestOldProduceCorruptMessageSet(t *testing.T) {
	b := startBroker(t, t.TempDir(), 2)
	rc := dialRaw(t, b.addr)

	badCRC := appendLegacyMessage(nil, 0, 0, -1, false, []byte("k"), []byte("v"))
	badCRC[len(badCRC)-1] ^= 0xff
	inner := appendLegacyMessage(nil, 1, 0, 1, false, nil, []byte("v"))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(inner)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	cut := appendLegacyMessage(nil, 1, 0, 1, false, nil, gz.Bytes()[:gz.Len()/2])
	cut[legacyAttributesAt] |= byte(batch.CompressionGzip)
	binary.BigEndian.PutUint32(cut[12:], crc32.ChecksumIEEE(cut[16:]))
	good := appendLegacyMessage(nil, 1, 0, 1, false, nil, []byte("good"))

	for v, bad := range map[int16][]byte{0: badCRC, 2: cut} {
		p := produceRaw(t, rc, v, "corrupt", 0, bad)
		require.Equal(t, kerr.CorruptMessage.Code, p.ErrorCode, "produce v%d: %v", v, kerr.ErrorForCode(p.ErrorCode))
		require.Equal(t, int64(-1), p.BaseOffset)

		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "corrupt"
		for part, recs := range [][]byte{bad, good} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(part), recs
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req).(*kmsg.ProduceResponse)
		require.Len(t, resp.Topics, 1)
		codes := map[int32]int16{}
		for _, p := range resp.Topics[0].Partitions {
			codes[p.Partition] = p.ErrorCode
		}
		require.Equal(t, map[int32]int16{0: kerr.CorruptMessage.Code, 1: 0}, codes, "produce v%d", v)
	}
	for part, want := range []int64{0, 2} {
		f := fetchV(t, rc, 4, "corrupt", 0)
		if part == 1 {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxWaitMillis = 4, 100
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "corrupt"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			f = rc.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		}
		require.Equal(t, want, f.HighWatermark, "partition %d", part)
	}
}

// xxh32 gives XXH32's reference values (seed 0) for short inputs.
func TestXXH32(t *testing.T) {
	for in, want := range map[string]uint32{"": 0x02cc5d05, "a": 0x550d7456, "abc": 0x32d153ff} {
		require.Equal(t, want, xxh32([]byte(in)), "XXH32(%q)", in)
	}
}
