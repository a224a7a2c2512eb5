package log_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestLockHelperProcess is not a test: TestOpenLocksDirectory runs the
// test binary again with it selected and $PARTLOG_LOCK_CHILD_DIR set. It
// opens the partition there and prints "locked" when Open reports
// ErrLocked, "opened" when it succeeds (it then appends and closes).
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("helper process for TestOpenLocksDirectory")
	}
	p, err := plog.Open(dir, plog.Config{})
	switch {
	case errors.Is(err, plog.ErrLocked):
		fmt.Println("locked")
	case err != nil:
		fmt.Println("error", err)
	default:
		if _, err := p.AppendBatch(logtest.MakeBatch(1, 10, 0, 1)); err != nil {
			fmt.Println("error", err)
		}
		if err := p.Close(); err != nil {
			fmt.Println("error", err)
		}
		fmt.Println("opened")
	}
	os.Exit(0)
}

// TestOpenLocksDirectory (issue 12, item 5): a second Open of an open
// partition directory, from this process (OS and MemFS) or another one,
// fails with ErrLocked naming the directory instead of appending over the
// first owner; Close releases the lock; a refused Open releases it too.
func TestOpenLocksDirectory(t *testing.T) {
	for _, fsName := range []string{"os", "mem"} {
		t.Run(fsName, func(t *testing.T) {
			cfg := plog.Config{FS: vfs.Default}
			dir := filepath.Join(t.TempDir(), "orders-0")
			if fsName == "mem" {
				cfg.FS = vfs.NewMem()
				dir = "/data/orders-0"
			}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 0, 1))
			require.NoError(t, err)

			q, err := plog.Open(dir, cfg)
			require.ErrorIs(t, err, plog.ErrLocked)
			require.Nil(t, q)
			require.Contains(t, err.Error(), dir)
			require.Equal(t, int64(2), p.LogEndOffset(), "the failed Open changed nothing")

			require.NoError(t, p.Close())
			q, err = plog.Open(dir, cfg)
			require.NoError(t, err, "Close released the lock")
			require.Equal(t, int64(2), q.LogEndOffset())
			require.NoError(t, q.Close())
			_, err = cfg.FS.Stat(filepath.Join(dir, plog.LockFile))
			require.NoError(t, err, "the lock file stays")
		})
	}
	t.Run("another process", func(t *testing.T) {
		if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
			t.Skip("without flock(2) the lock only excludes owners within one process")
		}
		dir := filepath.Join(t.TempDir(), "orders-0")
		child := func() string { return runLockChild(t, dir) }
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 0, 1))
		require.NoError(t, err)
		require.Equal(t, "locked", child())
		require.Equal(t, int64(3), p.LogEndOffset())
		require.NoError(t, p.Close())
		require.Equal(t, "opened", child())
		p, err = plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		require.Equal(t, int64(4), p.LogEndOffset(), "the child appended after the parent closed")
		require.NoError(t, p.Verify())
		require.NoError(t, p.Close())
	})
}

// damageFixtureConfig makes a 1,000-record log span 8 segments.
func damageFixtureConfig() plog.Config {
	return plog.Config{SegmentBytes: 15872, IndexIntervalBytes: 1024}
}

// damageFixture writes a cleanly closed, synced 1,000-record log (125
// batches of 8 records) of 8 segments; with deleteBefore > 0 it first
// moves the log start there (DeleteRecordsBefore).
func damageFixture(t *testing.T, deleteBefore int64) (string, []plog.SegmentInfo) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders-0")
	p, err := plog.Open(dir, damageFixtureConfig())
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	for i := 0; i < 125; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(8, 100, now, byte(i)))
		require.NoError(t, err)
	}
	if deleteBefore > 0 {
		require.NoError(t, p.DeleteRecordsBefore(deleteBefore))
	}
	require.NoError(t, p.Sync())
	segs := p.SegmentInfos()
	require.Len(t, segs, 8)
	require.Equal(t, int64(1000), p.LogEndOffset())
	require.NoError(t, p.Close())
	return dir, segs
}

// fileState is a file's bytes and modification time.
type fileState struct {
	data  []byte
	mtime time.Time
}

// snapshotDir returns every file of dir with its bytes and mtime.
func snapshotDir(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]fileState{}
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = fileState{b, st.ModTime()}
	}
	return out
}

// segFile is the path of a segment file of dir.
func segFile(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segment.FileName(base, suffix))
}

// readAll reads the whole log from its start and returns the number of
// records and the offsets of the batches.
func readAll(t *testing.T, p *plog.Partition) (records int, batches [][2]int64) {
	t.Helper()
	for o := p.LogStartOffset(); o < p.HighWatermark(); {
		r, err := p.ReadFrom(o, 1<<20)
		require.NoError(t, err)
		for _, b := range batchesIn(t, r.Bytes()) {
			batches = append(batches, b)
			records += int(b[1] - b[0] + 1)
			o = b[1] + 1
		}
		require.NoError(t, r.Close())
	}
	return records, batches
}

// TestOpenDamagedDirectory (issue 12, item 11): each damage to a cleanly
// closed, synced 1,000-record log that used to lose data silently. Every
// one is refused by StrictRecovery with an error wrapping
// ErrRecoveryRefused and base.ErrCorrupt, and the refused Open (then a
// Close of nothing) changes no file: bytes and mtimes are compared. What
// DefaultRecovery does is each case's check: refuse what it cannot
// explain, or go on without losing a record, logging the file at WARN or
// ERROR.
func TestOpenDamagedDirectory(t *testing.T) {
	type tc struct {
		name         string
		deleteBefore int64
		damage       func(t *testing.T, dir string, segs []plog.SegmentInfo)
		// defaultRefuses: DefaultRecovery refuses too (and changes
		// nothing); otherwise check runs on the partition it opened.
		defaultRefuses bool
		check          func(t *testing.T, dir string, p *plog.Partition, segs []plog.SegmentInfo)
		// logs must appear in what DefaultRecovery logged.
		logs []string
	}
	allThere := func(t *testing.T, p *plog.Partition) {
		t.Helper()
		require.Equal(t, int64(1000), p.LogEndOffset())
		n, batches := readAll(t, p)
		require.Equal(t, 1000, n)
		require.Len(t, batches, 125)
		require.NoError(t, p.Verify())
	}
	cases := []tc{
		{
			name: "stray empty swap named after a live segment",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				require.NoError(t, os.WriteFile(segFile(dir, segs[3].BaseOffset, ".log.swap"), nil, 0o644))
			},
			check: func(t *testing.T, dir string, p *plog.Partition, segs []plog.SegmentInfo) {
				allThere(t, p)
				_, err := os.Stat(segFile(dir, segs[3].BaseOffset, ".log.swap"))
				require.ErrorIs(t, err, os.ErrNotExist, "the empty swap is removed")
				require.Len(t, p.SegmentInfos(), 8)
			},
			logs: []string{"level=WARN", "empty .swap", ".log.swap"},
		},
		{
			name: "swap holding another segment's batches",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				b, err := os.ReadFile(segFile(dir, segs[2].BaseOffset, ".log"))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(segFile(dir, segs[3].BaseOffset, ".log.swap"), b, 0o644))
			},
			defaultRefuses: true,
		},
		{
			name: "swap ending below the segment it would replace",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				b, err := os.ReadFile(segFile(dir, segs[3].BaseOffset, ".log"))
				require.NoError(t, err)
				pos := batchPositions(t, segFile(dir, segs[3].BaseOffset, ".log"))
				require.NoError(t, os.WriteFile(segFile(dir, segs[3].BaseOffset, ".log.swap"), b[:pos[2]], 0o644))
			},
			defaultRefuses: true,
		},
		{
			name:         "log start checkpoint past the log end",
			deleteBefore: 5,
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				rewriteCheckpoint(t, filepath.Join(dir, plog.LogStartOffsetCheckpointFile), " 5\n", " 5000\n")
			},
			check: func(t *testing.T, dir string, p *plog.Partition, segs []plog.SegmentInfo) {
				distrustedLogStart(t, p)
			},
			logs: []string{"ERROR", plog.LogStartOffsetCheckpointFile, "past the log end"},
		},
		{
			name:         "log start checkpoint with one wrong digit (5 to 905)",
			deleteBefore: 5,
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				rewriteCheckpoint(t, filepath.Join(dir, plog.LogStartOffsetCheckpointFile), " 5\n", " 905\n")
			},
			check: func(t *testing.T, dir string, p *plog.Partition, segs []plog.SegmentInfo) {
				distrustedLogStart(t, p)
			},
			logs: []string{"ERROR", plog.LogStartOffsetCheckpointFile},
		},
		{
			name: "active segment removed",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				require.NoError(t, os.Remove(segFile(dir, segs[7].BaseOffset, ".log")))
			},
			defaultRefuses: true,
		},
		{
			name: "middle segment removed",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				for _, s := range []string{".log", ".index", ".timeindex"} {
					require.NoError(t, os.Remove(segFile(dir, segs[4].BaseOffset, s)))
				}
			},
			defaultRefuses: true,
		},
		{
			name: "first segment removed",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				for _, s := range []string{".log", ".index", ".timeindex"} {
					require.NoError(t, os.Remove(segFile(dir, segs[0].BaseOffset, s)))
				}
			},
			defaultRefuses: true,
		},
		{
			name:         "first segment removed after DeleteRecordsBefore",
			deleteBefore: 5,
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				require.NoError(t, os.Remove(segFile(dir, segs[0].BaseOffset, ".log")))
			},
			defaultRefuses: true,
		},
		{
			name: "empty stray segment far past the end",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				require.NoError(t, os.WriteFile(segFile(dir, 90000, ".log"), nil, 0o644))
			},
			defaultRefuses: true,
		},
		{
			name: "sealed segment truncated inside a batch",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				path := segFile(dir, segs[3].BaseOffset, ".log")
				pos := batchPositions(t, path)
				require.NoError(t, os.Truncate(path, pos[len(pos)/2]+30))
			},
			defaultRefuses: true,
		},
		{
			name: "sealed segment truncated at a batch boundary",
			damage: func(t *testing.T, dir string, segs []plog.SegmentInfo) {
				path := segFile(dir, segs[3].BaseOffset, ".log")
				pos := batchPositions(t, path)
				require.NoError(t, os.Truncate(path, pos[len(pos)/2]))
			},
			defaultRefuses: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, segs := damageFixture(t, c.deleteBefore)
			c.damage(t, dir, segs)
			before := snapshotDir(t, dir)

			cfg := damageFixtureConfig()
			cfg.Recovery = plog.StrictRecovery{}
			p, err := plog.Open(dir, cfg)
			if err == nil {
				_ = p.Close()
			}
			require.ErrorIs(t, err, plog.ErrRecoveryRefused)
			require.ErrorIs(t, err, base.ErrCorrupt)
			require.Equal(t, before, snapshotDir(t, dir), "strict recovery changed a file")

			var logs bytes.Buffer
			cfg = damageFixtureConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			p, err = plog.Open(dir, cfg)
			if c.defaultRefuses {
				if err == nil {
					_ = p.Close()
				}
				require.ErrorIs(t, err, plog.ErrRecoveryRefused)
				require.ErrorIs(t, err, base.ErrCorrupt)
				require.Contains(t, logs.String(), "level=ERROR")
				require.Equal(t, before, snapshotDir(t, dir), "a refused Open changed a file")
				t.Logf("refused: %v", err)
				return
			}
			require.NoError(t, err)
			c.check(t, dir, p, segs)
			require.NoError(t, p.Close())
			for _, s := range c.logs {
				require.Contains(t, logs.String(), s)
			}
		})
	}
}

// rewriteCheckpoint replaces old by new in a checkpoint file.
func rewriteCheckpoint(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

// distrustedLogStart checks a partition opened over a log start checkpoint
// that contradicts the segments: every record stays readable and retention
// deletes nothing on its account.
func distrustedLogStart(t *testing.T, p *plog.Partition) {
	t.Helper()
	require.Equal(t, int64(0), p.LogStartOffset())
	require.Equal(t, int64(1000), p.LogEndOffset())
	n, _ := readAll(t, p)
	require.Equal(t, 1000, n)
	r, err := compaction.NewRetention(compaction.Config{})
	require.NoError(t, err)
	res, err := r.Apply(context.Background(), p)
	require.NoError(t, err)
	require.Zero(t, res.SegmentsDeleted, "retention acted on the distrusted checkpoint")
	require.Len(t, p.SegmentInfos(), 8)
}

// TestOpenCompactionGaps: offsets missing between two segments are what a
// removed segment leaves, and also what compaction leaves (Kafka's
// cleaner drops the last batches of a segment). Open accepts the gap when
// compaction explains it — a segment beside it has offset gaps of its own,
// or the cleaner checkpoint covers it — after a crash and after a clean
// shutdown, under both policies, and refuses it otherwise.
func TestOpenCompactionGaps(t *testing.T) {
	mk := func(base int64, n int) []byte {
		b := batch.Batch(logtest.MakeBatch(n, 20, 1000, byte(base)))
		b.SetBaseOffset(base)
		return b
	}
	cases := []struct {
		name     string
		seg0     [][]byte // segment 0's batches; segment 10 holds [10, 11]
		cleaner  int64    // cleaner checkpoint offset, -1 for none
		accepted bool
	}{
		{"gap inside a segment", [][]byte{mk(0, 1), mk(3, 1)}, -1, true},
		{"cleaner checkpoint covers the gap", [][]byte{mk(0, 2)}, 12, true},
		{"cleaner checkpoint below the gap", [][]byte{mk(0, 2)}, 1, false},
		{"no compaction", [][]byte{mk(0, 2)}, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "orders-0")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(segFile(dir, 0, ".log"), bytes.Join(c.seg0, nil), 0o644))
			require.NoError(t, os.WriteFile(segFile(dir, 10, ".log"), mk(10, 2), 0o644))
			if c.cleaner >= 0 {
				require.NoError(t, checkpoint.WriteOffset(vfs.Default, filepath.Join(dir, plog.CleanerCheckpointFile), "orders", 0, c.cleaner))
			}
			for round, pol := range []plog.RecoveryPolicy{plog.StrictRecovery{}, plog.DefaultRecovery{}, plog.StrictRecovery{}} {
				// Round 0 recovers (no clean-shutdown marker); the
				// others reopen after a clean Close.
				before := snapshotDir(t, dir)
				p, err := plog.Open(dir, plog.Config{Recovery: pol})
				if !c.accepted {
					require.ErrorIs(t, err, plog.ErrRecoveryRefused)
					require.Contains(t, err.Error(), "offsets [2, 10) are missing")
					// The first Open of a directory creates the empty
					// lock file; nothing else changes.
					after := snapshotDir(t, dir)
					require.Empty(t, after[plog.LockFile].data)
					delete(after, plog.LockFile)
					require.Equal(t, before, after)
					return
				}
				require.NoError(t, err, "round %d", round)
				require.Equal(t, int64(12), p.LogEndOffset())
				n, batches := readAll(t, p)
				require.Equal(t, len(c.seg0)+1, len(batches))
				require.Equal(t, int64(10), batches[len(batches)-1][0])
				require.True(t, n >= 3)
				require.NoError(t, p.Close())
			}
		})
	}
}

// lockSpyFS is a filesystem whose directory locks report their release.
type lockSpyFS struct {
	vfs.FS
	unlocked *atomic.Bool
}

func (f lockSpyFS) Lock(name string) (io.Closer, error) {
	c, err := f.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	return spyCloser{c, f.unlocked}, nil
}

type spyCloser struct {
	io.Closer
	unlocked *atomic.Bool
}

func (c spyCloser) Close() error {
	c.unlocked.Store(true)
	return c.Closer.Close()
}

// TestCloseKeepsLockUntilBackgroundWorkEnds: Close releases the directory
// lock only after the partition's background goroutines ended. One that
// makes the next segment's spare writes and removes files under the spare's
// fixed names (*.spare.deleted); with the lock released first, another
// owner could open the directory meanwhile (law 12: one owner at a time)
// and have its own spare, or the segment a roll adopted from it (whose
// files keep those names until the renames), created over or removed by
// the closing partition's goroutine. Here the spare's creation is held
// until Close wrote the clean-shutdown marker (its last step before the
// unlock); the lock must still be held then.
func TestCloseKeepsLockUntilBackgroundWorkEnds(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	var unlocked atomic.Bool
	dir := "/data/closelock-0"
	p, err := plog.Open(dir, plog.Config{FS: lockSpyFS{in, &unlocked}, SegmentIndexBytes: 1024})
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(2, 40, 1, 1))
	require.NoError(t, err)

	var held, markerCreated atomic.Bool
	entered, markerDone := make(chan struct{}), make(chan struct{})
	var lockedWhileSpareMade atomic.Bool
	in.SetHook(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpCreate && strings.HasSuffix(op.Path, segment.SpareSuffix) && held.CompareAndSwap(false, true):
			// The roll's spare goroutine: wait for Close's marker, then
			// give Close time to release the lock if it does so now.
			close(entered)
			<-markerDone
			for range 10000 {
				if unlocked.Load() {
					break
				}
				runtime.Gosched()
			}
			lockedWhileSpareMade.Store(!unlocked.Load())
		case op.Kind == vfs.OpCreate && op.Path == filepath.Join(dir, checkpoint.CleanShutdownFile):
			markerCreated.Store(true)
		case op.Kind == vfs.OpClose && op.Path == dir && markerCreated.CompareAndSwap(true, false):
			// The directory sync after the marker: Close's last file
			// operation before it releases the lock.
			close(markerDone)
		}
		return nil
	})
	require.NoError(t, p.Roll()) // starts the spare's goroutine
	<-entered
	require.NoError(t, p.Close())
	require.True(t, lockedWhileSpareMade.Load(), "Close released the directory lock while its spare goroutine still made files")
	require.True(t, unlocked.Load())

	// The directory is whole: a new owner opens it, without spare files.
	q, err := plog.Open(dir, plog.Config{FS: mem, SegmentIndexBytes: 1024})
	require.NoError(t, err)
	require.Equal(t, int64(2), q.LogEndOffset())
	require.NoError(t, q.Close())
	names, err := mem.List(dir)
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, n, segment.SpareSuffix)
	}
}
