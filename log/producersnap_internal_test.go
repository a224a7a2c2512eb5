package log

import (
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
)

// The producer snapshot part without a Partition: a fake core (its
// truncation count and a dirSyncer) over an in-memory directory.

// snapPartDir is the directory of the part's files.
const snapPartDir = "/d/s-0"

// fakeSnapCore stands in for the partition core: its truncation count,
// and the directory syncs (dirSyncer) the part asks for.
type fakeSnapCore struct {
	truncations atomic.Uint64
	dirSyncs    atomic.Int64
}

func (c *fakeSnapCore) syncDir() error { c.dirSyncs.Add(1); return nil }

// newSnapPart returns a snapshot part over a fresh in-memory directory,
// its core and its filesystem.
func newSnapPart(t *testing.T) (*producerSnapshots, *fakeSnapCore, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(snapPartDir, 0o755))
	core := &fakeSnapCore{}
	s := &producerSnapshots{}
	s.init(core, &core.truncations, mem, snapPartDir, slog.New(slog.DiscardHandler), &sync.Mutex{})
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
	_, _, err = s.remove(func(int64) bool { return false })
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

// TestProducerSnapshotsCloseSkipsKept: Close's snapshot is skipped only
// while the snapshot at the log end is kept (written durably, or loaded at
// the end after a clean shutdown) and nothing changed since: no write, no
// truncation, no removal, no other log end, no unsynced directory entry.
// Each case removes the file behind the part's back, so a write shows as
// the file coming back.
func TestProducerSnapshotsCloseSkipsKept(t *testing.T) {
	type logState struct {
		end      int64
		writeSeq uint64
		dirDirty bool
	}
	// loadedAt writes the snapshot at off, loads the newest at or below
	// the log end as Open does, and keeps it if it is at the end.
	loadedAt := func(off int64) func(*testing.T, *producerSnapshots, *producer.State, *logState) {
		return func(t *testing.T, s *producerSnapshots, state *producer.State, l *logState) {
			require.NoError(t, s.write(off, state.AppendSnapshot(nil), true))
			_, err := s.restoreLocked(state, l.end)
			require.NoError(t, err)
			s.keepLoadedLocked(l.end, l.writeSeq)
		}
	}
	for _, tc := range []struct {
		name string
		// keep makes the snapshot at 10 kept (or not) at write 3.
		keep func(t *testing.T, s *producerSnapshots, state *producer.State, l *logState)
		// change changes something after it was kept.
		change    func(s *producerSnapshots, core *fakeSnapCore, l *logState)
		wantWrite bool
	}{
		{name: "written, nothing changed", wantWrite: false},
		{name: "a batch written since", change: func(_ *producerSnapshots, _ *fakeSnapCore, l *logState) { l.writeSeq++ }, wantWrite: true},
		{name: "another log end", change: func(_ *producerSnapshots, _ *fakeSnapCore, l *logState) { l.end = 9 }, wantWrite: true},
		{name: "a truncation since", change: func(_ *producerSnapshots, c *fakeSnapCore, _ *logState) { c.truncations.Add(1) }, wantWrite: true},
		{name: "a removal since", change: func(s *producerSnapshots, _ *fakeSnapCore, _ *logState) {
			_, _, _ = s.remove(func(int64) bool { return false })
		}, wantWrite: true},
		{name: "directory dirty", change: func(_ *producerSnapshots, _ *fakeSnapCore, l *logState) { l.dirDirty = true }, wantWrite: true},
		{name: "loaded at the end", keep: loadedAt(10), wantWrite: false},
		{name: "loaded below the end", keep: loadedAt(8), wantWrite: true},
		{name: "never kept", keep: func(*testing.T, *producerSnapshots, *producer.State, *logState) {}, wantWrite: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, core, mem := newSnapPart(t)
			state := producer.NewState(producer.Config{})
			l := logState{end: 10, writeSeq: 3}
			if tc.keep != nil {
				tc.keep(t, s, state, &l)
			} else {
				require.NoError(t, s.durableLocked(state, l.end, l.writeSeq, &l.dirDirty))
				require.False(t, l.dirDirty, "the directory sync clears the flag")
			}
			_ = mem.Remove(producer.SnapshotPath(snapPartDir, 10))
			if tc.change != nil {
				tc.change(s, core, &l)
			}
			syncs := core.dirSyncs.Load()
			require.NoError(t, s.closeLocked(state, l.end, l.writeSeq, &l.dirDirty))
			wrote := slices.Contains(snapshotFiles(t, s), l.end)
			require.Equal(t, tc.wantWrite, wrote, "snapshot at %d written", l.end)
			if tc.wantWrite {
				require.Equal(t, syncs+1, core.dirSyncs.Load(), "a written snapshot's entry is synced")
				require.False(t, l.dirDirty)
			} else {
				require.Equal(t, syncs, core.dirSyncs.Load(), "a skipped Close syncs nothing")
			}
		})
	}
}
