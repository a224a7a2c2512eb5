package log

import (
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
)

// The producer snapshot part without a Partition: a fake core
// (snapshotCore) over an in-memory directory.

// snapPartDir is the directory of the part's files.
const snapPartDir = "/d/s-0"

// fakeSnapCore stands in for the partition core.
type fakeSnapCore struct {
	truncations atomic.Uint64
	dirSyncs    atomic.Int64
}

func (c *fakeSnapCore) syncDirSettled() error   { c.dirSyncs.Add(1); return nil }
func (c *fakeSnapCore) truncationCount() uint64 { return c.truncations.Load() }

// newSnapPart returns a snapshot part over a fresh in-memory directory,
// its core and its filesystem.
func newSnapPart(t *testing.T) (*producerSnapshots, *fakeSnapCore, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(snapPartDir, 0o755))
	core := &fakeSnapCore{}
	s := &producerSnapshots{}
	s.init(core, mem, snapPartDir, slog.New(slog.DiscardHandler), &sync.Mutex{})
	return s, core, mem
}

// snapshotFiles lists the offsets of the part's snapshot files.
func snapshotFiles(t *testing.T, s *producerSnapshots) []int64 {
	t.Helper()
	offs, err := producer.ListSnapshots(s.fs, s.dir)
	require.NoError(t, err)
	return offs
}

// TestProducerSnapshotsRollRules: a roll's snapshot is served from memory
// until it is written; it is written only while no truncation and no
// removal came after the roll, and a replacement of the state discards it.
func TestProducerSnapshotsRollRules(t *testing.T) {
	s, core, _ := newSnapPart(t)
	state := producer.NewState(producer.Config{})
	state.Restore([]producer.Entry{{ProducerID: 7, ProducerEpoch: 1, LastSequence: 4, LastOffset: 9,
		Timestamp: 1000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	want := state.AppendSnapshot(nil)

	// Taken at 10: served from memory, then written by the roll's flush.
	s.takeOnRollLocked(state, 10)
	got, err := s.atLocked(10)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Empty(t, snapshotFiles(t, s))
	require.True(t, s.writeRolled(s.takePendingLocked(0), 0))
	require.Equal(t, []int64{10}, snapshotFiles(t, s))
	got, err = s.atLocked(10)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Taken at 20, then a removal: never written.
	s.takeOnRollLocked(state, 20)
	_, err = s.remove(func(int64) bool { return false })
	require.NoError(t, err)
	require.False(t, s.writeRolled(s.takePendingLocked(0), 0))
	require.Equal(t, []int64{10}, snapshotFiles(t, s))

	// Taken at 30, then a truncation: dropped by the take, and not written
	// by a full flush either.
	s.takeOnRollLocked(state, 30)
	core.truncations.Add(1)
	require.Empty(t, s.takePendingLocked(1))
	s.takeOnRollLocked(state, 31)
	core.truncations.Add(1)
	require.False(t, s.writePendingLocked())
	require.Equal(t, []int64{10}, snapshotFiles(t, s))

	// Taken at 40, then the state is replaced: discarded.
	s.takeOnRollLocked(state, 40)
	s.discardPendingLocked()
	require.False(t, s.writePendingLocked())
	_, err = s.atLocked(40)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, []int64{10}, snapshotFiles(t, s))
}

// TestProducerSnapshotsNewest: newest removes, durably, the snapshots past
// the end, skips one that does not decode and returns the newest that
// does; with none it returns -1.
func TestProducerSnapshotsNewest(t *testing.T) {
	s, core, _ := newSnapPart(t)
	from, entries, err := s.newest(100)
	require.NoError(t, err)
	require.Equal(t, int64(-1), from)
	require.Empty(t, entries)

	state := producer.NewState(producer.Config{})
	state.Restore([]producer.Entry{{ProducerID: 3, ProducerEpoch: 0, LastSequence: 0, LastOffset: 4,
		Timestamp: 1000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	require.NoError(t, s.write(5, state.AppendSnapshot(nil), true))
	require.NoError(t, s.write(8, []byte("not a snapshot"), true))
	require.NoError(t, s.write(12, state.AppendSnapshot(nil), true))

	from, entries, err = s.newest(10)
	require.NoError(t, err)
	require.Equal(t, int64(5), from)
	require.Equal(t, state.Entries(), entries)
	require.Equal(t, []int64{5, 8}, snapshotFiles(t, s))
	require.Equal(t, int64(1), core.dirSyncs.Load(), "the removal past the end is synced")
}
