package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

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
