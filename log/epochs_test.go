package log_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/killtest"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// epochsOf derives the leader epoch cache a log of batches with rising
// epochs implies: for each leader epoch higher than every earlier one, the
// base offset of its first batch, the first entry moved up to the log
// start offset.
func epochsOf(bs []batch.Batch, logStart int64) []plog.EpochStart {
	var out []plog.EpochStart
	for _, b := range bs {
		e := b.PartitionLeaderEpoch()
		if e < 0 || len(out) > 0 && e <= out[len(out)-1].Epoch {
			continue
		}
		out = append(out, plog.EpochStart{Epoch: e, StartOffset: b.BaseOffset()})
	}
	// Kafka's truncateFromStart.
	i := 0
	for i+1 < len(out) && out[i+1].StartOffset <= logStart {
		i++
	}
	out = out[i:]
	if len(out) > 0 && out[0].StartOffset < logStart {
		out[0].StartOffset = logStart
	}
	return out
}

// checkEpochs compares p's leader epoch cache with the one its surviving
// batches imply. One more entry is allowed at the log end offset with a
// higher epoch: an epoch that SetLeaderEpoch (or an append that then
// failed or was lost) recorded before any of its batches survived, as
// Kafka's cache keeps a new leader's epoch before its first append.
func checkEpochs(p *plog.Partition) error {
	var bs []batch.Batch
	for next := p.LogStartOffset(); next < p.LogEndOffset(); {
		r, err := p.ReadFromFollower(next, 1<<20)
		if err != nil {
			return err
		}
		for data := r.Bytes(); len(data) > 0; {
			b, rest, err := batch.Parse(data)
			if err != nil {
				r.Close()
				return err
			}
			bs = append(bs, batch.Batch(append([]byte(nil), b...)))
			next = b.NextOffset()
			data = rest
		}
		if err := r.Close(); err != nil {
			return err
		}
	}
	want := epochsOf(bs, p.LogStartOffset())
	got := p.LeaderEpochs()
	if n := len(got); n == len(want)+1 && got[n-1].StartOffset == p.LogEndOffset() &&
		(len(want) == 0 || got[n-1].Epoch > want[len(want)-1].Epoch) {
		got = got[:n-1]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("leader epochs %v, the surviving batches [%d, %d) imply %v", p.LeaderEpochs(), p.LogStartOffset(), p.LogEndOffset(), want)
	}
	return nil
}

// TestLeaderEpochsSurviveRollsAndCrash is issue 12 item 2: epoch 1 starting
// at offset 10, a few rolls, a crash. The leader epoch checkpoint used to
// be written only by a full flush while the rolls moved the recovery point
// past offset 10, so recovery rebuilt the cache from the recovered
// segments alone: [{1 190}] (or [{0 0} {1 177}]) instead of
// [{0 0} {1 10}]. Each epoch is now written durably when first assigned.
func TestLeaderEpochsSurviveRollsAndCrash(t *testing.T) {
	for _, keep := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced kept %d%%", keep), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := plog.Config{FS: mem, StampLeaderEpoch: true, SegmentBytes: 2000, SegmentIndexBytes: memIndexBytes}
			p, err := plog.Open("/kafka/epochs-0", cfg)
			require.NoError(t, err)
			for i := 0; i < 10; i++ {
				_, err := p.AppendBatch(logtest.MakeBatch(1, 50, 1_700_000_000_000+int64(i), 1))
				require.NoError(t, err)
			}
			require.NoError(t, p.SetLeaderEpoch(1))
			for i := 0; i < 60; i++ {
				_, err := p.AppendBatch(logtest.MakeBatch(3, 50, 1_700_000_000_000+int64(i), 2))
				require.NoError(t, err)
			}
			require.Greater(t, len(p.SegmentInfos()), 3, "rolls")
			want := []plog.EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 10}}
			require.Equal(t, want, p.LeaderEpochs())
			// The rolls' background flush, which moves the recovery point
			// past offset 10, has run (or runs now): the crash must come
			// after it, whatever the scheduler did with its goroutine
			// (faster rolls left it unscheduled at the crash once).
			require.NoError(t, p.FlushRolled())
			clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: keep, TornPercent: 50, Seed: uint64(keep)})
			require.NoError(t, p.Close())

			cfg.FS = clone
			q, err := plog.Open("/kafka/epochs-0", cfg)
			require.NoError(t, err)
			defer q.Close()
			require.Greater(t, q.LogEndOffset(), int64(10), "the rolls flushed past offset 10")
			require.Equal(t, want, q.LeaderEpochs())
			require.NoError(t, checkEpochs(q))
		})
	}
}

// TestLeaderEpochsCrashAtEveryOp crashes a run of stamped appends with
// leader changes, rolls, a truncation and a Sync (default flush policy:
// no fsync per append) at every filesystem operation in turn, keeping a
// random share of the unsynced writes: after every crash the reopened
// partition's leader epochs are the ones its surviving batches imply.
func TestLeaderEpochsCrashAtEveryOp(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 13))
	const dir = "/kafka/epoch-ops-0"
	cfg := func(fs vfs.FS) plog.Config {
		// The rolls' background flush runs as a step: one goroutine
		// does every operation, in one order.
		return plog.WithManualRollFlush(plog.Config{FS: fs, StampLeaderEpoch: true, LeaderEpoch: 3, SegmentBytes: 1200, IndexIntervalBytes: 100, SegmentIndexBytes: 240})
	}
	crashAtEveryOp(t, crashWalk[struct{}]{
		run: func(t *testing.T, fs vfs.FS, _ struct{}, _ func() bool) {
			p, err := plog.Open(dir, cfg(fs))
			require.NoError(t, err)
			for i := 0; i < 36; i++ {
				if i%6 == 5 {
					require.NoError(t, p.SetLeaderEpoch(p.LeaderEpoch()+1+int32(i%2)))
				}
				_, err := p.AppendBatch(logtest.MakeBatch(1+i%4, 30+5*i, int64(1000+i), byte(i)))
				require.NoError(t, err)
				switch i {
				case 20:
					require.NoError(t, p.TruncateTo(p.LogEndOffset()-7))
				case 26:
					require.NoError(t, p.Sync())
				case 10, 30:
					require.NoError(t, p.FlushRolled())
				}
			}
			require.NoError(t, p.Close())
		},
		options:     randomCrash(rng),
		mayEndEarly: true,
		check: func(t *testing.T, _ struct{}, state *vfs.MemFS, at crashPoint) {
			p, err := plog.Open(dir, cfg(state))
			require.NoError(t, err, "%s: reopen", at)
			require.NoError(t, checkEpochs(p), "%s", at)
			require.NoError(t, p.Verify())
			require.NoError(t, p.Close())
		},
	})
}

// TestLeaderEpochsCrashPoints runs random histories (stamped appends with
// leader changes, or follower appends carrying their leaders' epochs; rolls,
// Sync, TruncateTo, DeleteRecordsBefore) on the crash-simulating
// filesystem, crashes them at random moments with a random share of the
// unsynced writes surviving, and checks after every reopen that the leader
// epochs are the ones the surviving batches imply; then the history goes
// on from the recovered state.
func TestLeaderEpochsCrashPoints(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 17))
	histories, crashes := 12, 0
	if testing.Short() {
		histories = 4
	}
	for h := 0; h < histories; h++ {
		stamp := rng.IntN(2) == 0
		mem := vfs.NewMem()
		cfg := plog.Config{FS: mem, StampLeaderEpoch: stamp, SegmentBytes: int64(800 + rng.IntN(3000)), SegmentIndexBytes: memIndexBytes,
			FlushMessages: []int64{0, 0, 1, 5}[rng.IntN(4)]}
		const dir = "/kafka/epoch-crash-0"
		p, err := plog.Open(dir, cfg)
		require.NoError(t, err)
		epoch := int32(0) // the follower's epoch for AppendAssigned
		ts := int64(1_700_000_000_000)
		for step := 0; step < 80; step++ {
			where := fmt.Sprintf("history %d (stamp %v, flush %d) step %d", h, stamp, cfg.FlushMessages, step)
			if os.Getenv("EPOCH_DEBUG") != "" {
				t.Logf("%s: start %d end %d hw %d epochs %v", where, p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(), p.LeaderEpochs())
			}
			switch r := rng.IntN(100); {
			case r < 40:
				ts += int64(rng.IntN(1000))
				b := batch.Batch(logtest.MakeBatch(1+rng.IntN(5), rng.IntN(120), ts, byte(step)))
				if stamp {
					_, err := p.AppendBatch(b)
					require.NoError(t, err, where)
					break
				}
				// A follower: every batch carries its leader's epoch.
				b.SetBaseOffset(p.LogEndOffset())
				b.SetPartitionLeaderEpoch(epoch)
				_, err := p.AppendAssigned(b)
				require.NoError(t, err, where)
			case r < 50:
				if stamp {
					require.NoError(t, p.SetLeaderEpoch(p.LeaderEpoch()+int32(1+rng.IntN(2))), where)
				} else {
					epoch += int32(1 + rng.IntN(2))
				}
			case r < 57:
				require.NoError(t, p.Sync(), where)
			case r < 62:
				require.NoError(t, p.Roll(), where)
			case r < 68:
				o := p.LogStartOffset() + rng.Int64N(p.LogEndOffset()-p.LogStartOffset()+1)
				require.NoError(t, p.TruncateTo(o), where)
			case r < 71:
				o := p.LogStartOffset() + rng.Int64N(p.HighWatermark()-p.LogStartOffset()+1)
				require.NoError(t, p.DeleteRecordsBefore(o), where)
			case r < 80:
				opts := drawCrash(rng)
				clone := mem.CrashClone(opts)
				_ = p.Close()
				mem, cfg.FS = clone, clone
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err, where)
				require.NoError(t, checkEpochs(p), "%s: crash %+v", where, opts)
				if es := p.LeaderEpochs(); len(es) > 0 {
					epoch = max(epoch, es[len(es)-1].Epoch)
					if stamp {
						require.NoError(t, p.SetLeaderEpoch(max(p.LeaderEpoch(), epoch)))
					}
				}
				crashes++
			default:
				require.NoError(t, checkEpochs(p), "%s", where)
			}
		}
		require.NoError(t, p.Close())
	}
	t.Logf("%d crashes in %d histories", crashes, histories)
}

// TestAppendWithoutNewEpochDoesNotSync: appends that start no leader epoch
// pay no fsync (and write no checkpoint); one that starts an epoch pays
// for the checkpoint, once.
func TestAppendWithoutNewEpochDoesNotSync(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	var syncs, renames int
	in.SetHook(func(op vfs.Op) error {
		switch op.Kind {
		case vfs.OpSync:
			syncs++
		case vfs.OpRename:
			renames++
		}
		return nil
	})
	p, err := plog.Open("/kafka/nosync-0", plog.Config{FS: in, StampLeaderEpoch: true, LeaderEpoch: 1})
	require.NoError(t, err)
	defer p.Close()
	b := logtest.MakeBatch(5, 100, 1_700_000_000_000, 1)
	_, err = p.AppendBatch(b) // starts epoch 1: the checkpoint is written
	require.NoError(t, err)
	require.Greater(t, syncs, 0)
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}}, p.LeaderEpochs())

	syncs, renames = 0, 0
	for i := 0; i < 100; i++ {
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
	}
	require.Zero(t, syncs, "appends in a known epoch must not fsync")
	require.Zero(t, renames)

	require.NoError(t, p.SetLeaderEpoch(2))
	require.Greater(t, syncs, 0, "a new epoch is made durable at once")
	syncs = 0
	_, err = p.AppendBatch(b) // epoch 2 is known already
	require.NoError(t, err)
	require.Zero(t, syncs)
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 505}}, p.LeaderEpochs())

	// A lower epoch is refused (ErrStaleLeaderEpoch); no write.
	require.ErrorIs(t, p.SetLeaderEpoch(1), plog.ErrStaleLeaderEpoch)
	_, err = p.AppendBatch(b)
	require.NoError(t, err)
	require.Zero(t, syncs)
}

// TestSetLeaderEpochReplacesEmptyEpoch: two leader changes without an
// append in between leave one entry at the log end (Kafka's assign
// removes entries at or after the new start); a reopen removes it, as
// Kafka's loader does (truncateFromEnd(logEndOffset)): no batch of it was
// appended.
func TestSetLeaderEpochReplacesEmptyEpoch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	cfg := plog.Config{StampLeaderEpoch: true}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(4, 10, 1_700_000_000_000, 0))
	require.NoError(t, err)
	require.NoError(t, p.SetLeaderEpoch(3))
	require.NoError(t, p.SetLeaderEpoch(5))
	require.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 5, StartOffset: 4}}, p.LeaderEpochs())
	b, err := os.ReadFile(filepath.Join(dir, plog.LeaderEpochCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, "0\n2\n0 0\n5 4\n", string(b), "written before SetLeaderEpoch returned")
	require.NoError(t, p.Close())

	// Not stamping: SetLeaderEpoch records nothing.
	q, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.SetLeaderEpoch(9))
	require.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 0}}, q.LeaderEpochs())
}

// TestEpochAtLogEndRemovedLikeKafka is the Kafka-semantics issue's fourth
// case: a leader recorded epoch 5 at the log end and appended nothing
// before it lost its leadership. Kafka's truncateTo removes that entry
// even when it cuts nothing (truncateFromEnd(logEndOffset) for a target at
// or past the log end), and so does its loader on Open; then
// EndOffsetForEpoch(5) answers (-1, -1), not (5, 5), so that a follower
// following Kafka's fetch protocol does not truncate to 5 on every fetch.
// On 86b910c the entry stayed after both.
func TestEpochAtLogEndRemovedLikeKafka(t *testing.T) {
	for _, how := range []string{"TruncateTo at the log end", "TruncateTo past the log end", "reopen"} {
		t.Run(how, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "orders-0")
			cfg := plog.Config{StampLeaderEpoch: true, LeaderEpoch: 3}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			_, err = p.AppendBatch(logtest.MakeBatch(5, 10, 1_700_000_000_000, 0))
			require.NoError(t, err)
			require.NoError(t, p.SetLeaderEpoch(5))
			require.Equal(t, []plog.EpochStart{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 5}}, p.LeaderEpochs())
			switch how {
			case "TruncateTo at the log end":
				require.NoError(t, p.TruncateTo(5))
			case "TruncateTo past the log end":
				require.NoError(t, p.TruncateTo(50))
			default:
				require.NoError(t, p.Close())
				p, err = plog.Open(dir, plog.Config{StampLeaderEpoch: true})
				require.NoError(t, err)
			}
			defer p.Close()
			require.Equal(t, []plog.EpochStart{{Epoch: 3, StartOffset: 0}}, p.LeaderEpochs())
			e, off, err := p.EndOffsetForEpoch(5)
			require.NoError(t, err)
			require.Equal(t, [2]int64{-1, -1}, [2]int64{int64(e), off})
			require.Equal(t, int64(5), p.LogEndOffset())
			b, err := os.ReadFile(filepath.Join(dir, plog.LeaderEpochCheckpointFile))
			require.NoError(t, err)
			require.Equal(t, "0\n1\n3 0\n", string(b), "durable")
		})
	}
}

// TestFollowerLowerEpochCutsCache: a follower that copies a batch of an
// epoch lower than the cache's latest cuts the cache back to it, as
// Kafka's LeaderEpochFileCache.assign does (the entries of an epoch at or
// above it, or starting at or after it, go). On 86b910c the batch was
// ignored and the cache kept epoch 5 for offsets the lower epoch wrote.
// The cache is durable: a reopen finds it.
func TestFollowerLowerEpochCutsCache(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/data/lower-0"
	p, err := plog.Open(dir, plog.Config{FS: mem})
	require.NoError(t, err)
	follow := func(epoch int32, n int) {
		b := batch.Batch(logtest.MakeBatch(n, 10, 1_700_000_000_000, byte(epoch)))
		b.SetBaseOffset(p.LogEndOffset())
		b.SetPartitionLeaderEpoch(epoch)
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
	}
	follow(2, 3) // 0-2
	follow(5, 2) // 3-4
	follow(4, 2) // 5-6
	want := []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 5}}
	require.Equal(t, want, p.LeaderEpochs())
	require.NoError(t, p.Close())
	q, err := plog.Open(dir, plog.Config{FS: mem})
	require.NoError(t, err)
	defer q.Close()
	require.Equal(t, want, q.LeaderEpochs())
}

// killEpochsChildEnv names the directory TestKillLeaderEpochsHelperProcess
// appends to.
const killEpochsChildEnv = "PARTLOG_KILL_EPOCHS_DIR"

// killEpochsConfig: the default flush policy (no fsync per append) with
// small segments, so that rolls move the recovery point often.
func killEpochsConfig() plog.Config {
	return plog.Config{StampLeaderEpoch: true, SegmentBytes: 32 << 10, IndexIntervalBytes: 1024}
}

// TestKillLeaderEpochsHelperProcess is not a test: TestKillLeaderEpochs
// runs it in a child process, which appends and changes the leader epoch
// every few appends until it is killed.
func TestKillLeaderEpochsHelperProcess(t *testing.T) {
	dir := os.Getenv(killEpochsChildEnv)
	if dir == "" {
		t.Skip("helper process for TestKillLeaderEpochs")
	}
	p, err := plog.Open(dir, killEpochsConfig())
	if err != nil {
		fmt.Printf("error open: %v\n", err)
		os.Exit(3)
	}
	epoch := int32(0)
	if es := p.LeaderEpochs(); len(es) > 0 {
		epoch = es[len(es)-1].Epoch
	}
	fmt.Println("ready")
	stop := time.Now().Add(20 * time.Second) // never outlive a lost parent
	for i := 0; time.Now().Before(stop); i++ {
		if i%25 == 0 {
			epoch++
			if err := p.SetLeaderEpoch(epoch); err != nil {
				fmt.Printf("error epoch: %v\n", err)
				os.Exit(3)
			}
		}
		if _, err := p.AppendBatch(logtest.MakeBatch(1+i%7, 10+(i*37)%400, time.Now().UnixMilli(), byte(i))); err != nil {
			fmt.Printf("error append: %v\n", err)
			os.Exit(3)
		}
	}
	_ = p.Close()
}

// TestKillLeaderEpochs kills a child process (SIGKILL, at a random moment)
// that appends to a partition on the real filesystem under the default
// flush policy while changing leader epochs, and checks after each reopen
// that the leader epochs are the ones the surviving batches imply: the
// rolls moved the recovery point past epochs the checkpoint must already
// hold.
func TestKillLeaderEpochs(t *testing.T) {
	if os.Getenv(killEpochsChildEnv) != "" {
		t.Skip("in the helper process")
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 19))
	dir := t.TempDir() + "/kill-epochs-0"
	kills := 8
	if testing.Short() {
		kills = 3
	}
	for round := 0; round < kills; round++ {
		child := killtest.Start(t, "TestKillLeaderEpochsHelperProcess", killEpochsChildEnv+"="+dir)
		if line := <-child.Lines; line != "ready" {
			child.Kill()
			require.Failf(t, "the child did not start", "round %d: child: %s", round, line)
		}
		delay := time.Duration(20+rng.IntN(200)) * time.Millisecond
		timer := time.NewTimer(delay) // the moment of the kill is random on purpose
		<-timer.C
		child.Kill()
		child.Wait()

		p, err := plog.Open(dir, killEpochsConfig())
		require.NoError(t, err)
		require.NoError(t, p.Verify())
		require.NoError(t, checkEpochs(p), "round %d (killed after %v)", round, delay)
		t.Logf("round %d: killed after %v, log end %d, %d segments, epochs %v", round, delay, p.LogEndOffset(), len(p.SegmentInfos()), p.LeaderEpochs())
		require.NoError(t, p.Close())
	}
}

// BenchmarkAppendBatchStamped appends 16 KiB batches under
// StampLeaderEpoch in one leader epoch (no fsync policy) and reports the
// fsyncs each append paid: 0, since only an append that starts an epoch
// writes the leader epoch checkpoint.
func BenchmarkAppendBatchStamped(b *testing.B) {
	in := vfs.NewInjector(vfs.Default)
	var syncs atomic.Int64
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync {
			syncs.Add(1)
		}
		return nil
	})
	p, err := plog.Open(filepath.Join(b.TempDir(), "bench-0"), plog.Config{FS: in, StampLeaderEpoch: true, LeaderEpoch: 1})
	require.NoError(b, err)
	defer p.Close()
	bt := benchBatch()
	if _, err := p.AppendBatch(bt); err != nil { // starts epoch 1
		b.Fatal(err)
	}
	syncs.Store(0)
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		_, err := p.AppendBatch(bt)
		require.NoError(b, err)
	}
	b.ReportMetric(float64(syncs.Load())/float64(b.N), "fsyncs/op")
}

// TestRecoveryEpochsBelowCheckpointEntries: the follower path copied a
// batch of epoch 5 at offset 0, the log was cut back to offset 1 (the
// cache lost the epoch 5 entry) and batches of epochs 2 and 3 followed;
// after a crash, recovery replays the segment from offset 0. It used to
// append epoch 5 at offset 0 after epoch 3 at offset 2, and Open then
// failed writing that cache ("start offset 0 after 2", found by
// TestStateMachine). A newer epoch observed below entries the cache holds
// now replaces them (Kafka's assign), so the cache only increases.
func TestRecoveryEpochsBelowCheckpointEntries(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/data/epochs-0"
	p, err := plog.Open(dir, plog.Config{FS: mem})
	require.NoError(t, err)
	follow := func(epoch int32) {
		b := batch.Batch(logtest.MakeBatch(1, 10, time.Now().UnixMilli(), byte(epoch)))
		b.SetBaseOffset(p.LogEndOffset())
		b.SetPartitionLeaderEpoch(epoch)
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
	}
	follow(5)
	follow(5)
	follow(5)
	require.NoError(t, p.DeleteRecordsBefore(1))
	require.NoError(t, p.TruncateTo(1))
	follow(2)
	follow(3)
	require.NoError(t, p.Sync())
	clone := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())

	p2, err := plog.Open(dir, plog.Config{FS: clone})
	require.NoError(t, err)
	defer p2.Close()
	epochs := p2.LeaderEpochs()
	for i := 1; i < len(epochs); i++ {
		require.Greater(t, epochs[i].Epoch, epochs[i-1].Epoch, "%v", epochs)
		require.Greater(t, epochs[i].StartOffset, epochs[i-1].StartOffset, "%v", epochs)
	}
	require.Equal(t, int64(3), p2.LogEndOffset())
	// TestRecoveryIgnoresEpochsBelowLogStart: the epoch-5 batch at offset
	// 0 lies below the log start and names no epoch.
	require.Equal(t, []plog.EpochStart{{Epoch: 2, StartOffset: 1}, {Epoch: 3, StartOffset: 2}}, epochs)
}

// TestRecoveryIgnoresEpochsBelowLogStart is a TestLeaderEpochsCrashPoints
// history (seed 1796519976974385132, which CI met) made deterministic: a
// leader stamps epoch 5 on offsets 0-4, DeleteRecordsBefore(3) and
// TruncateTo(3) empty the log, a crash leaves the cache empty, so the
// reopened leader stamps epoch 0 from offset 3; the batches of epoch 5
// stay in the segment below the log start. Recovery after the next crash
// replays that segment from its base, and used to observe epoch 5 at
// offset 0, a higher epoch than any after it: the cache came out as
// [{5 3}] while every readable batch carries epoch 0. Batches wholly below
// the log start now name no epoch.
func TestRecoveryIgnoresEpochsBelowLogStart(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/data/epochs-below-start-0"
	cfg := plog.Config{FS: mem, StampLeaderEpoch: true}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	require.NoError(t, p.SetLeaderEpoch(5))
	ts := int64(1_700_000_000_000)
	for i := range 5 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, ts, byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.DeleteRecordsBefore(3))
	require.NoError(t, p.TruncateTo(3))
	require.Empty(t, p.LeaderEpochs())
	require.NoError(t, p.Sync())

	crash := func() {
		clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
		require.NoError(t, p.Close())
		mem, cfg.FS = clone, clone
		p, err = plog.Open(dir, cfg)
		require.NoError(t, err)
	}
	crash()
	require.Empty(t, p.LeaderEpochs())
	require.Equal(t, int32(0), p.LeaderEpoch())
	for i := range 4 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, ts, byte(10+i)))
		require.NoError(t, err)
	}
	want := []plog.EpochStart{{Epoch: 0, StartOffset: 3}}
	require.Equal(t, want, p.LeaderEpochs())
	crash()
	defer func() { require.NoError(t, p.Close()) }()
	require.Equal(t, int64(3), p.LogStartOffset())
	require.Equal(t, int64(7), p.LogEndOffset())
	require.Equal(t, want, p.LeaderEpochs())
	require.NoError(t, checkEpochs(p))
}

// TestDeleteRecordsToEndThenRollKeepsEpochs: DeleteRecordsBefore up to the
// log end cannot remove the active segment; a roll then leaves it wholly
// below the log start, before an empty segment at the log start. Until a
// reopen the leader epoch cache stays what DeleteRecordsBefore made of it
// (the first entry moved up to the log start, Kafka's truncateFromStart;
// TestStateMachine once found it emptied). Open, after a clean close or a
// crash, then removes that entry, which starts at the log end, as Kafka's
// LogLoader does (truncateFromEnd(nextOffset)), and logtest's model says
// the same.
func TestDeleteRecordsToEndThenRollKeepsEpochs(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			const dir = "/data/epochs-delete-roll-0"
			mem := vfs.NewMem()
			cfg := plog.WithManualRollFlush(plog.Config{FS: mem})
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			m := logtest.NewModel(0, false)
			for i, epoch := range []int32{0, 0, 3} {
				b := batch.Batch(logtest.MakeBatch(1, 10, 1_700_000_000_000, byte(i)))
				b.SetBaseOffset(int64(i))
				b.SetPartitionLeaderEpoch(epoch)
				_, err := p.AppendAssigned(b)
				require.NoError(t, err)
				require.NoError(t, m.Append(b))
			}
			require.NoError(t, p.DeleteRecordsBefore(3))
			require.NoError(t, m.DeleteRecordsBefore(3))
			require.NoError(t, p.Roll())
			want := []plog.EpochStart{{Epoch: 3, StartOffset: 3}}
			require.Equal(t, want, m.LeaderEpochs())
			require.Equal(t, want, p.LeaderEpochs())
			if crash {
				// The roll's background flush ran: the new segment is
				// durable, the epoch cache need not be.
				require.NoError(t, p.FlushRolled())
				clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 0, Seed: 1})
				require.NoError(t, p.Close())
				cfg.FS = clone
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err)
				require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
			} else {
				require.NoError(t, p.Close())
				p, err = plog.Open(dir, cfg)
				require.NoError(t, err)
				m.Reopen()
			}
			require.Empty(t, p.LeaderEpochs(), "the entry at the log end goes on Open")
			require.NoError(t, logtest.Check(p, m))
			require.Len(t, p.SegmentInfos(), 1)
			require.NoError(t, p.Close())
		})
	}
}

// TestEpochOfBatchBelowLogStartAfterTruncateAndCrash is a TestStateMachine
// history (rapid seed 17622019715672729009, not replayable: whether the
// crash kept a roll's segment decided it) made deterministic. Every record
// deleted (DeleteRecordsBefore up to the log end) leaves the leader epoch
// cache with its first entry moved up to the log start, which is the log
// end; a batch appended after it and cut again by TruncateTo takes that
// entry with it (it starts at the new end, Kafka's truncateFromEnd). A
// crash then reopens through recovery, which reads the segment holding the
// recovery point from its base: the batch below the log start is read
// again and its epoch moved up to the log start, an entry at the log end.
// docs/crash-safety.md ("Leader epochs") allows exactly that: after a
// crash the cache is the one the surviving batches imply, plus at most one
// entry at the log end; the model took only an entry it had itself.
func TestEpochOfBatchBelowLogStartAfterTruncateAndCrash(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/data/epochs-0"
	cfg := plog.Config{FS: mem, SegmentIndexBytes: 1024}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	m := logtest.NewModel(0, false)

	b := batch.Batch(logtest.MakeBatch(1, 5, 1, 1))
	b.SetPartitionLeaderEpoch(0)
	_, err = p.AppendAssigned(b)
	require.NoError(t, err)
	require.NoError(t, m.Append(b))
	require.NoError(t, p.DeleteRecordsBefore(1))
	require.NoError(t, m.DeleteRecordsBefore(1))
	require.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 1}}, p.LeaderEpochs())

	next := logtest.MakeBatch(4, 0, 2, 2)
	base, err := p.AppendBatch(next)
	require.NoError(t, err)
	require.NoError(t, m.AppendBatch(next, base))
	require.NoError(t, p.TruncateTo(3))
	require.NoError(t, m.TruncateTo(3))
	require.NoError(t, logtest.Check(p, m))

	clone := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())
	cfg.FS = clone
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
	require.NoError(t, logtest.Check(p, m))
}

// TestLeaderEpochCheckpointAsKafkaLeavesIt: Open reads the
// leader-epoch-checkpoint files Kafka leaves as Kafka reads them, also
// under StrictRecovery. Kafka's CheckpointFile creates the file empty
// before its first write, and reads an empty file, or one that ends after
// its version line, as no entries (a partition that never had an epoch);
// both used to be refused as corrupt. A file whose entries go out of order
// keeps the entries before the first that does (the cache's Load), where
// the whole file used to be dropped as corrupt, and LeaderEpochs came back
// empty.
func TestLeaderEpochCheckpointAsKafkaLeavesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want []plog.EpochStart
	}{
		{"empty", "", nil},
		{"version line only", "0\n", nil},
		{"out of order", "0\n3\n1 0\n5 10\n3 15\n", []plog.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 5, StartOffset: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "orders-0")
			p, err := plog.Open(dir, plog.Config{})
			require.NoError(t, err)
			if tc.want != nil {
				_, err = p.AppendAssigned(recordSet(t, 1, assigned{base: 0, n: 10}))
				require.NoError(t, err)
				_, err = p.AppendAssigned(recordSet(t, 5, assigned{base: 10, n: 10}))
				require.NoError(t, err)
			}
			require.NoError(t, p.Close())
			require.NoError(t, os.WriteFile(filepath.Join(dir, plog.LeaderEpochCheckpointFile), []byte(tc.file), 0o644))
			q, err := plog.Open(dir, plog.Config{Recovery: plog.StrictRecovery{}})
			require.NoError(t, err)
			defer q.Close()
			if tc.want == nil {
				require.Empty(t, q.LeaderEpochs())
				return
			}
			require.Equal(t, tc.want, q.LeaderEpochs())
		})
	}
}

// TestFollowerGapEpochCrashUnderFlushEveryMessage: under per-append
// durability a new leader epoch entry is preceded by a sync of the log and
// a durable recovery point. A follower's batch after an offset gap starts
// its epoch past the log end; the recovery point used to be raised to the
// batch's base, past the log end, so that a crash before the batch landed
// (it was never acknowledged) looked like synced batches lost: Open under
// StrictRecovery refused the partition. The recovery point stops at the
// log end now, and the crash loses only the unacknowledged batch, with or
// without a gap.
func TestFollowerGapEpochCrashUnderFlushEveryMessage(t *testing.T) {
	for _, gap := range []int64{0, 10} {
		t.Run(fmt.Sprintf("gap %d", gap), func(t *testing.T) {
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			const dir = "/data/gap-epoch-0"
			cfg := plog.Config{FS: in, FlushMessages: 1, SegmentIndexBytes: memIndexBytes}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			_, err = p.AppendAssigned(recordSet(t, 1, assigned{base: 0, n: 10}))
			require.NoError(t, err)
			var crashed *vfs.MemFS
			in.SetHook(func(op vfs.Op) error {
				if crashed == nil && (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) && filepath.Ext(op.Path) == ".log" {
					crashed = mem.CrashClone(vfs.CrashOptions{}) // just before the batch is written
				}
				return nil
			})
			_, err = p.AppendAssigned(recordSet(t, 2, assigned{base: 10 + gap, n: 5}))
			require.NoError(t, err)
			in.SetHook(nil)
			require.NotNil(t, crashed)
			require.NoError(t, p.Close())

			cfg.FS, cfg.Recovery = crashed, plog.StrictRecovery{}
			q, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer q.Close()
			require.Equal(t, int64(10), q.LogEndOffset())
			require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}}, q.LeaderEpochs())
		})
	}
}

// TestStampedEpochBelowCacheRefused: under StampLeaderEpoch a stamped
// append whose epoch is below the latest cached one would cut the cache
// back to it (the follower's rule, Kafka's assign), losing the epochs of
// the batches already there; SetLeaderEpoch refuses such an epoch for
// that reason. A reopen with the default Config.LeaderEpoch (0), or a
// follower's batches of a higher epoch, used to let AppendBatch and
// AppendMarker stamp it anyway: the cache [{3 0} {5 5}] became [{0 10}],
// and EndOffsetForEpoch(3) answered (-1, -1) where it had answered (3, 5).
// Those appends now get ErrStaleLeaderEpoch and change nothing, until
// SetLeaderEpoch raises the stamped epoch.
func TestStampedEpochBelowCacheRefused(t *testing.T) {
	ts := int64(1_700_000_000_000)
	for _, how := range []string{"reopen", "follower's higher epoch"} {
		for _, call := range []string{"AppendBatch", "AppendMarker"} {
			t.Run(how+"/"+call, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "orders-0")
				cfg := plog.Config{StampLeaderEpoch: true, LeaderEpoch: 3}
				p, err := plog.Open(dir, cfg)
				require.NoError(t, err)
				_, err = p.AppendBatch(logtest.MakeBatch(5, 10, ts, 0))
				require.NoError(t, err)
				if how == "reopen" {
					require.NoError(t, p.SetLeaderEpoch(5))
					_, err = p.AppendBatch(logtest.MakeBatch(5, 10, ts, 1))
					require.NoError(t, err)
					require.NoError(t, p.Close())
					p, err = plog.Open(dir, plog.Config{StampLeaderEpoch: true})
					require.NoError(t, err)
				} else {
					_, err = p.AppendAssigned(recordSet(t, 5, assigned{base: 5, n: 5}))
					require.NoError(t, err)
				}
				defer func() { require.NoError(t, p.Close()) }()
				want := []plog.EpochStart{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 5}}
				require.Equal(t, want, p.LeaderEpochs())

				switch call {
				case "AppendBatch":
					_, err = p.AppendBatch(logtest.MakeBatch(5, 10, ts, 2))
				default:
					_, err = p.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1})
				}
				require.ErrorIs(t, err, plog.ErrStaleLeaderEpoch)
				require.Equal(t, want, p.LeaderEpochs())
				require.Equal(t, int64(10), p.LogEndOffset())
				e, off, err := p.EndOffsetForEpoch(3)
				require.NoError(t, err)
				require.Equal(t, [2]int64{3, 5}, [2]int64{int64(e), off})

				// Raised, the stamped epoch appends and keeps the history.
				require.NoError(t, p.SetLeaderEpoch(6))
				_, err = p.AppendBatch(logtest.MakeBatch(5, 10, ts, 3))
				require.NoError(t, err)
				require.Equal(t, append(want, plog.EpochStart{Epoch: 6, StartOffset: 10}), p.LeaderEpochs())
				require.NoError(t, checkEpochs(p))
			})
		}
	}
}

// TestFailedFollowerAppendKeepsEpochs: a follower's batch of an epoch
// below the cache's latest cuts the cache back (Kafka's assign), durably,
// before the batch is written. When that write then failed (the partition
// stays writable: law 2, a failed write publishes nothing), the cut stayed:
// the cache [{2 0} {5 3}] became [{2 0} {4 6}] for a log still ending
// with the batches of epoch 5, EndOffsetForEpoch(2) answered (2, 6) for a
// log whose epoch 2 ends at 3, and a crash then left [{2 0} {5 5}]
// (recovery found epoch 5 again only in the segment it read). A failed
// write now puts the cache back as it was, durably.
func TestFailedFollowerAppendKeepsEpochs(t *testing.T) {
	for _, c := range []struct {
		name string
		rule vfs.Rule
		roll bool
	}{
		{"write fails", vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite, vfs.OpWriteAt), Match: isLog}, false},
		{"roll cannot create the next segment", vfs.Rule{Kinds: vfs.Kinds(vfs.OpCreate), Match: isLog}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			sets := [][]byte{
				recordSet(t, 2, assigned{base: 0, n: 3}),
				recordSet(t, 5, assigned{base: 3, n: 2}),
				recordSet(t, 5, assigned{base: 5, n: 1}),
			}
			cfg := plog.WithManualRollFlush(plog.Config{FS: in, SegmentIndexBytes: memIndexBytes})
			if c.roll {
				cfg.SegmentBytes = int64(len(sets[0])) // every batch rolls first
			}
			const dir = "/data/orders-0"
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			for i, set := range sets {
				if i == 2 && !c.roll {
					require.NoError(t, p.Roll())
				}
				_, err = p.AppendAssigned(set)
				require.NoError(t, err)
			}
			want := []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 3}}
			require.Equal(t, want, p.LeaderEpochs())
			// Synced: recovery after a crash reads the last segment only,
			// the file alone holds where epoch 5 starts.
			require.NoError(t, p.Sync())

			in.Add(c.rule)
			_, err = p.AppendAssigned(recordSet(t, 4, assigned{base: 6, n: 2}))
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.Equal(t, int64(6), p.LogEndOffset())
			require.Equal(t, want, p.LeaderEpochs())
			e, off, err := p.EndOffsetForEpoch(2)
			require.NoError(t, err)
			require.Equal(t, [2]int64{2, 3}, [2]int64{int64(e), off})
			require.NoError(t, checkEpochs(p))

			// Durably: a crash right after finds the same cache.
			clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
			require.NoError(t, p.Close())
			cfg.FS = clone
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			require.Equal(t, want, p.LeaderEpochs())
			// And the follower goes on with the batch that failed.
			_, err = p.AppendAssigned(recordSet(t, 4, assigned{base: 6, n: 2}))
			require.NoError(t, err)
			require.Equal(t, []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 6}}, p.LeaderEpochs())
			require.NoError(t, p.Close())
		})
	}
}
