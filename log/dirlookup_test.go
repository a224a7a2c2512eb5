package log_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// openMemDir opens a Dir at /data on an in-memory filesystem behind an
// error injector, with partition orders-0 holding three records.
func openMemDir(t *testing.T) (*plog.Dir, *vfs.Injector) {
	t.Helper()
	in := vfs.NewInjector(vfs.NewMem())
	d, err := plog.OpenDir("/data", plog.DirConfig{Config: plog.Config{FS: in}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	p, err := d.CreatePartition("orders", 0)
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 1000, 1))
	require.NoError(t, err)
	return d, in
}

// failSync makes p fail: its next fsync of a .log file fails.
func failSync(t *testing.T, in *vfs.Injector, p *plog.Partition) {
	t.Helper()
	in.FailOnce(func(op vfs.Op) bool {
		return op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix)
	})
	require.ErrorIs(t, p.Sync(), plog.ErrFailed)
}

// TestDirLookup: Lookup tells an unknown partition (ErrUnknownPartition)
// from a closed one or a closed Dir (ErrClosed), where Partition says nil
// or returns the closed partition; a failed partition is returned, its
// failure shows on use.
func TestDirLookup(t *testing.T) {
	cases := []struct {
		name    string
		topic   string
		prepare func(t *testing.T, d *plog.Dir, in *vfs.Injector)
		wantErr error
		notErr  error // an error the result must not wrap
		// partition is what Dir.Partition returns: "open", "closed" or
		// "nil".
		partition string
	}{
		{name: "open", topic: "orders", partition: "open"},
		{name: "unknown topic", topic: "payments", wantErr: plog.ErrUnknownPartition, notErr: plog.ErrClosed, partition: "nil"},
		{name: "partition closed alone", topic: "orders",
			prepare: func(t *testing.T, d *plog.Dir, _ *vfs.Injector) {
				require.NoError(t, d.Partition("orders", 0).Close())
			},
			wantErr: plog.ErrClosed, notErr: plog.ErrUnknownPartition, partition: "closed"},
		{name: "dir closed", topic: "orders",
			prepare: func(t *testing.T, d *plog.Dir, _ *vfs.Injector) { require.NoError(t, d.Close()) },
			wantErr: plog.ErrClosed, notErr: plog.ErrUnknownPartition, partition: "nil"},
		{name: "unknown in a closed dir", topic: "payments",
			prepare: func(t *testing.T, d *plog.Dir, _ *vfs.Injector) { require.NoError(t, d.Close()) },
			wantErr: plog.ErrClosed, partition: "nil"},
		{name: "failed", topic: "orders",
			prepare:   func(t *testing.T, d *plog.Dir, in *vfs.Injector) { failSync(t, in, d.Partition("orders", 0)) },
			partition: "open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, in := openMemDir(t)
			if tc.prepare != nil {
				tc.prepare(t, d, in)
			}
			p, err := d.Lookup(tc.topic, 0)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, p)
			} else {
				require.NoError(t, err)
				require.Same(t, d.Partition(tc.topic, 0), p)
			}
			if tc.notErr != nil {
				require.NotErrorIs(t, err, tc.notErr)
			}
			switch got := d.Partition(tc.topic, 0); tc.partition {
			case "nil":
				require.Nil(t, got)
			case "closed":
				require.NotNil(t, got)
				require.ErrorIs(t, got.Sync(), plog.ErrClosed)
			case "open":
				require.NotNil(t, got)
			}
		})
	}
}

// TestDirOpenPartition: OpenPartition returns an open partition as it is,
// reopens one closed alone (or closed after it failed) with its records,
// in place of the closed one, and refuses unknown partitions and a closed
// Dir; a Dir whose failed partition was reopened closes clean.
func TestDirOpenPartition(t *testing.T) {
	cases := []struct {
		name    string
		topic   string
		prepare func(t *testing.T, d *plog.Dir, in *vfs.Injector)
		reopen  bool // a new partition replaces the old one
		wantErr error
	}{
		{name: "open partition", topic: "orders"},
		{name: "closed alone", topic: "orders", reopen: true,
			prepare: func(t *testing.T, d *plog.Dir, _ *vfs.Injector) {
				require.NoError(t, d.Partition("orders", 0).Close())
			}},
		{name: "failed, then closed", topic: "orders", reopen: true,
			prepare: func(t *testing.T, d *plog.Dir, in *vfs.Injector) {
				p := d.Partition("orders", 0)
				failSync(t, in, p)
				require.ErrorIs(t, p.Close(), plog.ErrFailed)
			}},
		{name: "failed, not closed", topic: "orders",
			prepare: func(t *testing.T, d *plog.Dir, in *vfs.Injector) { failSync(t, in, d.Partition("orders", 0)) }},
		{name: "unknown", topic: "payments", wantErr: plog.ErrUnknownPartition},
		{name: "dir closed", topic: "orders", wantErr: plog.ErrClosed,
			prepare: func(t *testing.T, d *plog.Dir, _ *vfs.Injector) { require.NoError(t, d.Close()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, in := openMemDir(t)
			old := d.Partition("orders", 0)
			if tc.prepare != nil {
				tc.prepare(t, d, in)
			}
			p, err := d.OpenPartition(tc.topic, 0)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			if !tc.reopen {
				require.Same(t, old, p)
				return
			}
			require.NotSame(t, old, p)
			require.Same(t, p, d.Partition("orders", 0))
			looked, err := d.Lookup("orders", 0)
			require.NoError(t, err)
			require.Same(t, p, looked)
			require.ErrorIs(t, old.Sync(), plog.ErrClosed, "the closed partition stays closed")

			require.Equal(t, int64(3), p.LogEndOffset())
			require.False(t, p.Stats().Recovery.Clean, "a reopen recovers as after a crash")
			require.Positive(t, p.Stats().Recovery.BytesScanned, "the segment holding the recovery point is read again")
			base, err := p.AppendBatch(logtest.MakeBatch(2, 10, 2000, 2))
			require.NoError(t, err)
			require.Equal(t, int64(3), base)
			again, err := d.OpenPartition("orders", 0)
			require.NoError(t, err)
			require.Same(t, p, again, "an open partition is not reopened")

			require.NoError(t, d.Close())
			clean, err := checkpoint.HasCleanShutdown(in, "/data")
			require.NoError(t, err)
			require.True(t, clean, "the reopened partition replaced the failed one")
			d2, err := plog.OpenDir("/data", plog.DirConfig{Config: plog.Config{FS: in}})
			require.NoError(t, err)
			defer d2.Close()
			p2, err := d2.Lookup("orders", 0)
			require.NoError(t, err)
			assert.Equal(t, int64(5), p2.LogEndOffset())
			assert.True(t, p2.Stats().Recovery.Clean)
		})
	}
}

// TestDirOpenPartitionDuringClose: OpenPartition racing a Close of the
// same partition in another goroutine returns either the partition as it
// was (the Close had not begun) or a new one opened once the Close ended;
// the partition it leaves in the Dir takes appends.
func TestDirOpenPartitionDuringClose(t *testing.T) {
	for range 5 {
		d, _ := openMemDir(t)
		old := d.Partition("orders", 0)
		var wg sync.WaitGroup
		wg.Go(func() { _ = old.Close() })
		p, err := d.OpenPartition("orders", 0)
		require.NoError(t, err)
		wg.Wait()
		if p == old { // opened before the Close began: reopen now
			p, err = d.OpenPartition("orders", 0)
			require.NoError(t, err)
			require.NotSame(t, old, p)
		}
		_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 2000, 2))
		require.NoError(t, err)
		require.Equal(t, int64(4), p.LogEndOffset())
		require.NoError(t, d.Close())
	}
}
