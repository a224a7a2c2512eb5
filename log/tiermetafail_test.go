package log_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	// The first version recording a copy "copied".
	syncFault, syncFailed := metaRenameSyncFault(t, mem, dir, "copied")
	var writesFail atomic.Bool
	local.SetHook(func(op vfs.Op) error {
		if writesFail.Load() && op.Kind == vfs.OpCreate && strings.HasPrefix(op.Path, meta) {
			return fmt.Errorf("%w: metadata write", vfs.ErrInjected)
		}
		return syncFault(op)
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

// TestTierLocalRetentionAfterFailedTruncation: a TruncateTo whose record
// of the copies it cuts fails after the new remote-log-metadata was
// renamed into place (its directory sync fails) changes nothing, but the
// file may hold those copies "deleting" while the partition holds them
// "copied". The local retention that follows first writes the partition's
// version again: after a restart every batch reads back. (The local
// retention deleted the segments for copies the file recorded
// "deleting"; the restart's first pass deleted the copies, and the
// offsets between the first of them and the local log start read as a
// gap.)
func TestTierLocalRetentionAfterFailedTruncation(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	local := vfs.NewInjector(mem)
	now := time.UnixMilli(1000) // no batch older than the local retention
	cfg := tierDirConfig(local, st)
	cfg.Config.Now = func() time.Time { return now }
	cfg.Remote.LocalRetentionBytes = 0
	cfg.Remote.LocalRetentionMs = 60_000
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 40)
	want := readAllBatches(t, p, 0)
	d.RunTierPass()
	require.GreaterOrEqual(t, p.Stats().Remote.Segments, 3)
	require.Zero(t, p.LogStartOffset())

	const dir = "/data/t-0"
	meta := dir + "/remote-log-metadata"
	syncFault, syncFailed := metaRenameSyncFault(t, mem, dir, "deleting")
	local.SetHook(syncFault)
	require.ErrorIs(t, p.TruncateTo(20), vfs.ErrInjected)
	local.SetHook(nil)
	require.True(t, syncFailed.Load(), "the record of the cut failed")
	require.Contains(t, string(readFileT(t, mem, meta)), "\ndeleting ", "the file holds the new version")
	assert.Equal(t, want, readAllBatches(t, p, 0), "the failed truncation cut nothing")

	now = time.UnixMilli(1000 + 3_600_000) // every sealed segment expired locally
	d.RunTierPass()
	require.Positive(t, p.LogStartOffset(), "local retention deleted copied segments")
	require.NoError(t, d.Close())

	d, err = plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	d.RunTierPass()
	assert.Equal(t, want, readAllBatches(t, p, 0))
}

// metaRenameSyncFault returns a filesystem hook that fails the directory
// sync after the first rename of dir's remote-log-metadata whose new
// version records a copy in state ("copied", "deleting"): the file then
// holds the new version while the partition keeps the old one. failed
// reports whether the hook failed that sync.
func metaRenameSyncFault(t *testing.T, mem *vfs.MemFS, dir, state string) (hook func(vfs.Op) error, failed *atomic.Bool) {
	meta := dir + "/remote-log-metadata"
	var renamed atomic.Bool
	failed = new(atomic.Bool)
	return func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpRename && op.NewPath == meta && !renamed.Load():
			renamed.Store(bytes.Contains(readFileT(t, mem, op.Path), []byte("\n"+state+" ")))
		case op.Kind == vfs.OpSync && op.Path == dir && renamed.Load() && !failed.Load():
			failed.Store(true)
			return fmt.Errorf("%w: directory sync after the metadata's rename", vfs.ErrInjected)
		}
		return nil
	}, failed
}
