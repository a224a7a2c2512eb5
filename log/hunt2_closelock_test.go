package log_test

import (
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

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
