package log_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTxnCrash: random histories of transactional producers (data
// batches, COMMIT and ABORT markers, some for producers with no open
// transaction), plain appends, rolls, syncs and truncations on the
// crash-simulating filesystem, crashed at random moments with a random
// share of the unsynced writes surviving (some torn) and reopened from the
// clone. A crash falls between two steps or at a random filesystem
// operation inside the steps that follow (a roll, its flush, a
// truncation, a close), the unfinished step going on against the old
// filesystem. After every reopen and truncation, the open transactions, the
// last stable offset, what read_committed returns and reports, and the
// .txnindex files (after a close) agree with an oracle computed from the
// recovered log's batches: the transaction state survives close and crash
// through the producer snapshot and the replay of the log after it.
//
// Half the histories leave the rolls' background flush to explicit steps
// (one goroutine does every operation, so the seed replays the history
// exactly); the others run it in the background as in production, racing
// the steps, so the seed replays their steps but not where the flush was
// when a crash came.
func TestTxnCrash(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x7a))
	budget, minCrashes := 6*time.Second, 150
	if testing.Short() || raceEnabled {
		budget, minCrashes = 2*time.Second, 40
	}
	crashHistories(t, budget, minCrashes, func(id int) int { return txnCrashHistory(t, seed, rng, id) })
}

func txnCrashHistory(t *testing.T, seed uint64, rng *rand.Rand, id int) int {
	t.Helper()
	flush := []int64{0, 1}[rng.IntN(2)]
	manual := rng.IntN(2) == 0
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.Config{
		FS:           in,
		SegmentBytes: int64(300 + rng.IntN(1200)),
		// Small indexes (Kafka's 10 MiB preallocation costs a history
		// most of its time on the in-memory filesystem).
		SegmentIndexBytes:  []int{24, 240, 4096}[rng.IntN(3)],
		IndexIntervalBytes: []int{1, 100, 4096}[rng.IntN(3)],
		FlushMessages:      flush,
	}
	if manual {
		cfg = plog.WithManualRollFlush(cfg)
	}
	const dir = "/kafka/txn-0"
	where := func(what string) string {
		return fmt.Sprintf("seed %d (PARTLOG_CRASH_SEED), history %d (flush.messages %d, manual roll flush %v): %s", seed, id, flush, manual, what)
	}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err, where("open"))
	defer func() {
		if p != nil { // nil after a refused reopen, which the check reports
			_ = p.Close()
		}
	}()
	// A crash inside the coming steps: the hook takes the clone before
	// the armed operation (the background flush calls it too).
	var armed struct {
		sync.Mutex
		left  int // operations before the crash; -1 when not armed
		opts  vfs.CrashOptions
		clone *vfs.MemFS
	}
	armed.left = -1
	hook := func(vfs.Op) error {
		armed.Lock()
		defer armed.Unlock()
		if armed.left == 0 && armed.clone == nil {
			armed.clone = mem.CrashClone(armed.opts)
		}
		if armed.left >= 0 {
			armed.left--
		}
		return nil
	}
	in.SetHook(hook)
	crashes := 0
	// reopenFrom closes p and opens the partition again on clone (the
	// filesystem a crash left), then checks its transaction state.
	reopenFrom := func(clone *vfs.MemFS, opts vfs.CrashOptions, what string) {
		_ = p.Close()
		p = nil
		armed.Lock()
		mem, in = clone, vfs.NewInjector(clone)
		armed.left, armed.clone = -1, nil
		armed.Unlock()
		in.SetHook(hook)
		cfg.FS = in
		p, err = plog.Open(dir, cfg)
		require.NoError(t, err, where(fmt.Sprintf("reopen after crash %+v %s", opts, what)))
		checkTxnState(t, where(fmt.Sprintf("after crash %+v %s", opts, what)), p, mem, dir, true)
		crashes++
	}
	const producers = 3
	ts := time.Now().UnixMilli()
	nextSeq := func(pid int64) int32 {
		st, ok, err := p.ProducerState(pid)
		require.NoError(t, err, where("producer state"))
		if !ok || len(st.Batches) == 0 {
			return 0
		}
		return st.Batches[len(st.Batches)-1].LastSequence + 1
	}
	for step := 0; step < 60; step++ {
		switch r := rng.IntN(100); {
		case r < 40:
			pid := int64(rng.IntN(producers))
			n := 1 + rng.IntN(3)
			_, err := p.AppendBatch(prodBatch(t, pid, 0, nextSeq(pid), n, ts, true))
			require.NoError(t, err, where("transactional append"))
		case r < 55:
			typ := []batch.ControlType{batch.ControlAbort, batch.ControlCommit}[rng.IntN(2)]
			_, err := p.AppendMarker(marker(typ, int64(rng.IntN(producers)), 0, 0))
			require.NoError(t, err, where("marker"))
		case r < 62:
			_, err := p.AppendBatch(prodBatch(t, -1, -1, -1, 1+rng.IntN(3), ts, false))
			require.NoError(t, err, where("plain append"))
		case r < 69:
			require.NoError(t, p.Roll(), where("roll"))
		case r < 73 && manual:
			require.NoError(t, p.FlushRolled(), where("roll flush"))
		case r < 77:
			require.NoError(t, p.Sync(), where("sync"))
		case r < 82 && p.LogEndOffset() > 0:
			o := rng.Int64N(p.LogEndOffset())
			require.NoError(t, p.TruncateTo(o), where(fmt.Sprintf("truncate to %d", o)))
			checkTxnState(t, where(fmt.Sprintf("after truncating to %d", o)), p, mem, dir, false)
		case r < 86:
			require.NoError(t, p.Close(), where("close"))
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err, where("reopen"))
			checkTxnState(t, where("after a clean reopen"), p, mem, dir, true)
		case r < 92:
			armed.Lock()
			if armed.left < 0 && armed.clone == nil {
				armed.left = rng.IntN(40)
				armed.opts = drawCrash(rng)
			}
			armed.Unlock()
		default:
			opts := drawCrash(rng)
			reopenFrom(mem.CrashClone(opts), opts, "between steps")
		}
		armed.Lock()
		clone, opts := armed.clone, armed.opts
		armed.Unlock()
		if clone != nil {
			reopenFrom(clone, opts, fmt.Sprintf("at an operation of step %d", step))
		}
	}
	checkTxnState(t, where("at the end"), p, mem, dir, false)
	return crashes
}

// TestTruncateToCrashKeepsTxnIndex crashes a TruncateTo at every
// filesystem operation, keeping none, half or all of the unsynced writes.
// The cut removes an ABORT marker's .txnindex entry in the segment it cuts
// and deletes a later segment holding another aborted transaction, while a
// producer snapshot past both markers (from a clean close) is on disk. A
// crash that kept the .txnindex cut (or the later segment's .txnindex
// rename to .deleted) and lost the .log cut (or the .log rename) left a
// marker whose entry was gone: the reopened partition replayed from the
// snapshot past it, never rewrote the entry, and read_committed served
// the aborted records as committed. TruncateTo now removes the snapshots
// past its new end durably before it cuts anything, so the replay after a
// crash starts at or below every marker the cut may have touched.
func TestTruncateToCrashKeepsTxnIndex(t *testing.T) {
	const dir = "/kafka/txn-trunc-0"
	cfg := func(fs vfs.FS) plog.Config {
		return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentIndexBytes: 240, IndexIntervalBytes: 1})
	}
	ts := time.Now().UnixMilli()
	// setup writes the log and closes it cleanly: segment 0 holds a plain
	// batch, an aborted transaction of producer 1 (marker at 2) and an
	// open one of producer 2; segment 4 an aborted transaction of
	// producer 3 (marker at 5); segment 6 a plain batch.
	setup := func(fs vfs.FS) {
		p, err := plog.Open(dir, cfg(fs))
		require.NoError(t, err)
		_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 1, ts, false))
		require.NoError(t, err)
		_, err = p.AppendBatch(prodBatch(t, 1, 0, 0, 1, ts, true))
		require.NoError(t, err)
		_, err = p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
		require.NoError(t, err)
		_, err = p.AppendBatch(prodBatch(t, 2, 0, 0, 1, ts, true))
		require.NoError(t, err)
		require.NoError(t, p.Roll())
		_, err = p.AppendBatch(prodBatch(t, 3, 0, 0, 1, ts, true))
		require.NoError(t, err)
		_, err = p.AppendMarker(marker(batch.ControlAbort, 3, 0, 0))
		require.NoError(t, err)
		require.NoError(t, p.Roll())
		_, err = p.AppendBatch(prodBatch(t, -1, -1, -1, 1, ts, false))
		require.NoError(t, err)
		require.NoError(t, p.FlushRolled())
		require.NoError(t, p.Close())
	}
	// The truncation to 2 cuts segment 0 at the marker and deletes
	// segments 4 and 6.
	_, ops := crashAtEveryOp(t, crashWalk[*plog.Partition]{
		setup: func(t *testing.T, fs vfs.FS) *plog.Partition {
			setup(fs)
			p, err := plog.Open(dir, cfg(fs))
			require.NoError(t, err)
			return p
		},
		run: func(t *testing.T, _ vfs.FS, p *plog.Partition, _ func() bool) {
			require.NoError(t, p.TruncateTo(2))
		},
		finish: func(t *testing.T, p *plog.Partition) { require.NoError(t, p.Close()) },
		options: func(k, _ int64) []vfs.CrashOptions {
			var opts []vfs.CrashOptions
			for _, keep := range []int{0, 50, 100} {
				opts = append(opts, vfs.CrashOptions{UnsyncedDataPercent: keep, Seed: uint64(k)})
			}
			return opts
		},
		check: func(t *testing.T, _ *plog.Partition, clone *vfs.MemFS, at crashPoint) {
			where := at.String() + " of TruncateTo(2)"
			p, err := plog.Open(dir, cfg(clone))
			require.NoError(t, err, where)
			checkTxnState(t, where, p, clone, dir, true)
			require.NoError(t, p.Close())
		},
	})
	require.Greater(t, ops, int64(10))
}
