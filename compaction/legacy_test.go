package compaction

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// legacyEntries walks a record set and returns its legacy messages (magic
// 0/1) and the (offset, key) of every v2 record.
func legacyEntries(t *testing.T, set []byte) (legacyMsgs [][]byte, v2 [][2]string) {
	t.Helper()
	var d batch.Decoder
	for len(set) > 0 {
		n, magic, _, err := batch.FrameEntry(set)
		require.NoError(t, err)
		if legacy.IsMagic(magic) {
			require.NoError(t, d.ValidateLegacy(set[:n]))
			legacyMsgs = append(legacyMsgs, bytes.Clone(set[:n]))
		} else {
			for r, err := range batch.Batch(set[:n]).All(&d) {
				require.NoError(t, err)
				v2 = append(v2, [2]string{fmt.Sprint(r.Offset), string(r.Key)})
			}
		}
		set = set[n:]
	}
	return legacyMsgs, v2
}

// TestCompactionKeepsLegacyMessages: a segment Kafka wrote with magic 1
// messages and gzip wrappers among v2 batches compacts; every legacy
// message is copied byte for byte at its offsets (never renumbered, never
// dropped), while duplicate keys in the v2 batches go.
func TestCompactionKeepsLegacyMessages(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "legacy", "mixed-0", "00000000000000000000.log"))
	require.NoError(t, err)
	wantLegacy, v2Before := legacyEntries(t, src)
	require.Len(t, wantLegacy, 7)
	dir := filepath.Join(t.TempDir(), "t-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), src, 0o644))
	l, err := openTestLog(vfs.Default, dir, segment.Config{MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}, 1<<20)
	require.NoError(t, err)
	defer l.close()
	// More updates of two keys the v2 batches hold, then roll so that
	// everything is cleanable.
	for i := range 3 {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		require.NoError(t, bld.Add(batch.Record{Key: []byte("gamma"), Value: []byte(fmt.Sprint("g", i)), Timestamp: 1_800_000_000_000}))
		require.NoError(t, bld.Add(batch.Record{Key: []byte("delta"), Value: []byte(fmt.Sprint("d", i)), Timestamp: 1_800_000_000_000}))
		b, err := bld.AppendTo(nil)
		require.NoError(t, err)
		_, err = l.append(b)
		require.NoError(t, err)
	}
	require.NoError(t, l.roll())
	now := time.Now()
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Positive(t, res.RecordsRemoved)

	var all []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rs, err := l.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		all = append(all, rs.Bytes()...)
		off = rs.NextOffset()
		require.NoError(t, rs.Close())
	}
	gotLegacy, v2After := legacyEntries(t, all)
	require.Equal(t, wantLegacy, gotLegacy, "legacy messages not kept verbatim")
	require.Less(t, len(v2After), len(v2Before)+6)
	for _, kv := range v2After {
		require.NotContains(t, []string{"4", "6"}, kv[0], "an older gamma/delta v2 record survived: %v", kv)
	}
}
