package log_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestDeletionCrashThenCleanReopenKeepsLogStart: a crash inside
// DeleteRecordsBefore or retention, after the log start checkpoint moved
// and before the first segment was deleted, leaves segments wholly below
// the log start. The Open after the crash must finish the deletion: after
// it and a clean Close, the next Open still has the new log start and
// refuses reads below it. Before, the segments outlived the clean
// shutdown, the clean Open took the checkpoint (past the second segment's
// base) for damage and ignored it, and the deleted records [0, 7) were
// served again.
func TestDeletionCrashThenCleanReopenKeepsLogStart(t *testing.T) {
	for _, how := range []string{"DeleteRecordsBefore", "retention"} {
		t.Run(how, func(t *testing.T) {
			const dir = "/data/deletion-crash-0"
			mem := vfs.NewMem()
			in, c := crashBeforeFirstDeletion(mem)
			cfg := plog.Config{FS: in}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			appendN(t, p, 3) // offsets 0-2
			require.NoError(t, p.Roll())
			appendN(t, p, 4) // offsets 3-6
			require.NoError(t, p.Roll())
			appendN(t, p, 2) // offsets 7-8
			require.NoError(t, p.Sync())
			c.setArmed(true)
			if how == "retention" {
				segs, err := p.Segments()
				require.NoError(t, err)
				err = p.DeleteSegments(segs[:2])
				for _, s := range segs {
					require.NoError(t, s.Unref())
				}
				require.NoError(t, err)
			} else {
				require.NoError(t, p.DeleteRecordsBefore(7))
			}
			require.NoError(t, p.Close())
			crashed := c.clone()
			require.NotNil(t, crashed)

			cfg.FS = crashed
			for _, open := range []string{"after the crash", "after a clean shutdown"} {
				q, err := plog.Open(dir, cfg)
				require.NoError(t, err)
				require.Equal(t, int64(7), q.LogStartOffset(), open)
				require.Equal(t, int64(9), q.LogEndOffset(), open)
				_, err = q.ReadFrom(0, 1<<20)
				require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, open)
				require.NoError(t, q.Close())
			}
		})
	}
}

// TestOpenRecreatingFirstSegmentSyncsIt replays a TestStateMachine
// history: a crash inside a TruncateTo below the log start (a restart)
// left no segment but the log start checkpoint; the Open after it creates
// the first segment at the log start, and a crash inside the restart
// above it that followed kept the new segment's file but not the first
// one's, and Open refused the directory (offsets missing below the first
// segment). The Open that recreates the first segment must make it
// durable: a crash right after keeps it, and the crash inside the restart
// leaves a log that opens (law 4: the old log or the restarted one).
func TestOpenRecreatingFirstSegmentSyncsIt(t *testing.T) {
	const dir = "/d/p-0"
	var c midOpCrash
	mem := vfs.NewMem()
	cfg := plog.Config{FS: c.wrap(mem), SegmentBytes: 600, SegmentIndexBytes: 24, IndexIntervalBytes: 1}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	require.NoError(t, p.TruncateFullyAndStartAt(2147483647))
	c.arm(mem, 2, vfs.CrashOptions{UnsyncedDataPercent: 4, Seed: 5})
	require.NoError(t, p.TruncateTo(2147483644))
	crashed := c.disarm()
	require.NotNil(t, crashed)
	require.NoError(t, p.Close())

	mem = crashed
	cfg.FS = c.wrap(mem)
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	require.Equal(t, int64(2147483647), p.LogEndOffset())
	names, err := mem.CrashClone(vfs.CrashOptions{}).List(dir)
	require.NoError(t, err)
	require.Contains(t, names, "00000000002147483647.log", "the first segment the Open created is durable")

	c.arm(mem, 5, vfs.CrashOptions{UnsyncedDataPercent: 9, Seed: 2})
	require.NoError(t, p.TruncateFullyAndStartAt(2147483648))
	crashed = c.disarm()
	require.NotNil(t, crashed)
	cfg.FS = crashed
	q, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = q.Close() }()
	require.Contains(t, []int64{2147483647, 2147483648}, q.LogEndOffset())
}

// deletionCrash takes a crash clone of a MemFS just before the first
// segment file is renamed to .deleted while it is armed
// (crashBeforeFirstDeletion).
type deletionCrash struct {
	mu      sync.Mutex
	armed   bool
	crashed *vfs.MemFS
}

// crashBeforeFirstDeletion returns an injector over mem whose hook takes
// the clone, and the crash it fills.
func crashBeforeFirstDeletion(mem *vfs.MemFS) (*vfs.Injector, *deletionCrash) {
	c := &deletionCrash{}
	in := vfs.NewInjector(mem)
	in.SetHook(func(op vfs.Op) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.armed && c.crashed == nil && op.Kind == vfs.OpRename && strings.HasSuffix(op.NewPath, ".deleted") {
			c.crashed = mem.CrashClone(vfs.CrashOptions{})
		}
		return nil
	})
	return in, c
}

// setArmed turns the crash on or off.
func (c *deletionCrash) setArmed(on bool) {
	c.mu.Lock()
	c.armed = on
	c.mu.Unlock()
}

// clone returns the crash clone, nil when the crash point was not met.
func (c *deletionCrash) clone() *vfs.MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}
