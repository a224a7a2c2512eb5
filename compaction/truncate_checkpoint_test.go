package compaction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTruncateBelowCleanerCheckpointResurrectsKey: TruncateTo must lower
// the cleaner checkpoint to the new log end (Kafka's
// maybeTruncateCheckpoint). Otherwise records appended after a truncation
// below it count as already clean: a key's tombstone is removed at its
// horizon while the older value it deleted stays, and the key comes back.
func TestTruncateBelowCleanerCheckpointResurrectsKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-0")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 600})
	require.NoError(t, err)
	defer p.Close()
	now := time.Unix(100000, 0)
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	app := func(key string, val []byte) {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		require.NoError(t, bld.Add(batch.Record{Key: []byte(key), Value: val, Timestamp: now.UnixMilli() - 1000}))
		b, _ := bld.Build()
		_, err := p.AppendBatch(append([]byte(nil), b...))
		require.NoError(t, err)
	}
	fill := func(n int, tag string) {
		for i := 0; i < n; i++ {
			app(fmt.Sprintf("f-%s-%d", tag, i), []byte("x"))
		}
		require.NoError(t, p.Roll())
	}
	compact := func() Result {
		r, err := c.Apply(context.Background(), p)
		require.NoError(t, err)
		return r
	}
	fill(40, "a")
	r := compact()
	require.Greater(t, r.CleanedTo, int64(10), "round 1 cleaned to %d, the test needs a checkpoint above 10", r.CleanedTo)
	require.NoError(t, p.TruncateTo(10))
	cp, found, err := readCleanerCheckpoint(p)
	require.NoError(t, err, "cleaner checkpoint after TruncateTo(10): %d found=%v err=%v, want 10", cp, found, err)
	require.True(t, found, "cleaner checkpoint after TruncateTo(10): %d found=%v err=%v, want 10", cp, found, err)
	require.Equal(t, int64(10), cp, "cleaner checkpoint after TruncateTo(10): %d found=%v err=%v, want 10", cp, found, err)
	app("K", []byte("v1")) // offset 10
	app("K", nil)          // offset 11: K deleted
	fill(40, "b")
	compact()
	now = now.Add(2 * time.Hour) // past delete.retention
	fill(10, "c")
	compact()
	last := map[string]rec{}
	for _, x := range readPartition(t, p) {
		last[x.Key] = x
	}
	x, ok := last["K"]
	if ok {
		require.True(t, x.Null, "deleted key K is visible again with value %q at offset %d", x.Value, x.Offset)
	}
}

// readCleanerCheckpoint reads p's cleaner checkpoint file (Kafka's
// format, the directory's topic-partition entry) on the operating system's
// filesystem, which the test opened p on; found is false without one.
func readCleanerCheckpoint(p *plog.Partition) (offset int64, found bool, err error) {
	topic, part := checkpoint.EntryName(p.Dir())
	off, found, err := checkpoint.ReadOffset(vfs.Default, filepath.Join(p.Dir(), checkpoint.CleanerOffsetFile), topic, part)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return off, found, err
}
