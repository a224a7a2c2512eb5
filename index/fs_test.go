package index_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index"
)

// TestNilFS: both index kinds open on the operating system's filesystem
// when the FS is nil (it used to panic).
func TestNilFS(t *testing.T) {
	dir := t.TempDir()
	oi, err := index.OpenOffsetIndex(nil, filepath.Join(dir, "00000000000000000100.index"), 100, 4096)
	require.NoError(t, err)
	require.NoError(t, oi.Append(103, 0))
	require.NoError(t, oi.Append(110, 512))
	require.Equal(t, index.OffsetEntry{Offset: 103, Position: 0}, oi.Lookup(105))
	require.NoError(t, oi.Close())

	ti, err := index.OpenTimeIndex(nil, filepath.Join(dir, "00000000000000000100.timeindex"), 100, 4096)
	require.NoError(t, err)
	require.NoError(t, ti.MaybeAppend(1000, 103, false))
	require.Equal(t, int64(103), ti.Lookup(1500).Offset)
	require.NoError(t, ti.Close())

	for _, name := range []string{"00000000000000000100.index", "00000000000000000100.timeindex"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, "%s is on the OS filesystem", name)
	}
}
