package log_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestGroupWriteReadersDoNotWriteQueue checks that the calls that only
// read the producer and transaction state (ProducerState, Producers,
// OpenTransactions) make no write while batches wait queued for the group
// syncer (its fdatasync held), and that they already answer with the
// queued batches, as they do once the queue is written.
func TestGroupWriteReadersDoNotWriteQueue(t *testing.T) {
	c := newGroupCycle(t, 0) // A1's batch written, its fdatasync held
	const pid = 7            // timestamps near the cycle's: no time roll, so both batches queue
	before := c.p.Stats().BatchesAppended
	var wg sync.WaitGroup
	var txnBase, plainBase int64
	var txnErr, plainErr error
	wg.Go(func() { txnBase, txnErr = c.p.AppendBatch(prodBatch(t, pid, 0, 0, 3, 50, true)) })
	for c.p.Stats().BatchesAppended < before+1 { // queued behind the held sync
		runtime.Gosched()
	}
	wg.Go(func() { plainBase, plainErr = c.p.AppendBatch(prodBatch(t, pid+1, 0, 0, 2, 60, false)) })
	for c.p.Stats().BatchesAppended < before+2 {
		runtime.Gosched()
	}
	end := c.p.LogEndOffset() // the queued batches are not written

	var writes atomic.Int64
	c.in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt || op.Kind == vfs.OpTruncate {
			writes.Add(1)
		}
		return nil
	})
	st, ok, err := c.p.ProducerState(pid)
	require.NoError(t, err)
	require.True(t, ok, "the queued batch's producer is known")
	producers, err := c.p.Producers()
	require.NoError(t, err)
	open, err := c.p.OpenTransactions()
	require.NoError(t, err)
	require.Zero(t, writes.Load(), "a read-only call wrote while the group syncer's fdatasync ran")
	require.Equal(t, end, c.p.LogEndOffset(), "the queue is still pending")

	// The queued batches are in the answers, at offsets from the log end.
	require.Len(t, st.Batches, 1)
	require.GreaterOrEqual(t, st.Batches[0].FirstOffset, end)
	require.Equal(t, st.Batches[0].FirstOffset, st.CurrentTxnFirstOffset)
	require.Len(t, producers, 2)
	require.Len(t, open, 1)
	require.Equal(t, st.Batches[0].FirstOffset, open[0].FirstOffset)

	c.in.SetHook(nil)
	c.release()
	wg.Wait()
	c.wait()
	require.NoError(t, txnErr)
	require.NoError(t, plainErr)
	require.Equal(t, txnBase, st.Batches[0].FirstOffset)
	require.Greater(t, c.p.LogEndOffset(), plainBase)

	// Written and synced, the answers are the same.
	st2, ok, err := c.p.ProducerState(pid)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, st, st2)
	producers2, err := c.p.Producers()
	require.NoError(t, err)
	require.Equal(t, producers, producers2)
	open2, err := c.p.OpenTransactions()
	require.NoError(t, err)
	require.Equal(t, open, open2)
	require.NoError(t, c.p.Close())
}

// TestReadersDoNotWaitForTruncation checks that ProducerState, Producers
// and OpenTransactions answer while a TruncateTo waits for the read lease
// a Records holds (the truncation has changed nothing yet), so a goroutine
// holding Records may call them. (Before, they waited for the truncation,
// which then gave up after TruncateWait with ErrTruncationBlocked.)
func TestReadersDoNotWaitForTruncation(t *testing.T) {
	mem := vfs.NewMem()
	p, err := plog.Open("/data/readers-0", plog.Config{FS: mem, TruncateWait: time.Minute})
	require.NoError(t, err)
	const pid = 9
	_, err = p.AppendBatch(prodBatch(t, pid, 0, 0, 2, pbNow(), true))
	require.NoError(t, err)
	_, err = p.AppendBatch(prodBatch(t, pid, 0, 2, 2, pbNow(), true))
	require.NoError(t, err)
	r, err := p.ReadFromFollower(0, 1<<20) // holds the segment's read lease
	require.NoError(t, err)
	stBefore, ok, err := p.ProducerState(pid)
	require.NoError(t, err)
	require.True(t, ok)

	truncated := make(chan error, 1)
	go func() { truncated <- p.TruncateTo(2) }()
	// Wait (without a clock) until the truncation waits for the lease.
	for p.Stats().TruncationWaiting == 0 {
		runtime.Gosched()
	}
	st, ok, err := p.ProducerState(pid)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, stBefore, st, "the truncation has changed nothing yet")
	_, err = p.Producers()
	require.NoError(t, err)
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	require.Len(t, open, 1)
	require.NoError(t, r.Close())
	require.NoError(t, <-truncated)
	require.NoError(t, p.Close())
}
