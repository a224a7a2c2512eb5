package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTierRetentionCrashKeepsEpochs: in a Dir that tiers, a crash inside
// local retention (DeleteSegments of every sealed segment, all copied),
// after the log start checkpoint moved to the empty active segment's base
// and before the segments below it were deleted. The Open after it
// finishes the deletion (settleEmptyTail); the leader epoch cache must
// still hold the epochs of the copies, which are still the log's (law 14;
// the cache follows the whole log's start). Before, that Open emptied the
// cache, as for a restart of the log, and EndOffsetForEpoch(2) no longer
// answered from the copies' epochs.
func TestTierRetentionCrashKeepsEpochs(t *testing.T) {
	mem := vfs.NewMem()
	in, c := crashBeforeFirstDeletion(mem)
	st := plog.NewDirRemoteStorage("/remote", in)
	cfg := tierDirConfig(in, st)
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendTwoEpochs(t, p)
	require.NoError(t, p.Roll())
	require.NoError(t, p.Sync())
	want := []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 3, StartOffset: 28}}
	require.Equal(t, want, p.LeaderEpochs())
	d.RunTierPass() // copies every sealed segment, deletes all but the last
	segs, err := p.Segments()
	require.NoError(t, err)
	c.setArmed(true)
	err = p.DeleteSegments(segs[:len(segs)-1])
	for _, s := range segs {
		require.NoError(t, s.Unref())
	}
	require.NoError(t, err)
	c.setArmed(false)
	require.Equal(t, int64(120), p.LogStartOffset())
	require.Equal(t, want, p.LeaderEpochs())
	crashed := c.clone()
	require.NotNil(t, crashed)

	cfg.Config.FS = crashed
	cfg.Remote.Storage = plog.NewDirRemoteStorage("/remote", crashed)
	d2, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d2.Close()
	p2 := d2.Partition("t", 0)
	require.NotNil(t, p2)
	require.Equal(t, int64(120), p2.LogStartOffset())
	require.Equal(t, want, p2.LeaderEpochs())
	e, off, err := p2.EndOffsetForEpoch(2)
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 28}, [2]int64{int64(e), off})
}
