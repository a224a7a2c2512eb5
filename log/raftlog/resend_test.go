package raftlog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/index/vfs"
)

// A follower that installed a compacted snapshot whose records end below
// its point (the leader's compaction removed the last batches before it)
// holds the leader's producer state at the end of those records, which is
// the state at the point: no batch lies between. Once it leads, the
// snapshots it sends from that point carry that state, so its own
// followers keep answering retries of batches below the point as
// duplicates.
func TestSnapshotFromInstalledCompactedPointCarriesProducerState(t *testing.T) {
	root := t.TempDir()
	dir, state := filepath.Join(root, "t-0"), filepath.Join(root, "t-0.state")
	part := openReplicated(t, dir)
	st, err := OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)

	// The leader's point is offset 6 (after entry 12 of term 1); its
	// compacted records are the batches at 0 and 2 (3 to 5 removed);
	// producer 7's last batch below the point is at offset 5.
	const point = 6
	var records []byte
	for _, base := range []int64{0, 2} {
		records = append(records, producerKeyedBatch(t, base, 1, "k")...)
	}
	producers := appendProducerSnapshot(nil, []producerSnapEntry{{ProducerID: 7, ProducerEpoch: 0, LastSequence: 5, LastOffset: 5,
		Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	snap := &pb.Snapshot{
		Data:     appendSnapshotData(nil, snapshotData{offset: point, start: 0, producers: producers, records: records}),
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(12)), Term: new(uint64(1)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}},
	}
	require.NoError(t, st.applySnapshot(snap))
	require.Equal(t, int64(3), part.LogEndOffset(), "the copied records end below the point")

	// It goes on past the point, then sends a snapshot of its own.
	r := newTestCore(part, st)
	require.NoError(t, r.persist(noopEntry(13, 2)))
	require.NoError(t, part.Sync())
	require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(2)), Commit: new(uint64(13))}))
	require.NoError(t, st.setCommitted(13))
	for _, reopen := range []bool{false, true} {
		if reopen {
			require.NoError(t, part.Close())
			part = openReplicated(t, dir)
			st, err = OpenStorage(vfs.Default, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
			require.NoError(t, err)
		}
		sent, err := st.Snapshot()
		require.NoError(t, err)
		d, err := decodeSnapshotData(sent.GetData())
		require.NoError(t, err)
		assert.Equal(t, int64(point), d.offset)
		assert.Equal(t, producers, d.producers, "the producer state at the point (reopened: %v)", reopen)
	}
	require.NoError(t, part.Close())
}
