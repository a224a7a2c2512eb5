package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
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

// The zero-copy Fetch encoder must produce exactly the bytes Kafka sends,
// for every version it serves (zeroCopyFetch): kmsg's encoding of the same response,
// where a partition without records carries an empty records field (Kafka's
// MemoryRecords.EMPTY: length 0), never a null one (length -1), whatever the
// reason it has none.
func TestFetchFrameMatchesKmsg(t *testing.T) {
	p, err := plog.Open(filepath.Join(t.TempDir(), "t-0"), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	for range 3 {
		_, err := p.AppendBatch(buildBatch(t, "v", 5, batch.CompressionNone))
		require.NoError(t, err)
	}
	for v := zeroCopyFetch.min; v <= zeroCopyFetch.max; v++ {
		recs, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		resp := &fetchResponse{FetchResponse: kmsg.NewPtrFetchResponse()}
		resp.Version = v
		resp.ThrottleMillis = 7
		withData := kmsg.NewFetchResponseTopicPartition()
		withData.Partition, withData.HighWatermark, withData.LastStableOffset, withData.LogStartOffset = 0, 15, 15, 0
		withData.RecordBatches = recs.Bytes()
		// read_committed answers: aborted transactions (a list, maybe
		// empty) where read_uncommitted ones carry null (failed).
		a1, a2 := kmsg.NewFetchResponseTopicPartitionAbortedTransaction(), kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		a1.ProducerID, a1.FirstOffset = 7, 2
		a2.ProducerID, a2.FirstOffset = 1<<40, 9
		withData.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{a1, a2}
		empty := kmsg.NewFetchResponseTopicPartition()
		empty.Partition, empty.HighWatermark = 1, 3
		empty.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		failed := kmsg.NewFetchResponseTopicPartition()
		failed.Partition, failed.ErrorCode = 9, kerr.UnknownTopicOrPartition.Code
		t1 := kmsg.NewFetchResponseTopic()
		t1.Topic = "topic-one"
		t1.Partitions = []kmsg.FetchResponseTopicPartition{withData, empty}
		t2 := kmsg.NewFetchResponseTopic()
		t2.Topic = "two"
		t2.Partitions = []kmsg.FetchResponseTopicPartition{failed}
		resp.Topics = []kmsg.FetchResponseTopic{t1, t2}
		resp.recs = [][]recordSet{{recs, nil}, {nil}}

		// Kafka's bytes: the partitions without data carry empty
		// (non-null) records; the zero-copy encoder gets them nil.
		kafka := *resp.FetchResponse
		kafka.Topics = []kmsg.FetchResponseTopic{t1, t2}
		kafka.Topics[0].Partitions = []kmsg.FetchResponseTopicPartition{withData, empty}
		kafka.Topics[0].Partitions[1].RecordBatches = []byte{}
		kafka.Topics[1].Partitions = []kmsg.FetchResponseTopicPartition{failed}
		kafka.Topics[1].Partitions[0].RecordBatches = []byte{}
		want := appendResponse(nil, requestHeader{key: 1, version: v, correlationID: 42}, &kafka)
		// The last partition ends with its records length: int32 0, or
		// compact 0+1 and the partition's, topic's and response's tags.
		wantTail := []byte{0, 0, 0, 0}
		if v >= 12 {
			wantTail = []byte{1, 0, 0, 0}
		}
		require.True(t, bytes.HasSuffix(want, wantTail), "v%d: kmsg does not encode empty records as Kafka does: % x", v, want[len(want)-8:])
		var got bytes.Buffer
		require.NoError(t, writeFetch(&got, 42, resp))
		require.Equal(t, string(want), string(got.Bytes()), "v%d: zero-copy frame differs from kmsg's\n got % x\nwant % x", v, got.Bytes(), want)
		require.NoError(t, recs.Close())
	}
}

func fetchReq(topic string, partitions []int32, offset int64, maxBytes, partMax, minBytes, waitMs int32) *kmsg.FetchRequest {
	fr := kmsg.NewPtrFetchRequest()
	fr.Version, fr.ReplicaID = 12, -1
	fr.MaxBytes, fr.MinBytes, fr.MaxWaitMillis = maxBytes, minBytes, waitMs
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for _, p := range partitions {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offset, partMax
		ft.Partitions = append(ft.Partitions, fp)
	}
	fr.Topics = append(fr.Topics, ft)
	return fr
}

// countBatches frames a record set.
func countBatches(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		var err error
		_, b, err = batch.Parse(b)
		require.NoError(t, err)
		n++
	}
	return n
}

// MaxBytes, PartitionMaxBytes and "at least one batch" as Kafka applies them.
func TestFetchByteLimits(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 2)
	rc := dialRaw(t, b.addr)
	const topic = "limits"
	one := len(buildBatch(t, "x", 40, batch.CompressionNone))
	for part := range int32(2) {
		for range 3 {
			p := produceRaw(t, rc, 9, topic, part, buildBatch(t, "x", 40, batch.CompressionNone))
			require.Equal(t, int16(0), p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	cases := []struct {
		name              string
		maxBytes, partMax int32
		want              [2]int // batches per partition
	}{
		{"everything", 1 << 20, 1 << 20, [2]int{3, 3}},
		{"partition limit below one batch", 1 << 20, 10, [2]int{1, 0}},
		{"partition limit two batches", 1 << 20, int32(2*one + 1), [2]int{2, 2}},
		{"response limit one and a half batches", int32(one + one/2), 1 << 20, [2]int{1, 0}},
		{"response limit zero", 0, 1 << 20, [2]int{1, 0}}, // still one batch
		{"both limits zero", 0, 0, [2]int{1, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := rc.do(fetchReq(topic, []int32{0, 1}, 0, c.maxBytes, c.partMax, 1, 0)).(*kmsg.FetchResponse)
			for i, p := range resp.Topics[0].Partitions {
				require.Equal(t, int16(0), p.ErrorCode, "partition %d: %+v", i, p)
				require.Equal(t, int64(120), p.HighWatermark, "partition %d: %+v", i, p)
				require.Equal(t, int64(120), p.LastStableOffset, "partition %d: %+v", i, p)
				require.Equal(t, int64(0), p.LogStartOffset, "partition %d: %+v", i, p)
				got := countBatches(t, p.RecordBatches)
				assert.Equal(t, c.want[i], got, "partition %d: %d batches, want %d", i, got, c.want[i])
			}
		})
	}
}

// A fetch at the end of the log parks until data arrives or MaxWait passes.
func TestFetchWaitsForData(t *testing.T) {
	leakCheck(t)
	parked := make(chan struct{}, 16)
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.FetchParked = func() {
			select {
			case parked <- struct{}{}:
			default:
			}
		}
	})
	rc := dialRaw(t, b.addr)
	const topic = "waiting"
	produceRaw(t, rc, 9, topic, 0, buildBatch(t, "a", 2, batch.CompressionNone))

	// Nothing comes: the answer arrives after MaxWait, empty.
	start := time.Now()
	resp := rc.do(fetchReq(topic, []int32{0}, 2, 1<<20, 1<<20, 1, 300)).(*kmsg.FetchResponse)
	el := time.Since(start)
	assert.False(t, el < 250*time.Millisecond, "empty fetch answered after %v, want about 300ms", el)
	assert.False(t, el > 5*time.Second, "empty fetch answered after %v, want about 300ms", el)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode, "empty fetch: %+v", p)
	require.Empty(t, p.RecordBatches, "empty fetch: %+v", p)
	require.Equal(t, int64(2), p.HighWatermark, "empty fetch: %+v", p)

	// Data comes while the fetch is parked: it answers at once. The
	// empty fetch above parked too; forget its signal.
	for len(parked) > 0 {
		<-parked
	}
	done := make(chan *kmsg.FetchResponse, 1)
	waiter := dialRaw(t, b.addr)
	corr := waiter.send(fetchReq(topic, []int32{0}, 2, 1<<20, 1<<20, 1, 10_000))
	go func() {
		raw, err := waiter.readFrame()
		if err != nil || int32(binary.BigEndian.Uint32(raw)) != corr {
			done <- nil
			return
		}
		r := kmsg.NewPtrFetchResponse()
		r.Version = 12
		if r.ReadFrom(raw[5:]) != nil {
			done <- nil
			return
		}
		done <- r
	}()
	select {
	case <-parked:
	case r := <-done:
		require.Failf(t, "the fetch answered before any data came", "response %+v", r)
	case <-time.After(8 * time.Second):
		require.Fail(t, "the fetch did not park")
	}
	start = time.Now()
	produceRaw(t, rc, 9, topic, 0, buildBatch(t, "b", 3, batch.CompressionNone))
	select {
	case r := <-done:
		require.NotNil(t, r, "parked fetch failed")
		p := r.Topics[0].Partitions[0]
		require.Equal(t, 1, countBatches(t, p.RecordBatches), "parked fetch got %+v", p)
		require.Equal(t, int64(5), p.HighWatermark, "parked fetch got %+v", p)
		el := time.Since(start)
		assert.False(t, el > 5*time.Second, "parked fetch woke after %v", el)
	case <-time.After(8 * time.Second):
		require.Fail(t, "parked fetch did not wake up on append")
	}
}

// acks=0 gets no response: the next answer on the connection is the next
// request's.
func TestAcksZeroNoResponse(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 0, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "fire-and-forget"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = buildBatch(t, "f", 4, batch.CompressionNone)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.send(req)
	lo := listOffset(t, rc, "fire-and-forget", 0, plog.LatestTimestamp)
	require.Equal(t, int16(0), lo.ErrorCode, "after acks=0 produce: %+v", lo)
	require.Equal(t, int64(4), lo.Offset, "after acks=0 produce: %+v", lo)
}

// acks=0 with an error in any partition closes the connection, as Kafka
// closes it (KafkaApis.handleProduceRequest): the producer gets no answer,
// so the closed connection is what tells it to refresh its metadata.
// Without an error the connection stays open.
func TestAcksZeroErrorClosesConnection(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	good := buildBatch(t, "f", 2, batch.CompressionNone)
	for name, version := range map[string]int16{"v9": 9, "legacy v2": 2} {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = version, 0, 1000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "acks-zero-" + fmt.Sprint(version)
			ok := kmsg.NewProduceRequestTopicPartition()
			ok.Records = append([]byte(nil), good...)
			rt.Partitions = append(rt.Partitions, ok)
			req.Topics = []kmsg.ProduceRequestTopic{rt}
			rc.send(req)
			lo := listOffset(t, rc, rt.Topic, 0, plog.LatestTimestamp)
			require.Equal(t, int64(2), lo.Offset, "no error: the connection serves on: %+v", lo)

			bad := kmsg.NewProduceRequestTopicPartition()
			bad.Partition = 5 // no such partition
			bad.Records = append([]byte(nil), good...)
			rt.Partitions = []kmsg.ProduceRequestTopicPartition{ok, bad}
			req.Topics = []kmsg.ProduceRequestTopic{rt}
			rc.send(req)
			// A request after it gets no answer: the broker closed the
			// connection (this write may already see the reset).
			lreq := kmsg.NewPtrListOffsetsRequest()
			lreq.Version = 7
			frame := binary.BigEndian.AppendUint32(nil, 0)
			frame = binary.BigEndian.AppendUint16(frame, uint16(lreq.Key()))
			frame = binary.BigEndian.AppendUint16(frame, uint16(lreq.Version))
			frame = binary.BigEndian.AppendUint32(frame, 99)
			frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
			frame = append(frame, 0)                             // header tags (v6+ is flexible)
			frame = lreq.AppendTo(frame)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			_, _ = rc.c.Write(frame)
			raw, err := rc.readFrame()
			require.Error(t, err, "acks=0 with UNKNOWN_TOPIC_OR_PARTITION: the connection stayed open, the next request was answered (% x)", raw[:min(len(raw), 8)])
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the connection was neither closed nor answered")
		})
	}
}

// Many records across many segments: a consumer reads them all, in order,
// segment after segment (each Fetch answers from one segment).
func TestConsumeAcrossSegments(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.SegmentBytes = 16 << 10 })
	const topic, n = "many", 3000
	pr := newClient(t, b.addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(4<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%06d %s", i, "padding padding padding padding padding padding")})
	}
	require.NoError(t, pr.ProduceSync(ctx, recs...).FirstErr())
	cl := newClient(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(32<<10), kgo.FetchMaxPartitionBytes(8<<10))
	got := consume(ctx, t, cl, n)
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset, "record %d: offset %d value %q", i, r.Offset, r.Value[:6])
		require.Equal(t, fmt.Sprintf("%06d", i), string(r.Value[:6]), "record %d: offset %d value %q", i, r.Offset, r.Value[:6])
	}
	b.stop(t)
	p, err := plog.Open(filepath.Join(b.dir, topic+"-0"), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	segs := len(p.SegmentInfos())
	assert.GreaterOrEqual(t, segs, 10, "only %d segments: the test meant to cross many", segs)
	assert.NoError(t, p.Verify(), "partition after the run")
}
