package compaction

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// legacyEntries walks a record set and returns its legacy messages (magic
// 0/1) by the offset of their last record.
func legacyEntries(t *testing.T, set []byte) map[int64][]byte {
	t.Helper()
	var d batch.Decoder
	out := map[int64][]byte{}
	for len(set) > 0 {
		n, magic, next, err := batchaccess.FrameEntry(set)
		require.NoError(t, err)
		if legacy.IsMagic(magic) {
			require.NoError(t, d.ValidateLegacy(set[:n]))
			out[next-1] = bytes.Clone(set[:n])
		}
		set = set[n:]
	}
	return out
}

// readSet returns the log's bytes from its start to its end.
func readSet(t *testing.T, l *testLog) []byte {
	t.Helper()
	var all []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rs, err := l.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		all = append(all, rs.Bytes()...)
		off = rs.NextOffset()
		require.NoError(t, rs.Close())
	}
	return all
}

// TestCompactionLegacyFixtureMatchesKafkaCleaner is issue 27 case 1 on the
// repository's Kafka fixture (testdata/legacy/mixed-0: magic 1 messages
// and gzip magic 1 wrappers among v2 batches, keys alpha beta alpha beta,
// then gamma to theta, offsets 0-19) with a v2 tombstone for alpha at 20.
// Kafka's cleaner maps every record of the dirty section, legacy inner
// messages included, at its absolute offset (Cleaner.buildOffsetMap) and
// retains a record only when it is the latest for its key and not a
// tombstone past its delete horizon (Cleaner.shouldRetainRecord): once
// the horizon has passed the log holds the latest value of every key and
// nothing of alpha. On the old code the magic 1 values of alpha at 0 and
// 2 stayed (legacy messages were copied and never mapped) while the
// tombstone went: alpha was alive again.
func TestCompactionLegacyFixtureMatchesKafkaCleaner(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "legacy", "mixed-0", "00000000000000000000.log"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "t-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), src, 0o644))
	l, err := openTestLog(vfs.Default, dir, segment.Config{MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}, 1<<20)
	require.NoError(t, err)
	defer l.close()
	before := l.readAll(t)
	require.Len(t, before, 20)
	require.Equal(t, "alpha", before[0].Key)
	require.Equal(t, "alpha", before[2].Key)
	fixtureLegacy := legacyEntries(t, src)

	now := time.Now()
	ts := now.UnixMilli()
	_, err = l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("alpha"), ts: ts}))
	require.NoError(t, err)
	require.NoError(t, l.roll())
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)
	// Before the horizon the tombstone stays and shadows alpha's values.
	var alpha []rec
	for _, r := range l.readAll(t) {
		if r.Key == "alpha" {
			alpha = append(alpha, r)
		}
	}
	require.Len(t, alpha, 1, "alpha's tombstone is not its only record: %v", alpha)
	require.True(t, alpha[0].Null)
	require.Equal(t, int64(20), alpha[0].Offset)

	// Past the horizon (one hour), the next round drops the tombstone.
	now = now.Add(2 * time.Hour)
	_, err = l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("omega"), value: k("last"), ts: ts}))
	require.NoError(t, err)
	require.NoError(t, l.roll())
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)

	got := l.readAll(t)
	byOff := map[int64]rec{}
	for _, r := range before {
		byOff[r.Offset] = r
	}
	var offsets []int64
	table := map[string]string{}
	for _, r := range got {
		offsets = append(offsets, r.Offset)
		table[r.Key] = r.Value
		if r.Offset < 20 {
			require.Equal(t, byOff[r.Offset], r, "record at %d changed", r.Offset)
		}
	}
	// Kafka's answer: the latest record of every key, alpha gone.
	require.Equal(t, []int64{3, 6, 7, 10, 11, 18, 19, 21}, offsets, "records left: %v", got)
	require.NotContains(t, table, "alpha")
	for _, key := range []string{"beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "omega"} {
		require.Contains(t, table, key)
	}
	// The legacy messages that stay whole are copied byte for byte.
	after := legacyEntries(t, readSet(t, l))
	require.Len(t, after, 2, "legacy messages left: %v", after)
	for off, e := range after {
		require.Equal(t, fixtureLegacy[off], e, "legacy message ending at %d changed", off)
	}
}
