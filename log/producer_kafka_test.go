package log_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/producer"
	plog "github.com/partlog/partlog/log"
)

// kafkaSnapshotEntries is what Kafka 2.7.1's
// myTopic-0/00000000000000000038.snapshot (testdata/PROVENANCE.md) holds,
// decoded by hand from its bytes (docs/format.md, "Producer state
// snapshots"): three idempotent producers, one entry each. The codec is
// checked against the file's bytes in package internal/producer
// (TestDecodeGolden); here Open loads it.
var kafkaSnapshotEntries = []producer.Entry{
	{ProducerID: 4001, ProducerEpoch: 0, LastSequence: 11, LastOffset: 11, OffsetDelta: 2, Timestamp: 0x184d7d15005, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	{ProducerID: 4002, ProducerEpoch: 0, LastSequence: 11, LastOffset: 23, OffsetDelta: 11, Timestamp: 0x184d7da9d7c, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	{ProducerID: 4003, ProducerEpoch: 0, LastSequence: 13, LastOffset: 37, OffsetDelta: 13, Timestamp: 0x184d8011c10, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
}

// TestKafkaProducerSnapshot opens Kafka's myTopic-0 (a 0-byte segment at
// 38 and the snapshot at 38): the three producers are loaded, and a retry
// of each one's last batch, rebuilt from its entry (same producer id,
// epoch, first and last sequence), is recognised with the original
// offsets and writes nothing. With the real clock the producers (idle
// since December 2022) are expired on load, as Kafka expires them.
func TestKafkaProducerSnapshot(t *testing.T) {
	dir := copyFixtureFrom(t, "kafka-2.7.1", "myTopic-0")
	clock := func() time.Time { return time.UnixMilli(0x184d8011c10).Add(time.Hour) }
	p, err := plog.Open(dir, plog.Config{Now: clock})
	require.NoError(t, err)
	ps, err := p.Producers()
	require.NoError(t, err)
	require.Len(t, ps, 3)
	for i, e := range kafkaSnapshotEntries {
		st := ps[i]
		assert.Equal(t, e.ProducerID, st.ProducerID)
		assert.Equal(t, e.ProducerEpoch, st.Epoch)
		assert.Equal(t, e.Timestamp, st.LastTimestamp)
		require.Len(t, st.Batches, 1)
		b := st.Batches[0]
		assert.Equal(t, plog.ProducerBatch{FirstSequence: e.LastSequence - e.OffsetDelta, LastSequence: e.LastSequence,
			FirstOffset: e.LastOffset - int64(e.OffsetDelta), LastOffset: e.LastOffset, MaxTimestamp: e.Timestamp}, b)

		retry := prodBatch(t, e.ProducerID, e.ProducerEpoch, b.FirstSequence, int(e.OffsetDelta)+1, e.Timestamp, false)
		info, err := p.AppendBatchInfo(retry)
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "producer %d", e.ProducerID)
		assert.Equal(t, b.FirstOffset, info.Base)
		assert.Equal(t, e.LastOffset, info.LastOffset)
		assert.Equal(t, int64(38), p.LogEndOffset())
	}
	// The next batch of producer 4003 follows sequence 13; a gap is refused.
	_, err = p.AppendBatch(prodBatch(t, 4003, 0, 15, 1, 0x184d8011c10, false))
	require.ErrorIs(t, err, plog.ErrOutOfOrderSequence)
	base, err := p.AppendBatch(prodBatch(t, 4003, 0, 14, 1, 0x184d8011c10, false))
	require.NoError(t, err)
	assert.Equal(t, int64(38), base)
	require.NoError(t, p.Close())

	// Real clock: idle for years, expired (Kafka's loadFromSnapshot skips
	// them too).
	dir = copyFixtureFrom(t, "kafka-2.7.1", "myTopic-0")
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	ps, err = p.Producers()
	require.NoError(t, err)
	assert.Empty(t, ps)
	require.NoError(t, p.Close())
}
