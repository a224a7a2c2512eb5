package log_test

import (
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// rootLockHookFS calls hook once, from the first rename into root (the
// root-entry takeover's rewrite of a root file, made with the Dir's lock
// held), and then reports the result of every Lock of name.
type rootLockHookFS struct {
	vfs.FS
	root, name string
	armed      atomic.Bool
	hooked     atomic.Bool
	hook       func()
	lockedBy   chan error
}

func (f *rootLockHookFS) Rename(oldname, newname string) error {
	if filepath.Dir(newname) == f.root && !f.hooked.Swap(true) {
		f.armed.Store(true)
		f.hook()
	}
	return f.FS.Rename(oldname, newname)
}

func (f *rootLockHookFS) Lock(name string) (io.Closer, error) {
	c, err := f.FS.Lock(name)
	if name == f.name && f.armed.Load() {
		f.lockedBy <- err
	}
	return c, err
}

// TestOpenAloneTwoPartitionsOfClosedDir: two partitions of a closed Dir
// opened alone at the same time both open, although each takes the Dir's
// lock a moment to take its root entries over: the other one's look at
// the Dir's lock then waits for it rather than taking it for a Dir's.
func TestOpenAloneTwoPartitionsOfClosedDir(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 400, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	for part := range int32(2) {
		p, err := d.CreatePartition("t", part)
		require.NoError(t, err)
		for range 4 {
			_, err = p.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
			require.NoError(t, err)
		}
		require.NoError(t, p.DeleteRecordsBefore(int64(2+part)))
	}
	require.NoError(t, d.Close())

	fs := &rootLockHookFS{FS: mem, root: "/logs", name: "/logs/.lock", lockedBy: make(chan error, 8)}
	var wg sync.WaitGroup
	var other *plog.Partition
	var otherErr error
	fs.hook = func() {
		// t-0 holds the Dir's lock: t-1's Open looks at it now.
		wg.Go(func() {
			c := cfg.Config
			c.FS = fs
			other, otherErr = plog.Open("/logs/t-1", c)
		})
		<-fs.lockedBy
	}
	c := cfg.Config
	c.FS = fs
	p, err := plog.Open("/logs/t-0", c)
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, otherErr, "the other partition opened alone at the same time")
	require.Equal(t, int64(2), p.LogStartOffset())
	require.Equal(t, int64(3), other.LogStartOffset())
	require.NoError(t, p.Close())
	require.NoError(t, other.Close())
}
