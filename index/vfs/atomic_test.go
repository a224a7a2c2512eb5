package vfs_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/index/vfs/vfstest"
)

func readAll(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	require.NoError(t, err)
	return string(b)
}

// TestWriteFileAtomicCrashAtEveryOp takes crash clones before every
// filesystem operation of a WriteFileAtomic that replaces "old" with "new",
// keeping none, some or all of the unsynced changes: each clone holds the
// old content or the new one, and a clone taken after it returned holds
// the new one, whatever survives.
func TestWriteFileAtomicCrashAtEveryOp(t *testing.T) {
	const name = "/state/file"
	mem := vfstest.NewMem()
	require.NoError(t, mem.MkdirAll("/state", 0o755))
	require.NoError(t, vfs.SyncDir(mem, "/"))
	require.NoError(t, vfs.WriteFileAtomic(mem, name, []byte("old")))

	in := vfstest.NewInjector(mem)
	var clones []*vfstest.MemFS
	in.SetHook(func(vfstest.Op) error {
		for seed := range uint64(4) {
			for _, pct := range []int{0, 50, 100} {
				clones = append(clones, mem.CrashClone(vfstest.CrashOptions{UnsyncedDataPercent: pct, TornPercent: 50, Seed: seed}))
			}
		}
		return nil
	})
	require.NoError(t, vfs.WriteFileAtomic(in, name, []byte("new")))
	require.NotEmpty(t, clones)
	for i, c := range clones {
		got := readAll(t, c, name)
		require.Contains(t, []string{"old", "new"}, got, "clone %d", i)
	}
	for _, pct := range []int{0, 100} {
		require.Equal(t, "new", readAll(t, mem.CrashClone(vfstest.CrashOptions{UnsyncedDataPercent: pct}), name))
	}
}

// TestWriteFileAtomicFailures fails each operation of a WriteFileAtomic in
// turn: the call returns the error, and the file holds the old content or
// the new one.
func TestWriteFileAtomicFailures(t *testing.T) {
	const name = "/state/file"
	for k := int64(0); ; k++ {
		mem := vfstest.NewMem()
		require.NoError(t, mem.MkdirAll("/state", 0o755))
		require.NoError(t, vfs.WriteFileAtomic(mem, name, []byte("old")))
		in := vfstest.NewInjector(mem)
		in.FailNth(k, 0)
		err := vfs.WriteFileAtomic(in, name, []byte("new"))
		got := readAll(t, mem, name)
		if err == nil {
			require.Equal(t, "new", got)
			require.Greater(t, k, int64(3), "every operation failed in turn")
			return
		}
		require.ErrorIs(t, err, vfstest.ErrInjected, fmt.Sprintf("operation %d", k))
		require.Contains(t, []string{"old", "new"}, got, "operation %d", k)
	}
}
