package log_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestDirFailedLogStartCheckpointChangesNothing is what TestSoakDiskFull
// found (seed 4): a retention round on a partition of a Dir whose write of
// the root log-start-offset-checkpoint fails (ENOSPC) returns the error and
// deletes nothing, but the Dir kept the new log start in its entries all the
// same. A reopen of the partition (OpenPartition, as after a failure) then
// took that log start, dropping the segment below it from the log, while
// the file still held the old one: the next OpenDir refused the directory
// ("offsets [a, b) are missing: the log start checkpoint says a but the first
// segment starts at b"). A failed root checkpoint write must leave the
// partition's entry as it was.
func TestDirFailedLogStartCheckpointChangesNothing(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.DirConfig{Config: plog.Config{SegmentBytes: 2048, SegmentIndexBytes: 4096, FlushMessages: 1, FS: in}}
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for len(p.SegmentInfos()) < 4 {
		_, err := p.AppendBatch(soakPlainBatch(t, 0, p.LogEndOffset()))
		require.NoError(t, err)
	}
	start, end := p.LogStartOffset(), p.LogEndOffset()

	in.Add(vfs.Rule{Err: syscall.ENOSPC, Match: func(op vfs.Op) bool {
		return strings.Contains(op.Path, plog.LogStartOffsetCheckpointFile)
	}, Times: -1})
	_, err = p.DeleteExpired(context.Background(), soakOldestSegment{})
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Equal(t, start, p.LogStartOffset(), "the failed retention moved the log start")

	// The partition reopened while the root file still cannot be written:
	// the log is what it was.
	require.NoError(t, p.Close())
	p, err = d.OpenPartition("t", 0)
	require.NoError(t, err)
	require.Equal(t, start, p.LogStartOffset(), "the reopened partition took the log start of a failed checkpoint write")
	require.Equal(t, end, p.LogEndOffset())
	_ = d.Close() // its root log start file cannot be written either

	in.Reset()
	d, err = plog.OpenDir("/data", cfg)
	require.NoError(t, err, "the directory does not open after a failed log start checkpoint")
	p = d.Partition("t", 0)
	require.Equal(t, start, p.LogStartOffset())
	require.Equal(t, end, p.LogEndOffset())
	require.NoError(t, p.Verify())
	require.NoError(t, d.Close())
}
