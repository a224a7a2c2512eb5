package index

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestSearchPosition: the number of entries whose position lies below pos.
func TestSearchPosition(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/d", 0o755))
	idx, err := OpenOffsetIndex(mem, "/d/0.index", 100, 64*OffsetEntrySize)
	require.NoError(t, err)
	defer func() { require.NoError(t, idx.Close()) }()
	assert.Equal(t, 0, idx.SearchPosition(1000), "empty index")
	for i := range int64(10) {
		require.NoError(t, idx.Append(100+10*i, 500*i)) // positions 0, 500, ..., 4500
	}
	for _, tc := range []struct {
		pos  int64
		want int
	}{
		{-1, 0}, {0, 0}, {1, 1}, {500, 1}, {501, 2}, {4500, 9}, {4501, 10}, {1 << 40, 10},
	} {
		assert.Equal(t, tc.want, idx.SearchPosition(tc.pos), "SearchPosition(%d)", tc.pos)
	}
}
