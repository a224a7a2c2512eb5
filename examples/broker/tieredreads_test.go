package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/s3remote/weedtest"
)

// tieredSegmentBytes is the segment size of the tiered tests: small, so a
// few hundred KiB make dozens of segments.
const tieredSegmentBytes = 16 << 10

// tieredRecords is how many records the tiered tests produce (about 150
// bytes each: some 30 segments).
const tieredRecords = 3000

// A broker tiering to a directory store, with local retention of two
// segments: once the first segments are gone locally, franz-go and kcat
// read every record from offset 0, and ListOffsets and Fetch report the
// whole log's start.
func TestTieredReadsFromZeroDirStore(t *testing.T) {
	leakCheck(t)
	checkTieredReadsFromZero(t, plog.NewDirRemoteStorage(t.TempDir(), nil))
}

// The same against SeaweedFS's S3 gateway through log/s3remote. .ci/run
// runs it in its last step, with log/s3remote's tests.
func TestTieredReadsFromZeroS3(t *testing.T) {
	w := weedtest.Start(t)
	checkTieredReadsFromZero(t, w.Store(t, "broker/"))
}

// checkTieredReadsFromZero runs the tiered reads scenario on store.
func checkTieredReadsFromZero(t *testing.T, store plog.RemoteStorage) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.SegmentBytes = tieredSegmentBytes
		c.RemoteStorage = store
		c.LocalRetentionBytes = 2 * tieredSegmentBytes
		c.RemoteInterval = 50 * time.Millisecond
		c.onServer = func(s *server) { srv = s }
	})
	const topic = "tiered"
	want := make([]*kgo.Record, tieredRecords)
	var lines strings.Builder
	for i := range want {
		want[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%05d", i),
			Value: fmt.Appendf(nil, "tiered record %05d %s", i, strings.Repeat("v", 100))}
		fmt.Fprintf(&lines, "%d %s %s\n", i, want[i].Key, want[i].Value)
	}
	// Small batches (about 4 KiB), so segments roll every few batches.
	prod := newClient(t, b.addr, kgo.ProducerBatchMaxBytes(4<<10), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.AllowAutoTopicCreation())
	require.NoError(t, prod.ProduceSync(ctx, want...).FirstErr())

	ps, err := srv.store.topic(topic, false)
	require.NoError(t, err)
	part := ps[0]
	// Tiering copies the sealed segments and local retention deletes
	// the first ones: wait (bounded) until the local log starts above 0
	// and the copies start at 0.
	for {
		st := part.Stats()
		if part.LogStartOffset() > 0 && st.Remote.Segments > 0 && st.Remote.LogStartOffset == 0 {
			break
		}
		require.NoError(t, ctx.Err(), "local retention did not delete copied segments in time: local start %d, remote %+v", part.LogStartOffset(), st.Remote)
		time.Sleep(20 * time.Millisecond)
	}
	localStart := part.LogStartOffset()
	readsBefore := part.Stats().Remote.RemoteReads

	rc := dialRaw(t, b.addr)
	assert.Equal(t, int64(0), listOffset(t, rc, topic, 0, plog.EarliestTimestamp).Offset, "ListOffsets earliest: the whole log's start")
	assert.Equal(t, int64(tieredRecords), listOffset(t, rc, topic, 0, plog.LatestTimestamp).Offset, "ListOffsets latest")
	local := listOffsetVersion(t, rc, 8, topic, 0, plog.EarliestLocalTimestamp)
	require.Equal(t, int16(0), local.ErrorCode, kerr.ErrorForCode(local.ErrorCode))
	assert.GreaterOrEqual(t, local.Offset, localStart, "ListOffsets v8 earliest local: the local log start")
	assert.Equal(t, kerr.InvalidRequest.Code, listOffset(t, rc, topic, 0, plog.EarliestLocalTimestamp).ErrorCode, "earliest local below v8")
	resp := rc.do(fetchReq(topic, []int32{0}, 0, 1<<20, 1<<20, 0, 0)).(*kmsg.FetchResponse)
	fp := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), fp.ErrorCode, "fetch at 0: %v", kerr.ErrorForCode(fp.ErrorCode))
	assert.Equal(t, int64(0), fp.LogStartOffset, "fetch: the whole log's start")
	assert.NotEmpty(t, fp.RecordBatches, "fetch at 0 from the remote copy")

	cons := newClient(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	got := consume(ctx, t, cons, tieredRecords)
	require.Len(t, got, tieredRecords)
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset, "franz-go: record %d", i)
		require.Equal(t, want[i].Key, r.Key, "franz-go: key of record %d", i)
		require.Equal(t, want[i].Value, r.Value, "franz-go: value of record %d", i)
	}

	kcat := needKcat(t)
	out := runClient(t, "", kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o %k %s\n")
	require.Equal(t, lines.String(), out, "kcat -C -o beginning -e: every record from offset 0")
	assert.Greater(t, part.Stats().Remote.RemoteReads, readsBefore, "the reads below the local start came from the copies")
}

// With the remote retention (-retention) deleting the oldest copies, the
// whole log starts above 0 but below the local start: a Fetch below it
// gets OFFSET_OUT_OF_RANGE with that start, ListOffsets earliest names
// it, and a Fetch at it reads the remote copy.
func TestTieredFetchBelowWholeLogStart(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var srv *server
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.SegmentBytes = tieredSegmentBytes
		c.RemoteStorage = plog.NewDirRemoteStorage(t.TempDir(), nil)
		c.LocalRetentionBytes = 2 * tieredSegmentBytes
		c.RemoteInterval = 50 * time.Millisecond
		c.Retention = time.Hour
		c.CleanupInterval = -1 // only tiering deletes
		c.onServer = func(s *server) { srv = s }
	})
	const topic = "expiring-tiered"
	old := time.Now().Add(-2 * time.Hour)
	recs := make([]*kgo.Record, 2000)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "record %05d %s", i, strings.Repeat("v", 100))}
		if i < len(recs)/2 {
			recs[i].Timestamp = old // past -retention: its copies go
		}
	}
	prod := newClient(t, b.addr, kgo.ProducerBatchMaxBytes(4<<10), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.AllowAutoTopicCreation())
	require.NoError(t, prod.ProduceSync(ctx, recs...).FirstErr())
	ps, err := srv.store.topic(topic, false)
	require.NoError(t, err)
	part := ps[0]
	var remoteStart int64
	for {
		st := part.Stats().Remote
		remoteStart = st.LogStartOffset
		if st.Deletes > 0 && remoteStart > 0 && remoteStart < part.LogStartOffset() {
			break
		}
		require.NoError(t, ctx.Err(), "remote retention did not delete the old copies in time: local start %d, remote %+v", part.LogStartOffset(), st)
		time.Sleep(20 * time.Millisecond)
	}
	// The deletions go on, a copy or more a pass (every RemoteInterval),
	// until the oldest copy holds a fresh record: wait until the start
	// has not moved for 20 passes, so that it does not move between the
	// requests below.
	for stable := 0; stable < 20; {
		require.NoError(t, ctx.Err(), "the remote log start did not settle: %+v", part.Stats().Remote)
		time.Sleep(50 * time.Millisecond)
		if st := part.Stats().Remote.LogStartOffset; st != remoteStart {
			remoteStart, stable = st, 0
			continue
		}
		stable++
	}
	require.LessOrEqual(t, remoteStart, int64(len(recs)/2), "the copies of fresh records stay")

	rc := dialRaw(t, b.addr)
	assert.Equal(t, remoteStart, listOffset(t, rc, topic, 0, plog.EarliestTimestamp).Offset, "ListOffsets earliest: the oldest copy")
	resp := rc.do(fetchReq(topic, []int32{0}, 0, 1<<20, 1<<20, 0, 0)).(*kmsg.FetchResponse)
	fp := resp.Topics[0].Partitions[0]
	assert.Equal(t, kerr.OffsetOutOfRange.Code, fp.ErrorCode, "fetch below the whole log's start: %v", kerr.ErrorForCode(fp.ErrorCode))
	assert.Equal(t, remoteStart, fp.LogStartOffset, "fetch below the whole log's start: its log_start_offset")
	resp = rc.do(fetchReq(topic, []int32{0}, remoteStart, 1<<20, 1<<20, 0, 0)).(*kmsg.FetchResponse)
	fp = resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), fp.ErrorCode, "fetch at the whole log's start: %v", kerr.ErrorForCode(fp.ErrorCode))
	assert.Equal(t, remoteStart, fp.LogStartOffset)
	assert.NotEmpty(t, fp.RecordBatches, "fetch at the whole log's start reads the copy")
}
