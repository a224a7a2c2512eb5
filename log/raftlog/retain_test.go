package raftlog

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/log"
)

// Retention on a replica deletes records only before a segment base, as
// Replica.Retain says: an offset inside a segment, even an entry's base,
// is ignored. The snapshot point moved there would have no producer
// snapshot (the log takes one at every segment base only), so a follower
// catching up from it would not know the producers of the records below
// it, and would store a retry of their batches again once it leads.
func TestRetainIgnoresOffsetInsideSegment(t *testing.T) {
	root := t.TempDir()
	part, err := log.Open(filepath.Join(root, "t-0"), log.Config{DisableAutoHighWatermark: true, StampLeaderEpoch: true, SegmentBytes: 300})
	require.NoError(t, err)
	defer part.Close()
	st, err := OpenStorage(vfs.Default, filepath.Join(root, "t-0.state"), part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	r := newTestCore(part, st)
	require.NoError(t, r.persist(noopEntry(1, 1)))
	idx := uint64(2)
	for len(part.SegmentInfos()) < 3 {
		require.NoError(t, r.persist(producerKeyedEntry(t, idx, 1, part.LogEndOffset(), "k")))
		idx++
	}
	last := idx - 1
	require.NoError(t, part.Sync())
	require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(last)}))
	require.NoError(t, st.setCommitted(last))
	st.applied = last

	seg := part.SegmentInfos()[1].BaseOffset
	inside := seg + 1 // the base of the entry after the segment's first
	require.NotZero(t, st.indexOf(inside))
	require.Equal(t, inside, st.pos(st.indexOf(inside)).base, "an entry's base, not a segment's")
	require.NoError(t, r.retain(inside))
	assert.Equal(t, int64(0), part.LogStartOffset(), "nothing deleted")
	assert.Equal(t, uint64(0), st.snapIndex, "the snapshot point did not move")

	require.NoError(t, r.retain(seg))
	assert.Equal(t, seg, part.LogStartOffset())
	assert.Equal(t, seg, st.snapOffset)
	snap, err := st.Snapshot()
	require.NoError(t, err)
	d, err := decodeSnapshotData(snap.GetData())
	require.NoError(t, err)
	assert.NotNil(t, d.producers, "the snapshot at a segment base carries the producer state")
}
