package compaction

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
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
	cp, found, err := ReadCleanerCheckpoint(p)
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

// TestTruncateCleanerCheckpointClamp checks the clamp itself: only when the
// file exists and its offset is above the new end; a full truncation (the
// log start's batch) clamps to the log start; and a round whose snapshot
// predates a truncation does not raise the checkpoint again.
func TestTruncateCleanerCheckpointClamp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-3")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 600})
	require.NoError(t, err)
	defer p.Close()
	app := func(n int) {
		for i := 0; i < n; i++ {
			b := buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint("k", i%5)), value: k("v"), ts: 1000})
			_, err := p.AppendBatch(b)
			require.NoError(t, err)
		}
	}
	cp := func() int64 {
		t.Helper()
		off, found, err := ReadCleanerCheckpoint(p)
		require.NoError(t, err)
		if !found {
			return -1
		}
		return off
	}
	app(30)
	// No file: TruncateTo creates none.
	require.NoError(t, p.TruncateTo(28))
	got := cp()
	require.Equal(t, int64(-1), got, "TruncateTo created a cleaner checkpoint at %d", got)
	// At or below the new end: unchanged.
	ok, err := p.WriteCleanerCheckpoint(20, p.Truncations())
	require.NoError(t, err, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.True(t, ok, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.NoError(t, p.TruncateTo(25))
	got = cp()
	require.Equal(t, int64(20), got, "checkpoint %d after TruncateTo(25), want 20 (unchanged)", got)
	// Above: clamped.
	require.NoError(t, p.TruncateTo(12))
	got = cp()
	require.Equal(t, int64(12), got, "checkpoint %d after TruncateTo(12), want 12", got)
	// A round that started before a truncation does not write.
	gen := p.Truncations()
	require.NoError(t, p.TruncateTo(8))
	ok, err = p.WriteCleanerCheckpoint(11, gen)
	require.NoError(t, err, "stale WriteCleanerCheckpoint wrote: %v %v", ok, err)
	require.False(t, ok, "stale WriteCleanerCheckpoint wrote: %v %v", ok, err)
	got = cp()
	require.Equal(t, int64(8), got, "checkpoint %d, want 8", got)
	// Full truncation: the log start inside the batch holding the offset.
	app(1) // offset 8
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := 0; i < 4; i++ {
		bld.Add(batch.Record{Key: k("m"), Value: k("v"), Timestamp: 1000})
	}
	b, _ := bld.Build()
	// 9..12
	_, err = p.AppendBatch(append([]byte(nil), b...))
	require.NoError(t, err)
	ok, err = p.WriteCleanerCheckpoint(13, p.Truncations())
	require.NoError(t, err, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.True(t, ok, "WriteCleanerCheckpoint: %v %v", ok, err)
	require.NoError(t, p.DeleteRecordsBefore(11))
	require.NoError(t, p.TruncateTo(11))
	require.Equal(t, int64(11), p.LogEndOffset(), "full truncation: start %d end %d, want 11 11", p.LogStartOffset(), p.LogEndOffset())
	require.Equal(t, int64(11), p.LogStartOffset(), "full truncation: start %d end %d, want 11 11", p.LogStartOffset(), p.LogEndOffset())
	got = cp()
	require.Equal(t, int64(11), got, "checkpoint %d after full truncation to 11, want 11", got)
}

// *log.Partition writes its cleaner checkpoint under its lock.
var _ truncationAware = (*plog.Partition)(nil)
