package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// commitOffset commits one offset with a simple (generation -1) commit.
func commitOffset(t *testing.T, rc *rawConn, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = group
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.OffsetCommitResponse)
	code := resp.Topics[0].Partitions[0].ErrorCode
	require.Equal(t, int16(0), code, "commit: %v", kerr.ErrorForCode(code))
}

func fetchCommitted(t *testing.T, rc *rawConn, group, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	p := rc.do(req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode, "offset fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	return p.Offset
}

// countRecords reads a whole partition through Fetch and counts its records.
func countRecords(t *testing.T, rc *rawConn, topic string) (records int, end int64) {
	t.Helper()
	return countRecordsFrom(t, rc, topic, 0)
}

// countRecordsFrom counts the records from an offset to the end.
func countRecordsFrom(t *testing.T, rc *rawConn, topic string, from int64) (records int, end int64) {
	t.Helper()
	var dec batch.Decoder
	for off := from; ; {
		resp := rc.do(fetchReq(topic, []int32{0}, off, 1<<20, 1<<20, 0, 0)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, int16(0), p.ErrorCode, "fetch %s at %d: %v", topic, off, kerr.ErrorForCode(p.ErrorCode))
		if len(p.RecordBatches) == 0 {
			return records, p.HighWatermark
		}
		rest := p.RecordBatches
		for len(rest) > 0 {
			b, r, err := batch.Parse(rest)
			require.NoError(t, err)
			rest = r
			for _, err := range b.All(&dec) {
				require.NoError(t, err)
				records++
			}
			off = b.NextOffset()
		}
	}
}

// Committed offsets live in a compacted partition: after many commits of the
// same key the compactor keeps few records, offsets are not renumbered, and
// a restart replays the latest commit.
func TestOffsetsPartitionIsCompacted(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	ran := make(chan struct{}, 1)
	small := func(c *config) {
		c.OffsetsSegmentBytes = 1024
		c.CleanupInterval = 20 * time.Millisecond
		c.CleanupDone = cleanupSignal(ran)
	}
	b := startBrokerWith(t, dir, 1, small)
	rc := dialRaw(t, b.addr)
	produceRaw(t, rc, 9, "orders", 0, buildBatch(t, "o", 3, batch.CompressionNone))
	const commits = 200
	for i := range commits {
		commitOffset(t, rc, "g", "orders", 0, int64(i))
	}
	var n int
	var end int64
	for {
		n, end = countRecords(t, rc, offsetsTopic)
		if n < commits/4 || !waitCleanup(t, ran) {
			break
		}
	}
	t.Logf("%d commits, %d records left in %s", commits, n, offsetsTopic)
	require.Less(t, n, commits/4, "__consumer_offsets still holds %d records of %d commits: not compacted", n, commits)
	require.Equal(t, int64(commits), end, "__consumer_offsets end offset %d, want %d (compaction never renumbers)", end, commits)
	got := fetchCommitted(t, rc, "g", "orders", 0)
	require.Equal(t, int64(commits-1), got, "committed %d, want %d", got, commits-1)

	b.stop(t)
	b = startBrokerWith(t, dir, 1, small)
	rc = dialRaw(t, b.addr)
	got = fetchCommitted(t, rc, "g", "orders", 0)
	require.Equal(t, int64(commits-1), got, "after restart committed %d, want %d", got, commits-1)
}

// copyFiles copies the named files of src into dst (created).
func copyFiles(t *testing.T, src, dst string, names ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, n), b, 0o644))
	}
}

// The broker reads committed offsets that Apache Kafka wrote: its
// __consumer_offsets records use Kafka's schema. Fixture: a Kafka 2.1
// partition (see ../dumplog/testdata/PROVENANCE.md) committing offset 2705908
// for DemoConsumer/topic1/0, then deleting it with a tombstone.
func TestReplaysKafkaConsumerOffsets(t *testing.T) {
	leakCheck(t)
	src := filepath.Join("..", "dumplog", "testdata", "kafka-source-code", "kafka-logs", "__consumer_offsets-17")
	for _, c := range []struct {
		name  string
		files []string
		want  int64
	}{
		{"commit", []string{"00000000000000000000.log"}, 2705908},
		{"commit then tombstone", []string{"00000000000000000000.log", "00000000000000000058.log"}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			// As Kafka left it: partition 17 of 50 (the broker writes to 0).
			copyFiles(t, src, filepath.Join(dir, offsetsTopic+"-17"), c.files...)
			b := startBroker(t, dir, 1)
			rc := dialRaw(t, b.addr)
			got := fetchCommitted(t, rc, "DemoConsumer", "topic1", 0)
			require.Equal(t, c.want, got, "committed offset %d, want %d", got, c.want)
			// New commits append after Kafka's records and win.
			produceRaw(t, rc, 9, "topic1", 0, buildBatch(t, "x", 1, batch.CompressionNone))
			commitOffset(t, rc, "DemoConsumer", "topic1", 0, 1)
			b.stop(t)
			b = startBroker(t, dir, 1)
			rc = dialRaw(t, b.addr)
			got = fetchCommitted(t, rc, "DemoConsumer", "topic1", 0)
			require.Equal(t, int64(1), got, "after a new commit and a restart: %d, want 1", got)
		})
	}
}

// Retention (cleanup.policy=delete) removes old sealed segments: the log start
// offset moves up, reads below it get OFFSET_OUT_OF_RANGE, the rest stays.
func TestRetentionDeletesOldSegments(t *testing.T) {
	leakCheck(t)
	ran := make(chan struct{}, 1)
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.SegmentBytes = 1024
		c.Retention = time.Hour
		c.CleanupInterval = 20 * time.Millisecond
		c.CleanupDone = cleanupSignal(ran)
	})
	rc := dialRaw(t, b.addr)
	const topic = "expiring"
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 20 { // old records: about 10 segments
		bld := batch.NewBuilder(batch.BuilderOptions{})
		for j := range 5 {
			require.NoError(t, bld.Add(batch.Record{Value: []byte("old record padding"), Timestamp: old + int64(i*5+j)}))
		}
		bt, err := bld.Build()
		require.NoError(t, err)
		p := produceRaw(t, rc, 9, topic, 0, bt)
		require.Equal(t, int16(0), p.ErrorCode, kerr.ErrorForCode(p.ErrorCode))
	}
	for range 3 { // fresh records
		produceRaw(t, rc, 9, topic, 0, buildBatch(t, "new", 5, batch.CompressionNone))
	}
	// Every segment holding only old records goes (the one where old and
	// fresh records meet stays). Where that segment starts depends on when
	// a retention round ran: a round that found every segment expired,
	// the active one included, rolled the log there (Kafka's rule), so
	// the boundaries after it shift. The segment that holds the first
	// fresh record (1 KiB: at most five old batches of about 190 bytes)
	// starts at 75 or later: the log start ends in [75, 100].
	var start int64
	for {
		if start = listOffset(t, rc, topic, 0, -2).Offset; start >= 75 || !waitCleanup(t, ran) {
			break
		}
	}
	require.GreaterOrEqual(t, start, int64(75), "log start offset %d, want 75..100", start)
	require.LessOrEqual(t, start, int64(100), "log start offset %d, want 75..100", start)
	end := listOffset(t, rc, topic, 0, -1).Offset
	require.Equal(t, int64(115), end, "log end offset %d, want 115", end)
	resp := rc.do(fetchReq(topic, []int32{0}, 0, 1<<20, 1<<20, 0, 0)).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, kerr.OffsetOutOfRange.Code, p.ErrorCode, "fetch below the log start: %v, log start %d", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	require.Equal(t, start, p.LogStartOffset, "fetch below the log start: %v, log start %d", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	n, _ := countRecordsFrom(t, rc, topic, start)
	require.Equal(t, int(115-start), n, "%d records from the log start %d, want %d", n, start, 115-start)
}

// cleanupSignal returns a config.CleanupDone that signals ran after each
// cleanup run (dropping the signal when one is pending).
func cleanupSignal(ran chan struct{}) func() {
	return func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	}
}

// waitCleanup waits for the next cleanup run to finish; it reports false
// when none finished within a generous fuse (the caller then checks what
// it has).
func waitCleanup(t *testing.T, ran <-chan struct{}) bool {
	t.Helper()
	select {
	case <-ran:
		return true
	case <-time.After(15 * time.Second):
		return false
	}
}
