package log_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// copyFixture copies testdata/kafka-2.7.1/<name> into a fresh directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "kafka-2.7.1", name)
	dst := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// TestOpenKafkaPartition opens directories a Kafka broker wrote: a
// compacted partition with offset gaps and a 0-byte index, and a partition
// whose data retention deleted. Reads return Kafka's bytes unchanged, the
// time index answers, and appends continue at Kafka's log end offset.
func TestOpenKafkaPartition(t *testing.T) {
	t.Run("compacted __consumer_offsets-39", func(t *testing.T) {
		dir := copyFixture(t, "__consumer_offsets-39")
		seg0, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
		require.NoError(t, err)
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, int64(0), p.LogStartOffset())
		require.Equal(t, int64(20), p.LogEndOffset())

		r, err := p.ReadFrom(0, 1<<20) // offsets 0-3 were compacted away
		require.NoError(t, err)
		require.Equal(t, seg0, r.Bytes())
		require.Equal(t, [][2]int64{{4, 4}, {16, 16}, {17, 17}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
		r, err = p.ReadFrom(5, 1) // inside the gap: the next batch
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{16, 16}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
		r, err = p.ReadFrom(18, 1<<20)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{18, 19}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())

		to, ok, err := p.OffsetForTimestamp(1685814551582)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(17), to.Offset)

		b := logtest.MakeBatch(2, 10, 1685814560000, 0)
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.Equal(t, int64(20), base)
		require.Equal(t, int64(22), p.LogEndOffset())

		// Truncating into the gap 5-15 keeps batch 4: the log ends at 5.
		require.NoError(t, p.TruncateTo(10))
		require.Equal(t, int64(5), p.LogEndOffset())
		require.Equal(t, 1, len(p.SegmentInfos()))
		base, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1685814570000, 0))
		require.NoError(t, err)
		require.Equal(t, int64(5), base)
		r, err = p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{4, 4}, {5, 5}}, batchesIn(t, r.Bytes()))
		require.NoError(t, r.Close())
	})
	t.Run("emptied myTopic-0", func(t *testing.T) {
		dir := copyFixture(t, "myTopic-0")
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		require.Equal(t, int64(38), p.LogStartOffset())
		require.Equal(t, int64(38), p.LogEndOffset())
		_, err = p.ReadFrom(37, 1)
		require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
		base, err := p.AppendBatch(logtest.MakeBatch(3, 10, 0, 0))
		require.NoError(t, err)
		require.Equal(t, int64(38), base)
		r, err := p.ReadFrom(39, 1)
		require.NoError(t, err)
		require.Equal(t, int64(38), batch.Batch(r.Bytes()).BaseOffset())
		require.NoError(t, r.Close())
		require.NoError(t, p.Verify())
	})
}
