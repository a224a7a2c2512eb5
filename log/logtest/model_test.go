package logtest_test

import (
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log/logtest"
)

// TestModelCrash checks the synced-prefix rules of Model.Crash.
func TestModelCrash(t *testing.T) {
	build := func() *logtest.Model {
		m := logtest.NewModel(0, false)
		for i, n := range []int{3, 2, 4} { // offsets 0-2, 3-4, 5-8
			b := logtest.MakeBatch(n, 10, int64(i), 0)
			batch.Batch(b).SetBaseOffset(m.LogEndOffset())
			if err := m.Append(b); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				m.Sync()
			}
		}
		return m
	}
	if got := build().SyncedEnd(); got != 3 {
		t.Fatalf("syncedEnd %d, want 3", got)
	}
	for _, c := range []struct {
		end int64
		ok  bool
	}{{3, true}, {5, true}, {9, true}, {0, false}, {2, false}, {4, false}, {10, false}} {
		m := build()
		err := m.Crash(c.end, c.end)
		if (err == nil) != c.ok {
			t.Fatalf("Crash(%d): %v, want ok=%v", c.end, err, c.ok)
		}
		if c.ok && (m.LogEndOffset() != c.end || m.HighWatermark() != c.end) {
			t.Fatalf("Crash(%d): log end %d, high watermark %d", c.end, m.LogEndOffset(), m.HighWatermark())
		}
	}
	m := build()
	m.SyncEveryAppend = true
	b := logtest.MakeBatch(1, 1, 1, 1)
	batch.Batch(b).SetBaseOffset(m.LogEndOffset())
	if err := m.Append(b); err != nil {
		t.Fatal(err)
	}
	if m.SyncedEnd() != 10 {
		t.Fatalf("SyncEveryAppend: syncedEnd %d, want 10", m.SyncedEnd())
	}
}
