package log_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTierCleanupAfterFailedRecord: the record of a copy "copied" fails
// after the new remote-log-metadata was renamed into place (its directory
// sync fails), so the file may hold "copied" while the partition still
// holds "copying". The next pass's cleanup, with every metadata write
// failing, deletes nothing from the store: a restart that reads "copied"
// from the file finds the copy, and every batch reads back after local
// retention deleted its segment. (The cleanup deleted the copy of a
// "copying" record at once, and the restart then served a "copied" record
// of a copy the store no longer held: the local segment went for it, and
// its batches with it.)
func TestTierCleanupAfterFailedRecord(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	local := vfs.NewInjector(mem)
	d, err := plog.OpenDir("/data", tierDirConfig(local, st))
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 40)
	want := readAllBatches(t, p, 0)

	const dir = "/data/t-0"
	meta := dir + "/remote-log-metadata"
	var recorded, syncFailed, writesFail atomic.Bool
	local.SetHook(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpRename && op.NewPath == meta && !recorded.Load():
			// The first version recording a copy "copied".
			recorded.Store(bytes.Contains(readFileT(t, mem, op.Path), []byte("\ncopied ")))
		case op.Kind == vfs.OpSync && op.Path == dir && recorded.Load() && !syncFailed.Load():
			syncFailed.Store(true)
			return fmt.Errorf("%w: directory sync after the metadata's rename", vfs.ErrInjected)
		case writesFail.Load() && op.Kind == vfs.OpCreate && strings.HasPrefix(op.Path, meta):
			return fmt.Errorf("%w: metadata write", vfs.ErrInjected)
		}
		return nil
	})
	d.RunTierPass()
	require.True(t, syncFailed.Load(), "the record of the first copy failed")
	require.Zero(t, p.Stats().Remote.Segments)
	require.Contains(t, string(readFileT(t, mem, meta)), "\ncopied ", "the file holds the new version")

	writesFail.Store(true)
	d.RunTierPass() // its cleanup cannot record anything
	local.SetHook(nil)
	require.NoError(t, d.Close())

	d, err = plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	d.RunTierPass()
	require.Positive(t, p.LogStartOffset(), "local retention deleted copied segments")
	assert.Equal(t, want, readAllBatches(t, p, 0))
}
