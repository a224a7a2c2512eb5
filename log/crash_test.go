package log_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestCrashPoints is DESIGN law 4 at many random crash points: random
// histories (single and concurrent appends, follower appends, Sync, rolls,
// truncations, DeleteRecords) under random small configurations and every
// flush policy, on the in-memory filesystem, crashed at random moments
// with a random share of the unsynced writes surviving (some torn), and
// reopened from the crash clone. After each crash the log must end in
// [synced prefix, appended end] on a batch boundary (under the per-append
// policy: at or past every acknowledged batch), hold the model's batches
// byte for byte, and pass Verify and every check of logtest.Check; the
// history then goes on from the recovered state and crashes again.
func TestCrashPoints(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	budget, minCrashes := 12*time.Second, 5000
	if testing.Short() {
		budget, minCrashes = 3*time.Second, 300
	}
	crashHistories(t, budget, minCrashes, func(id int) int { return crashHistory(t, rng, id) })
}

// crashHistory runs one random history with several crashes and returns
// how many crashes it checked.
func crashHistory(t *testing.T, rng *rand.Rand, id int) int {
	t.Helper()
	flush := []int64{0, 1, 1, 5}[rng.IntN(4)]
	cfg := plog.Config{
		SegmentBytes:       int64(400 + rng.IntN(4000)),
		SegmentIndexBytes:  []int{24, 240, 4096}[rng.IntN(3)],
		IndexIntervalBytes: []int{1, 100, 4096}[rng.IntN(3)],
		FlushMessages:      flush,
	}
	var logs bytes.Buffer
	if rng.IntN(2) == 0 {
		// Half the histories recover through the read-only pre-scan a
		// non-default policy gets (scanLog), which must agree with
		// segment.Recover; the others through DefaultRecovery's single
		// pass.
		cfg.Recovery = checkedPolicy{t}
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}
	// Half the histories leave the rolls' background flush to explicit
	// steps (below), so that crashes often find sealed segments above the
	// recovery point, unflushed; the others run it in the background as
	// in production, racing the appends.
	manual := rng.IntN(2) == 0
	if manual {
		cfg = plog.WithManualRollFlush(cfg)
	}
	mem := vfs.NewMem()
	cfg.FS = mem
	const dir = "/kafka/crash-0"
	where := func() string {
		return fmt.Sprintf("history %d (flush.messages %d, manual roll flush %v)", id, flush, manual)
	}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err, "%s: open", where())
	m := logtest.NewModel(0, false)
	m.SyncEveryAppend = flush == 1
	ts := int64(1_700_000_000_000)
	mk := func() []byte {
		ts += int64(rng.IntN(2000))
		return logtest.MakeBatch(1+rng.IntN(8), rng.IntN(200), ts, byte(rng.IntN(256)))
	}
	crashes := 0
	for step := 0; step < 60; step++ {
		switch r := rng.IntN(100); {
		case r < 45:
			b := mk()
			if int64(len(b)) > cfg.SegmentBytes {
				continue
			}
			base, err := p.AppendBatch(b)
			require.NoError(t, err, "%s: append", where())
			require.NoError(t, m.AppendBatch(b, base), "%s", where())
		case r < 55:
			k := 2 + rng.IntN(4)
			bs := make([][]byte, k)
			for i := range bs {
				bs[i] = mk()
				if int64(len(bs[i])) > cfg.SegmentBytes {
					bs[i] = logtest.MakeBatch(1, 0, ts, 0)
				}
			}
			bases := make([]int64, k)
			var wg sync.WaitGroup
			var errs [8]error
			for i := range bs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bases[i], errs[i] = p.AppendBatch(bs[i])
				}()
			}
			wg.Wait()
			for i := range bs {
				require.False(t, errs[i] != nil, "%s: concurrent append: %v", where(), errs[i])
			}
			for done := 0; done < k; done++ {
				for i := range bs {
					if bases[i] == m.LogEndOffset() {
						require.NoError(t, m.AppendBatch(bs[i], bases[i]), "%s", where())
					}
				}
			}
		case r < 62:
			require.NoError(t, p.Sync(), "%s: sync", where())
			m.Sync()
		case r < 67:
			require.NoError(t, p.Roll(), "%s: roll", where())
		case r < 71:
			o := m.LogStartOffset() + rng.Int64N(m.LogEndOffset()-m.LogStartOffset()+1)
			err, merr := p.TruncateTo(o), m.TruncateTo(o)
			require.NoError(t, err, "%s: truncate to %d", where(), o)
			require.NoError(t, merr, "%s: model: truncate to %d", where(), o)
		case r < 74:
			o := m.LogStartOffset() + rng.Int64N(m.HighWatermark()-m.LogStartOffset()+1)
			err, merr := p.DeleteRecordsBefore(o), m.DeleteRecordsBefore(o)
			require.NoError(t, err, "%s: delete records before %d", where(), o)
			require.NoError(t, merr, "%s: model: delete records before %d", where(), o)
		case r < 77 && manual:
			require.NoError(t, p.FlushRolled(), "%s: roll flush", where())
		case r < 80 && manual:
			p.PrepareSpare() // the next roll adopts it (spare.go)
		default:
			opts := drawCrash(rng)
			clone := mem.CrashClone(opts)
			_ = p.Close()
			mem, cfg.FS = clone, clone
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err, "%s: reopen after crash %+v: %v\n%s", where(), opts, err, clone.String())
			require.Empty(t, spareNames(t, clone, dir), "%s: crash %+v: Open removes spare files", where(), opts)
			require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()), "%s: crash %+v", where(), opts)
			require.False(t, strings.Contains(logs.String(), "different length"), "%s: crash %+v: the pre-scan and segment.Recover disagree:\n%s", where(), opts, logs.String())
			logs.Reset()
			require.NoError(t, logtest.Check(p, m), "%s: after crash %+v", where(), opts)
			crashes++
		}
	}
	_ = p.Close()
	return crashes
}

// TestCrashAtEveryOp crashes a run of per-append-durable appends (with
// rolls, a Sync and a truncation) at every filesystem operation in turn:
// a hook on the k-th operation takes a crash clone (a random share of
// the unsynced writes survives, some torn) while the appends go on, and
// the clone must reopen holding every batch acknowledged before the k-th
// operation, as a clean prefix of the appended batches.
func TestCrashAtEveryOp(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	const dir = "/kafka/every-op-0"
	cfg := func(fs vfs.FS) plog.Config {
		// The rolls' background flush runs as a step (every fifth
		// append): one goroutine does every operation, in one order.
		return plog.WithManualRollFlush(plog.Config{FS: fs, FlushMessages: 1, SegmentBytes: 1500, IndexIntervalBytes: 100, SegmentIndexBytes: 240})
	}
	var bs [][]byte
	for i := 0; i < 30; i++ {
		bs = append(bs, logtest.MakeBatch(1+i%5, 20+7*i, int64(1000+i), byte(i)))
	}
	crashAtEveryOp(t, crashWalk[*int]{
		// The walk's shared value counts the batches acknowledged before
		// the crash.
		setup: func(*testing.T, vfs.FS) *int { return new(int) },
		run: func(t *testing.T, fs vfs.FS, acked *int, crashed func() bool) {
			p, err := plog.Open(dir, cfg(fs))
			require.NoError(t, err)
			for i, b := range bs {
				b = append([]byte(nil), b...)
				_, err := p.AppendBatch(b)
				require.NoError(t, err)
				if !crashed() {
					*acked = i + 1
				}
				if i%5 == 4 {
					require.NoError(t, p.FlushRolled())
				}
				if i == 20 {
					require.NoError(t, p.Sync())
				}
			}
			require.NoError(t, p.Close())
		},
		options:     randomCrash(rng),
		mayEndEarly: true,
		check: func(t *testing.T, acked *int, state *vfs.MemFS, at crashPoint) {
			p, err := plog.Open(dir, cfg(state))
			require.NoError(t, err, "%s: reopen", at)
			m := logtest.NewModel(0, false)
			for _, b := range bs {
				c := append([]byte(nil), b...)
				batch.Batch(c).SetBaseOffset(m.LogEndOffset())
				require.NoError(t, m.Append(c))
			}
			var want int64
			if *acked > 0 {
				want = m.Batches()[*acked-1].NextOffset()
			}
			require.GreaterOrEqual(t, p.LogEndOffset(), want, "%s: the log ends before the last acknowledged batch", at)
			require.NoError(t, m.TruncateTo(p.LogEndOffset()))
			m.Reopen()
			require.NoError(t, logtest.Check(p, m), "%s", at)
			require.NoError(t, p.Close())
		},
	})
}
