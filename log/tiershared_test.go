package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTierSharedStoreKeepsOtherDirsCopies tiers the same partition name of
// two Dirs to one store: the first pass of the second Dir leaves the
// copies the first one recorded alone.
func TestTierSharedStoreKeepsOtherDirsCopies(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	a, err := plog.OpenDir("/a", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer a.Close()
	pa, err := a.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, pa, 60)
	want := readAllBatches(t, pa, 0)
	a.RunTierPass()
	require.Positive(t, pa.LogStartOffset())

	b, err := plog.OpenDir("/b", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer b.Close()
	pb, err := b.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, pb, 5)
	b.RunTierPass()

	require.Equal(t, want, readAllBatches(t, pa, 0), "Dir a's copies after Dir b's first pass")
}
