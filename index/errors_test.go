package index_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index"
)

// TestInvalidArgumentErrors: every argument an index refuses, at Open or
// at Append, is an error wrapping the one public sentinel
// ErrInvalidArgument, and a refused append leaves the index unchanged.
func TestInvalidArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := index.OpenOffsetIndex(nil, filepath.Join(dir, "00000000000000000000.index"), 0, 4)
	require.ErrorIs(t, err, index.ErrInvalidArgument, "max index size below one entry")
	_, err = index.OpenTimeIndex(nil, filepath.Join(dir, "00000000000000000001.timeindex"), math.MaxInt64-math.MaxInt32+1, 4096)
	require.ErrorIs(t, err, index.ErrInvalidArgument, "base offset above math.MaxInt64 - math.MaxInt32")
	top, err := index.OpenTimeIndex(nil, filepath.Join(dir, "00000000000000000002.timeindex"), math.MaxInt64-math.MaxInt32, 4096)
	require.NoError(t, err, "the largest base offset the documentation names")
	require.NoError(t, top.Close())

	oi, err := index.OpenOffsetIndex(nil, filepath.Join(dir, "00000000000000000100.index"), 100, 4096)
	require.NoError(t, err)
	defer oi.Close()
	require.NoError(t, oi.Append(110, 512))
	for _, tt := range []struct {
		name             string
		offset, position int64
	}{
		{"offset not increasing", 105, 600},
		{"relative offset past MaxInt32", 100 + math.MaxInt32 + 1, 600},
		{"position past MaxInt32", 120, math.MaxInt32 + 1},
	} {
		err := oi.Append(tt.offset, tt.position)
		assert.ErrorIs(t, err, index.ErrInvalidArgument, tt.name)
		assert.NotErrorIs(t, err, index.ErrIndexFull, tt.name)
	}
	require.Equal(t, 1, oi.Entries(), "refused appends changed the index")
}
