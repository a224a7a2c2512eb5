package log_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// restartFixture opens a partition on mem with several segments of
// batches under leader epochs 1 and 2 (offsets 0-35), DeleteRecordsBefore
// at 10, synced, and returns it with the batches it holds.
func restartFixture(t *testing.T, mem vfs.FS, dir string) (*plog.Partition, []batch.Batch) {
	t.Helper()
	// Manual roll flush: no background goroutine does file operations
	// while a test counts them.
	p, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 500, SegmentIndexBytes: memIndexBytes}))
	require.NoError(t, err)
	var stored []batch.Batch
	for i := range 12 {
		b := batch.Batch(logtest.MakeBatch(3, 40, 1_700_000_000_000+int64(i), byte(i)))
		b.SetBaseOffset(int64(3 * i))
		b.SetPartitionLeaderEpoch(int32(1 + i/6))
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
		stored = append(stored, b)
	}
	require.NoError(t, p.DeleteRecordsBefore(10))
	require.NoError(t, p.Sync())
	require.Greater(t, len(p.SegmentInfos()), 3)
	return p, stored
}

// readAllFollower returns the batches a follower reads from the log start on.
func readAllFollower(t testing.TB, p *plog.Partition) [][2]int64 {
	t.Helper()
	var all [][2]int64
	for o := p.LogStartOffset(); o < p.LogEndOffset(); {
		r, err := p.ReadFromFollower(o, math.MaxInt32)
		require.NoError(t, err)
		got := batchesIn(t, r.Bytes())
		require.NoError(t, r.Close())
		if len(got) == 0 {
			break
		}
		all = append(all, got...)
		o = got[len(got)-1][1] + 1
	}
	return all
}

// TestTruncateFullyAndStartAt restarts a log at offsets above, at and
// below its end, below its log start, and at a negative offset, and
// checks the offsets, the files, the leader epoch cache, the producer
// state and a reopen; TruncateTo below the log start lowers it the same
// way (Kafka's truncateTo).
func TestTruncateFullyAndStartAt(t *testing.T) {
	cases := []struct {
		name string
		// restart runs the operation on p (log 0-35, log start 10).
		restart func(p *plog.Partition) error
		wantErr error
		start   int64
	}{
		{"above the log end", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(100) }, nil, 100},
		{"far above the log end", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(36 + 3*math.MaxInt32) }, nil, 36 + 3*math.MaxInt32},
		{"at the log end", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(36) }, nil, 36},
		{"at the log end after a roll", func(p *plog.Partition) error {
			require.NoError(t, p.Roll())
			return p.TruncateFullyAndStartAt(36)
		}, nil, 36},
		{"inside the log", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(31) }, nil, 31},
		{"below the log start", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(4) }, nil, 4},
		{"at zero", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(0) }, nil, 0},
		{"negative", func(p *plog.Partition) error { return p.TruncateFullyAndStartAt(-1) }, plog.ErrOffsetOutOfRange, 10},
		{"TruncateTo below the log start", func(p *plog.Partition) error { return p.TruncateTo(7) }, nil, 7},
		{"TruncateTo below the first segment", func(p *plog.Partition) error {
			segs := p.SegmentInfos()
			require.NoError(t, p.DeleteRecordsBefore(segs[2].BaseOffset))
			require.Greater(t, p.SegmentInfos()[0].BaseOffset, int64(5))
			return p.TruncateTo(5)
		}, nil, 5},
		{"TruncateTo at a negative offset", func(p *plog.Partition) error { return p.TruncateTo(-2) }, plog.ErrOffsetOutOfRange, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			const dir = "/data/restart-0"
			p, _ := restartFixture(t, mem, dir)
			defer func() { _ = p.Close() }()
			before := readAllFollower(t, p)
			err := c.restart(p)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				require.Equal(t, int64(10), p.LogStartOffset())
				require.Equal(t, int64(36), p.LogEndOffset())
				require.Equal(t, before, readAllFollower(t, p))
				require.NoError(t, p.Verify())
				return
			}
			require.NoError(t, err)
			check := func(p *plog.Partition) {
				t.Helper()
				require.Equal(t, c.start, p.LogStartOffset())
				require.Equal(t, c.start, p.LogEndOffset())
				require.Equal(t, c.start, p.HighWatermark())
				require.Empty(t, p.LeaderEpochs())
				require.Empty(t, readAllFollower(t, p))
				segs := p.SegmentInfos()
				require.Len(t, segs, 1)
				require.Equal(t, c.start, segs[0].BaseOffset)
				require.NoError(t, p.Verify())
			}
			check(p)
			names, err := mem.List(dir)
			require.NoError(t, err)
			for _, n := range names {
				require.NotContains(t, n, ".snapshot", "producer snapshots of the old log stay")
			}
			// Both append paths go on from the new start.
			b := batch.Batch(logtest.MakeBatch(2, 10, 1_700_000_000_100, 9))
			b.SetBaseOffset(c.start)
			b.SetPartitionLeaderEpoch(5)
			end, err := p.AppendAssigned(slices0(b))
			require.NoError(t, err)
			require.Equal(t, c.start+2, end)
			require.Equal(t, []plog.EpochStart{{Epoch: 5, StartOffset: c.start}}, p.LeaderEpochs())
			require.NoError(t, p.TruncateTo(c.start))
			check(p)
			require.NoError(t, p.Close())
			p, err = plog.Open(dir, plog.Config{FS: mem, SegmentBytes: 500, SegmentIndexBytes: memIndexBytes, Recovery: plog.StrictRecovery{}})
			require.NoError(t, err)
			check(p)
			base, err := p.AppendBatch(logtest.MakeBatch(1, 5, 1_700_000_000_200, 1))
			require.NoError(t, err)
			require.Equal(t, c.start, base)
		})
	}
}

// slices0 copies b (AppendAssigned must not see the test's later edits).
func slices0(b []byte) []byte { return append([]byte(nil), b...) }

// TestTruncateFullyAndStartAtCrashAtEveryOp crashes restarts of a synced
// log at every filesystem operation in turn. Above the log end the restart
// is atomic: the clone reopens as the old log (offsets, batches, leader
// epochs) or as the restarted one (empty at the new start, no epochs),
// never anything else. Below the log end the clone reopens as a prefix of
// the old log, an empty log at the old log start, or the restarted log.
func TestTruncateFullyAndStartAtCrashAtEveryOp(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 23))
	const dir = "/data/restart-crash-0"
	// restart is a synced log (see restartFixture) and what it held before
	// the restart.
	type restart struct {
		p          *plog.Partition
		stored     []batch.Batch
		oldBatches [][2]int64
		oldEpochs  []plog.EpochStart
	}
	for _, at := range []int64{100, 36 + math.MaxInt32 + 7, 36, 31, 4} {
		above := at >= 36
		t.Logf("restart at %d", at)
		crashAtEveryOp(t, crashWalk[*restart]{
			setup: func(t *testing.T, fs vfs.FS) *restart {
				p, stored := restartFixture(t, fs, dir)
				return &restart{p: p, stored: stored, oldBatches: readAllFollower(t, p), oldEpochs: p.LeaderEpochs()}
			},
			run: func(t *testing.T, _ vfs.FS, r *restart, _ func() bool) {
				require.NoError(t, r.p.TruncateFullyAndStartAt(at))
				require.NoError(t, r.p.Close())
			},
			options:     randomCrash(rng),
			mayEndEarly: true,
			check: func(t *testing.T, r *restart, clone *vfs.MemFS, crash crashPoint) {
				q, err := plog.Open(dir, plog.Config{FS: clone, SegmentBytes: 500, SegmentIndexBytes: memIndexBytes})
				require.NoError(t, err, "restart at %d, %s", at, crash)
				require.NoError(t, q.Verify())
				got := readAllFollower(t, q)
				start, end := q.LogStartOffset(), q.LogEndOffset()
				restarted := start == at && end == at && len(got) == 0
				switch {
				case restarted:
					require.Empty(t, q.LeaderEpochs(), "restart at %d, %s: epochs of the old log", at, crash)
					require.Len(t, q.SegmentInfos(), 1)
				case above:
					require.Equal(t, int64(10), start, "restart at %d, %s", at, crash)
					require.Equal(t, int64(36), end, "restart at %d, %s", at, crash)
					require.Equal(t, r.oldBatches, got)
					require.Equal(t, r.oldEpochs, q.LeaderEpochs())
				default:
					// A prefix of the old log, or empty at its log start.
					require.Equal(t, int64(10), start, "restart at %d, %s", at, crash)
					if len(got) > 0 {
						require.Equal(t, r.oldBatches[:len(got)], got)
						require.Equal(t, got[len(got)-1][1]+1, end)
					} else {
						require.Contains(t, []int64{10, 9}, end)
					}
				}
				// The reopened log goes on.
				nb := batch.Batch(slices0(r.stored[0]))
				nb.SetBaseOffset(q.LogEndOffset() + 1)
				_, err = q.AppendAssigned(nb)
				require.NoError(t, err)
				require.NoError(t, q.Verify())
				require.NoError(t, q.Close())
			},
		})
	}
}

// TestRestartCrashOverUnsyncedTail crashes TruncateFullyAndStartAt above
// the log end at every filesystem operation, on a log whose last segment
// holds a batch not yet synced: a crash may tear it. After the restart's
// commit (the log start checkpoint at the new base) the old segments are
// no reader's, so a torn one among them must not decide where the log
// ends. Open used to take the torn segment for the place recovery cuts
// the log, find the committed log start past that end, distrust it, cut
// the restarted log's segment away and serve the old log's first segment
// alone: synced batches gone, a mix of neither log.
func TestRestartCrashOverUnsyncedTail(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 29))
	const dir = "/data/restart-torn-0"
	bt := logtest.MakeBatch(2, 40, 1_700_000_000_000, 1)
	cfg := func(fs vfs.FS) plog.Config {
		// One batch a segment; no background flush counts operations.
		return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentBytes: int64(len(bt)), SegmentIndexBytes: memIndexBytes})
	}
	const at = 9
	crashAtEveryOp(t, crashWalk[*plog.Partition]{
		setup: func(t *testing.T, fs vfs.FS) *plog.Partition {
			p, err := plog.Open(dir, cfg(fs))
			require.NoError(t, err)
			for range 3 {
				_, err := p.AppendBatch(append([]byte(nil), bt...))
				require.NoError(t, err)
			}
			// Segments 0 and 2 synced, the recovery point at 4; the batch
			// of segment 4 is not synced.
			require.NoError(t, p.FlushRolled())
			require.Equal(t, int64(4), p.RecoveryPoint())
			return p
		},
		run: func(t *testing.T, _ vfs.FS, p *plog.Partition, _ func() bool) {
			require.NoError(t, p.TruncateFullyAndStartAt(at))
			require.NoError(t, p.Close())
		},
		options: func(k, total int64) []vfs.CrashOptions {
			return append(randomCrash(rng)(k, total),
				vfs.CrashOptions{UnsyncedDataPercent: 1, TornPercent: 100, Seed: uint64(k)})
		},
		check: func(t *testing.T, _ *plog.Partition, clone *vfs.MemFS, crash crashPoint) {
			q, err := plog.Open(dir, cfg(clone))
			require.NoError(t, err, crash)
			start, end := q.LogStartOffset(), q.LogEndOffset()
			if start != at || end != at {
				// The old log: every synced batch, at most the unsynced
				// one after them.
				require.Equal(t, int64(0), start, crash)
				require.Contains(t, []int64{4, 6}, end, crash)
			}
			require.NoError(t, q.Verify(), crash)
			require.NoError(t, q.Close(), crash)
		},
	})
}
