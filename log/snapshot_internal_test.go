package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestSnapshotReleasedBetweenLoadAndRef replays, deterministically, the
// interleaving behind SegmentInfos returning nil: a roll swaps in a new
// segment list and releases the old one between the reader's Load and its
// tryRef. SegmentInfos (like every lock-free snapshot user) must load the
// new list and describe it.
func TestSnapshotReleasedBetweenLoadAndRef(t *testing.T) {
	p, err := Open("/p-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000}))
	b, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(b)
	require.NoError(t, err)

	rolls := 0
	hook := func() {
		if rolls == 0 {
			rolls++
			require.NoError(t, p.Roll()) // releases the snapshot just loaded
		}
	}
	testHookSnapshotLoaded.Store(&hook)
	defer testHookSnapshotLoaded.Store(nil)

	infos := p.SegmentInfos()
	require.Equal(t, 1, rolls)
	require.Len(t, infos, 2, "SegmentInfos must describe the list after the roll")
	require.True(t, infos[1].Active)
	require.Equal(t, int64(1), infos[1].BaseOffset)
}
