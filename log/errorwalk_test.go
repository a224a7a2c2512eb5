package log_test

import (
	"errors"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestErrorWalk runs one scenario (open, appends with rolls, a forced roll,
// a truncation, DeleteRecords, Sync, Close) with an injected failure at
// filesystem operation 0, then 1, 2, ... until it runs clean. Every error
// must be the injected one (or the sticky failure that wraps it), nothing
// may panic, and the directory must reopen into the state before or after
// the failed operation, with every invariant of logtest.Check holding.
func TestErrorWalk(t *testing.T) {
	const dir = "/data/walk-0"
	cfg := func(fs vfs.FS) plog.Config {
		return plog.Config{FS: fs, SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: 240}
	}
	for k := int64(0); ; k++ {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		in.FailNth(k, vfs.AllOps)
		before := logtest.NewModel(0, false) // acknowledged state
		var after *logtest.Model             // the state had the failing step succeeded
		failedStep := ""

		failed := func(err error, step string) bool {
			if err == nil {
				return false
			}
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("k=%d %s: not the injected error: %v", k, step, err)
			}
			return true
		}
		stop := false
		p, err := plog.Open(dir, cfg(in))
		if failed(err, "open") {
			stop = true
		}
		apply := func(step string, f func() error, model func(*logtest.Model) error) {
			if stop {
				return
			}
			next := before.Clone()
			if err := model(next); err != nil {
				t.Fatalf("k=%d %s: model: %v", k, step, err)
			}
			if failed(f(), step) {
				after, stop, failedStep = next, true, step
				return
			}
			before = next
		}
		for i := 0; i < 24; i++ {
			b := logtest.MakeBatch(1+i%4, 100+10*i, int64(1000+i), byte(i))
			batch.Batch(b).SetBaseOffset(before.LogEndOffset()) // what AppendBatch assigns
			apply("append", func() error { _, err := p.AppendBatch(b); return err },
				func(m *logtest.Model) error { return m.Append(b) })
			switch i {
			case 8:
				apply("roll", p.Roll, func(*logtest.Model) error { return nil })
			case 14:
				to := before.LogEndOffset() - 6
				apply("truncate", func() error { return p.TruncateTo(to) },
					func(m *logtest.Model) error { return m.TruncateTo(to) })
			case 18:
				to := before.HighWatermark() / 2
				apply("delete records", func() error { return p.DeleteRecordsBefore(to) },
					func(m *logtest.Model) error { return m.DeleteRecordsBefore(to) })
			case 20:
				apply("sync", p.Sync, func(*logtest.Model) error { return nil })
			}
		}
		if p != nil {
			err := p.Close()
			if !stop {
				failed(err, "close")
			}
		}
		if in.Injected() == 0 {
			if stop {
				t.Fatalf("k=%d: stopped without an injected error", k)
			}
			t.Logf("clean run after %d failure points", k)
			break
		}

		p2, err := plog.Open(dir, cfg(mem))
		if err != nil {
			t.Fatalf("k=%d: reopen after the failure: %v\n%s", k, err, mem.String())
		}
		before.Reopen()
		errBefore := logtest.CheckErr(p2, before)
		if errBefore != nil && after != nil {
			after.Reopen()
			errAfter := logtest.CheckErr(p2, after)
			if errAfter != nil && failedStep == "truncate" {
				// A truncation that failed halfway leaves a prefix between
				// the target and the old end (later segments go first).
				mid := before.Clone()
				end := p2.LogEndOffset()
				if end >= after.LogEndOffset() && end <= before.LogEndOffset() {
					_ = mid.TruncateTo(end)
					mid.Reopen()
					errAfter = logtest.CheckErr(p2, mid)
				}
			}
			if errAfter != nil {
				t.Fatalf("k=%d (%s failed): reopened log matches neither state:\nbefore: %v\nafter: %v", k, failedStep, errBefore, errAfter)
			}
		} else if errBefore != nil {
			t.Fatalf("k=%d: reopened log: %v", k, errBefore)
		}
		_ = p2.Close()
	}
}
