package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
)

// min.compaction.lag.ms above max.compaction.lag.ms is refused with
// INVALID_CONFIG, as Kafka's LogConfig.validateValues refuses it (whatever
// the cleanup policy), and the topic is not created; equal lags are taken.
func TestCreateTopicCompactionLagConflict(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	for _, policy := range []string{"compact", "delete"} {
		name := "lag-conflict-" + policy
		rt := createTopics(t, rc, 7, false, newTopic(name, 1, 1, "cleanup.policy", policy,
			"min.compaction.lag.ms", "60000", "max.compaction.lag.ms", "1000"))[name]
		assert.Equal(t, codeName(kerr.InvalidConfig.Code), codeName(rt.ErrorCode), "%s: %v", name, rt.ErrorMessage)
		code, _ := metadataNoCreate(t, rc, name)
		assert.Equal(t, codeName(kerr.UnknownTopicOrPartition.Code), codeName(code), "%s was created", name)
	}
	rt := createTopics(t, rc, 7, false, newTopic("lag-equal", 1, 1, "cleanup.policy", "compact",
		"min.compaction.lag.ms", "1000", "max.compaction.lag.ms", "1000"))["lag-equal"]
	assert.Equal(t, codeName(0), codeName(rt.ErrorCode), "lag-equal: %v", rt.ErrorMessage)
}

// newTopic is a CreateTopics entry.
func newTopic(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		rt.Configs = append(rt.Configs, c)
	}
	return rt
}

// createTopics sends one CreateTopics request and returns its answers by
// topic.
func createTopics(t *testing.T, rc *rawConn, v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) map[string]kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly = v, 5000, validateOnly
	req.Topics = topics
	resp := rc.do(req).(*kmsg.CreateTopicsResponse)
	out := make(map[string]kmsg.CreateTopicsResponseTopic)
	for _, rt := range resp.Topics {
		out[rt.Topic] = rt
	}
	return out
}

// deleteTopics sends DeleteTopics v6 by name (v0-5: TopicNames) and returns
// the error codes by topic.
func deleteTopics(t *testing.T, rc *rawConn, v int16, names ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis = v, 5000
	for _, n := range names {
		if v >= 6 {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, dt)
		} else {
			req.TopicNames = append(req.TopicNames, n)
		}
	}
	resp := rc.do(req).(*kmsg.DeleteTopicsResponse)
	out := make(map[string]int16)
	for _, rt := range resp.Topics {
		if rt.Topic != nil {
			out[*rt.Topic] = rt.ErrorCode
		}
	}
	return out
}

// metadataNoCreate asks for one topic without auto-creation (v12) and
// returns its error code and partition count.
func metadataNoCreate(t *testing.T, rc *rawConn, topic string) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.MetadataResponse)
	require.Len(t, resp.Topics, 1)
	return resp.Topics[0].ErrorCode, len(resp.Topics[0].Partitions)
}

// codeName names an error code for assertion messages.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// CreateTopics answers as Kafka 3.9's controller does (partition count,
// replication factor 1, validate_only, manual assignments, honoured and
// refused configs, the error codes), and DeleteTopics removes a topic's
// partitions, its directories and its groups' offsets; Metadata follows.
func TestCreateDeleteTopics(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	b := startBroker(t, dir, 2)
	rc := dialRaw(t, b.addr)

	got := createTopics(t, rc, 7, false,
		newTopic("orders", 3, 1),
		newTopic("defaults", -1, -1),
		newTopic("compacted", 1, 1, "cleanup.policy", "compact", "retention.ms", "-1"),
	)
	require.Len(t, got, 3)
	for name, want := range map[string]int32{"orders": 3, "defaults": 2, "compacted": 1} {
		rt := got[name]
		require.Equal(t, int16(0), rt.ErrorCode, "%s: %s %v", name, codeName(rt.ErrorCode), rt.ErrorMessage)
		assert.Equal(t, want, rt.NumPartitions, name)
		assert.Equal(t, int16(1), rt.ReplicationFactor, name)
		code, n := metadataNoCreate(t, rc, name)
		assert.Equal(t, int16(0), code, "metadata of %s", name)
		assert.Equal(t, int(want), n, "partitions of %s in Metadata", name)
		_, err := os.Stat(filepath.Join(dir, name+"-0"))
		assert.NoError(t, err, "%s-0 directory", name)
	}
	configs := func(rt kmsg.CreateTopicsResponseTopic) map[string]string {
		m := make(map[string]string)
		for _, c := range rt.Configs {
			m[c.Name] = *c.Value + "/" + string('0'+rune(c.Source))
		}
		return m
	}
	assert.Equal(t, "compact/1", configs(got["compacted"])["cleanup.policy"], "an override: DYNAMIC_TOPIC_CONFIG")
	assert.Equal(t, "-1/1", configs(got["compacted"])["retention.ms"])
	assert.Equal(t, "delete/4", configs(got["orders"])["cleanup.policy"], "the broker's flag: STATIC_BROKER_CONFIG")
	assert.Equal(t, "604800000/4", configs(got["orders"])["retention.ms"])
	assert.Equal(t, "0.5/5", configs(got["orders"])["min.cleanable.dirty.ratio"], "Kafka's default: DEFAULT_CONFIG")

	assign := func(name string, parts ...[]int32) kmsg.CreateTopicsRequestTopic {
		rt := newTopic(name, -1, -1)
		for i, replicas := range parts {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	gap := assign("gap", []int32{0}, []int32{0})
	gap.ReplicaAssignment[1].Partition = 2
	withRF := assign("assigned-rf", []int32{0})
	withRF.ReplicationFactor = 1
	nullCfg := newTopic("null-config", 1, 1)
	nullCfg.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms"}}
	require.Len(t, createTopics(t, rc, 7, false, newTopic("a.b", 1, 1)), 1)
	cases := []struct {
		topic kmsg.CreateTopicsRequestTopic
		code  int16
	}{
		{newTopic("orders", 3, 1), kerr.TopicAlreadyExists.Code},
		{newTopic(offsetsTopic, 1, 1), kerr.TopicAlreadyExists.Code},
		{newTopic("bad/name", 1, 1), kerr.InvalidTopicException.Code},
		{newTopic(strings.Repeat("x", 250), 1, 1), kerr.InvalidTopicException.Code},
		{newTopic("a_b", 1, 1), kerr.InvalidTopicException.Code},
		{newTopic("zero", 0, 1), kerr.InvalidPartitions.Code},
		{newTopic("negative", -2, 1), kerr.InvalidPartitions.Code},
		{newTopic("huge", maxCreatePartitions+1, 1), kerr.InvalidPartitions.Code},
		{newTopic("rf3", 1, 3), kerr.InvalidReplicationFactor.Code},
		{newTopic("rf0", 1, 0), kerr.InvalidReplicationFactor.Code},
		{newTopic("unknown-config", 1, 1, "no.such.config", "1"), kerr.InvalidConfig.Code},
		{newTopic("unhonoured", 1, 1, "segment.bytes", "1048576"), kerr.InvalidConfig.Code},
		{newTopic("bad-value", 1, 1, "retention.ms", "soon"), kerr.InvalidConfig.Code},
		{newTopic("bad-policy", 1, 1, "cleanup.policy", "forever"), kerr.InvalidConfig.Code},
		{newTopic("bad-ratio", 1, 1, "min.cleanable.dirty.ratio", "2"), kerr.InvalidConfig.Code},
		{nullCfg, kerr.InvalidConfig.Code},
		{assign("other-broker", []int32{5}), kerr.InvalidReplicaAssignment.Code},
		{gap, kerr.InvalidReplicaAssignment.Code},
		{withRF, kerr.InvalidRequest.Code},
		{assign("assigned", []int32{0}, []int32{0}), 0},
	}
	for _, c := range cases {
		rt := createTopics(t, rc, 7, false, c.topic)[c.topic.Topic]
		assert.Equal(t, codeName(c.code), codeName(rt.ErrorCode), "%s: %v", c.topic.Topic, rt.ErrorMessage)
		if c.code != 0 {
			require.NotNil(t, rt.ErrorMessage, c.topic.Topic)
			assert.Equal(t, int32(-1), rt.NumPartitions, c.topic.Topic)
		}
	}
	_, n := metadataNoCreate(t, rc, "assigned")
	assert.Equal(t, 2, n, "a manual assignment of two partitions")

	// validate_only checks without creating; a name twice is refused.
	v := createTopics(t, rc, 7, true, newTopic("checked", 4, 1, "retention.ms", "1000"))["checked"]
	assert.Equal(t, int16(0), v.ErrorCode, codeName(v.ErrorCode))
	assert.Equal(t, int32(4), v.NumPartitions)
	code, _ := metadataNoCreate(t, rc, "checked")
	assert.Equal(t, codeName(kerr.UnknownTopicOrPartition.Code), codeName(code), "validate_only created the topic")
	dup := createTopics(t, rc, 7, false, newTopic("twice", 1, 1), newTopic("twice", 1, 1))
	assert.Equal(t, codeName(kerr.InvalidRequest.Code), codeName(dup["twice"].ErrorCode))
	code, _ = metadataNoCreate(t, rc, "twice")
	assert.Equal(t, codeName(kerr.UnknownTopicOrPartition.Code), codeName(code))
	// Version 0, the lowest Kafka 3.9 takes.
	assert.Equal(t, int16(0), createTopics(t, rc, 0, false, newTopic("old-client", 1, 1))["old-client"].ErrorCode)

	// Delete: data, Metadata and the groups' offsets go.
	for p := range int32(3) {
		pr := produceRaw(t, rc, 9, "orders", p, buildBatch(t, "o", 4, batch.CompressionNone))
		require.Equal(t, int16(0), pr.ErrorCode, codeName(pr.ErrorCode))
	}
	commitOffset(t, rc, "billing", "orders", 1, 3)
	commitOffset(t, rc, "billing", "defaults", 0, 0)
	commitOffset(t, rc, "only-orders", "orders", 0, 2)
	del := deleteTopics(t, rc, 6, "orders", "nope", offsetsTopic)
	assert.Equal(t, map[string]int16{"orders": 0, "nope": kerr.UnknownTopicOrPartition.Code, offsetsTopic: kerr.InvalidRequest.Code}, del)
	code, _ = metadataNoCreate(t, rc, "orders")
	assert.Equal(t, codeName(kerr.UnknownTopicOrPartition.Code), codeName(code), "Metadata after the deletion")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), "orders-"), "%s left in the data directory", e.Name())
	}
	assert.Equal(t, int64(-1), fetchCommitted(t, rc, "billing", "orders", 1), "the deleted topic's offset")
	assert.Equal(t, int64(0), fetchCommitted(t, rc, "billing", "defaults", 0), "another topic's offset stays")
	assert.Equal(t, kerr.GroupIDNotFound.Code, deleteGroup(t, rc, "only-orders"), "a group with offsets of the deleted topic only is gone")
	assert.Equal(t, map[string]int16{"orders": kerr.UnknownTopicOrPartition.Code}, deleteTopics(t, rc, 6, "orders"), "deleted twice")
	assert.Equal(t, map[string]int16{"defaults": 0}, deleteTopics(t, rc, 0, "defaults"), "DeleteTopics v0")
	assert.Equal(t, map[string]int16{"twice": kerr.InvalidRequest.Code}, deleteTopics(t, rc, 6, "twice", "twice"))
	byID := kmsg.NewPtrDeleteTopicsRequest()
	byID.Version = 6
	byID.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{1}}}
	idResp := rc.do(byID).(*kmsg.DeleteTopicsResponse)
	require.Len(t, idResp.Topics, 1)
	assert.Equal(t, codeName(kerr.UnknownTopicID.Code), codeName(idResp.Topics[0].ErrorCode), "by topic id: the broker keeps none")

	// A deleted topic can be created again, empty; the overrides survive a
	// restart.
	again := createTopics(t, rc, 7, false, newTopic("orders", 1, 1))["orders"]
	require.Equal(t, int16(0), again.ErrorCode, codeName(again.ErrorCode))
	assert.Equal(t, int64(0), listOffset(t, rc, "orders", 0, -1).Offset, "the recreated topic is empty")
	b.stop(t)
	var srv *server
	b = startBrokerWith(t, dir, 2, func(c *config) { c.onServer = func(s *server) { srv = s } })
	rc = dialRaw(t, b.addr)
	assert.Equal(t, topicConfig{"cleanup.policy": "compact", "retention.ms": "-1"}, srv.store.topicConfigOf("compacted"))
	assert.Nil(t, srv.store.topicConfigOf("orders"))
	_, n = metadataNoCreate(t, rc, "assigned")
	assert.Equal(t, 2, n, "partitions after a restart")
}

// A compacted topic (cleanup.policy compact, or compact,delete; by
// CreateTopics or the broker's -cleanup-policy) refuses a batch holding a
// record without a key: Kafka's LogValidator answers INVALID_RECORD
// ("Compacted topic cannot accept message without key") and writes
// nothing, where the cleaner would later drop the record. An empty key is
// a key; a delete topic takes keyless records.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	leakCheck(t)
	keyless := func(codec batch.Compression) []byte {
		bld := batch.NewBuilder(batch.BuilderOptions{Compression: codec})
		require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("keyed"), Timestamp: time.Now().UnixMilli()}))
		require.NoError(t, bld.Add(batch.Record{Value: []byte("no key"), Timestamp: time.Now().UnixMilli()}))
		bt, err := bld.Build()
		require.NoError(t, err)
		return bt
	}
	emptyKey := func() []byte {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		require.NoError(t, bld.Add(batch.Record{Key: []byte{}, Value: []byte("empty key"), Timestamp: time.Now().UnixMilli()}))
		bt, err := bld.Build()
		require.NoError(t, err)
		return bt
	}
	b := startBroker(t, t.TempDir(), 1)
	rc := dialRaw(t, b.addr)
	for name, rt := range createTopics(t, rc, 7, false,
		newTopic("compacted", 1, 1, "cleanup.policy", "compact"),
		newTopic("both", 1, 1, "cleanup.policy", "delete,compact"),
		newTopic("deleted", 1, 1, "cleanup.policy", "delete"),
	) {
		require.Equal(t, codeName(0), codeName(rt.ErrorCode), name)
	}
	for _, topic := range []string{"compacted", "both"} {
		for _, codec := range []batch.Compression{batch.CompressionNone, batch.CompressionGzip} {
			pr := produceRaw(t, rc, 9, topic, 0, keyless(codec))
			assert.Equal(t, codeName(kerr.InvalidRecord.Code), codeName(pr.ErrorCode), "%s, %v: a record without a key", topic, codec)
			if assert.Len(t, pr.ErrorRecords, 1, "%s, %v", topic, codec) {
				assert.Equal(t, int32(1), pr.ErrorRecords[0].RelativeOffset, "the keyless record's index in its batch")
			}
		}
		assert.Equal(t, int64(0), listOffset(t, rc, topic, 0, -1).Offset, "%s: a refused batch was written", topic)
		pr := produceRaw(t, rc, 9, topic, 0, emptyKey())
		assert.Equal(t, codeName(0), codeName(pr.ErrorCode), "%s: an empty key", topic)
	}
	pr := produceRaw(t, rc, 9, "deleted", 0, keyless(batch.CompressionNone))
	assert.Equal(t, codeName(0), codeName(pr.ErrorCode), "a delete topic takes records without a key")

	// The broker's -cleanup-policy compact: every user topic is compacted;
	// franz-go gets the error for the keyless record.
	b2 := startBrokerWith(t, t.TempDir(), 1, func(c *config) { c.CleanupPolicy = "compact" })
	cl := newClient(t, b2.addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("all-compacted"))
	ctx := context.Background()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr())
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidRecord)
}

// recordsWithKey builds a batch of n records with one key and old
// timestamps.
func recordsWithKey(t *testing.T, key string, n int, ts int64) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Key: []byte(key), Value: []byte("a value with some padding"), Timestamp: ts + int64(i)}))
	}
	bt, err := bld.Build()
	require.NoError(t, err)
	return bt
}

// The cleaner applies each topic's configuration: with the broker's
// retention of an hour, records two hours old go from a topic without
// overrides and from one with retention.ms=60000, stay in one with
// retention.ms=-1 or one of 584 years (beyond a time.Duration), and a
// cleanup.policy=compact topic (with Kafka's default
// max.compaction.lag.ms, 2^63-1) keeps its records' latest value per key.
func TestTopicConfigsApplied(t *testing.T) {
	leakCheck(t)
	ran := make(chan struct{}, 1)
	b := startBrokerWith(t, t.TempDir(), 1, func(c *config) {
		c.SegmentBytes = 1024
		c.Retention = time.Hour
		c.CleanupInterval = 20 * time.Millisecond
		c.CleanupDone = cleanupSignal(ran)
	})
	rc := dialRaw(t, b.addr)
	got := createTopics(t, rc, 7, false,
		newTopic("plain", 1, 1),
		newTopic("short", 1, 1, "retention.ms", "60000"),
		newTopic("forever", 1, 1, "retention.ms", "-1"),
		newTopic("centuries", 1, 1, "retention.ms", "18446744073710"),
		newTopic("keyed", 1, 1, "cleanup.policy", "compact", "min.cleanable.dirty.ratio", "0.01", "max.compaction.lag.ms", "9223372036854775807"),
	)
	for name, rt := range got {
		require.Equal(t, int16(0), rt.ErrorCode, "%s: %s", name, codeName(rt.ErrorCode))
	}
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 20 {
		for _, topic := range []string{"plain", "short", "forever", "centuries", "keyed"} {
			pr := produceRaw(t, rc, 9, topic, 0, recordsWithKey(t, "k", 5, old+int64(i*5)))
			require.Equal(t, int16(0), pr.ErrorCode, "%s: %s", topic, codeName(pr.ErrorCode))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, _ := countRecords(t, rc, "keyed")
		if listOffset(t, rc, "plain", 0, -2).Offset > 0 && listOffset(t, rc, "short", 0, -2).Offset > 0 && n < 50 {
			break
		}
		waitCleanup(t, ran)
	}
	// A few more rounds: the topic kept forever must not lose anything.
	for range 3 {
		waitCleanup(t, ran)
	}
	assert.Positive(t, listOffset(t, rc, "plain", 0, -2).Offset, "the broker's retention of an hour")
	assert.Positive(t, listOffset(t, rc, "short", 0, -2).Offset, "retention.ms=60000")
	assert.Equal(t, int64(0), listOffset(t, rc, "forever", 0, -2).Offset, "retention.ms=-1 keeps everything")
	n, end := countRecords(t, rc, "forever")
	assert.Equal(t, 100, n)
	assert.Equal(t, int64(100), end)
	assert.Equal(t, int64(0), listOffset(t, rc, "centuries", 0, -2).Offset, "retention.ms of 584 years keeps everything")
	assert.Equal(t, int64(0), listOffset(t, rc, "keyed", 0, -2).Offset, "compaction deletes no segment by age")
	n, end = countRecords(t, rc, "keyed")
	assert.Less(t, n, 50, "cleanup.policy=compact: %d of 100 records of one key left", n)
	assert.Equal(t, int64(100), end)
}
