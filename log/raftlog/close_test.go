package raftlog_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/raftlog"
)

// answerWait bounds how long a test waits for an answer that must come;
// it only turns a hang into a failure, it asserts no timing.
const answerWait = 5 * time.Second

// startSingle starts a one-voter group on a new partition under
// t.TempDir() and returns its node and replica.
func startSingle(t *testing.T) (*raftlog.Node, *raftlog.Replica) {
	t.Helper()
	dir := t.TempDir()
	part, err := log.Open(filepath.Join(dir, "g-0"), log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = part.Close() })
	net := &localNet{nodes: map[uint64]*raftlog.Node{}}
	node, err := raftlog.NewNode(raftlog.Config{ID: 1, Transport: net, StateDir: dir, Tick: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close() })
	r, err := node.Start("g-0", part, raftlog.Membership{Voters: []uint64{1}})
	require.NoError(t, err)
	return node, r
}

// oneRecordBatch returns a batch of one record.
func oneRecordBatch(t *testing.T) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("v")}))
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// After Node.Close every Propose fails with ErrStopped at once, even
// with a ctx that never ends: none is queued where no loop answers it.
func TestProposeOnClosedNodeFailsStopped(t *testing.T) {
	node, r := startSingle(t)
	require.NoError(t, node.Close())
	b := oneRecordBatch(t)
	for range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), answerWait)
		_, err := r.Propose(ctx, b, raftlog.ProposeOptions{})
		cancel()
		require.ErrorIs(t, err, raftlog.ErrStopped)
	}
	for range 50 {
		res, err := r.Submit(context.Background(), raftlog.Proposal{Records: b})
		require.ErrorIs(t, err, raftlog.ErrStopped)
		require.Nil(t, res)
	}
}

// Proposals submitted while the node closes are each answered: appended
// before the loop ended, or ErrStopped; Submit never hands back a channel
// that stays silent.
func TestSubmitRacingCloseIsAnswered(t *testing.T) {
	node, r := startSingle(t)
	require.Eventually(t, func() bool { return r.ReadyTerm() != 0 }, answerWait, time.Millisecond, "the single voter never led")
	b := oneRecordBatch(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		pending []<-chan raftlog.Result
	)
	for range 4 {
		wg.Go(func() {
			for {
				res, err := r.Submit(context.Background(), raftlog.Proposal{Records: b})
				if err != nil {
					assert.ErrorIs(t, err, raftlog.ErrStopped)
					return
				}
				mu.Lock()
				pending = append(pending, res)
				mu.Unlock()
			}
		})
	}
	// Let the submitters fill the queue before closing.
	for {
		mu.Lock()
		n := len(pending)
		mu.Unlock()
		if n >= 2000 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, node.Close())
	wg.Wait()
	stopped := 0
	require.NotEmpty(t, pending)
	for i, res := range pending {
		select {
		case a := <-res:
			if a.Err != nil {
				require.ErrorIs(t, a.Err, raftlog.ErrStopped, "proposal %d", i)
				stopped++
			}
		case <-time.After(answerWait):
			t.Fatalf("proposal %d of %d submitted before Close returned was never answered", i, len(pending))
		}
	}
	t.Logf("%d proposals, %d answered ErrStopped", len(pending), stopped)
}
