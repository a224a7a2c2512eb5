package compaction

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// TestCompactRewriteNeedsMoreIndexEntries: segments that rolled with a
// full offset index, each of one-tombstone batches of 98 bytes and an
// index interval of 100 bytes (an entry every other batch). The first
// round stamps every batch with a delete horizon, which re-encodes the
// record's timestamp delta and makes each batch larger than the
// interval: the rewrite needs an entry for every batch, twice what the
// segment it replaces had. Every round used to fail with "segment is
// full: index full" on the .cleaned segment, so the partition was never
// compacted again; the new segment's indexes now grow past
// segment.index.bytes, and the result reopens and verifies.
func TestCompactRewriteNeedsMoreIndexEntries(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) { testCompactRewriteNeedsMoreIndexEntries(t, fsName) })
	}
}

func testCompactRewriteNeedsMoreIndexEntries(t *testing.T, fsName string) {
	fsys, dir := vfs.FS(vfs.NewMem()), "/p/topic-0"
	if fsName == "os" {
		fsys, dir = vfs.Default, filepath.Join(t.TempDir(), "topic-0")
	}
	cfg := segment.Config{IndexIntervalBytes: 100, MaxIndexBytes: 80}
	l, err := openTestLog(fsys, dir, cfg, 1<<20)
	require.NoError(t, err)
	now := time.UnixMilli(1_700_000_000_000)
	ts := now.UnixMilli() - 1000
	const n = 60
	for i := range n {
		b := buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprintf("key-%026d", i)), ts: ts})
		require.Len(t, b, 98)
		_, err := l.append(b)
		require.NoError(t, err)
	}
	require.NoError(t, l.roll())
	require.Greater(t, len(l.segInfos()), 2, "the offset index filled: the log rolled")

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	for _, b := range rawBatches(t, l) {
		require.True(t, b.Attributes().HasDeleteHorizon(), "batch at %d", b.BaseOffset())
	}
	check := func(l *testLog) {
		t.Helper()
		got := l.readAll(t)
		require.Len(t, got, n)
		for i, r := range got {
			require.Equal(t, int64(i), r.Offset)
			require.True(t, r.Null, "record %d", i)
		}
		to, found, err := l.OffsetForTimestamp(ts)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, int64(0), to.Offset)
		require.NoError(t, l.Verify())
	}
	check(l)
	require.NoError(t, l.close())
	l, err = openTestLog(fsys, dir, cfg, 1<<20)
	require.NoError(t, err)
	defer l.close()
	check(l)
}
