package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// leakCheck fails the test if goroutines of partlog or franz-go started
// during it outlive it (see checkNoLeak).
func leakCheck(t *testing.T) {
	base := len(ourGoroutines())
	t.Cleanup(func() { checkNoLeak(t, base) })
}

// The field report's scenario over the wire: a batch of 11 records then one
// of 3 must come back as 14 records with offsets 0..13, before and after a
// restart.
func TestProduceElevenThenThreeConsumeFourteen(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	const topic = "field-report"

	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	p := produceRaw(t, rc, 9, topic, 0, buildBatch(t, "a", 11, batch.CompressionNone))
	require.Equal(t, int16(0), p.ErrorCode, "first batch: error %d base %d, want 0, 0", p.ErrorCode, p.BaseOffset)
	require.Equal(t, int64(0), p.BaseOffset, "first batch: error %d base %d, want 0, 0", p.ErrorCode, p.BaseOffset)
	p = produceRaw(t, rc, 3, topic, 0, buildBatch(t, "b", 3, batch.CompressionNone))
	require.Equal(t, int16(0), p.ErrorCode, "second batch: error %d base %d, want 0, 11", p.ErrorCode, p.BaseOffset)
	require.Equal(t, int64(11), p.BaseOffset, "second batch: error %d base %d, want 0, 11", p.ErrorCode, p.BaseOffset)
	lo := listOffset(t, rc, topic, 0, plog.LatestTimestamp)
	require.Equal(t, int64(14), lo.Offset, "latest offset %d, want 14", lo.Offset)

	check := func(addr string) {
		t.Helper()
		cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {0: kgo.NewOffset().AtStart()},
		}))
		recs := consume(ctx, t, cl, 14)
		require.Len(t, recs, 14, "got %d records, want 14", len(recs))
		for i, r := range recs {
			want := fmt.Sprintf("a-%d", i)
			if i >= 11 {
				want = fmt.Sprintf("b-%d", i-11)
			}
			require.Equal(t, int64(i), r.Offset, "record %d: offset %d value %q, want %d %q", i, r.Offset, r.Value, i, want)
			require.Equal(t, want, string(r.Value), "record %d: offset %d value %q, want %d %q", i, r.Offset, r.Value, i, want)
		}
		cl.Close()
	}
	check(b.addr)

	b.stop(t)
	b = startBroker(t, dir, 1)
	check(b.addr)
	rc = dialRaw(t, b.addr)
	lo = listOffset(t, rc, topic, 0, plog.EarliestTimestamp)
	require.Equal(t, int16(0), lo.ErrorCode, "earliest after restart: %+v", lo)
	require.Equal(t, int64(0), lo.Offset, "earliest after restart: %+v", lo)
	lo = listOffset(t, rc, topic, 0, plog.LatestTimestamp)
	require.Equal(t, int64(14), lo.Offset, "latest after restart %d, want 14", lo.Offset)
}

// Commit an offset, restart, resume from it; lag = log end offset -
// committed offset.
func TestCommitRestartResumeAndLag(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	const topic, group = "orders", "billing"

	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	produceRaw(t, rc, 9, topic, 0, buildBatch(t, "a", 11, batch.CompressionNone))
	produceRaw(t, rc, 9, topic, 0, buildBatch(t, "b", 3, batch.CompressionNone))

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 8
	commit.Group = group
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.Metadata = 0, 9, kmsg.StringPtr("checkpoint-9")
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp := rc.do(commit).(*kmsg.OffsetCommitResponse)
	code := cresp.Topics[0].Partitions[0].ErrorCode
	require.Equal(t, int16(0), code, "commit: %v", kerr.ErrorForCode(code))

	b.stop(t)
	b = startBroker(t, dir, 1)
	rc = dialRaw(t, b.addr)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 7
	fetch.Group = group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic = topic
	ft.Partitions = []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	fresp := rc.do(fetch).(*kmsg.OffsetFetchResponse)
	got := fresp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), got.ErrorCode, "committed after restart: %+v", got)
	require.Equal(t, int64(9), got.Offset, "committed after restart: %+v", got)
	require.NotNil(t, got.Metadata, "committed after restart: %+v", got)
	require.Equal(t, "checkpoint-9", *got.Metadata, "committed after restart: %+v", got)

	// Kafka's lag: log end offset (what ListOffsets latest returns on a
	// single node: the high watermark) minus the committed offset.
	end := listOffset(t, rc, topic, 0, plog.LatestTimestamp).Offset
	lag := end - got.Offset
	require.Equal(t, int64(14), end, "end %d committed %d lag %d, want 14 9 5", end, got.Offset, lag)
	require.Equal(t, int64(5), lag, "end %d committed %d lag %d, want 14 9 5", end, got.Offset, lag)

	// A consumer resumes from the committed offset.
	cl := newClient(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().At(got.Offset)},
	}))
	recs := consume(ctx, t, cl, 5)
	for i, r := range recs {
		require.Equal(t, 9+int64(i), r.Offset, "resumed record %d at offset %d, want %d", i, r.Offset, 9+i)
	}
	require.Equal(t, "a-9", string(recs[0].Value), "resumed values %q..%q", recs[0].Value, recs[4].Value)
	require.Equal(t, "b-2", string(recs[4].Value), "resumed values %q..%q", recs[0].Value, recs[4].Value)
}

// A kgo consumer group: consume and commit, restart the broker, the group
// resumes after what it committed.
func TestConsumerGroupResumesAfterRestart(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	const topic, group = "events", "readers"

	b := startBroker(t, dir, 2)
	producer := newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		require.NoError(t, producer.ProduceSync(ctx, recs...).FirstErr())
	}
	produce("first", 10)
	producer.Close()

	groupClient := func(addr string) *kgo.Client {
		return newClient(t, addr,
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond),
		)
	}
	cl := groupClient(b.addr)
	recs := consume(ctx, t, cl, 10)
	require.Len(t, recs, 10, "first round: %d records", len(recs))
	require.NoError(t, cl.CommitUncommittedOffsets(ctx), "commit")
	cl.Close() // leaves the group

	b.stop(t)
	b = startBroker(t, dir, 2)
	producer = newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce("second", 4)
	producer.Close()

	cl = groupClient(b.addr)
	recs = consume(ctx, t, cl, 4)
	for _, r := range recs {
		require.GreaterOrEqual(t, len(r.Value), 6, "after restart the group re-read %q (offset %d of partition %d)", r.Value, r.Offset, r.Partition)
		require.Equal(t, "second", string(r.Value[:6]), "after restart the group re-read %q (offset %d of partition %d)", r.Value, r.Offset, r.Partition)
	}
	// Nothing more arrives: the first round was committed.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	fs := cl.PollFetches(short)
	require.Equal(t, 0, fs.NumRecords(), "%d extra records after resuming", fs.NumRecords())
}

// Batches of every codec, produced by kgo, are stored as sent and come back.
func TestCompressedBatchesRoundTrip(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := startBroker(t, dir, 1)

	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		want  batch.Compression
	}{
		{"none", kgo.NoCompression(), batch.CompressionNone},
		{"gzip", kgo.GzipCompression(), batch.CompressionGzip},
		{"snappy", kgo.SnappyCompression(), batch.CompressionSnappy},
		{"lz4", kgo.Lz4Compression(), batch.CompressionLZ4},
		{"zstd", kgo.ZstdCompression(), batch.CompressionZstd},
	}
	const n = 50
	for _, c := range codecs {
		topic := "codec-" + c.name
		pr := newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(c.codec),
			kgo.ProducerLinger(50*time.Millisecond))
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{
				Key:     fmt.Appendf(nil, "key-%d", i),
				Value:   fmt.Appendf(nil, "%s value %d %s", c.name, i, "compressible compressible compressible"),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(c.name)}},
			})
		}
		require.NoError(t, pr.ProduceSync(ctx, recs...).FirstErr(), "%s", c.name)
		pr.Close()

		cl := newClient(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		got := consume(ctx, t, cl, n)
		for i, r := range got {
			require.Equal(t, int64(i), r.Offset, "%s record %d: offset %d key %q value %q headers %v", c.name, i, r.Offset, r.Key, r.Value, r.Headers)
			require.Equal(t, string(recs[i].Value), string(r.Value), "%s record %d: offset %d key %q value %q headers %v", c.name, i, r.Offset, r.Key, r.Value, r.Headers)
			require.Equal(t, string(recs[i].Key), string(r.Key), "%s record %d: offset %d key %q value %q headers %v", c.name, i, r.Offset, r.Key, r.Value, r.Headers)
			require.Len(t, r.Headers, 1, "%s record %d: offset %d key %q value %q headers %v", c.name, i, r.Offset, r.Key, r.Value, r.Headers)
			require.Equal(t, c.name, string(r.Headers[0].Value), "%s record %d: offset %d key %q value %q headers %v", c.name, i, r.Offset, r.Key, r.Value, r.Headers)
		}
		cl.Close()
	}

	// The stored batches carry the producer's codec, byte for byte.
	b.stop(t)
	for _, c := range codecs {
		p, err := plog.Open(filepath.Join(dir, "codec-"+c.name+"-0"), plog.Config{})
		require.NoError(t, err)
		recs, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		rest := recs.Bytes()
		for len(rest) > 0 {
			var bt batch.Batch
			bt, rest, err = batch.Parse(rest)
			require.NoError(t, err)
			require.NoError(t, bt.Validate(), "%s: stored batch", c.name)
			got := bt.Attributes().Compression()
			assert.Equal(t, c.want, got, "%s: stored codec %v", c.name, got)
		}
		_ = recs.Close()
		require.NoError(t, p.Close())
	}
}

// Bad produce input gets Kafka's error codes and changes nothing.
func TestBadProduceChangesNothing(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	const topic = "strict"
	p := produceRaw(t, rc, 9, topic, 0, buildBatch(t, "ok", 2, batch.CompressionNone))
	require.Equal(t, int16(0), p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))

	good := buildBatch(t, "x", 3, batch.CompressionNone)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-2] ^= 0x40 // inside the CRC range
	badCRCZstd := buildBatch(t, "z", 3, batch.CompressionZstd)
	badCRCZstd[batch.HeaderSize+1] ^= 0xff
	truncated := good[:len(good)-5]
	twoBatches := append(append([]byte(nil), good...), good...)
	hugeLength := append([]byte(nil), good...)
	hugeLength[8] = 0x7f
	legacy := append([]byte(nil), good...)
	legacy[16] = 1 // magic 1
	logAppendTime := append(batch.Batch(nil), good...)
	logAppendTime.SetAttributes(logAppendTime.Attributes() | 0x08) // LogAppendTime: only the broker sets it
	logAppendTime.SetCRC()
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("late"), Timestamp: time.Now().Add(2 * time.Hour).UnixMilli()}))
	future, err := bld.Build() // past message.timestamp.after.max.ms (1 hour)
	require.NoError(t, err)

	cases := []struct {
		name      string
		topic     string
		partition int32
		records   []byte
		want      int16
	}{
		{"crc mismatch", topic, 0, flipped, kerr.CorruptMessage.Code},
		{"crc mismatch compressed", topic, 0, badCRCZstd, kerr.CorruptMessage.Code},
		{"truncated batch", topic, 0, truncated, kerr.CorruptMessage.Code},
		{"garbage", topic, 0, []byte("definitely not a record batch, but long enough to have a header of sixty-one bytes"), kerr.CorruptMessage.Code},
		{"length past the end", topic, 0, hugeLength, kerr.CorruptMessage.Code},
		{"empty records", topic, 0, nil, kerr.CorruptMessage.Code},
		{"two batches", topic, 0, twoBatches, kerr.InvalidRecord.Code},
		{"legacy magic", topic, 0, legacy, kerr.InvalidRecord.Code},
		{"LogAppendTime from a producer", topic, 0, logAppendTime, kerr.InvalidTimestamp.Code},
		{"timestamp two hours ahead", topic, 0, future, kerr.InvalidTimestamp.Code},
		{"unknown partition", topic, 7, good, kerr.UnknownTopicOrPartition.Code},
		{"invalid topic name", "bad/name", 0, good, kerr.InvalidTopicException.Code},
		{"internal topic", offsetsTopic, 0, good, kerr.InvalidTopicException.Code},
		{"transaction state topic", txnStateTopic, 0, good, kerr.InvalidTopicException.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := produceRaw(t, rc, 9, c.topic, c.partition, append([]byte(nil), c.records...))
			require.Equal(t, c.want, p.ErrorCode, "error %v, want %v", kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(c.want))
			lo := listOffset(t, rc, topic, 0, plog.LatestTimestamp)
			require.Equal(t, int64(2), lo.Offset, "log end moved to %d", lo.Offset)
		})
	}

	// Invalid acks: refused for every partition, nothing written.
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, 2, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = append([]byte(nil), good...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	code := rc.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	require.Equal(t, kerr.InvalidRequiredAcks.Code, code, "acks=2: %v", kerr.ErrorForCode(code))

	// The next good batch gets the next offset.
	p = produceRaw(t, rc, 9, topic, 0, append([]byte(nil), good...))
	require.Equal(t, int16(0), p.ErrorCode, "good batch after bad ones: %v base %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	require.Equal(t, int64(2), p.BaseOffset, "good batch after bad ones: %v base %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)

	// Fetch errors.
	fr := kmsg.NewPtrFetchRequest()
	fr.Version, fr.MaxBytes, fr.MaxWaitMillis, fr.MinBytes = 11, 1<<20, 0, 1
	for _, tc := range []struct {
		topic     string
		partition int32
		offset    int64
	}{{topic, 0, 99}, {topic, 3, 0}, {"nope", 0, 0}} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = tc.topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = tc.partition, tc.offset, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
	}
	fresp := rc.do(fr).(*kmsg.FetchResponse)
	wantCodes := []int16{kerr.OffsetOutOfRange.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}
	for i, w := range wantCodes {
		p := fresp.Topics[i].Partitions[0]
		assert.Equal(t, w, p.ErrorCode, "fetch case %d: %v, want %v", i, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(w))
	}
	hw := fresp.Topics[0].Partitions[0].HighWatermark
	assert.Equal(t, int64(5), hw, "out-of-range answer carries high watermark %d, want 5", hw)
}

// Produce v3-6 cannot carry zstd (KIP-110 gave it to v7+): Kafka's
// ProduceRequest.validateRecords answers UNSUPPORTED_COMPRESSION_TYPE and
// writes nothing; from v7 on the batch is stored.
func TestProduceZstdNeedsV7(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	const topic = "zstd-versions"
	zstd := buildBatch(t, "z", 3, batch.CompressionZstd)
	for v := int16(3); v < 7; v++ {
		p := produceRaw(t, rc, v, topic, 0, append([]byte(nil), zstd...))
		require.Equal(t, kerr.UnsupportedCompressionType.Code, p.ErrorCode, "zstd at Produce v%d: %v", v, kerr.ErrorForCode(p.ErrorCode))
		require.Equal(t, int64(-1), p.BaseOffset, "zstd at Produce v%d", v)
	}
	lo := listOffset(t, rc, topic, 0, plog.LatestTimestamp)
	require.Equal(t, int64(0), lo.Offset, "a zstd batch below v7 was written")
	p := produceRaw(t, rc, 7, topic, 0, append([]byte(nil), zstd...))
	require.Equal(t, int16(0), p.ErrorCode, "zstd at Produce v7: %v", kerr.ErrorForCode(p.ErrorCode))
	require.Equal(t, int64(0), p.BaseOffset)
	p = produceRaw(t, rc, 3, topic, 0, buildBatch(t, "g", 2, batch.CompressionGzip))
	require.Equal(t, int16(0), p.ErrorCode, "gzip at Produce v3: %v", kerr.ErrorForCode(p.ErrorCode))
	require.Equal(t, int64(3), p.BaseOffset)
}

// Protocol-level abuse: an unsupported ApiVersions version gets a v0
// UNSUPPORTED_VERSION answer; an oversized frame or an unknown API closes
// the connection; the broker keeps serving.
func TestProtocolErrors(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)

	rc := dialRaw(t, b.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	resp := rc.do(av).(*kmsg.ApiVersionsResponse)
	require.Equal(t, int16(0), resp.ErrorCode, "ApiVersions v4: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	require.Len(t, resp.ApiKeys, len(supported), "ApiVersions v4: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	// Version 99: the answer is v0-encoded.
	rc.corr++
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, byte(rc.corr), 0xff, 0xff, 0}
	frame[3] = byte(len(frame) - 4)
	rc.write(frame)
	raw, err := rc.readFrame()
	require.NoError(t, err)
	v0 := kmsg.NewPtrApiVersionsResponse()
	err = v0.ReadFrom(raw[4:])
	require.NoError(t, err, "ApiVersions v99: %v error %d keys %d", err, v0.ErrorCode, len(v0.ApiKeys))
	require.Equal(t, kerr.UnsupportedVersion.Code, v0.ErrorCode, "ApiVersions v99: %v error %d keys %d", err, v0.ErrorCode, len(v0.ApiKeys))
	require.NotEmpty(t, v0.ApiKeys, "ApiVersions v99: %v error %d keys %d", err, v0.ErrorCode, len(v0.ApiKeys))

	for name, frame := range map[string][]byte{
		"oversized frame":     {0x7f, 0xff, 0xff, 0xff},
		"negative size":       {0xff, 0xff, 0xff, 0xf0},
		"unknown api":         {0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"produce v0":          {0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"truncated metadata":  {0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 9},
		"client id overflows": {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, b.addr)
			c.write(frame)
			_, err := c.readFrame()
			require.Error(t, err, "the broker answered instead of closing the connection")
		})
	}

	// Still serving.
	rc = dialRaw(t, b.addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto-created")}}
	md.AllowAutoTopicCreation = true
	mresp := rc.do(md).(*kmsg.MetadataResponse)
	require.Len(t, mresp.Topics, 1, "metadata: %+v", mresp.Topics)
	require.Equal(t, int16(0), mresp.Topics[0].ErrorCode, "metadata: %+v", mresp.Topics)
	require.Len(t, mresp.Topics[0].Partitions, 1, "metadata: %+v", mresp.Topics)
	require.Len(t, mresp.Brokers, 1, "brokers: %+v", mresp.Brokers)
	require.Equal(t, "127.0.0.1", mresp.Brokers[0].Host, "brokers: %+v", mresp.Brokers)
}

// The broker refuses to listen beyond loopback without -allow-remote.
func TestRefusesRemoteAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0"} {
		err := run(context.Background(), config{Addr: addr, DataDir: t.TempDir()})
		require.Error(t, err, "%s: accepted", addr)
	}
}

// Invalid settings stop the broker before it listens.
func TestBadConfig(t *testing.T) {
	for name, cfg := range map[string]config{
		"cleanup policy": {Addr: "127.0.0.1:0", DataDir: t.TempDir(), CleanupPolicy: "shred"},
		"advertise":      {Addr: "127.0.0.1:0", DataDir: t.TempDir(), Advertise: "no-port"},
		"data dir":       {Addr: "127.0.0.1:0", DataDir: "/dev/null/x"},
	} {
		assert.Error(t, run(context.Background(), cfg), "%s: accepted", name)
	}
}

// ListOffsets by timestamp finds the first record at or after it.
func TestListOffsetsByTimestamp(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	const topic = "times"
	base := int64(1_700_000_000_000)
	for i := range 3 {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		for j := range 4 {
			require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: base + int64(i*100+j*10)}))
		}
		bt, err := bld.Build()
		require.NoError(t, err)
		p := produceRaw(t, rc, 9, topic, 0, bt)
		require.Equal(t, int16(0), p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
	}
	for _, c := range []struct {
		ts, offset int64
	}{
		{base, 0}, {base + 15, 2}, {base + 100, 4}, {base + 230, 11}, {plog.EarliestTimestamp, 0}, {plog.LatestTimestamp, 12},
		{plog.MaxTimestamp, 11}, {base + 231, -1},
	} {
		got := listOffset(t, rc, topic, 0, c.ts)
		assert.Equal(t, int16(0), got.ErrorCode, "ts %d: offset %d error %d, want %d", c.ts, got.Offset, got.ErrorCode, c.offset)
		assert.Equal(t, c.offset, got.Offset, "ts %d: offset %d error %d, want %d", c.ts, got.Offset, got.ErrorCode, c.offset)
	}
}

// Mutated requests of every API and version: the broker answers or closes
// the connection, never panics, and data of other topics is untouched.
func TestMutatedRequestsNeverCrash(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	p := produceRaw(t, rc, 9, "precious", 0, buildBatch(t, "keep", 5, batch.CompressionNone))
	require.Equal(t, int16(0), p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
	good := buildBatch(t, "f", 3, batch.CompressionGzip)

	// One plausible request per API, all about topic "fuzz".
	requests := func(v int16) []kmsg.Request {
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = -1, 1000
		produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: append([]byte(nil), good...)}}}}
		fetch := fetchReq("fuzz", []int32{0}, 0, 1<<20, 1<<20, 0, 0)
		list := kmsg.NewPtrListOffsetsRequest()
		list.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
		md := kmsg.NewPtrMetadataRequest()
		md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fuzz")}}
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Group = "g"
		commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fuzz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
		ofetch := kmsg.NewPtrOffsetFetchRequest()
		ofetch.Group = "g"
		ofetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "fuzz", Partitions: []int32{0}}}
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey, find.CoordinatorKeys = "g", []string{"g"}
		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 6000, 100, "consumer"
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.MemberID = "g", "m"
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID = "g", "m"
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group, leave.MemberID = "g", "m"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		api := kmsg.NewPtrApiVersionsRequest()
		pid := kmsg.NewPtrInitProducerIDRequest()
		all := []kmsg.Request{produce, fetch, list, md, commit, ofetch, find, join, sync, hb, leave, api, pid}
		var out []kmsg.Request
		for _, r := range all {
			vr := supported[kmsg.Key(r.Key())]
			if v >= vr.min && v <= vr.max {
				r.SetVersion(v)
				out = append(out, r)
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	budget := time.Now().Add(30 * time.Second) // bound the test even if many requests park
	for v := int16(0); v <= 12 && time.Now().Before(budget); v++ {
		for _, req := range requests(v) {
			body := req.AppendTo(nil)
			for range 12 {
				mut := append([]byte(nil), body...)
				for range 1 + rng.IntN(3) {
					if len(mut) > 0 {
						mut[rng.IntN(len(mut))] ^= byte(1 + rng.IntN(255))
					}
				}
				if rng.IntN(4) == 0 && len(mut) > 0 {
					mut = mut[:rng.IntN(len(mut))]
				}
				c := dialRaw(t, b.addr)
				frame := []byte{0, 0, 0, 0}
				frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
				frame = binary.BigEndian.AppendUint16(frame, uint16(v))
				frame = binary.BigEndian.AppendUint32(frame, 1)
				frame = append(frame, 0xff, 0xff) // null client id
				if req.IsFlexible() {
					frame = append(frame, 0)
				}
				frame = append(frame, mut...)
				binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
				c.write(frame)
				// An answer, a closed connection, or a request that
				// legitimately parks (JoinGroup, Fetch with MinBytes).
				_, _ = c.readFrameWithin(300 * time.Millisecond)
				_ = c.c.Close()
			}
		}
	}
	rc = dialRaw(t, b.addr)
	lo := listOffset(t, rc, "precious", 0, plog.LatestTimestamp)
	require.Equal(t, int16(0), lo.ErrorCode, "precious topic after the storm: %+v", lo)
	require.Equal(t, int64(5), lo.Offset, "precious topic after the storm: %+v", lo)
}

// Two kgo consumers in one group split a topic's partitions; when one
// leaves, the other takes over its partition and continues from the
// committed offsets.
func TestConsumerGroupTwoMembers(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := startBroker(t, t.TempDir(), 2)
	const topic, group = "shared", "pair"
	producer := newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		require.NoError(t, producer.ProduceSync(ctx, recs...).FirstErr())
	}
	produce("first", 20)

	member := func() *kgo.Client {
		return newClient(t, b.addr,
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(200*time.Millisecond),
			kgo.AutoCommitInterval(100*time.Millisecond),
		)
	}
	a := member()
	bm := member()

	// Poll both until every record arrived and each member owns a partition.
	seen := make(map[string]bool)
	owners := make(map[string]map[int32]bool) // member -> partitions it read
	poll := func(name string, cl *kgo.Client) {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		fs := cl.PollFetches(pctx)
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)] = true
			if owners[name] == nil {
				owners[name] = make(map[int32]bool)
			}
			owners[name][r.Partition] = true
		})
	}
	for len(seen) < 20 || len(owners) < 2 {
		require.NoError(t, ctx.Err(), "saw %d of 20 records, owners %v", len(seen), owners)
		poll("a", a)
		poll("b", bm)
		if len(seen) == 20 && len(owners) < 2 {
			produce("more", 2) // give the late member something of its own
		}
	}
	for name, ps := range owners {
		if len(ps) != 1 {
			t.Logf("member %s read partitions %v (a rebalance moved one)", name, ps)
		}
	}

	// b leaves (committing what it read); a takes over everything new.
	require.NoError(t, bm.CommitUncommittedOffsets(ctx))
	bm.Close()
	before := len(seen)
	produce("after", 10)
	got := 0
	for got < 10 {
		require.NoError(t, ctx.Err(), "after b left, a got %d of 10 new records", got)
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := a.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 5 && string(r.Value[:5]) == "after" {
				got++
			} else {
				assert.True(t, seen[string(r.Value)], "unexpected record %q", r.Value)
			}
		})
	}
	require.Equal(t, 10, got, "a got %d new records", got)
	require.Len(t, seen, before, "a got %d new records", got)
}
