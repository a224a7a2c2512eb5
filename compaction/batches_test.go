package compaction

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// rawBatches returns a copy of every batch of the log by base offset.
func rawBatches(t testing.TB, l *testLog) map[int64]batch.Batch {
	segs, err := l.Segments()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(segs)
	out := map[int64]batch.Batch{}
	var sc scanner
	for _, s := range segs {
		if err := sc.forEach(s, s.BaseOffset(), func(b batch.Batch, _ int64) error {
			out[b.BaseOffset()] = batch.Batch(bytes.Clone(b))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRewrittenBatchesKeepHeaders(t *testing.T) {
	l, _ := newMemLog(t, 800)
	now := time.UnixMilli(1_700_000_000_000)
	fillLog(t, l, 20, 5, now.UnixMilli())
	// A batch whose records all stay: copied byte for byte.
	l.append(buildBatch(t, batch.CompressionGzip, nil, kv{key: k("solo1"), value: k("x"), ts: 5}, kv{key: k("solo2"), value: k("y"), ts: 6}))
	l.roll()
	before := rawBatches(t, l)
	c, _ := NewCompactor(compactCfg(&now))
	if _, err := c.Apply(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	after := rawBatches(t, l)
	verbatim := 0
	for base, nb := range after {
		ob, ok := before[base]
		if !ok {
			t.Fatalf("batch at %d did not exist", base)
		}
		oh, nh := ob.Header(), nb.Header()
		if nh.LastOffsetDelta != oh.LastOffsetDelta || nh.ProducerID != oh.ProducerID || nh.ProducerEpoch != oh.ProducerEpoch ||
			nh.BaseSequence != oh.BaseSequence || nh.PartitionLeaderEpoch != oh.PartitionLeaderEpoch {
			t.Fatalf("batch %d header changed:\n%+v\n%+v", base, oh, nh)
		}
		if nh.RecordsCount > 0 && nh.Attributes.Compression() != oh.Attributes.Compression() {
			t.Fatalf("batch %d codec %v -> %v", base, oh.Attributes.Compression(), nh.Attributes.Compression())
		}
		if nh.RecordsCount == oh.RecordsCount && !nh.Attributes.HasDeleteHorizon() {
			if !bytes.Equal(nb, ob) {
				t.Fatalf("batch %d with nothing removed was not copied verbatim", base)
			}
			verbatim++
		}
	}
	if verbatim == 0 || len(after) >= len(before) {
		t.Fatalf("%d verbatim of %d batches (before %d)", verbatim, len(after), len(before))
	}
}

func TestEmptyBatchKeptForProducer(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	now := time.UnixMilli(1_700_000_000_000)
	// Records an hour old: the producers are live (Config.ProducerIDExpiration).
	t1, t2 := now.Add(-time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()+1
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 5, Epoch: 2, BaseSequence: 10}, kv{key: k("a"), value: k("1"), ts: t1}, kv{key: k("b"), value: k("1"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 6, BaseSequence: 0}, kv{key: k("c"), value: k("1"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 6, BaseSequence: 1}, kv{key: k("c"), value: k("2"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("a"), value: k("2"), ts: t2}, kv{key: k("b"), value: k("2"), ts: t2}))
	l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("z"), value: k("3"), ts: t2}))
	l.roll()
	c, _ := NewCompactor(compactCfg(&now))
	if _, err := c.Apply(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	got := rawBatches(t, l)
	// pid 5's only (so last) batch lost both records: an empty header stays.
	b5, ok := got[0]
	if !ok || b5.RecordsCount() != 0 || b5.ProducerID() != 5 || b5.ProducerEpoch() != 2 || b5.BaseSequence() != 10 ||
		b5.LastOffsetDelta() != 1 || b5.BaseTimestamp() != batch.NoTimestamp || b5.Validate() != nil {
		t.Fatalf("pid 5's batch: %v %+v", ok, b5.Header())
	}
	// pid 6's first batch is superseded and not its last: gone.
	if _, ok := got[2]; ok {
		t.Fatal("pid 6's older empty batch kept")
	}
	if b, ok := got[3]; !ok || b.RecordsCount() != 1 {
		t.Fatal("pid 6's last batch lost")
	}
}

func TestCompactionReadersKeepReading(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var l *testLog
			if name == "mem" {
				l, _ = newMemLog(t, 600)
			} else {
				l = newOSLog(t, 600)
			}
			now := time.UnixMilli(1_700_000_000_000)
			fillLog(t, l, 12, 4, now.UnixMilli())
			segs, _ := l.Segments()
			held := segs[0]
			held.Ref()
			var sc scanner
			var want []byte
			sc.forEach(held, 0, func(b batch.Batch, _ int64) error { want = append(want, b...); return nil })
			releaseAll(segs)
			c, _ := NewCompactor(compactCfg(&now))
			if res, err := c.Apply(context.Background(), l); err != nil || !res.Compacted {
				t.Fatalf("%+v %v", res, err)
			}
			// The replaced segment still reads its old, valid bytes.
			var got []byte
			if err := sc.forEach(held, 0, func(b batch.Batch, _ int64) error {
				got = append(got, b...)
				return b.Validate()
			}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("a reader of a replaced segment saw different bytes")
			}
			if err := held.Unref(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
