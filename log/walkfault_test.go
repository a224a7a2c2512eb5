package log_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// walkFaultPartition writes a partition of one segment of about 1.6 MiB
// (more than one read window of the damage walk) on the OS filesystem
// through an Injector, closes it, and returns the directory, the .log's
// path and the Injector.
func walkFaultPartition(t *testing.T, disableMmap bool) (dir, path string, in *vfs.Injector) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	dir = filepath.Join(t.TempDir(), "orders-0")
	in = vfs.NewInjector(vfs.Default)
	p, err := plog.Open(dir, plog.Config{FS: in, DisableMmap: disableMmap, SegmentBytes: 8 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	for i := range 40 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 10_000, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.Len(t, p.SegmentInfos(), 1)
	require.Greater(t, p.SegmentInfos()[0].Size, int64(1<<20))
	require.NoError(t, p.Close())
	return dir, filepath.Join(dir, segment.FileName(0, segment.LogSuffix)), in
}

// TestWalkFaultIsErrFault: the .log losing its bytes while the damage walk
// reads it (a media error, or the file cut behind the partition's back) is
// reported as ErrFault by every caller of the walk in package log, never as
// damage: recovery's pre-scan (segment.Check, under a policy other than
// DefaultRecovery) and DefaultRecovery's one pass (segment.Recover) make
// Open fail with ErrFault and cut nothing, and Verify (Segment.Check over
// the segment's bytes) returns ErrFault and takes the partition offline,
// whether the segment is mapped (SIGBUS) or read with ReadAt (a read that
// finds the file ending early). Before, a read that found the file ending
// early was a torn tail: recovery cut the log at the loss (StrictRecovery
// with AllowTornTail accepted it), and Verify on an unmapped segment
// returned a plain read error.
func TestWalkFaultIsErrFault(t *testing.T) {
	t.Run("recovery", func(t *testing.T) {
		var events []plog.RecoveryEvent
		for _, tc := range []struct {
			name   string
			policy plog.RecoveryPolicy
		}{
			{"DefaultRecovery one pass", plog.DefaultRecovery{}},
			{"StrictRecovery AllowTornTail pre-scan", plog.StrictRecovery{AllowTornTail: true}},
			{"policy accepting every cut pre-scan", recordingPolicy{&events, plog.DefaultRecovery{}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				events = nil
				dir, path, in := walkFaultPartition(t, true)
				require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
				require.NoError(t, os.Remove(filepath.Join(dir, plog.RecoveryPointCheckpointFile)))
				// The walk reads the .log in windows larger than a
				// header: the first such read past the start finds the
				// file cut there.
				var cutAt atomic.Int64
				cutAt.Store(-1)
				in.SetHook(func(op vfs.Op) error {
					if op.Kind == vfs.OpReadAt && op.Path == path && op.Off > 0 && op.Len > batch.HeaderSize &&
						cutAt.CompareAndSwap(-1, op.Off) {
						return os.Truncate(path, op.Off)
					}
					return nil
				})
				_, err := plog.Open(dir, plog.Config{FS: in, DisableMmap: true, SegmentBytes: 8 << 20, Recovery: tc.policy,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.Positive(t, cutAt.Load(), "the walk did not read past its first window")
				require.ErrorIs(t, err, index.ErrFault)
				require.False(t, base.IsCorruption(err), "%v", err)
				var fe *segment.FaultError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, path, fe.File)
				require.Empty(t, events, "the policy was asked about a fault")
				st, err := os.Stat(path)
				require.NoError(t, err)
				require.Equal(t, cutAt.Load(), st.Size(), "recovery changed the .log")
			})
		}
	})
	t.Run("Verify", func(t *testing.T) {
		for _, mapped := range []bool{true, false} {
			name := "mapped"
			if !mapped {
				name = "reads"
			}
			t.Run(name, func(t *testing.T) {
				dir, path, in := walkFaultPartition(t, !mapped)
				p, err := plog.Open(dir, plog.Config{FS: in, DisableMmap: !mapped, SegmentBytes: 8 << 20,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				require.NoError(t, err)
				defer p.Close()
				require.NoError(t, p.Verify())
				require.NoError(t, os.Truncate(path, 0))

				err = p.Verify()
				require.ErrorIs(t, err, index.ErrFault)
				require.ErrorIs(t, err, plog.ErrFailed, "the partition is offline")
				require.False(t, base.IsCorruption(err), "%v", err)
				var fe *segment.FaultError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, path, fe.File)
				_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1_700_000_000_000, 1))
				require.ErrorIs(t, err, index.ErrFault)
			})
		}
	})
}
