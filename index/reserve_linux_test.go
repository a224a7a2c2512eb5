//go:build linux

// The disk reservation of the index files on Linux (fallocate): an index
// reserves its blocks as its entries grow, never writes an entry through
// the mapping past them, and fails an append it cannot reserve for.

package index

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// allocated returns the bytes of disk the named file holds (st_blocks).
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}

// TestIndexReservesAsItGrows (issue 28, case 5): new indexes of Kafka's
// default size (10 MiB) are files of that length holding one page of disk
// each, not 10 MiB; as entries are appended the reservation stays ahead
// of them (every entry lies below the reserved bytes, which the disk
// holds) and within about twice what they take.
func TestIndexReservesAsItGrows(t *testing.T) {
	dir := t.TempDir()
	offPath, timePath := filepath.Join(dir, "0.index"), filepath.Join(dir, "0.timeindex")
	idx := openOffset(t, vfs.Default, offPath, 0, DefaultMaxIndexSize)
	defer func() { require.NoError(t, idx.Close()) }()
	tidx := openTime(t, vfs.Default, timePath, 0, DefaultMaxIndexSize)
	defer func() { require.NoError(t, tidx.Close()) }()
	for path, entry := range map[string]int{offPath: OffsetEntrySize, timePath: TimeEntrySize} {
		assert.Equal(t, int64(roundDown(DefaultMaxIndexSize, entry)), fileSize(t, vfs.Default, path), path)
		assert.LessOrEqual(t, allocated(t, path), int64(2*reserveChunk), "a new index's disk: %s", path)
	}
	const n = 200_000
	for i := range n {
		require.NoError(t, idx.Append(int64(i), int64(i)*100))
		end := int64(i+1) * OffsetEntrySize
		require.GreaterOrEqual(t, idx.x.w.reserved, end, "entry %d past the reservation", i)
		if i%10_000 == 0 || i == n-1 {
			disk := allocated(t, offPath)
			require.GreaterOrEqual(t, disk, idx.x.w.reserved, "entry %d: reserved bytes the disk does not hold", i)
			require.LessOrEqual(t, disk, 2*end+2*reserveChunk, "entry %d: disk far ahead of the entries", i)
		}
	}
	t.Logf("%d entries (%d KiB): %d KiB of disk for a %d KiB file", n, n*OffsetEntrySize>>10,
		allocated(t, offPath)>>10, fileSize(t, vfs.Default, offPath)>>10)
}

// TestIndexAppendFullDisk (issue 28, case 5): on a full disk an append
// whose entry lies past the blocks reserved fails with ENOSPC, writes
// nothing (the count stays; no store into an unbacked page of the mapping,
// which would raise SIGBUS) and leaves the index usable: once there is
// room the same append succeeds. Appends below the reservation go on
// while the reservation ahead fails.
func TestIndexAppendFullDisk(t *testing.T) {
	in := vfs.NewInjector(vfs.Default)
	path := filepath.Join(t.TempDir(), "0.index")
	idx := openOffset(t, in, path, 0, DefaultMaxIndexSize)
	defer func() { require.NoError(t, idx.Close()) }()
	require.True(t, idx.x.cur.Load().region.Mapped())
	in.SetDiskFull(0)
	perChunk := reserveChunk / OffsetEntrySize
	for i := range perChunk {
		require.NoError(t, idx.Append(int64(i), int64(i)*100), "entry %d lies in the first reserved page", i)
	}
	err := idx.Append(int64(perChunk), int64(perChunk)*100)
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	require.Equal(t, perChunk, idx.Entries())
	require.LessOrEqual(t, allocated(t, path), int64(reserveChunk))
	in.SetDiskFull(-1)
	require.NoError(t, idx.Append(int64(perChunk), int64(perChunk)*100))
	require.Equal(t, perChunk+1, idx.Entries())
	require.NoError(t, idx.SanityCheck())
}
