package log

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeSyncer is a groupSyncer without a partition: a round "syncs" every
// write numbered so far (written) after sleeping for delay, and fails with
// err when set.
type fakeSyncer struct {
	g       *groupCommit
	written atomic.Uint64
	delay   time.Duration
	err     error
	rounds  atomic.Int64
	running atomic.Int32
	overlap atomic.Bool
}

func (f *fakeSyncer) syncRound(seq uint64) (uint64, error) {
	if f.running.Add(1) > 1 {
		f.overlap.Store(true)
	}
	defer f.running.Add(-1)
	f.rounds.Add(1)
	from := f.g.synced.Load()
	if from >= seq {
		return 0, nil
	}
	covers := f.written.Load()
	time.Sleep(f.delay)
	if f.err != nil {
		return 0, f.err
	}
	f.g.synced.Store(covers)
	return covers - from, nil
}

// newFakeGroup returns a group commit whose rounds f runs.
func newFakeGroup(f *fakeSyncer) *groupCommit {
	g := &groupCommit{}
	g.init(f)
	f.g = g
	return g
}

// TestGroupCommitOneRoundForMany: appenders that wait together are covered
// by few rounds, one at a time, and none returns before a round that
// started after its write succeeded.
func TestGroupCommitOneRoundForMany(t *testing.T) {
	f := &fakeSyncer{delay: 2 * time.Millisecond}
	g := newFakeGroup(f)
	const appenders = 64
	var wg sync.WaitGroup
	var seqMu sync.Mutex
	for range appenders {
		wg.Go(func() {
			seqMu.Lock() // the partition's mu: numbers are handed out in order
			seq := f.written.Add(1)
			g.written.Store(seq)
			seqMu.Unlock()
			require.NoError(t, g.wait(seq))
			require.GreaterOrEqual(t, g.syncedSeq(), seq)
		})
	}
	wg.Wait()
	require.False(t, f.overlap.Load(), "two rounds ran at once")
	require.Equal(t, uint64(appenders), g.syncedSeq())
	require.Less(t, f.rounds.Load(), int64(appenders), "every appender synced alone")

	// A write a sync covered already costs no round.
	before := f.rounds.Load()
	require.NoError(t, g.wait(appenders))
	require.Equal(t, before, f.rounds.Load())
}

// TestGroupCommitErrorReachesEveryWaiter: a failed round returns its
// error to its syncer; the waiters it woke run rounds of their own (which
// on a partition find it failed) and get the error too.
func TestGroupCommitErrorReachesEveryWaiter(t *testing.T) {
	errSync := errors.New("fsync failed")
	f := &fakeSyncer{delay: time.Millisecond, err: errSync}
	g := newFakeGroup(f)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			seq := f.written.Add(1)
			g.written.Store(seq)
			require.ErrorIs(t, g.wait(seq), errSync)
		})
	}
	wg.Wait()
	require.Zero(t, g.syncedSeq())
	require.False(t, f.overlap.Load())
}

// TestGroupCommitGatherGivesUp: a new syncer that expects more writes
// than come gives up after gatherIdleRounds yields without one.
func TestGroupCommitGatherGivesUp(t *testing.T) {
	g := newFakeGroup(&fakeSyncer{})
	start := time.Now()
	g.gather(1000)
	require.Less(t, time.Since(start), time.Second)
}
