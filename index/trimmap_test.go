package index

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestTrimShrinksMapping: a trimmed index (a sealed segment's) maps its
// entries, not segment.index.bytes, and still answers lookups; Resize maps
// it at full size again and appends go on. Before the fix the mapping
// stayed at maxIndexSize (10 MiB per index at rest with Kafka's default).
func TestTrimShrinksMapping(t *testing.T) {
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const maxSize = 1 << 20
		oi := openOffset(t, fsys, filepath.Join(dir, "00000000000000000000.index"), 0, maxSize)
		ti := openTime(t, fsys, filepath.Join(dir, "00000000000000000000.timeindex"), 0, maxSize)
		require.Equal(t, maxSize, oi.x.mappedBytes())
		for i := range 10 {
			require.NoError(t, oi.Append(int64(i*10), int64(i*100)))
			require.NoError(t, ti.MaybeAppend(int64(1000+i), int64(i*10), false))
		}
		require.NoError(t, oi.TrimToValidSize())
		require.NoError(t, ti.TrimToValidSize())
		require.Equal(t, 10*OffsetEntrySize, oi.x.mappedBytes())
		require.Equal(t, 10*TimeEntrySize, ti.x.mappedBytes())
		require.Equal(t, OffsetEntry{50, 500}, oi.Lookup(55))
		require.Equal(t, TimeEntry{1005, 50}, ti.Lookup(1005))
		require.NoError(t, oi.Flush())
		require.NoError(t, ti.Flush())
		require.NoError(t, oi.SanityCheck())
		require.NoError(t, ti.SanityCheck())

		require.NoError(t, oi.Resize(maxSize))
		require.NoError(t, ti.Resize(maxSize))
		require.Equal(t, maxSize, oi.x.mappedBytes())
		require.NoError(t, oi.Append(100, 1000))
		require.NoError(t, ti.MaybeAppend(2000, 100, false))
		require.Equal(t, OffsetEntry{100, 1000}, oi.Lookup(100))
		require.Equal(t, TimeEntry{2000, 100}, ti.Lookup(3000))

		// An empty index trims to no mapped bytes.
		empty := openOffset(t, fsys, filepath.Join(dir, "00000000000000000200.index"), 200, maxSize)
		require.NoError(t, empty.TrimToValidSize())
		require.Equal(t, 0, empty.x.mappedBytes())
		require.Equal(t, OffsetEntry{200, 0}, empty.Lookup(300))
		require.NoError(t, empty.Flush())
		require.NoError(t, empty.Close())
		require.NoError(t, oi.Close())
		require.NoError(t, ti.Close())
	})
}
