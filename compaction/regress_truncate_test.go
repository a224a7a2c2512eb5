package compaction

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Unix(100000, 0)
	c, err := NewCompactor(compactCfg(&now))
	if err != nil {
		t.Fatal(err)
	}
	app := func(key string, val []byte) {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		if err := bld.Add(batch.Record{Key: []byte(key), Value: val, Timestamp: now.UnixMilli() - 1000}); err != nil {
			t.Fatal(err)
		}
		b, _ := bld.Build()
		if _, err := p.AppendBatch(append([]byte(nil), b...)); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(n int, tag string) {
		for i := 0; i < n; i++ {
			app(fmt.Sprintf("f-%s-%d", tag, i), []byte("x"))
		}
		if err := p.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	compact := func() Result {
		r, err := c.Apply(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fill(40, "a")
	r := compact()
	if r.CleanedTo <= 10 {
		t.Fatalf("round 1 cleaned to %d, the test needs a checkpoint above 10", r.CleanedTo)
	}
	if err := p.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if cp, found, err := ReadCleanerCheckpoint(p); err != nil || !found || cp != 10 {
		t.Fatalf("cleaner checkpoint after TruncateTo(10): %d found=%v err=%v, want 10", cp, found, err)
	}
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
	if x, ok := last["K"]; ok && !x.Null {
		t.Fatalf("deleted key K is visible again with value %q at offset %d", x.Value, x.Offset)
	}
}

// TestTruncateCleanerCheckpointClamp checks the clamp itself: only when the
// file exists and its offset is above the new end; a full truncation (the
// log start's batch) clamps to the log start; and a round whose snapshot
// predates a truncation does not raise the checkpoint again.
func TestTruncateCleanerCheckpointClamp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topic-3")
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	app := func(n int) {
		for i := 0; i < n; i++ {
			b := buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint("k", i%5)), value: k("v"), ts: 1000})
			if _, err := p.AppendBatch(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp := func() int64 {
		t.Helper()
		off, found, err := ReadCleanerCheckpoint(p)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return -1
		}
		return off
	}
	app(30)
	// No file: TruncateTo creates none.
	if err := p.TruncateTo(28); err != nil {
		t.Fatal(err)
	}
	if got := cp(); got != -1 {
		t.Fatalf("TruncateTo created a cleaner checkpoint at %d", got)
	}
	// At or below the new end: unchanged.
	if ok, err := p.WriteCleanerCheckpoint(20, p.Truncations()); err != nil || !ok {
		t.Fatalf("WriteCleanerCheckpoint: %v %v", ok, err)
	}
	if err := p.TruncateTo(25); err != nil {
		t.Fatal(err)
	}
	if got := cp(); got != 20 {
		t.Fatalf("checkpoint %d after TruncateTo(25), want 20 (unchanged)", got)
	}
	// Above: clamped.
	if err := p.TruncateTo(12); err != nil {
		t.Fatal(err)
	}
	if got := cp(); got != 12 {
		t.Fatalf("checkpoint %d after TruncateTo(12), want 12", got)
	}
	// A round that started before a truncation does not write.
	gen := p.Truncations()
	if err := p.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.WriteCleanerCheckpoint(11, gen); err != nil || ok {
		t.Fatalf("stale WriteCleanerCheckpoint wrote: %v %v", ok, err)
	}
	if got := cp(); got != 8 {
		t.Fatalf("checkpoint %d, want 8", got)
	}
	// Full truncation: the log start inside the batch holding the offset.
	app(1) // offset 8
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := 0; i < 4; i++ {
		bld.Add(batch.Record{Key: k("m"), Value: k("v"), Timestamp: 1000})
	}
	b, _ := bld.Build()
	if _, err := p.AppendBatch(append([]byte(nil), b...)); err != nil { // 9..12
		t.Fatal(err)
	}
	if ok, err := p.WriteCleanerCheckpoint(13, p.Truncations()); err != nil || !ok {
		t.Fatalf("WriteCleanerCheckpoint: %v %v", ok, err)
	}
	if err := p.DeleteRecordsBefore(11); err != nil {
		t.Fatal(err)
	}
	if err := p.TruncateTo(11); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 11 || p.LogStartOffset() != 11 {
		t.Fatalf("full truncation: start %d end %d, want 11 11", p.LogStartOffset(), p.LogEndOffset())
	}
	if got := cp(); got != 11 {
		t.Fatalf("checkpoint %d after full truncation to 11, want 11", got)
	}
}

// *log.Partition writes its cleaner checkpoint under its lock.
var _ truncationAware = (*plog.Partition)(nil)
