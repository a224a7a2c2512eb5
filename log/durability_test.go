package log_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestGroupCommit checks that concurrent appenders under the per-append
// policy share fdatasyncs (fewer syncs than appends), that every append
// returned durable (a crash clone keeping only synced data holds them
// all), and that the high watermark reached the log end.
func TestGroupCommit(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	var syncs atomic.Int64
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			syncs.Add(1)
			time.Sleep(500 * time.Microsecond) // a device's fdatasync latency
		}
		return nil
	})
	const dir = "/data/group-0"
	p, err := plog.Open(dir, plog.Config{FS: in, FlushMessages: 1, SegmentBytes: 64 << 10})
	require.NoError(t, err)
	const appenders, each = 8, 100
	var wg sync.WaitGroup
	for g := 0; g < appenders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := p.AppendBatch(logtest.MakeBatch(1, 100, int64(i), byte(g))); !assert.NoError(t, err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	end := p.LogEndOffset()
	require.Equal(t, int64(appenders*each), end)
	require.Equal(t, end, p.HighWatermark())
	t.Logf("%d appends, %d fdatasyncs of .log files", appenders*each, syncs.Load())
	require.True(t, syncs.Load() < appenders*each, "no group commit: %d syncs for %d appends", syncs.Load(), appenders*each)

	synced := mem.CrashClone(vfs.CrashOptions{}) // only what was synced
	q, err := plog.Open(dir, plog.Config{FS: synced})
	require.NoError(t, err)
	require.Equal(t, end, q.LogEndOffset())
	require.NoError(t, q.Verify())
	require.NoError(t, q.Close())
	require.NoError(t, p.Close())
}

// TestGroupCommitGathersAppenders checks that a group sync covers about
// as many appends as there are appenders waiting for one. On one P (so
// that the order is the scheduler's, not the machine's) the syncer that
// a finished sync released used to take its snapshot before the other
// released appenders wrote again: syncs alternated between covering one
// append and covering seven, 4.3 records per fdatasync for 8 appenders
// (issue 16). The syncer now lets them write first.
func TestGroupCommitGathersAppenders(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	in := vfs.NewInjector(vfs.NewMem())
	var syncs atomic.Int64
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			syncs.Add(1)
		}
		return nil
	})
	p, err := plog.Open("/data/gather-0", plog.Config{FS: in, FlushMessages: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	const appenders, each = 8, 50
	var wg sync.WaitGroup
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bt := logtest.MakeBatch(1, 100, 1_700_000_000_000, byte(g))
			for range each {
				if _, err := p.AppendBatch(bt); !assert.NoError(t, err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(appenders*each), p.LogEndOffset())
	perSync := float64(appenders*each) / float64(syncs.Load())
	t.Logf("%d appends, %d fdatasyncs: %.2f records per fdatasync", appenders*each, syncs.Load(), perSync)
	require.GreaterOrEqual(t, perSync, 6.0, "a group sync covers too few of the %d waiting appenders", appenders)
}

// TestHighWatermarkFollowsSync checks that under the per-append policy a
// batch written but not yet synced is past the high watermark: ReadFrom
// does not return it until its fdatasync is done.
func TestHighWatermarkFollowsSync(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	p, err := plog.Open("/data/hw-0", plog.Config{FS: in, FlushMessages: 1})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 1, 1))
	require.NoError(t, err)

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	})
	done := make(chan error)
	go func() {
		_, err := p.AppendBatch(logtest.MakeBatch(3, 10, 2, 2))
		done <- err
	}()
	<-entered
	require.Equal(t, int64(5), p.LogEndOffset())
	require.Equal(t, int64(2), p.HighWatermark())
	r, err := p.ReadFrom(2, 1<<20)
	require.NoError(t, err)
	require.Empty(t, r.Bytes(), "an unsynced batch is visible")
	require.NoError(t, r.Close())
	r, err = p.ReadFromFollower(2, 1<<20) // followers read up to the log end
	require.NoError(t, err)
	require.NotEmpty(t, r.Bytes())
	require.NoError(t, r.Close())
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, int64(5), p.HighWatermark())
}

// TestFsyncFailureIsSticky checks fsyncgate handling: after a failed
// fdatasync the partition refuses every later write with ErrFailed
// (wrapping the cause), even once the disk works again, keeps serving
// reads, and a reopen recovers every batch acknowledged before.
func TestFsyncFailureIsSticky(t *testing.T) {
	for _, c := range []struct {
		name  string
		flush int64
	}{{"per-append", 1}, {"explicit Sync", 0}} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			const dir = "/data/fsyncgate-0"
			p, err := plog.Open(dir, plog.Config{FS: in, FlushMessages: c.flush})
			require.NoError(t, err)
			m := logtest.NewModel(0, false)
			for i := 0; i < 5; i++ {
				b := logtest.MakeBatch(2, 50, int64(i), 1)
				base, err := p.AppendBatch(b)
				require.NoError(t, err)
				require.NoError(t, m.AppendBatch(b, base))
			}
			require.NoError(t, p.Sync())
			in.FailOnce(func(op vfs.Op) bool {
				return op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix)
			})
			_, err = p.AppendBatch(logtest.MakeBatch(1, 1, 9, 9))
			if c.flush == 0 {
				require.NoError(t, err) // not synced yet
				err = p.Sync()
			}
			require.ErrorIs(t, err, plog.ErrFailed)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.Equal(t, int64(1), in.Injected())

			for _, op := range []func() error{
				func() error { _, err := p.AppendBatch(logtest.MakeBatch(1, 1, 10, 1)); return err },
				p.Sync,
				p.Roll,
				func() error { return p.TruncateTo(3) },
			} {
				err := op()
				require.ErrorIs(t, err, plog.ErrFailed)
				require.ErrorIs(t, err, vfs.ErrInjected) // the original cause
			}
			r, err := p.ReadFrom(0, 1<<20) // reads still work
			require.NoError(t, err)
			require.NotEmpty(t, r.Bytes())
			require.NoError(t, r.Close())
			err = p.Close() // the failure again: the shutdown was not clean
			require.ErrorIs(t, err, plog.ErrFailed)
			require.ErrorIs(t, err, vfs.ErrInjected)
			has, err := checkpoint.HasCleanShutdown(mem, dir)
			require.NoError(t, err)
			require.False(t, has, "a failed partition must not mark a clean shutdown")

			// Only synced data survives; every acknowledged batch is there.
			q, err := plog.Open(dir, plog.Config{FS: mem.CrashClone(vfs.CrashOptions{})})
			require.NoError(t, err)
			require.NoError(t, m.Crash(q.LogEndOffset(), q.HighWatermark()))
			require.NoError(t, logtest.Check(q, m))
			require.NoError(t, q.Close())
		})
	}
}

// TestFlushMessages checks flush.messages = N > 1: the append that
// crosses N records flushes everything and moves the recovery point.
func TestFlushMessages(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	var syncs atomic.Int64
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) {
			syncs.Add(1)
		}
		return nil
	})
	const dir = "/data/flushn-0"
	p, err := plog.Open(dir, plog.Config{FS: in, FlushMessages: 10})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 12; i++ { // 3 records each: flushes after 12, 24, 36 records
		_, err := p.AppendBatch(logtest.MakeBatch(3, 10, int64(i), 1))
		require.NoError(t, err)
	}
	require.Equal(t, int64(3), syncs.Load())
	rp, ok, err := checkpoint.ReadOffset(in, filepath.Join(dir, plog.RecoveryPointCheckpointFile), "flushn", 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(36), rp)
}

// TestFlushMessagesAnsweredByClose: under FlushMessages N > 1, an append
// that crosses N records and finds its flush done by a Close that ran
// first (the Close's full flush covered its batch) succeeds, alone or in
// a Dir whose Close syncs the whole filesystem: the appends that
// succeeded are exactly the records a crash right after keeps (20 rounds
// each: a Sync blocked in its fdatasync holds both locks while the append
// and the Close line up behind it).
func TestFlushMessagesAnsweredByClose(t *testing.T) {
	for _, inDir := range []bool{false, true} {
		t.Run(fmt.Sprintf("inDir=%v", inDir), func(t *testing.T) {
			for round := range 20 {
				flushAnsweredByClose(t, inDir, round)
			}
		})
	}
}

func flushAnsweredByClose(t *testing.T, inDir bool, round int) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	const dir = "/data/t-0"
	var (
		p        *plog.Partition
		closeAll func() error
		err      error
	)
	if inDir {
		var d *plog.Dir
		d, err = plog.OpenDir("/data", plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: memIndexBytes, FlushMessages: 2}})
		require.NoError(t, err)
		p, err = d.CreatePartition("t", 0)
		closeAll = d.Close
	} else {
		p, err = plog.Open(dir, plog.Config{FS: in, FlushMessages: 2})
		closeAll = p.Close
	}
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1, 1))
	require.NoError(t, err)
	release := make(chan struct{})
	inSync := holdFirstLogSync(in, release)
	synced := make(chan error, 1)
	go func() { synced <- p.Sync() }()
	<-inSync
	appended, closed := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 2, 1)) // crosses 2 records
		appended <- err
	}()
	go func() { closed <- closeAll() }()
	for range round % 4 {
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, <-synced, "round %d", round)
	require.NoError(t, <-closed, "round %d", round)
	acked := int64(1)
	if err := <-appended; err == nil {
		acked += 2
	} else {
		require.ErrorIs(t, err, plog.ErrClosed, "round %d", round)
	}
	in.SetHook(nil)

	crashed := mem.CrashClone(vfs.CrashOptions{})
	if inDir {
		d, err := plog.OpenDir("/data", plog.DirConfig{Config: plog.Config{FS: crashed, SegmentIndexBytes: memIndexBytes}})
		require.NoError(t, err)
		assert.Equal(t, acked, d.Partition("t", 0).LogEndOffset(), "round %d: records acknowledged, against records kept", round)
		require.NoError(t, d.Close())
		return
	}
	p, err = plog.Open(dir, plog.Config{FS: crashed})
	require.NoError(t, err)
	assert.Equal(t, acked, p.LogEndOffset(), "round %d: records acknowledged, against records kept", round)
	require.NoError(t, p.Close())
}

// TestFlushInterval checks flush.ms: a background goroutine flushes and
// moves the recovery point, and stops on Close.
func TestFlushInterval(t *testing.T) {
	before := runtime.NumGoroutine()
	in := vfs.NewInjector(vfs.NewMem())
	const dir = "/data/flushms-0"
	p, err := plog.Open(dir, plog.Config{FS: in, FlushInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(7, 10, 1, 1))
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rp, ok, err := checkpoint.ReadOffset(in, filepath.Join(dir, plog.RecoveryPointCheckpointFile), "flushms", 0)
		if err == nil && ok && rp == 7 {
			break
		}
		require.False(t, time.Now().After(deadline), "the recovery point never reached 7 (%d, %v, %v)", rp, ok, err)
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(t, p.Close())
	for i := 0; runtime.NumGoroutine() > before; i++ {
		require.False(t, i > 1000, "goroutines: %d before Open, %d after Close", before, runtime.NumGoroutine())
		time.Sleep(time.Millisecond)
	}
}

// TestCheckpointFiles checks the files Sync and Close write, in Kafka's
// formats: the recovery point, the high watermark (manual mode), and the
// clean-shutdown marker, which Open removes before loading.
func TestCheckpointFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-2")
	p, err := plog.Open(dir, plog.Config{DisableAutoHighWatermark: true})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(i), 1))
		require.NoError(t, err)
	}
	require.NoError(t, p.SetHighWatermark(6))
	require.NoError(t, p.Sync())
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "0\n1\norders 2 12\n", read(plog.RecoveryPointCheckpointFile))
	require.Equal(t, "0\n1\norders 2 6\n", read(plog.HighWatermarkCheckpointFile))
	_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
	require.True(t, errors.Is(err, os.ErrNotExist), "marker while open")
	require.NoError(t, p.SetHighWatermark(8))
	require.NoError(t, p.Close())
	require.Equal(t, "", read(checkpoint.CleanShutdownFile))
	require.Equal(t, "0\n1\norders 2 8\n", read(plog.HighWatermarkCheckpointFile))

	p, err = plog.Open(dir, plog.Config{DisableAutoHighWatermark: true})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
	require.True(t, errors.Is(err, os.ErrNotExist), "Open must remove the marker before loading")
	require.Equal(t, int64(8), p.HighWatermark())
	require.NoError(t, p.TruncateTo(4)) // lowers the recovery point, durably
	require.Equal(t, "0\n1\norders 2 4\n", read(plog.RecoveryPointCheckpointFile))
	require.Equal(t, int64(4), p.HighWatermark())
	require.NoError(t, p.Close())
}

// TestLeaderEpochCheckpoint checks the leader epoch cache: entries come
// from the stamped batches, go to leader-epoch-checkpoint in Kafka's
// format on Sync, are cut by TruncateTo (durably) and moved by
// DeleteRecordsBefore, and survive a reopen.
func TestLeaderEpochCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	cfg := plog.Config{StampLeaderEpoch: true, LeaderEpoch: 2}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	appendN := func(n int) {
		for i := 0; i < n; i++ {
			_, err := p.AppendBatch(logtest.MakeBatch(2, 10, int64(i), 1))
			require.NoError(t, err)
		}
	}
	appendN(3) // epoch 2: offsets 0-5
	require.NoError(t, p.SetLeaderEpoch(5))
	appendN(2) // epoch 5: 6-9
	require.ErrorIs(t, p.SetLeaderEpoch(4), plog.ErrStaleLeaderEpoch)
	appendN(1) // a lower epoch is refused: still epoch 5, 10-11
	require.NoError(t, p.SetLeaderEpoch(7))
	appendN(2) // epoch 7: 12-15
	want := []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 6}, {Epoch: 7, StartOffset: 12}}
	require.Equal(t, want, p.LeaderEpochs())
	require.NoError(t, p.Sync())
	read := func() string {
		b, err := os.ReadFile(filepath.Join(dir, plog.LeaderEpochCheckpointFile))
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "0\n3\n2 0\n5 6\n7 12\n", read())

	require.NoError(t, p.TruncateTo(12)) // epoch 7 had only batches from 12
	require.Equal(t, "0\n2\n2 0\n5 6\n", read())
	require.NoError(t, p.DeleteRecordsBefore(7))
	require.Equal(t, []plog.EpochStart{{Epoch: 5, StartOffset: 7}}, p.LeaderEpochs())
	require.NoError(t, p.Close())
	require.Equal(t, "0\n1\n5 7\n", read())

	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	require.Equal(t, []plog.EpochStart{{Epoch: 5, StartOffset: 7}}, p.LeaderEpochs())
	require.NoError(t, p.Close())

	// After a crash the epochs of the recovered batches are found again.
	mem := vfs.NewMem()
	q, err := plog.Open("/data/epochs-0", plog.Config{FS: mem, StampLeaderEpoch: true, LeaderEpoch: 1})
	require.NoError(t, err)
	_, err = q.AppendBatch(logtest.MakeBatch(1, 1, 1, 1))
	require.NoError(t, err)
	require.NoError(t, q.Sync())
	require.NoError(t, q.SetLeaderEpoch(3))
	_, err = q.AppendBatch(logtest.MakeBatch(1, 1, 1, 1))
	require.NoError(t, err)
	crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, q.Close())
	q, err = plog.Open("/data/epochs-0", plog.Config{FS: crashed})
	require.NoError(t, err)
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 1}}, q.LeaderEpochs())
	require.NoError(t, q.Close())
}

// TestFlushUnderMuDuringGroupSyncSyncsDirectory: under FlushMessages 1 the
// group syncer takes the directory's dirty flag under mu, releases mu for
// its fdatasync and syncs the directory afterwards. A writer that flushes
// under mu alone meanwhile (TruncateTo, DeleteRecordsBefore, compaction's
// and retention's flush of sealed segments) must still sync the directory
// before it calls anything durable: the entries of the segment a roll made
// (created, or a spare's renames) are not durable yet. Here a TruncateTo
// runs while the first group sync after a roll holds its fdatasync; in a
// Dir (whose checkpoints are synced at the root, not in the partition's
// directory) nothing else syncs the partition directory, and a crash right
// after TruncateTo returned lost the new segment, the batch TruncateTo had
// flushed with it; DeleteRecordsBefore (whose flush covers what was
// appended before it) the same. With a created segment and an adopted
// spare.
func TestFlushUnderMuDuringGroupSyncSyncsDirectory(t *testing.T) {
	type writer struct {
		name string
		// run calls the writer; it returns the log end a crash right
		// after it must keep, given the roll's base.
		run func(p *plog.Partition, rollBase int64) (int64, error)
	}
	writers := []writer{
		{"TruncateTo", func(p *plog.Partition, rollBase int64) (int64, error) {
			// Writes the queued batch, cuts it away and flushes.
			return rollBase + 3, p.TruncateTo(rollBase + 3)
		}},
		{"DeleteRecordsBefore", func(p *plog.Partition, rollBase int64) (int64, error) {
			// Writes the queued batch and flushes both.
			return rollBase + 4, p.DeleteRecordsBefore(1)
		}},
	}
	for _, w := range writers {
		for _, spare := range []bool{false, true} {
			t.Run(w.name+"/"+map[bool]string{false: "created", true: "spare"}[spare], func(t *testing.T) {
				mem := vfs.NewMem()
				in := vfs.NewInjector(mem)
				// The rolls' background flush (which syncs the directory)
				// is left to the test, and never run.
				cfg := plog.WithManualRollFlush(plog.Config{FS: in, FlushMessages: 1, SegmentIndexBytes: 1024})
				d, err := plog.OpenDir("/logs", plog.DirConfig{Config: cfg})
				require.NoError(t, err)
				p, err := d.CreatePartition("t", 0)
				require.NoError(t, err)
				for i := range 3 {
					_, err := p.AppendBatch(logtest.MakeBatch(2, 40, int64(1+i), byte(i)))
					require.NoError(t, err)
				}
				if spare {
					p.PrepareSpare()
					require.True(t, p.HasSpare())
				}
				require.NoError(t, p.Roll())
				segs, err := p.Segments()
				require.NoError(t, err)
				require.Equal(t, spare, segs[len(segs)-1].AdoptionPending(), "the roll adopted the spare")
				for _, s := range segs {
					require.NoError(t, s.Unref())
				}
				rollBase := p.LogEndOffset()

				// The first group sync after the roll: hold its fdatasync of
				// the new segment's .log, after it took the dirty flag.
				var held atomic.Bool
				entered, release := make(chan struct{}), make(chan struct{})
				in.SetHook(func(op vfs.Op) error {
					if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) && held.CompareAndSwap(false, true) {
						close(entered)
						<-release
					}
					return nil
				})
				keep := logtest.MakeBatch(3, 40, 10, 7)
				var wg sync.WaitGroup
				var keepErr error
				wg.Go(func() { _, keepErr = p.AppendBatch(keep) })
				<-entered
				// Another appender queues behind the held sync; TruncateTo
				// writes it, cuts it away and flushes: the kept batch is
				// synced when TruncateTo returns.
				var cutErr error
				wg.Go(func() { _, cutErr = p.AppendBatch(logtest.MakeBatch(1, 40, 11, 8)) })
				for p.Stats().BatchesAppended < 5 {
					runtime.Gosched()
				}
				want, err := w.run(p, rollBase)
				require.NoError(t, err)
				clone := mem.CrashClone(vfs.CrashOptions{}) // synced state only
				close(release)
				wg.Wait()
				require.NoError(t, keepErr)
				_ = cutErr // TruncateTo cut it: its sync covers nothing of it
				require.NoError(t, d.Close())

				d2, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: clone, SegmentIndexBytes: 1024}})
				require.NoError(t, err)
				defer func() { require.NoError(t, d2.Close()) }()
				q := d2.Partition("t", 0)
				require.NotNil(t, q)
				require.Equal(t, want, q.LogEndOffset(), "batches %s flushed are lost: the new segment's directory entry was never synced", w.name)
			})
		}
	}
}

// TestFlushIntervalPersistsHighWatermark: under DisableAutoHighWatermark
// the FlushInterval flush persists the high watermark also when no batch
// was written since the last flush (a replicated leader whose followers
// caught up after its last append), so that a crash after it restarts the
// high watermark there, as after a Sync.
func TestFlushIntervalPersistsHighWatermark(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/data/hwflush-0"
	cfg := plog.Config{FS: mem, DisableAutoHighWatermark: true}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for i := range 3 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(i), 1))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync()) // every batch durable; high watermark 0
	require.NoError(t, p.SetHighWatermark(12))
	p.PeriodicFlush()
	crashed := mem.CrashClone(vfs.CrashOptions{}) // only what was synced
	require.NoError(t, p.Close())

	cfg.FS = crashed
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(12), p.LogEndOffset())
	require.Equal(t, int64(12), p.HighWatermark(), "the high watermark the interval flush persisted")
}

// TestTruncateLowersHighWatermarkCheckpoint: under DisableAutoHighWatermark
// TruncateTo clamps the high watermark to the new log end, and that clamp
// must outlive a crash as the batches appended after the cut do: here they
// are made durable by per-append syncs, which persist no high watermark.
// Before, the checkpoint kept the old, higher value, and a crash brought
// the high watermark back over batches no SetHighWatermark ever covered
// (law 3: ReadFrom returned records past the visibility bound).
func TestTruncateLowersHighWatermarkCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	const dir = "/data/hwtrunc-0"
	cfg := plog.Config{FS: mem, DisableAutoHighWatermark: true, FlushMessages: 1}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	appendCommitted16(t, p)
	require.NoError(t, p.TruncateTo(8))
	require.Equal(t, int64(8), p.HighWatermark())
	reappendAfterCut(t, p)
	require.Equal(t, int64(8), p.HighWatermark())
	requireCutHighWatermarkAfterCrash(t, mem, p, dir, cfg, "the high watermark the truncation clamped")
}

// appendCommitted16 appends offsets 0-15 in four batches, commits and
// syncs them: the high watermark checkpoint says 16.
func appendCommitted16(t *testing.T, p *plog.Partition) {
	t.Helper()
	for i := range 4 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(i), 1))
		require.NoError(t, err)
	}
	require.NoError(t, p.SetHighWatermark(16))
	require.NoError(t, p.Sync())
}

// reappendAfterCut appends offsets 8-15 again after a cut at 8, in two
// batches, durable (FlushMessages 1) and not committed.
func reappendAfterCut(t *testing.T, p *plog.Partition) {
	t.Helper()
	for i := range 2 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(10+i), 2))
		require.NoError(t, err)
	}
}

// requireCutHighWatermarkAfterCrash takes a crash clone of mem (only what
// was synced), closes p and opens the clone with cfg: the re-appended
// batches must be there, under the high watermark 8 (clamped says who
// clamped it).
func requireCutHighWatermarkAfterCrash(t *testing.T, mem *vfs.MemFS, p *plog.Partition, dir string, cfg plog.Config, clamped string) {
	t.Helper()
	crashed := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())
	cfg.FS = crashed
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(16), p.LogEndOffset(), "the synced appends after the cut")
	require.Equal(t, int64(8), p.HighWatermark(), clamped)
}

// TestOpenLowersHighWatermarkCheckpoint: a crash inside TruncateTo, after
// the cut and before the high watermark checkpoint was lowered (here: that
// write failed), leaves the checkpoint past the log end. Open clamps the
// high watermark to the log end, and must lower the checkpoint with it:
// else batches appended after the open and made durable by per-append
// syncs come back, after a second crash, under the old high watermark.
func TestOpenLowersHighWatermarkCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	const dir = "/data/hwopen-0"
	cfg := plog.Config{FS: in, DisableAutoHighWatermark: true, FlushMessages: 1}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	appendCommitted16(t, p)
	in.FailOnce(func(op vfs.Op) bool {
		return op.Kind == vfs.OpCreate && strings.Contains(op.Path, plog.HighWatermarkCheckpointFile)
	})
	require.ErrorIs(t, p.TruncateTo(8), plog.ErrFailed)
	_ = p.Close()

	cfg.FS = mem
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	require.Equal(t, int64(8), p.LogEndOffset())
	require.Equal(t, int64(8), p.HighWatermark())
	reappendAfterCut(t, p)
	requireCutHighWatermarkAfterCrash(t, mem, p, dir, cfg, "the high watermark Open clamped")
}

// TestTruncateFailedRecoveryPointRaiseCutsEpochs: a TruncateTo whose cut
// raises the recovery point (nothing was flushed since the batches were
// appended) and whose write of that checkpoint fails returns the error
// but leaves the partition writable: a failed raise is safe, the older
// recovery point stays. The rest of the truncation must still be done.
// Before, the error returned before the leader epoch cache was cut: it
// kept an epoch starting past the new log end, and EndOffsetForEpoch of
// the epoch before answered the old, cut end (a follower asking it keeps
// the records the leader cut).
func TestTruncateFailedRecoveryPointRaiseCutsEpochs(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	p, err := plog.Open("/data/rpraise-0", plog.Config{FS: in, StampLeaderEpoch: true, LeaderEpoch: 1})
	require.NoError(t, err)
	defer p.Close()
	for i := range 2 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(i), 1))
		require.NoError(t, err)
	}
	require.NoError(t, p.SetLeaderEpoch(2))
	for i := range 2 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10, int64(2+i), 2))
		require.NoError(t, err)
	}
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 8}}, p.LeaderEpochs())
	require.Equal(t, int64(0), p.RecoveryPoint())
	in.FailOnce(func(op vfs.Op) bool {
		return op.Kind == vfs.OpCreate && strings.Contains(op.Path, plog.RecoveryPointCheckpointFile)
	})
	err = p.TruncateTo(6) // the batch holding 6 starts at 4
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.NotErrorIs(t, err, plog.ErrFailed)
	require.Equal(t, int64(4), p.LogEndOffset())
	require.Equal(t, []plog.EpochStart{{Epoch: 1, StartOffset: 0}}, p.LeaderEpochs())
	epoch, end, err := p.EndOffsetForEpoch(1)
	require.NoError(t, err)
	require.Equal(t, int32(1), epoch)
	require.Equal(t, int64(4), end, "epoch 1 ends at the log end")
	_, err = p.AppendBatch(logtest.MakeBatch(4, 10, 4, 3)) // writable
	require.NoError(t, err)
}
