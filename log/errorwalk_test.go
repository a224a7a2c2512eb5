package log_test

import (
	"errors"
	"fmt"
	"github.com/stretchr/testify/require"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestErrorWalk runs one scenario (open, appends with rolls and the
// rolls' background flushes, a forced roll, a truncation, DeleteRecords,
// Sync, Close) with an injected failure at
// filesystem operation 0, then 1, 2, ... until it runs clean. Every error
// must be the injected one (or the sticky failure that wraps it), nothing
// may panic, and the directory must reopen into the state before or after
// the failed operation, with every invariant of logtest.Check holding.
//
// It runs under Kafka's default policy and under the per-append policy
// (group syncs, checkpoints and the clean-shutdown marker included). After
// an injected fsync failure the partition must have failed (ErrFailed) and
// refuse the next append with it (fsyncgate); and the synced state alone
// (a crash clone keeping nothing unsynced) must reopen holding every
// synced batch (under the per-append policy: every acknowledged one).
func TestErrorWalk(t *testing.T) {
	for _, flush := range []int64{0, 1} {
		t.Run(fmt.Sprintf("flush.messages=%d", flush), func(t *testing.T) { errorWalk(t, flush) })
	}
}

func errorWalk(t *testing.T, flush int64) {
	const dir = "/data/walk-0"
	cfg := func(fs vfs.FS) plog.Config {
		// The rolls' background flush runs as a step of its own (below),
		// so that the operations come in the same order in every run.
		return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: 240, FlushMessages: flush})
	}
	noop := func(*logtest.Model) error { return nil }
	failAtEveryOp(t, func(k int64) (injected bool, ops int64) {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		in.FailNth(k, vfs.AllOps)
		before := logtest.NewModel(0, false) // acknowledged state
		before.SyncEveryAppend = flush == 1
		var after *logtest.Model // the state had the failing step succeeded
		failedStep := ""

		failed := func(err error, step string) bool {
			if err == nil {
				return false
			}
			require.False(t, !errors.Is(err, vfs.ErrInjected), "k=%d %s: not the injected error: %v", k, step, err)
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
			require.NoError(t, model(next), "k=%d %s: model", k, step)
			err := f()
			if failed(err, step) {
				after, stop, failedStep = next, true, step
				var ie *vfs.InjectedError
				if errors.As(err, &ie) && ie.Op.Kind == vfs.OpSync && strings.HasSuffix(ie.Op.Path, ".log") {
					require.False(t, !errors.Is(err, plog.ErrFailed), "k=%d %s: a failed fsync of %s did not fail the partition: %v", k, step, ie.Op.Path, err)
				}
				if errors.Is(err, plog.ErrFailed) {
					_, err := p.AppendBatch(logtest.MakeBatch(1, 1, 1, 1))
					require.False(t, !errors.Is(err, plog.ErrFailed) || !errors.Is(err, vfs.ErrInjected), "k=%d %s: append after a failure: %v, want the sticky failure", k, step, err)
				}
				return
			}
			before = next
		}
		for i := 0; i < 24; i++ {
			b := logtest.MakeBatch(1+i%4, 100+10*i, int64(1000+i), byte(i))
			batch.Batch(b).SetBaseOffset(before.LogEndOffset()) // what AppendBatch assigns
			apply("append", func() error { _, err := p.AppendBatch(b); return err },
				func(m *logtest.Model) error { return m.Append(b) })
			if i%3 == 2 {
				// Every third append: the flush the rolls since the last
				// one left to the background (the others leave it to a
				// later one, a truncation, Sync or Close).
				apply("roll flush", p.FlushRolled, noop)
			}
			switch i {
			case 8:
				apply("roll", p.Roll, noop)
			case 14:
				to := before.LogEndOffset() - 6
				apply("truncate", func() error { return p.TruncateTo(to) },
					func(m *logtest.Model) error { return m.TruncateTo(to) })
			case 18:
				to := before.HighWatermark() / 2
				apply("delete records", func() error { return p.DeleteRecordsBefore(to) },
					func(m *logtest.Model) error { return m.DeleteRecordsBefore(to) })
			case 20:
				apply("sync", p.Sync, func(m *logtest.Model) error { m.Sync(); return nil })
			}
		}
		if p != nil {
			err := p.Close()
			if !stop && !failed(err, "close") {
				before.Sync()
			}
		}
		if in.Injected() == 0 {
			require.False(t, stop, "k=%d: stopped without an injected error", k)
			return false, in.Ops()
		}

		// The synced state alone keeps every synced batch, as a prefix.
		synced := mem.CrashClone(vfs.CrashOptions{})
		if p3, err := plog.Open(dir, cfg(synced)); err != nil {
			t.Fatalf("k=%d: reopen the synced state: %v\n%s", k, err, synced.String())
		} else {
			crashed := before.Clone()
			errB := crashed.Crash(p3.LogEndOffset(), p3.HighWatermark())
			if errB == nil {
				errB = logtest.Check(p3, crashed)
			}
			if errB != nil && after != nil {
				crashed = after.Clone()
				if err := crashed.Crash(p3.LogEndOffset(), p3.HighWatermark()); err == nil {
					errB = logtest.Check(p3, crashed)
				}
			}
			if end := p3.LogEndOffset(); errB != nil && failedStep == "truncate" &&
				end >= after.LogEndOffset() && end <= before.LogEndOffset() {
				// A truncation that failed halfway leaves a prefix.
				mid := before.Clone()
				_ = mid.TruncateTo(end)
				mid.Reopen()
				errB = logtest.Check(p3, mid)
			}
			require.False(t, errB != nil, "k=%d (%s failed): synced state: %v", k, failedStep, errB)
			_ = p3.Close()
		}

		p2, err := plog.Open(dir, cfg(mem))
		require.NoError(t, err, "k=%d: reopen after the failure: %v\n%s", k, err, mem.String())
		before.Reopen()
		errBefore := logtest.Check(p2, before)
		if errBefore != nil && after != nil {
			after.Reopen()
			errAfter := logtest.Check(p2, after)
			if errAfter != nil && failedStep == "truncate" {
				// A truncation that failed halfway leaves a prefix between
				// the target and the old end (later segments go first).
				mid := before.Clone()
				end := p2.LogEndOffset()
				if end >= after.LogEndOffset() && end <= before.LogEndOffset() {
					_ = mid.TruncateTo(end)
					mid.Reopen()
					errAfter = logtest.Check(p2, mid)
				}
			}
			require.False(t, errAfter != nil, "k=%d (%s failed): reopened log matches neither state:\nbefore: %v\nafter: %v", k, failedStep, errBefore, errAfter)
		} else if errBefore != nil {
			require.NoError(t, errBefore, "k=%d: reopened log", k)
		}
		_ = p2.Close()
		return true, 0
	})
}

// TestErrorWalkOpen fails every filesystem operation of Open in turn, on a
// partition that was closed cleanly (the clean-shutdown marker, every
// checkpoint) and on one that crashed (recovery from the recovery point,
// a torn tail to cut): every error must be the injected one, and the
// directory must then reopen, without failures, into the same log.
func TestErrorWalkOpen(t *testing.T) {
	const dir = "/data/walk-open-0"
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := plog.Config{FS: mem, SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: 240, DisableAutoHighWatermark: true}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			m := logtest.NewModel(0, true)
			for i := 0; i < 30; i++ {
				b := logtest.MakeBatch(1+i%4, 100+10*i, int64(1000+i), byte(i))
				base, err := p.AppendBatch(b)
				require.NoError(t, err)
				require.NoError(t, m.AppendBatch(b, base))
				if i == 20 {
					require.NoError(t, p.SetHighWatermark(m.LogEndOffset()-3))
					require.NoError(t, m.SetHighWatermark(m.LogEndOffset()-3))
					require.NoError(t, p.DeleteRecordsBefore(5))
					require.NoError(t, m.DeleteRecordsBefore(5))
					require.NoError(t, p.Sync())
					m.Sync()
				}
			}
			var state *vfs.MemFS
			if clean {
				require.NoError(t, p.Close())
				m.Reopen()
				state = mem.CrashClone(vfs.CrashOptions{})
			} else {
				// Everything written survives, the last write torn.
				state = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100, TornPercent: 100, Seed: 1})
				_ = p.Close()
			}
			failAtEveryOp(t, func(k int64) (injected bool, ops int64) {
				fs := state.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
				in := vfs.NewInjector(fs)
				in.FailNth(k, vfs.AllOps)
				p, err := plog.Open(dir, plog.Config{FS: in, SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: 240, DisableAutoHighWatermark: true})
				if err == nil {
					err = p.Close() // the failure may come here
				}
				require.False(t, err != nil && !errors.Is(err, vfs.ErrInjected), "k=%d: not the injected error: %v", k, err)
				if in.Injected() == 0 {
					return false, in.Ops()
				}
				p, err = plog.Open(dir, plog.Config{FS: fs, SegmentBytes: 2048, IndexIntervalBytes: 100, SegmentIndexBytes: 240, DisableAutoHighWatermark: true})
				require.NoError(t, err, "k=%d: reopen after the failure", k)
				want := m.Clone()
				if !clean {
					require.NoError(t, want.Crash(p.LogEndOffset(), p.HighWatermark()), "k=%d", k)
				}
				require.NoError(t, logtest.Check(p, want), "k=%d", k)
				require.NoError(t, p.Close())
				return true, 0
			})
		})
	}
}

// failAtEveryOp runs a walk that fails filesystem operation k of its run
// (counting from 0), for k = 0, 1, 2, ... until a run injects nothing:
// try(k) runs the walk with operation k failed and checks what it left,
// and reports whether an error was injected and, when none was, how many
// operations the clean run did. The count of failure points is logged
// with the test.
//
// Under -race it fails every raceCrashStride-th operation only, and the
// last one (the clean run's operation count tells which that is), as
// crashAtEveryOp crashes: the walks are histories of one goroutine, in
// which the race detector has little to see and which it slows about
// tenfold, and the plain run fails every operation.
func failAtEveryOp(t *testing.T, try func(k int64) (injected bool, ops int64)) {
	t.Helper()
	stride := int64(1)
	if raceEnabled {
		stride = raceCrashStride
	}
	points := 0
	for k := int64(0); ; k += stride {
		injected, ops := try(k)
		if injected {
			points++
			continue
		}
		if last := ops - 1; last > k-stride && last >= 0 {
			// The stride stepped over the last failing operation.
			ok, _ := try(last)
			require.True(t, ok, "failing operation %d of a clean run of %d injected nothing", last, ops)
			points++
		}
		if stride > 1 {
			t.Logf("%d failure points of %d operations (every %dth under -race)", points, ops, stride)
		} else {
			t.Logf("clean run after %d failure points", points)
		}
		return
	}
}
