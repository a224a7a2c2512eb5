package segment

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/vfs"
)

// TestWalkFaultIsNotDamage: a .log that loses its bytes while the damage
// walk reads it (a media error, or the file cut behind the walk's back) is
// an error wrapping ErrFault naming the file, for every caller of the walk
// and whether it reads through the mapping or with reads: Check (full and
// headers only), Segment.Check and Recover. It is never a damage verdict:
// before, a read that found the file ending early was a torn tail, so
// Check answered "torn tail at the cut" with no error and Recover cut the
// log there, while the same loss on the mapping (SIGBUS) was ErrFault.
//
// The loss is provoked deterministically: reads go through a vfs.Injector
// whose hook, once armed, cuts the file at the position of the walk's
// first read past its start, before that read runs; a mapped walk cuts the
// file from its callback after the first entry, so that the next entry's
// pages lie past the end of the file.
func TestWalkFaultIsNotDamage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	tests := []struct {
		name   string
		mapped bool
		walk   func(s *Segment, fsys vfs.FS, path string, cutNow func() error) (RecoverResult, error)
	}{
		{"Check", false, func(_ *Segment, fsys vfs.FS, path string, _ func() error) (RecoverResult, error) {
			return Check(fsys, path, 0, CheckOptions{}, nil)
		}},
		{"Check headers only", false, func(_ *Segment, fsys vfs.FS, path string, _ func() error) (RecoverResult, error) {
			return Check(fsys, path, 0, CheckOptions{HeadersOnly: true}, nil)
		}},
		{"Check keep going", false, func(_ *Segment, fsys vfs.FS, path string, _ func() error) (RecoverResult, error) {
			return Check(fsys, path, 0, CheckOptions{KeepGoing: true}, nil)
		}},
		{"Segment.Check reads", false, func(s *Segment, _ vfs.FS, _ string, _ func() error) (RecoverResult, error) {
			return s.Check(CheckOptions{}, nil)
		}},
		{"Segment.Check headers only reads", false, func(s *Segment, _ vfs.FS, _ string, _ func() error) (RecoverResult, error) {
			return s.Check(CheckOptions{HeadersOnly: true}, nil)
		}},
		{"Recover reads", false, func(s *Segment, _ vfs.FS, _ string, _ func() error) (RecoverResult, error) {
			return s.Recover(batch.MaxBatchSize)
		}},
		{"Segment.Check mapped", true, func(s *Segment, _ vfs.FS, _ string, cutNow func() error) (RecoverResult, error) {
			return s.Check(CheckOptions{}, func(h BatchInfo, _ batch.Batch, _ error) error {
				if h.Pos == 0 {
					return cutNow()
				}
				return nil
			})
		}},
		{"Segment.Check headers only mapped", true, func(s *Segment, _ vfs.FS, _ string, cutNow func() error) (RecoverResult, error) {
			return s.Check(CheckOptions{HeadersOnly: true}, func(h BatchInfo, _ batch.Batch, _ error) error {
				if h.Pos == 0 {
					return cutNow()
				}
				return nil
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName(0, LogSuffix))
			in := vfs.NewInjector(vfs.Default)
			var armed atomic.Bool
			var cutAt atomic.Int64
			cutAt.Store(-1)
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpReadAt && op.Path == path && op.Off > 0 && armed.CompareAndSwap(true, false) {
					cutAt.Store(op.Off)
					return os.Truncate(path, op.Off)
				}
				return nil
			})
			s, err := Create(in, dir, 0, Config{MaxSegmentBytes: 8 << 20, DisableMmap: !tc.mapped})
			require.NoError(t, err)
			t.Cleanup(func() { mustClose(t, s) })
			require.Equal(t, tc.mapped, s.Mapped())
			// 40 batches of about 40 KiB: more than one read window.
			for i := range int64(40) {
				mustAppend(t, s, simpleBatch(t, 4*i, 4, 1000+i, 10_000))
			}
			require.Greater(t, s.Size(), int64(checkWindow))

			cutNow := func() error {
				cutAt.Store(0)
				return os.Truncate(path, 0)
			}
			armed.Store(!tc.mapped)
			res, err := tc.walk(s, in, path, cutNow)
			require.GreaterOrEqual(t, cutAt.Load(), int64(0), "the file was not cut during the walk")
			require.ErrorIs(t, err, mmap.ErrFault, "a loss during the walk is a fault, not damage (result %+v)", res)
			require.False(t, base.IsCorruption(err), "%v", err)
			var fe *mmap.FaultError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, path, fe.File)
		})
	}
}
