package log

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// The durability part without a Partition: a fake core (durabilityCore and
// spareCore) over an in-memory directory.

// fakeCore stands in for the partition core.
type fakeCore struct {
	mu          sync.Mutex
	truncations atomic.Uint64
	closed      atomic.Bool
	rolledRuns  atomic.Int64
	// failed and writes are guarded by mu.
	failed error
	writes uint64
}

func (c *fakeCore) syncRound(uint64) (uint64, error) { return 0, nil }
func (c *fakeCore) flushRolled() error               { c.rolledRuns.Add(1); return nil }
func (c *fakeCore) periodicFlush()                   {}
func (c *fakeCore) failLocked(err error) error {
	if c.failed == nil {
		c.failed = err
	}
	return c.failed
}
func (c *fakeCore) lockAppender() { c.mu.Lock() }
func (c *fakeCore) lockReader()   { c.mu.Lock() }
func (c *fakeCore) unlock()       { c.mu.Unlock() }
func (c *fakeCore) writesLocked() (uint64, bool) {
	return c.writes, !c.closed.Load() && c.failed == nil
}

const partDir = "/d/t-0"

// newPart returns a durability part over a fresh in-memory directory, its
// core, its filesystem and its checkpoint lock.
func newPart(t *testing.T, cfg Config) (*durability, *fakeCore, *vfs.MemFS, *sync.Mutex) {
	t.Helper()
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(partDir, 0o755))
	cfg.FS = mem
	cfg.ensureDefaults()
	core := &fakeCore{}
	var ckptMu sync.Mutex
	d := &durability{}
	d.init(core, core, durabilityConfig{dir: partDir, cfg: &cfg, segCfg: cfg.segmentConfig(),
		stats: &counters{}, ckpt: partitionFiles{fs: mem, dir: partDir, logger: cfg.Logger}, ckptMu: &ckptMu,
		closed: &core.closed, truncations: &core.truncations})
	return d, core, mem, &ckptMu
}

// recoveryPointOnDisk reads the recovery point checkpoint (-1: none).
func recoveryPointOnDisk(t *testing.T, d *durability) int64 {
	t.Helper()
	off, ok, err := d.ckpt.read(recoveryPointCheckpointFile)
	require.NoError(t, err)
	if !ok {
		return -1
	}
	return off
}

// TestRecoveryPointRules: set writes it (and fails the partition only when
// a lowering cannot be written); a background raise writes only a higher
// value, and nothing once a truncation came after its work was taken.
func TestRecoveryPointRules(t *testing.T) {
	d, core, mem, _ := newPart(t, Config{})
	require.Equal(t, int64(-1), d.currentRecoveryPoint())

	require.NoError(t, d.setRecoveryPointLocked(100))
	require.Equal(t, int64(100), recoveryPointOnDisk(t, d))

	d.raiseRecoveryPoint(200, 0)
	require.Equal(t, int64(200), d.currentRecoveryPoint())
	d.raiseRecoveryPoint(150, 0) // lower: not a raise
	require.Equal(t, int64(200), d.currentRecoveryPoint())
	core.truncations.Add(1)
	d.raiseRecoveryPoint(300, 0) // a truncation since the work was taken
	require.Equal(t, int64(200), d.currentRecoveryPoint())
	require.Equal(t, int64(200), recoveryPointOnDisk(t, d))

	// Writes fail from now on: the directory is gone.
	require.NoError(t, mem.RemoveAll(partDir))
	require.Error(t, d.setRecoveryPointLocked(400), "raise")
	require.NoError(t, core.failed, "a failed raise keeps the older value, which is safe")
	require.Equal(t, int64(200), d.currentRecoveryPoint())
	err := d.setRecoveryPointLocked(50)
	require.Error(t, err, "lower")
	require.Equal(t, core.failed, err, "a failed lowering fails the partition")
	require.Equal(t, int64(200), d.currentRecoveryPoint())
}

// TestHighWatermarkCheckpointWrittenOnChange: under
// DisableAutoHighWatermark a flush writes the high watermark only when it
// moved; with the automatic one, never.
func TestHighWatermarkCheckpointWrittenOnChange(t *testing.T) {
	d, _, mem, _ := newPart(t, Config{DisableAutoHighWatermark: true})
	path := filepath.Join(partDir, highWatermarkCheckpointFile)
	require.NoError(t, d.writeHighWatermarkLocked(10))
	off, ok, err := d.ckpt.read(highWatermarkCheckpointFile)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(10), off)
	require.NoError(t, mem.Remove(path))
	require.NoError(t, d.writeHighWatermarkLocked(10))
	_, err = mem.Stat(path)
	require.True(t, errors.Is(err, fs.ErrNotExist), "unchanged: not written again")

	auto, _, amem, _ := newPart(t, Config{})
	require.NoError(t, auto.writeHighWatermarkLocked(10))
	_, err = amem.Stat(path)
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

// TestRollFlushScheduledOnce: rolls schedule one background flush at a
// time; the next roll schedules another once the flush took its work;
// under the manual mode of tests none.
func TestRollFlushScheduledOnce(t *testing.T) {
	d, core, _, _ := newPart(t, Config{})
	d.noteRolledLocked(100, 0)
	d.noteRolledLocked(200, 0) // queued already
	d.bg.Wait()
	require.Equal(t, int64(1), core.rolledRuns.Load())
	d.rollFlushStartedLocked()
	d.noteRolledLocked(300, 0)
	d.bg.Wait()
	require.Equal(t, int64(2), core.rolledRuns.Load())
	require.Equal(t, int64(300), d.rollTarget)

	m, mcore, _, _ := newPart(t, manualRollFlushConfig(Config{}))
	m.noteRolledLocked(100, 0)
	m.bg.Wait()
	require.Zero(t, mcore.rolledRuns.Load())
	require.Equal(t, int64(100), m.rollTarget)
}

// manualRollFlushConfig is export_test.go's WithManualRollFlush, for
// this package's tests.
func manualRollFlushConfig(cfg Config) Config {
	cfg.manualRollFlush = true
	return cfg
}

// TestSpareLifecycle: a spare is made under the spare names, adopted by a
// roll at its base in memory and renamed by the next settlement; an idle
// spare is removed only when no write came since the last check.
func TestSpareLifecycle(t *testing.T) {
	d, core, mem, _ := newPart(t, manualRollFlushConfig(Config{}))
	s := &d.spare
	spareLog := filepath.Join(partDir, segment.FileName(0, ".log")+segment.SpareSuffix)
	exists := func(path string) bool {
		_, err := mem.Stat(path)
		return err == nil
	}

	s.prepare()
	core.mu.Lock()
	require.True(t, s.readyLocked())
	core.mu.Unlock()
	require.True(t, exists(spareLog))

	// A write since the spare was made: the idle check keeps it.
	core.mu.Lock()
	core.writes++
	core.mu.Unlock()
	s.idleCheck()
	core.mu.Lock()
	require.True(t, s.readyLocked())
	core.mu.Unlock()
	// None since the last check: removed.
	s.idleCheck()
	d.bg.Wait()
	core.mu.Lock()
	require.False(t, s.readyLocked())
	core.mu.Unlock()
	require.False(t, exists(spareLog))

	// A roll adopts the next spare at its base; the settlement renames it.
	core.mu.Lock()
	s.next = nextSegment{}
	core.mu.Unlock()
	s.prepare()
	core.mu.Lock()
	seg, err := s.createNextLocked(500)
	core.mu.Unlock()
	require.NoError(t, err)
	defer seg.Close()
	require.Equal(t, int64(500), seg.BaseOffset())
	require.True(t, seg.AdoptionPending())
	require.NoError(t, s.settleAdoptions())
	require.False(t, seg.AdoptionPending())
	require.True(t, exists(filepath.Join(partDir, segment.FileName(500, ".log"))))
	require.False(t, exists(spareLog))

	// Without a spare the roll creates the segment itself.
	core.mu.Lock()
	seg2, err := s.createNextLocked(900)
	core.mu.Unlock()
	require.NoError(t, err)
	defer seg2.Close()
	require.False(t, seg2.AdoptionPending())

	// A spare made after Close began is discarded, not installed.
	core.closed.Store(true)
	s.prepare()
	core.mu.Lock()
	require.False(t, s.readyLocked())
	core.mu.Unlock()
	require.False(t, exists(spareLog))
}

// TestSyncBeforeEpochRules: under per-append durability a new leader epoch
// entry first has the log flushed and the recovery point raised to its
// start, durably (in what a crash now leaves); under the other policies
// nothing happens; the recovery point is only raised; a failed fsync fails
// the partition, a failed checkpoint write is returned and changes
// nothing.
func TestSyncBeforeEpochRules(t *testing.T) {
	const start = 10
	isLogSync := func(op vfs.Op) bool {
		return op.Kind == vfs.OpSync && filepath.Ext(op.Path) == segment.LogSuffix
	}
	isRecoveryPoint := func(op vfs.Op) bool {
		return strings.HasPrefix(filepath.Base(op.Path), recoveryPointCheckpointFile)
	}
	for _, tc := range []struct {
		name          string
		flushMessages int64
		// before is the recovery point before the call (-1: none).
		before        int64
		fail          func(vfs.Op) bool
		wantDirSynced bool
		wantRP        int64 // in memory and after a crash
		wantErr       bool
		wantFailed    bool
	}{
		{name: "per append: flushed, then raised", flushMessages: 1, before: -1, wantDirSynced: true, wantRP: start},
		{name: "per append: never lowered", flushMessages: 1, before: 20, wantDirSynced: true, wantRP: 20},
		{name: "default policy: nothing", flushMessages: 0, before: -1, wantRP: -1},
		{name: "every n records: nothing", flushMessages: 5, before: -1, wantRP: -1},
		{name: "failed fsync fails the partition", flushMessages: 1, before: -1, fail: isLogSync, wantRP: -1, wantErr: true, wantFailed: true},
		{name: "failed checkpoint write", flushMessages: 1, before: -1, fail: isRecoveryPoint, wantDirSynced: true, wantRP: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			require.NoError(t, mkdirDurable(mem, partDir))
			in := vfs.NewInjector(mem)
			cfg := Config{FS: in, FlushMessages: tc.flushMessages, SegmentBytes: 1 << 16, SegmentIndexBytes: 4 << 10}
			cfg.ensureDefaults()
			core := &fakeCore{}
			var ckptMu sync.Mutex
			// A Dir's store, holding lazy writes back (as while the Dir
			// opens or closes): the raise must not be one of them.
			root := filepath.Dir(partDir)
			tp := TopicPartition{Topic: "t", Partition: 0}
			rc := newRootCheckpoints(in, root, nil)
			d := &durability{}
			d.init(core, core, durabilityConfig{dir: partDir, cfg: &cfg, segCfg: cfg.segmentConfig(),
				stats: &counters{}, ckpt: dirEntries{root: rc, tp: tp}, ckptMu: &ckptMu,
				closed: &core.closed, truncations: &core.truncations})
			if tc.before >= 0 {
				require.NoError(t, d.setRecoveryPointLocked(tc.before))
			}
			rc.hold()
			seg, err := segment.Create(in, partDir, 0, cfg.segmentConfig())
			require.NoError(t, err)
			snap := newSegments([]*segment.Segment{seg})
			defer func() {
				snap.retire()
				require.NoError(t, snap.unref())
				require.NoError(t, seg.Close())
			}()
			if tc.fail != nil {
				in.FailOnce(tc.fail)
			}

			dirSynced, err := d.syncBeforeEpochLocked(snap, start, true)
			if tc.wantErr {
				require.ErrorIs(t, err, vfs.ErrInjected)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantDirSynced, dirSynced)
			if tc.wantFailed {
				require.Equal(t, core.failed, err, "the partition failed with it")
			} else {
				require.NoError(t, core.failed)
			}
			require.Equal(t, tc.wantRP, d.currentRecoveryPoint())
			crashed := mem.CrashClone(vfs.CrashOptions{})
			entries, err := readRootCheckpoint(crashed, root, recoveryPointCheckpointFile)
			require.NoError(t, err)
			rp, ok := entries[tp]
			if tc.wantRP < 0 {
				require.False(t, ok, "no recovery point on disk")
			} else {
				require.True(t, ok)
				require.Equal(t, tc.wantRP, rp, "the recovery point survives a crash")
			}
			_, err = crashed.Stat(seg.LogPath())
			require.Equal(t, tc.wantDirSynced, err == nil, "the segment's entry is durable once the directory was synced")
		})
	}
}
