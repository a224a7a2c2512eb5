package raftlog

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/partlog/partlog/index/vfs/vfstest"
	"github.com/partlog/partlog/log"
)

// openMemReplicated opens a replicated partition at dir of mem, and its
// raft state at state.
func openMemReplicated(t *testing.T, mem *vfstest.MemFS, dir, state string) (*log.Partition, *Storage) {
	t.Helper()
	part, err := log.Open(dir, log.Config{FS: mem, DisableAutoHighWatermark: true, StampLeaderEpoch: true})
	require.NoError(t, err)
	st, err := OpenStorage(mem, state, part, &pb.ConfState{Voters: []uint64{1, 2, 3}})
	require.NoError(t, err)
	return part, st
}

// The removal of a snapshot install file is durable once the install is
// finished or undone: a machine crash right after it does not bring the
// file back. A file that came back would make the next open undo the
// install again, cutting the log back to the install's keep offset and
// losing the entries persisted since.
func TestRaftStorageInstallFileRemovalSurvivesCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		// interrupted crashes the install before the state file holds
		// it, so that the next open undoes it; otherwise the install
		// finishes.
		interrupted bool
	}{
		{name: "undone at open", interrupted: true},
		{name: "finished", interrupted: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfstest.NewMem()
			require.NoError(t, mem.MkdirAll("/data", 0o755))

			// The leader: six committed entries, its snapshot point at
			// entry 4 (offset 4).
			lpart, lst := openMemReplicated(t, mem, "/data/leader/t-0", "/data/leader.state")
			defer lpart.Close()
			lr := newTestCore(lpart, lst)
			for i, k := range []string{"a", "b", "a", "b", "a", "b"} {
				require.NoError(t, lr.persist(keyedEntry(t, uint64(i+1), 1, int64(i), k)))
			}
			require.NoError(t, lpart.Sync())
			require.NoError(t, lst.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(6))}))
			require.NoError(t, lst.setCommitted(6))
			lst.applied = 6
			ok, err := lst.moveSnapshot(4)
			require.NoError(t, err)
			require.True(t, ok)
			snap, err := lst.Snapshot()
			require.NoError(t, err)

			// The follower: entry 1 committed, entry 2 not.
			const dir, state = "/data/follower/t-0", "/data/follower.state"
			part, st := openMemReplicated(t, mem, dir, state)
			r := newTestCore(part, st)
			require.NoError(t, r.persist(keyedEntry(t, 1, 1, 0, "a")))
			require.NoError(t, r.persist(keyedEntry(t, 2, 1, 1, "x")))
			require.NoError(t, part.Sync())
			require.NoError(t, st.setHardState(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}))
			mem.SyncAll() // the directories made on the way, too

			if tc.interrupted {
				// applySnapshot's steps up to the state file, then a
				// crash; the open undoes the install.
				d, err := decodeSnapshotData(snap.GetData())
				require.NoError(t, err)
				require.NoError(t, st.saveInstall(1, 4, d))
				require.NoError(t, part.TruncateTo(1))
				require.NoError(t, part.Close())
				mem = mem.CrashClone(vfstest.CrashOptions{})
				part, st = openMemReplicated(t, mem, dir, state)
				require.Equal(t, int64(1), part.LogEndOffset(), "the open cut the partial install back")
				// The follower goes on: entry 2 again, persisted (so
				// acknowledged to the leader), not yet committed, so
				// the state file is not written again.
				r = newTestCore(part, st)
				require.NoError(t, r.persist(keyedEntry(t, 2, 1, 1, "y")))
				require.NoError(t, part.Sync())
			} else {
				require.NoError(t, st.applySnapshot(snap))
			}
			end := part.LogEndOffset()
			require.NoError(t, part.Close())

			// A crash keeping only what was synced.
			crashed := mem.CrashClone(vfstest.CrashOptions{})
			_, err = crashed.Stat(st.installPath())
			require.ErrorIs(t, err, fs.ErrNotExist, "the install file came back after the crash")
			part, _ = openMemReplicated(t, crashed, dir, state)
			defer part.Close()
			assert.Equal(t, end, part.LogEndOffset(), "the log keeps what it held before the crash")
		})
	}
}
