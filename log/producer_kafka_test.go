package log_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// kafkaSnapshot is Kafka 2.7.1's myTopic-0/00000000000000000038.snapshot
// (testdata/PROVENANCE.md): three idempotent producers, one entry each.
const kafkaSnapshot = "testdata/kafka-2.7.1/myTopic-0/00000000000000000038.snapshot"

// kafkaSnapshotEntries is what that file holds, decoded by hand from its
// bytes (docs/format.md, "Producer state snapshots").
var kafkaSnapshotEntries = []plog.ProducerSnapshotEntry{
	{ProducerID: 4001, ProducerEpoch: 0, LastSequence: 11, LastOffset: 11, OffsetDelta: 2, Timestamp: 0x184d7d15005, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	{ProducerID: 4002, ProducerEpoch: 0, LastSequence: 11, LastOffset: 23, OffsetDelta: 11, Timestamp: 0x184d7da9d7c, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	{ProducerID: 4003, ProducerEpoch: 0, LastSequence: 13, LastOffset: 37, OffsetDelta: 13, Timestamp: 0x184d8011c10, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
}

// TestKafkaSnapshotGolden: decoding Kafka's snapshot gives its three
// entries, and encoding them again gives Kafka's bytes exactly; the same
// for every (empty, 10-byte) snapshot of the fixtures.
func TestKafkaSnapshotGolden(t *testing.T) {
	want, err := os.ReadFile(kafkaSnapshot)
	require.NoError(t, err)
	require.Len(t, want, 148)
	got, err := plog.DecodeProducerSnapshot(want)
	require.NoError(t, err)
	require.Equal(t, kafkaSnapshotEntries, got)
	require.Equal(t, want, plog.AppendProducerSnapshot(nil, got))

	paths, err := filepath.Glob("testdata/*/*/*.snapshot")
	require.NoError(t, err)
	require.Greater(t, len(paths), 5)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		es, err := plog.DecodeProducerSnapshot(b)
		require.NoError(t, err, path)
		require.Equal(t, b, plog.AppendProducerSnapshot(nil, es), path)
	}
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

// FuzzDecodeProducerSnapshot: the decoder never panics, and whatever it
// accepts encodes back to the same bytes.
func FuzzDecodeProducerSnapshot(f *testing.F) {
	if b, err := os.ReadFile(kafkaSnapshot); err == nil {
		f.Add(b)
	}
	f.Add(plog.AppendProducerSnapshot(nil, nil))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := plog.DecodeProducerSnapshot(data)
		if err != nil {
			require.ErrorIs(t, err, plog.ErrCorruptSnapshot)
			return
		}
		require.Equal(t, data, plog.AppendProducerSnapshot(nil, es))
	})
}
