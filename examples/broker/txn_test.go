package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
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

// createTopic creates topic through Metadata (auto-creation).
func createTopic(t *testing.T, rc *rawConn, topic string) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.MetadataResponse)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "create %s", topic)
}

// txnInit sends InitProducerID for a transactional id.
func txnInit(t *testing.T, rc *rawConn, txnID string, timeoutMs int32) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(txnID)
	req.TransactionTimeoutMillis = timeoutMs
	req.ProducerID, req.ProducerEpoch = -1, -1
	return rc.do(req).(*kmsg.InitProducerIDResponse)
}

// txnAddPartitions sends AddPartitionsToTxn v3 for one topic and returns
// the first partition's code.
func txnAddPartitions(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, topic string, parts ...int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.AddPartitionsToTxnResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, len(parts))
	return resp.Topics[0].Partitions[0].ErrorCode
}

// txnAddOffsets sends AddOffsetsToTxn v3.
func txnAddOffsets(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
	return rc.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

// txnOffsetCommit sends TxnOffsetCommit v3 (generation -1) of one offset
// and returns its code.
func txnOffsetCommit(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, group, topic string, partition int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.TxnOffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// txnEnd sends EndTxn v3.
func txnEnd(t *testing.T, rc *rawConn, txnID string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	return rc.do(req).(*kmsg.EndTxnResponse).ErrorCode
}

// committedOffset sends OffsetFetch v7 for one partition.
func committedOffset(t *testing.T, rc *rawConn, group, topic string, partition int32, requireStable bool) kmsg.OffsetFetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.RequireStable = requireStable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.OffsetFetchResponse)
	return resp.Topics[0].Partitions[0]
}

// txnBatch builds n records "<prefix>-<i>" as one batch of producer pid at
// epoch, base sequence seq; transactional when txn is set.
func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, txn bool, prefix string, n int) []byte {
	t.Helper()
	return txnBatchAt(t, pid, epoch, seq, txn, prefix, n, time.Now().UnixMilli())
}

// txnBatchAt is txnBatch with the records' timestamp.
func txnBatchAt(t *testing.T, pid int64, epoch int16, seq int32, txn bool, prefix string, n int, now int64) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{
		PartitionLeaderEpoch: -1,
		Producer:             &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: seq},
		Transactional:        txn,
	})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i), Timestamp: now}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// fetchAt sends one Fetch v12 for topic/partition from offset at the given
// isolation level, without waiting.
func fetchAt(t *testing.T, rc *rawConn, topic string, partition int32, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(topic, []int32{partition}, offset, 1<<20, 1<<20, 0, 0)
	req.IsolationLevel = isolation
	resp := rc.do(req).(*kmsg.FetchResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// dataValues decodes the data records (not markers) of fetched batches,
// with their producer id and offset.
func dataValues(t *testing.T, records []byte) []string {
	t.Helper()
	var out []string
	var dec batch.Decoder
	for len(records) > 0 {
		b, rest, err := batch.Parse(records)
		require.NoError(t, err)
		records = rest
		if b.Attributes().IsControl() {
			continue
		}
		for r, err := range b.All(&dec) {
			require.NoError(t, err)
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
	}
	return out
}

// listOffsetAt asks ListOffsets for one partition at an isolation level.
func listOffsetAt(t *testing.T, rc *rawConn, topic string, partition int32, ts int64, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rc.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode)
	return p.Offset
}

// consumeUntilEnd reads partitions of topic from the start with a kgo
// consumer at the given isolation level until each delivered a record
// "end", and returns the values before those, per partition, in order.
func consumeUntilEnd(ctx context.Context, t *testing.T, addr, topic string, partitions int32, committedOnly bool) map[int32][]string {
	t.Helper()
	offs := make(map[int32]kgo.Offset)
	for p := range partitions {
		offs[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs})}
	if committedOnly {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := newClient(t, addr, opts...)
	defer cl.Close()
	out := make(map[int32][]string)
	ended := make(map[int32]bool)
	for len(ended) < int(partitions) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %v before the deadline", out)
		fs.EachError(func(topic string, p int32, err error) {
			require.NoError(t, err, "fetch %s[%d]", topic, p)
		})
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, ended[r.Partition], "record %q at offset %d after the end record", r.Value, r.Offset)
			if string(r.Value) == "end" {
				ended[r.Partition] = true
				return
			}
			out[r.Partition] = append(out[r.Partition], string(r.Value))
		})
	}
	return out
}

// produceEnd writes a plain record "end" to every partition of topic.
func produceEnd(ctx context.Context, t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	for p := range partitions {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("end")}).FirstErr())
	}
}

// A franz-go transactional producer commits, aborts and commits: a
// read_committed consumer gets the committed records only, a
// read_uncommitted one all of them, and ListOffsets "latest" at
// read_committed is the high watermark once nothing is open.
func TestTxnFranzCommitAbortReadCommitted(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBroker(t, t.TempDir(), 2)
	const topic = "txn-ca"
	pr := newClient(t, b.addr, kgo.TransactionalID("franz-ca"), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for _, step := range []struct {
		prefix string
		commit kgo.TransactionEndTry
	}{{"c1", kgo.TryCommit}, {"a", kgo.TryAbort}, {"c2", kgo.TryCommit}} {
		require.NoError(t, pr.BeginTransaction())
		for i := range 6 {
			require.NoError(t, pr.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", step.prefix, i))).FirstErr())
		}
		require.NoError(t, pr.EndTransaction(ctx, step.commit), "end %s", step.prefix)
	}
	pr.Close()
	produceEnd(ctx, t, b.addr, topic, 2)

	count := func(got map[int32][]string) map[string]int {
		n := make(map[string]int)
		for _, vs := range got {
			for _, v := range vs {
				n[v[:len(v)-2]]++
			}
		}
		return n
	}
	committed := consumeUntilEnd(ctx, t, b.addr, topic, 2, true)
	assert.Equal(t, map[string]int{"c1": 6, "c2": 6}, count(committed), "read_committed: %v", committed)
	all := consumeUntilEnd(ctx, t, b.addr, topic, 2, false)
	assert.Equal(t, map[string]int{"c1": 6, "a": 6, "c2": 6}, count(all), "read_uncommitted: %v", all)

	rc := dialRaw(t, b.addr)
	for p := range int32(2) {
		hw := listOffsetAt(t, rc, topic, p, plog.LatestTimestamp, 0)
		assert.Equal(t, hw, listOffsetAt(t, rc, topic, p, plog.LatestTimestamp, readCommitted), "partition %d", p)
		// 3 records of each transaction, 3 markers, "end".
		assert.Equal(t, int64(13), hw, "partition %d", p)
	}
}

// An open transaction holds read_committed readers at its first offset:
// Fetch returns nothing from there (also not the plain records after
// it), ListOffsets "latest" is that offset, until the commit releases all.
func TestTxnOpenHoldsReadCommitted(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBroker(t, t.TempDir(), 1)
	const topic, txnID = "txn-open", "open-tx"
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, buildBatch(t, "before", 3, batch.CompressionNone)).ErrorCode)
	ip := txnInit(t, rc, txnID, 60000)
	require.Equal(t, int16(0), ip.ErrorCode)
	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, topic, 0))
	pr := produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "txn", 4))
	require.Equal(t, int16(0), pr.ErrorCode, "%+v", pr)
	require.Equal(t, int64(3), pr.BaseOffset)
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, buildBatch(t, "after", 2, batch.CompressionNone)).ErrorCode)

	cl := newClient(t, b.addr, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	first := consume(ctx, t, cl, 3)
	require.Len(t, first, 3, "a read_committed consumer read past the open transaction")

	p := fetchAt(t, rc, topic, 0, 0, readCommitted)
	require.Equal(t, int16(0), p.ErrorCode)
	assert.Equal(t, int64(9), p.HighWatermark)
	assert.Equal(t, int64(3), p.LastStableOffset)
	assert.Equal(t, []string{"0:before-0", "1:before-1", "2:before-2"}, dataValues(t, p.RecordBatches))
	p = fetchAt(t, rc, topic, 0, 3, readCommitted)
	assert.Empty(t, dataValues(t, p.RecordBatches), "read_committed from the open transaction's first offset")
	p = fetchAt(t, rc, topic, 0, 0, 0)
	assert.Len(t, dataValues(t, p.RecordBatches), 9, "read_uncommitted sees everything")
	assert.Equal(t, int64(3), listOffsetAt(t, rc, topic, 0, plog.LatestTimestamp, readCommitted))
	assert.Equal(t, int64(9), listOffsetAt(t, rc, topic, 0, plog.LatestTimestamp, 0))

	require.Equal(t, int16(0), txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, true))
	rest := consume(ctx, t, cl, 6)
	var got []string
	for _, r := range append(first, rest...) {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	assert.Equal(t, []string{"0:before-0", "1:before-1", "2:before-2", "3:txn-0", "4:txn-1", "5:txn-2", "6:txn-3", "7:after-0", "8:after-1"}, got)
	assert.Equal(t, int64(10), listOffsetAt(t, rc, topic, 0, plog.LatestTimestamp, readCommitted))
}

// InitProducerID of a transactional id whose transaction is open aborts it
// with the epoch bumped: the old instance is fenced at the coordinator
// (PRODUCER_FENCED) and in the partition (INVALID_PRODUCER_EPOCH), its
// records are reported aborted to read_committed readers, and the new
// instance works at the new epoch.
func TestTxnInitProducerIDFencesOpenTransaction(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBroker(t, t.TempDir(), 1)
	const topic, txnID = "txn-fence", "fence-tx"
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	old := txnInit(t, rc, txnID, 60000)
	require.Equal(t, int16(0), old.ErrorCode)
	require.Equal(t, int16(0), old.ProducerEpoch)
	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, old.ProducerID, old.ProducerEpoch, topic, 0))
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatch(t, old.ProducerID, old.ProducerEpoch, 0, true, "old", 3)).ErrorCode)

	cur := txnInit(t, rc, txnID, 60000)
	require.Equal(t, int16(0), cur.ErrorCode)
	assert.Equal(t, old.ProducerID, cur.ProducerID)
	assert.Equal(t, old.ProducerEpoch+1, cur.ProducerEpoch)

	assert.Equal(t, kerr.ProducerFenced.Code, txnEnd(t, rc, txnID, old.ProducerID, old.ProducerEpoch, true))
	assert.Equal(t, kerr.ProducerFenced.Code, txnAddPartitions(t, rc, txnID, old.ProducerID, old.ProducerEpoch, topic, 0))
	pr := produceRaw(t, rc, 9, topic, 0, txnBatch(t, old.ProducerID, old.ProducerEpoch, 3, true, "old", 1))
	assert.Equal(t, kerr.InvalidProducerEpoch.Code, pr.ErrorCode, "%+v", pr)

	p := fetchAt(t, rc, topic, 0, 0, readCommitted)
	assert.Equal(t, p.HighWatermark, p.LastStableOffset, "the abort closed the transaction")
	require.Len(t, p.AbortedTransactions, 1)
	assert.Equal(t, old.ProducerID, p.AbortedTransactions[0].ProducerID)
	assert.Equal(t, int64(0), p.AbortedTransactions[0].FirstOffset)

	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, cur.ProducerID, cur.ProducerEpoch, topic, 0))
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatch(t, cur.ProducerID, cur.ProducerEpoch, 0, true, "new", 2)).ErrorCode)
	require.Equal(t, int16(0), txnEnd(t, rc, txnID, cur.ProducerID, cur.ProducerEpoch, true))
	assert.Equal(t, int16(0), txnEnd(t, rc, txnID, cur.ProducerID, cur.ProducerEpoch, true), "a retried commit")
	assert.Equal(t, kerr.InvalidTxnState.Code, txnEnd(t, rc, txnID, cur.ProducerID, cur.ProducerEpoch, false), "an abort after the commit")
	produceEnd(ctx, t, b.addr, topic, 1)
	got := consumeUntilEnd(ctx, t, b.addr, topic, 1, true)
	assert.Equal(t, []string{"new-0", "new-1"}, got[0])
}

// A transaction open longer than its timeout is aborted by the
// coordinator's check, with the epoch bumped (the producer is fenced).
func TestTxnTimeoutAborts(t *testing.T) {
	leakCheck(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.TransactionCheckInterval = -1 // the test runs the check
		c.onServer = func(s *server) {
			srv = s
			s.txns.now = func() time.Time { return time.UnixMilli(clock.Load()) }
		}
	})
	const topic, txnID = "txn-timeout", "timeout-tx"
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	ip := txnInit(t, rc, txnID, 1000)
	require.Equal(t, int16(0), ip.ErrorCode)
	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, topic, 0))
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "slow", 2)).ErrorCode)

	clock.Add(1000) // at the timeout: still open
	srv.txns.abortTimedOut()
	st, ok := srv.txns.state(txnID)
	require.True(t, ok)
	require.Equal(t, txnOngoing, st.status)
	assert.Equal(t, int64(0), fetchAt(t, rc, topic, 0, 0, readCommitted).LastStableOffset)

	clock.Add(1) // past it
	srv.txns.abortTimedOut()
	st, _ = srv.txns.state(txnID)
	assert.Equal(t, txnCompleteAbort, st.status)
	assert.Equal(t, ip.ProducerEpoch+1, st.producerEpoch, "the abort fences the producer")
	p := fetchAt(t, rc, topic, 0, 0, readCommitted)
	assert.Equal(t, int64(3), p.LastStableOffset, "two records and the abort marker")
	require.Len(t, p.AbortedTransactions, 1)
	assert.Equal(t, kerr.ProducerFenced.Code, txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, true))

	// KIP-360: the fenced producer may still ask for a new epoch naming
	// the one it had; another epoch may not.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(txnID)
	req.TransactionTimeoutMillis = 1000
	req.ProducerID, req.ProducerEpoch = ip.ProducerID, ip.ProducerEpoch+5
	assert.Equal(t, kerr.ProducerFenced.Code, rc.do(req).(*kmsg.InitProducerIDResponse).ErrorCode)
	req.ProducerEpoch = ip.ProducerEpoch
	resp := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), resp.ErrorCode)
	assert.Equal(t, ip.ProducerID, resp.ProducerID)
	assert.Equal(t, ip.ProducerEpoch+2, resp.ProducerEpoch)
}

// TxnOffsetCommit's offsets are durable but invisible until the commit
// (RequireStable gets UNSTABLE_OFFSET_COMMIT meanwhile), survive a restart
// while the transaction is open, and an abort drops them.
func TestTxnOffsetCommitVisibleOnCommit(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			leakCheck(t)
			dir := t.TempDir()
			b := startBroker(t, dir, 1)
			const topic, txnID, group = "txn-offsets", "offsets-tx", "g"
			rc := dialRaw(t, b.addr)
			createTopic(t, rc, topic)
			ip := txnInit(t, rc, txnID, 60000)
			require.Equal(t, int16(0), ip.ErrorCode)
			require.Equal(t, int16(0), txnAddOffsets(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group))
			require.Equal(t, int16(0), txnOffsetCommit(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group, topic, 0, 42))
			require.Equal(t, int16(0), txnOffsetCommit(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group, topic, 0, 43))
			assert.Equal(t, int64(-1), committedOffset(t, rc, group, topic, 0, false).Offset)
			assert.Equal(t, kerr.UnstableOffsetCommit.Code, committedOffset(t, rc, group, topic, 0, true).ErrorCode)

			b.stop(t)
			b = startBroker(t, dir, 1)
			rc = dialRaw(t, b.addr)
			assert.Equal(t, kerr.UnstableOffsetCommit.Code, committedOffset(t, rc, group, topic, 0, true).ErrorCode, "pending after the restart")
			require.Equal(t, int16(0), txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, commit))
			want := int64(-1)
			if commit {
				want = 43
			}
			got := committedOffset(t, rc, group, topic, 0, true)
			assert.Equal(t, int16(0), got.ErrorCode)
			assert.Equal(t, want, got.Offset)

			b.stop(t)
			b = startBroker(t, dir, 1)
			rc = dialRaw(t, b.addr)
			assert.Equal(t, want, committedOffset(t, rc, group, topic, 0, true).Offset, "after a second restart")
		})
	}
}

// A broker stopped with a transaction in PrepareCommit (or PrepareAbort),
// before its markers were written, completes it when it starts: the
// markers land in every partition of the transaction, including
// __consumer_offsets (the transaction's offsets become visible on
// commit), and the state becomes CompleteCommit (CompleteAbort).
func TestTxnPrepareCompletedOnRestart(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   txnStatus
		done     txnStatus
		values   []string
		consumed int64
	}{
		{"PrepareCommit", txnPrepareCommit, txnCompleteCommit, []string{"t-0", "t-1", "t-2", "t-3"}, 4},
		{"PrepareAbort", txnPrepareAbort, txnCompleteAbort, nil, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakCheck(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			b := startBroker(t, dir, 1)
			const topic, txnID, group = "txn-prep", "prep-tx", "g"
			rc := dialRaw(t, b.addr)
			createTopic(t, rc, topic)
			ip := txnInit(t, rc, txnID, 60000)
			require.Equal(t, int16(0), ip.ErrorCode)
			require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, topic, 0))
			require.Equal(t, int16(0), txnAddOffsets(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group))
			require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "t", 4)).ErrorCode)
			require.Equal(t, int16(0), txnOffsetCommit(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group, topic, 0, 4))
			b.stop(t)

			// The record EndTxn writes before the markers, as if the
			// broker had stopped right after it.
			writeTxnState(t, dir, 0, txnID, txnRecord{producerID: ip.ProducerID, producerEpoch: ip.ProducerEpoch, timeoutMs: 60000, status: c.status,
				partitions: []topicPartition{{offsetsTopic, 0}, {topic, 0}}, updateMs: time.Now().UnixMilli(), startMs: time.Now().UnixMilli()})

			var srv *server
			b = startBrokerWith(t, dir, 1, func(cfg *config) { cfg.onServer = func(s *server) { srv = s } })
			st, ok := srv.txns.state(txnID)
			require.True(t, ok)
			assert.Equal(t, c.done, st.status)
			assert.Empty(t, st.partitions)
			rc = dialRaw(t, b.addr)
			fp := fetchAt(t, rc, topic, 0, 0, readCommitted)
			assert.Equal(t, int64(5), fp.LastStableOffset, "four records and the marker")
			assert.Equal(t, fp.HighWatermark, fp.LastStableOffset)
			got := committedOffset(t, rc, group, topic, 0, true)
			assert.Equal(t, int16(0), got.ErrorCode)
			assert.Equal(t, c.consumed, got.Offset)
			produceEnd(ctx, t, b.addr, topic, 1)
			assert.Equal(t, c.values, consumeUntilEnd(ctx, t, b.addr, topic, 1, true)[0])
		})
	}
}

// The exactly-once pipeline of Kafka's design, with franz-go's
// GroupTransactSession: a consume-transform-produce loop in a consumer
// group copies a topic, each poll in one transaction that also commits the
// consumed offsets. The broker is restarted in the middle of a
// transaction (records produced, offsets not yet committed); the loop goes
// on against the restarted broker. The output, read at read_committed,
// holds every input record exactly once, and the group's committed offsets
// are the input's ends.
func TestTxnGroupTransactSessionExactlyOnceAcrossRestart(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := startBroker(t, dir, 2)
	addr := b.addr
	const in, out, group, n = "eos-in", "eos-out", "eos-group", 240

	src := newClient(t, addr, kgo.DefaultProduceTopic(in), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		require.NoError(t, src.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("v-%03d", i))).FirstErr())
	}
	src.Close()
	rc := dialRaw(t, addr)
	createTopic(t, rc, out)

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.RetryTimeout(30*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.TransactionalID("eos-copier"),
		kgo.TransactionTimeout(60*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
	)
	require.NoError(t, err)
	defer sess.Close()

	mid := make(chan struct{})     // the loop is inside a transaction
	resumed := make(chan struct{}) // the broker was restarted
	loopDone := make(chan error, 1)
	var txns, commits, aborts atomic.Int32
	go func() {
		copied := 0
		for copied < n {
			fs := sess.PollRecords(ctx, 25)
			if ctx.Err() != nil {
				loopDone <- fmt.Errorf("copied %d of %d: %w", copied, n, ctx.Err())
				return
			}
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
			if len(recs) == 0 {
				continue // errors from the restart: the client retries
			}
			if err := sess.Begin(); err != nil {
				loopDone <- fmt.Errorf("begin: %w", err)
				return
			}
			for _, r := range recs {
				sess.Produce(ctx, kgo.StringRecord("copy-"+string(r.Value)), nil)
			}
			if txns.Add(1) == 3 {
				// Make the restart land inside this transaction:
				// its records are written, its offsets not yet.
				if err := sess.Client().Flush(ctx); err != nil {
					loopDone <- fmt.Errorf("flush: %w", err)
					return
				}
				close(mid)
				<-resumed
			}
			committed, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				loopDone <- fmt.Errorf("end: %w", err)
				return
			}
			if committed {
				commits.Add(1)
				copied += len(recs)
			} else {
				aborts.Add(1)
			}
		}
		loopDone <- nil
	}()

	select {
	case <-mid:
	case err := <-loopDone:
		require.Failf(t, "the loop ended before the restart", "%v", err)
	case <-ctx.Done():
		require.Fail(t, "the loop never reached its third transaction")
	}
	b.stop(t)
	b = startBrokerWith(t, dir, 2, func(c *config) { c.Addr = addr })
	close(resumed)
	select {
	case err := <-loopDone:
		require.NoError(t, err)
	case <-ctx.Done():
		require.Fail(t, "the loop did not finish")
	}
	sess.Close()
	assert.GreaterOrEqual(t, commits.Load(), int32(3), "transactions committed")
	t.Logf("%d transactions: %d committed, %d aborted", txns.Load(), commits.Load(), aborts.Load())

	produceEnd(ctx, t, addr, out, 2)
	copies := make(map[string]int)
	for _, vs := range consumeUntilEnd(ctx, t, addr, out, 2, true) {
		for _, v := range vs {
			copies[v]++
		}
	}
	for i := range n {
		v := fmt.Sprintf("copy-v-%03d", i)
		assert.Equal(t, 1, copies[v], "copies of %s", v)
		delete(copies, v)
	}
	assert.Empty(t, copies, "records in the output that are not copies of input records")
	if aborts.Load() > 0 {
		// The aborted transaction's copies are in the log: only the
		// isolation level kept them from the output above.
		total := 0
		for _, vs := range consumeUntilEnd(ctx, t, addr, out, 2, false) {
			total += len(vs)
		}
		assert.Greater(t, total, n, "read_uncommitted output")
	}

	rc = dialRaw(t, addr)
	for p := range int32(2) {
		end := listOffsetAt(t, rc, in, p, plog.LatestTimestamp, 0)
		got := committedOffset(t, rc, group, in, p, true)
		assert.Equal(t, int16(0), got.ErrorCode)
		assert.Equal(t, end, got.Offset, "committed offset of %s[%d]", in, p)
	}
}

// librdkafka (python3-confluent-kafka): init_transactions, commit, abort,
// commit; a read_committed librdkafka consumer gets the committed records
// only, a read_uncommitted one all of them.
func TestConfluentTransactions(t *testing.T) {
	needConfluent(t)
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	var got struct {
		Values      []string `json:"values"`
		Uncommitted []string `json:"uncommitted"`
	}
	ck(t, &got, "txn", b.addr, "ck-txn", "ck-tx", "4")
	assert.Equal(t, []string{"c1-0", "c1-1", "c1-2", "c1-3", "c2-0", "c2-1", "c2-2", "c2-3"}, got.Values)
	assert.Equal(t, []string{"c1-0", "c1-1", "c1-2", "c1-3", "a-0", "a-1", "a-2", "a-3", "c2-0", "c2-1", "c2-2", "c2-3"}, got.Uncommitted)
}

// A marker the partition refuses because it knows a newer producer epoch
// (here a batch sent with a forged later epoch) cannot succeed on retry:
// the coordinator gives that partition up and completes the transaction,
// instead of leaving the transactional id stuck in PrepareCommit
// (CONCURRENT_TRANSACTIONS forever).
func TestTxnMarkerRefusedForNewerEpochCompletes(t *testing.T) {
	leakCheck(t)
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	const topic, txnID = "txn-newer", "newer-tx"
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	ip := txnInit(t, rc, txnID, 60000)
	require.Equal(t, int16(0), ip.ErrorCode)
	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, topic, 0))
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatch(t, ip.ProducerID, ip.ProducerEpoch+3, 0, true, "forged", 1)).ErrorCode)

	assert.Equal(t, int16(0), txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, true))
	st, ok := srv.txns.state(txnID)
	require.True(t, ok)
	assert.Equal(t, txnCompleteCommit, st.status)
}

// FindCoordinator names this node for transactional ids (key type 1) as
// for groups, in both request shapes (one key before v4, a list from v4);
// an unknown key type gets INVALID_REQUEST.
func TestTxnFindCoordinator(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	for _, c := range []struct {
		name    string
		keyType int8
		code    int16
	}{
		{"group", 0, 0},
		{"transaction", 1, 0},
		{"unknown type", 2, kerr.InvalidRequest.Code},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []int16{1, 3, 4} {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version = v
				req.CoordinatorType = c.keyType
				req.CoordinatorKey = "k1"
				req.CoordinatorKeys = []string{"k1", "k2"}
				resp := rc.do(req).(*kmsg.FindCoordinatorResponse)
				type answer struct {
					code   int16
					nodeID int32
				}
				var got []answer
				if v >= 4 {
					for _, co := range resp.Coordinators {
						got = append(got, answer{co.ErrorCode, co.NodeID})
					}
				} else {
					got = append(got, answer{resp.ErrorCode, resp.NodeID})
				}
				want := answer{c.code, nodeID}
				if c.code != 0 {
					want.nodeID = -1
				}
				for i, a := range got {
					assert.Equal(t, want, a, "v%d key %d", v, i)
				}
			}
		})
	}
}

// TxnOffsetCommit is refused, and writes nothing, outside an open
// transaction that added the group, for an unknown transactional id, and
// for a fenced epoch.
func TestTxnOffsetCommitRefused(t *testing.T) {
	leakCheck(t)
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.onServer = func(s *server) { srv = s } })
	rc := dialRaw(t, b.addr)
	const topic, group = "txn-refused", "g"
	createTopic(t, rc, topic)
	for _, c := range []struct {
		name  string
		setup func(txnID string) (int64, int16)
		code  int16
	}{
		{"group not added", func(txnID string) (int64, int16) {
			ip := txnInit(t, rc, txnID, 60000)
			return ip.ProducerID, ip.ProducerEpoch
		}, kerr.InvalidTxnState.Code},
		{"unknown transactional id", func(string) (int64, int16) { return 12345, 0 }, kerr.InvalidProducerIDMapping.Code},
		{"fenced epoch", func(txnID string) (int64, int16) {
			ip := txnInit(t, rc, txnID, 60000)
			require.Equal(t, int16(0), txnAddOffsets(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group))
			require.Equal(t, int16(0), txnInit(t, rc, txnID, 60000).ErrorCode)
			return ip.ProducerID, ip.ProducerEpoch
		}, kerr.ProducerFenced.Code},
	} {
		t.Run(c.name, func(t *testing.T) {
			txnID := "refused-" + c.name
			pid, epoch := c.setup(txnID)
			assert.Equal(t, c.code, txnOffsetCommit(t, rc, txnID, pid, epoch, group, topic, 0, 7))
			assert.False(t, srv.offsets.hasPending(offsetKey{group: group, topic: topic, partition: 0}))
		})
	}
}

// A transaction open in a partition that no transactional id covers (here
// a transactional batch written without AddPartitionsToTxn, and one of a
// known producer into a partition its transaction did not add) would hold
// read_committed readers forever; once older than the longest transaction
// timeout the coordinator's check aborts it. A covered transaction whose
// batch carries an old timestamp is left to its own timeout.
func TestTxnHangingTransactionAborted(t *testing.T) {
	leakCheck(t)
	var clock atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.Store(start.UnixMilli())
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 2, func(c *config) {
		c.TransactionCheckInterval = -1
		c.TransactionMaxTimeout = time.Minute
		c.onServer = func(s *server) {
			srv = s
			s.txns.now = func() time.Time { return time.UnixMilli(clock.Load()) }
		}
	})
	const topic, txnID = "txn-hanging", "hanging-tx"
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	ip := txnInit(t, rc, txnID, 60000)
	require.Equal(t, int16(0), ip.ErrorCode)
	old := start.Add(-time.Hour).UnixMilli()
	// Partition 0: the covered transaction, with an old timestamp; then a
	// stray producer's transaction.
	require.Equal(t, int16(0), txnAddPartitions(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, topic, 0))
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatchAt(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "covered", 2, old)).ErrorCode)
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 0, txnBatchAt(t, 777777, 0, 0, true, "stray", 2, old)).ErrorCode)
	// Partition 1: the known producer, without AddPartitionsToTxn.
	require.Equal(t, int16(0), produceRaw(t, rc, 9, topic, 1, txnBatchAt(t, ip.ProducerID, ip.ProducerEpoch, 0, true, "unadded", 2, old)).ErrorCode)

	srv.txns.abortTimedOut()
	p0 := fetchAt(t, rc, topic, 0, 0, readCommitted)
	assert.Equal(t, int64(0), p0.LastStableOffset, "the covered transaction stays open")
	p1 := fetchAt(t, rc, topic, 1, 0, readCommitted)
	assert.Equal(t, p1.HighWatermark, p1.LastStableOffset, "partition 1's hanging transaction is aborted")
	require.Len(t, p1.AbortedTransactions, 1)
	assert.Equal(t, ip.ProducerID, p1.AbortedTransactions[0].ProducerID)

	// The stray transaction was aborted by the same check: once the
	// covered one commits, nothing holds partition 0.
	require.Equal(t, int16(0), txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, true))
	p0 = fetchAt(t, rc, topic, 0, 0, readCommitted)
	assert.Equal(t, p0.HighWatermark, p0.LastStableOffset)
	require.Len(t, p0.AbortedTransactions, 1)
	assert.Equal(t, int64(777777), p0.AbortedTransactions[0].ProducerID)
	assert.Equal(t, int64(2), p0.AbortedTransactions[0].FirstOffset)
}

// In a data directory taken over from Kafka, a transactional id's state is
// in the __transaction_state partition its name hashes to: the broker
// replays every partition, so the id keeps its producer id, and its next
// InitProducerID bumps the epoch instead of starting over.
func TestTxnStateReplayedFromEveryPartition(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	writeTxnState(t, dir, 3, "kafka-tx", txnRecord{producerID: 4242, producerEpoch: 9, timeoutMs: 60000, status: txnCompleteCommit, updateMs: 1, startMs: 1})

	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	ip := txnInit(t, rc, "kafka-tx", 60000)
	require.Equal(t, int16(0), ip.ErrorCode)
	assert.Equal(t, int64(4242), ip.ProducerID)
	assert.Equal(t, int16(10), ip.ProducerEpoch)
	// New ids start above the ones the replayed state holds.
	fresh := txnInit(t, rc, "new-tx", 60000)
	require.Equal(t, int16(0), fresh.ErrorCode)
	assert.Greater(t, fresh.ProducerID, int64(4242))
}

// Transactional producers working at once, each committing and aborting in
// turn over the same partitions: a read_committed consumer gets exactly
// the committed records of every producer.
func TestTxnConcurrentProducers(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := startBroker(t, t.TempDir(), 3)
	const topic, producers, rounds, perTxn = "txn-many", 4, 6, 5
	rc := dialRaw(t, b.addr)
	createTopic(t, rc, topic)
	errs := make(chan error, producers)
	for w := range producers {
		go func() {
			errs <- func() error {
				cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.TransactionalID(fmt.Sprintf("many-%d", w)),
					kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
				if err != nil {
					return err
				}
				defer cl.Close()
				for r := range rounds {
					if err := cl.BeginTransaction(); err != nil {
						return err
					}
					for i := range perTxn {
						if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("w%d-r%d-%d", w, r, i))).FirstErr(); err != nil {
							return err
						}
					}
					if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(r%2 == 0)); err != nil {
						return fmt.Errorf("producer %d round %d: %w", w, r, err)
					}
				}
				return nil
			}()
		}()
	}
	for range producers {
		require.NoError(t, <-errs)
	}
	produceEnd(ctx, t, b.addr, topic, 3)
	got := make(map[string]int)
	for _, vs := range consumeUntilEnd(ctx, t, b.addr, topic, 3, true) {
		for _, v := range vs {
			got[v]++
		}
	}
	want := make(map[string]int)
	for w := range producers {
		for r := 0; r < rounds; r += 2 {
			for i := range perTxn {
				want[fmt.Sprintf("w%d-r%d-%d", w, r, i)] = 1
			}
		}
	}
	assert.Equal(t, want, got)
}

// When a transaction's offset and a plain OffsetCommit of the same
// partition interleave, the one later in the log is the committed offset
// once the transaction commits (Kafka's rule), also after a restart.
func TestTxnOffsetCommitAgainstPlainCommit(t *testing.T) {
	for _, c := range []struct {
		name       string
		plainFirst bool
		want       int64
	}{
		{"plain commit after the transaction's offset", false, 20},
		{"plain commit before the transaction's offset", true, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakCheck(t)
			dir := t.TempDir()
			b := startBroker(t, dir, 1)
			const topic, txnID, group = "txn-mixed", "mixed-tx", "g"
			rc := dialRaw(t, b.addr)
			createTopic(t, rc, topic)
			ip := txnInit(t, rc, txnID, 60000)
			require.Equal(t, int16(0), ip.ErrorCode)
			require.Equal(t, int16(0), txnAddOffsets(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group))
			plain, txn := int64(20), int64(10)
			if c.plainFirst {
				commitOffset(t, rc, group, topic, 0, plain)
			}
			require.Equal(t, int16(0), txnOffsetCommit(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, group, topic, 0, txn))
			if !c.plainFirst {
				commitOffset(t, rc, group, topic, 0, plain)
			}
			require.Equal(t, int16(0), txnEnd(t, rc, txnID, ip.ProducerID, ip.ProducerEpoch, true))
			assert.Equal(t, c.want, committedOffset(t, rc, group, topic, 0, true).Offset)
			b.stop(t)
			b = startBroker(t, dir, 1)
			rc = dialRaw(t, b.addr)
			assert.Equal(t, c.want, committedOffset(t, rc, group, topic, 0, true).Offset, "after a restart")
		})
	}
}

// writeTxnState appends a transactional id's state record to
// __transaction_state-<partition> in dir (the broker stopped).
func writeTxnState(t *testing.T, dir string, partition int, txnID string, rec txnRecord) {
	t.Helper()
	p, err := plog.Open(filepath.Join(dir, fmt.Sprintf("%s-%d", txnStateTopic, partition)), plog.Config{})
	require.NoError(t, err)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	require.NoError(t, bld.Add(batch.Record{Key: encodeTxnKey(nil, txnID), Value: encodeTxnValue(nil, rec), Timestamp: max(rec.updateMs, 0)}))
	bt, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(bt)
	require.NoError(t, err)
	require.NoError(t, p.Close())
}

// A transactional id whose epoch cannot grow (32766, the largest a bump
// may reach) gets a new producer id at epoch 0 from InitProducerID, as
// Kafka's coordinator does.
func TestTxnEpochExhaustedNewProducerID(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	writeTxnState(t, dir, 0, "old-tx", txnRecord{producerID: 77, producerEpoch: math.MaxInt16 - 1, timeoutMs: 60000, status: txnCompleteCommit, updateMs: 1, startMs: 1})
	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	ip := txnInit(t, rc, "old-tx", 60000)
	require.Equal(t, int16(0), ip.ErrorCode)
	assert.Greater(t, ip.ProducerID, int64(77))
	assert.Equal(t, int16(0), ip.ProducerEpoch)
	again := txnInit(t, rc, "old-tx", 60000)
	assert.Equal(t, ip.ProducerID, again.ProducerID)
	assert.Equal(t, int16(1), again.ProducerEpoch)
}

// KIP-360's InitProducerID v3+ names the producer's current id and epoch;
// when the answer to one that bumped the epoch is lost, the producer sends
// the same request again. Kafka's coordinator (its lastProducerEpoch)
// answers that retry with the epoch it already handed out, without a bump;
// an epoch that is neither the current nor the last one is fenced.
func TestTxnInitProducerIDRetryKeepsEpoch(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	const txnID = "init-retry"
	rc := dialRaw(t, b.addr)
	ip := txnInit(t, rc, txnID, 1000)
	require.Equal(t, int16(0), ip.ErrorCode)

	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr(txnID)
	req.TransactionTimeoutMillis = 1000
	req.ProducerID, req.ProducerEpoch = ip.ProducerID, ip.ProducerEpoch
	first := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), first.ErrorCode, kerr.ErrorForCode(first.ErrorCode))
	require.Equal(t, ip.ProducerEpoch+1, first.ProducerEpoch)

	retry := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), retry.ErrorCode, "retry of a successful InitProducerID: %v", kerr.ErrorForCode(retry.ErrorCode))
	assert.Equal(t, first.ProducerID, retry.ProducerID)
	assert.Equal(t, first.ProducerEpoch, retry.ProducerEpoch, "the retry gets the epoch already handed out")

	// The epoch it answered is the current one: a transaction runs with it.
	require.Equal(t, int16(0), txnAddOffsets(t, rc, txnID, retry.ProducerID, retry.ProducerEpoch, "g"))
	require.Equal(t, int16(0), txnEnd(t, rc, txnID, retry.ProducerID, retry.ProducerEpoch, true))

	// Another bump from the current epoch forgets the older one.
	req.ProducerEpoch = first.ProducerEpoch
	second := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), second.ErrorCode, kerr.ErrorForCode(second.ErrorCode))
	require.Equal(t, first.ProducerEpoch+1, second.ProducerEpoch)
	req.ProducerEpoch = ip.ProducerEpoch
	assert.Equal(t, kerr.ProducerFenced.Code, rc.do(req).(*kmsg.InitProducerIDResponse).ErrorCode)
}

// The same for a retried InitProducerID v3+ whose bump gave a new producer
// id (the epoch was exhausted): Kafka answers it with the new id and epoch
// (its previous producer id and lastProducerEpoch), not a third id.
func TestTxnInitProducerIDRetryAfterNewProducerID(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	writeTxnState(t, dir, 0, "old-tx", txnRecord{producerID: 77, producerEpoch: math.MaxInt16 - 1, timeoutMs: 60000, status: txnCompleteCommit, updateMs: 1, startMs: 1})
	b := startBroker(t, dir, 1)
	rc := dialRaw(t, b.addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr("old-tx")
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = 77, math.MaxInt16-1
	first := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), first.ErrorCode, kerr.ErrorForCode(first.ErrorCode))
	require.Greater(t, first.ProducerID, int64(77))
	require.Equal(t, int16(0), first.ProducerEpoch)

	retry := rc.do(req).(*kmsg.InitProducerIDResponse)
	require.Equal(t, int16(0), retry.ErrorCode, "retry after a new producer id: %v", kerr.ErrorForCode(retry.ErrorCode))
	assert.Equal(t, first.ProducerID, retry.ProducerID)
	assert.Equal(t, first.ProducerEpoch, retry.ProducerEpoch)
}
