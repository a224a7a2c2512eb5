package log_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestGroupWriteOneWritePerCycle checks that the appenders that queue
// while an fdatasync runs are written with one write of the .log and
// covered by one fdatasync, and get consecutive offsets in the order
// they took the lock.
func TestGroupWriteOneWritePerCycle(t *testing.T) {
	const queued = 5
	c := newGroupCycle(t, queued)
	var writes, syncs atomic.Int64
	c.in.SetHook(func(op vfs.Op) error {
		if strings.HasSuffix(op.Path, segment.LogSuffix) {
			switch op.Kind {
			case vfs.OpWrite, vfs.OpWriteAt:
				writes.Add(1)
			case vfs.OpSync:
				syncs.Add(1)
			}
		}
		return nil
	})
	c.release()
	c.wait()
	for i, err := range c.errs[1:] {
		require.NoError(t, err, "appender %d", i+1)
	}
	require.Equal(t, int64(1), writes.Load(), "the queued batches take one write")
	require.Equal(t, int64(1), syncs.Load(), "and one fdatasync")
	bases := slices.Clone(c.bases[2:])
	slices.Sort(bases)
	for i := 1; i < len(bases); i++ {
		require.Greater(t, bases[i], bases[i-1])
	}
	end := c.p.LogEndOffset()
	require.Equal(t, end, c.p.HighWatermark())
	c.checkPrefix(t, c.p, end, "open partition")
	require.NoError(t, c.p.Close())
}

// TestGroupWriteCrashAtEveryOp crashes the cycle that writes and syncs
// queued batches before each of its file operations (and after the
// last), keeping only synced data or also unsynced writes, cut or torn:
// the log must reopen as a prefix of what was appended that holds every
// batch whose append had returned.
func TestGroupWriteCrashAtEveryOp(t *testing.T) {
	c := newGroupCycle(t, 4)
	type crash struct {
		op    string
		fs    *vfs.MemFS
		acked int64
	}
	var (
		mu      sync.Mutex
		crashes []crash
	)
	options := []vfs.CrashOptions{
		{},
		{UnsyncedDataPercent: 100},
		{UnsyncedDataPercent: 50, TornPercent: 100, Seed: 1},
		{UnsyncedDataPercent: 50, TornPercent: 100, Seed: 2},
	}
	snap := func(op string) {
		acked := c.acked.Load() // before the clone: those acks' syncs are in it
		mu.Lock()
		defer mu.Unlock()
		for _, o := range options {
			crashes = append(crashes, crash{op: fmt.Sprintf("%s %+v", op, o), fs: c.mem.CrashClone(o), acked: acked})
		}
	}
	c.in.SetHook(func(op vfs.Op) error {
		switch op.Kind {
		case vfs.OpRead, vfs.OpReadAt, vfs.OpStat, vfs.OpList:
		default:
			snap("before " + op.String())
		}
		return nil
	})
	c.release()
	c.wait()
	c.in.SetHook(nil)
	snap("after the cycle")
	for i, err := range c.errs[1:] {
		require.NoError(t, err, "appender %d", i+1)
	}
	require.Equal(t, c.p.LogEndOffset(), c.acked.Load())
	require.NoError(t, c.p.Close())
	require.Greater(t, len(crashes), 2*len(options), "the cycle ran no operations")
	for _, cr := range crashes {
		q, err := plog.Open(c.dir, plog.Config{FS: cr.fs})
		require.NoError(t, err, cr.op)
		c.checkPrefix(t, q, cr.acked, cr.op)
		require.NoError(t, q.Close(), cr.op)
	}
}

// TestGroupWriteFailure injects a failure into the cycle that writes and
// syncs queued batches: a failed write of the queue or a failed
// fdatasync fails exactly the queued appenders (A0, synced before, does
// not fail), takes the partition to ErrFailed, and loses nothing
// acknowledged.
func TestGroupWriteFailure(t *testing.T) {
	for _, kind := range []vfs.OpKind{vfs.OpWriteAt, vfs.OpSync} {
		t.Run(kind.String(), func(t *testing.T) {
			const queued = 4
			c := newGroupCycle(t, queued)
			c.in.SetHook(nil)
			c.in.FailOnce(func(op vfs.Op) bool {
				return op.Kind == kind && strings.HasSuffix(op.Path, segment.LogSuffix)
			})
			c.release()
			c.wait()
			require.NoError(t, c.errs[1], "A0 was synced before the failure")
			for i := 2; i < len(c.errs); i++ {
				require.ErrorIs(t, c.errs[i], plog.ErrFailed, "appender %d", i)
				require.ErrorIs(t, c.errs[i], vfs.ErrInjected, "appender %d", i)
			}
			require.Equal(t, int64(1), c.in.Injected())
			_, err := c.p.AppendBatch(logtest.MakeBatch(1, 1, 99, 9))
			require.ErrorIs(t, err, plog.ErrFailed)
			acked := c.bases[1] + int64(batchRecords(c.batches[1]))
			require.ErrorIs(t, c.p.Close(), plog.ErrFailed)

			// The failed appenders' batches may survive (written, never
			// acknowledged), but only as a prefix.
			for _, o := range []vfs.CrashOptions{{}, {UnsyncedDataPercent: 100}} {
				q, err := plog.Open(c.dir, plog.Config{FS: c.mem.CrashClone(o)})
				require.NoError(t, err)
				c.checkPrefix(t, q, acked, fmt.Sprintf("%+v", o))
				require.NoError(t, q.Close())
			}
		})
	}
}

// TestGroupWriteOtherWriterWritesQueue checks that a writer other than the
// group syncer finds the queued batches written: a Roll while appenders
// wait queued (their syncer held) writes them into the segment it seals,
// and the sync that follows makes them durable.
func TestGroupWriteOtherWriterWritesQueue(t *testing.T) {
	const queued = 3
	c := newGroupCycle(t, queued)
	endBefore := c.p.LogEndOffset()
	require.NoError(t, c.p.Roll())
	segs, err := c.p.Segments()
	require.NoError(t, err)
	require.Len(t, segs, 2)
	queuedRecords := int64(0)
	for _, b := range c.batches[2:] {
		queuedRecords += int64(batchRecords(b))
	}
	require.Equal(t, endBefore+queuedRecords, segs[1].BaseOffset(), "the queued batches are in the sealed segment")
	require.Equal(t, segs[1].BaseOffset(), c.p.LogEndOffset())
	for _, s := range segs {
		require.NoError(t, s.Unref())
	}
	c.in.SetHook(nil)
	c.release()
	c.wait()
	for i, err := range c.errs[1:] {
		require.NoError(t, err, "appender %d", i+1)
	}
	end := c.p.LogEndOffset()
	require.Equal(t, end, c.p.HighWatermark())
	c.checkPrefix(t, c.p, end, "open partition")
	require.NoError(t, c.p.Close())
	q, err := plog.Open(c.dir, plog.Config{FS: c.mem.CrashClone(vfs.CrashOptions{})})
	require.NoError(t, err)
	require.Equal(t, end, q.LogEndOffset())
	require.NoError(t, q.Close())
}

// TestGroupWriteDuplicateWaitsForOriginal checks that an idempotent
// producer's retry of a batch still queued (or written and not yet
// synced) is not acknowledged before the original's fdatasync: a crash
// at the moment the retry returns keeps the original.
func TestGroupWriteDuplicateWaitsForOriginal(t *testing.T) {
	c := newGroupCycle(t, 0) // A1's batch written, its fdatasync held
	orig := prodBatch(t, 7, 0, 0, 3, pbNow(), false)
	before := c.p.Stats().BatchesAppended
	var origBase int64
	var origErr error
	var wg sync.WaitGroup
	wg.Go(func() { origBase, origErr = c.p.AppendBatch(orig) })
	for c.p.Stats().BatchesAppended < before+1 { // queued behind the held sync
		runtime.Gosched()
	}
	var (
		dup    plog.AppendInfo
		dupErr error
		clone  *vfs.MemFS
	)
	wg.Go(func() {
		dup, dupErr = c.p.AppendBatchInfo(orig)
		clone = c.mem.CrashClone(vfs.CrashOptions{}) // synced data only
	})
	c.release()
	wg.Wait()
	c.wait()
	require.NoError(t, origErr)
	require.NoError(t, dupErr)
	require.True(t, dup.Duplicate)
	require.Equal(t, origBase, dup.Base)
	require.NoError(t, c.p.Close())
	q, err := plog.Open(c.dir, plog.Config{FS: clone})
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close()) }()
	require.Greater(t, q.LogEndOffset(), dup.LastOffset, "the retry was acknowledged before its original was durable")
}
