package segment

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrackerCountsUntilTheLastUnref: a Tracker counts the segments Create,
// CreateSpare, Open and OpenClean (under a Budget, which leaves the files
// closed) returned with its Config, each until its last Unref, and runs
// what WhenIdle registered once, after the last segment's files were
// closed and (after MarkDeleted) removed. With none counted, WhenIdle
// registers nothing.
func TestTrackerCountsUntilTheLastUnref(t *testing.T) {
	root := t.TempDir()
	var tr Tracker
	cfg := Config{Tracker: &tr}
	require.False(t, tr.WhenIdle(func() { t.Error("ran with nothing counted") }))

	// A sealed segment to open, twice, in two directories.
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	for _, dir := range dirs {
		require.NoError(t, os.Mkdir(dir, 0o755))
		s, err := Create(nil, dir, 0, cfg)
		require.NoError(t, err)
		require.Equal(t, 1, tr.Live())
		mustAppend(t, s, simpleBatch(t, 0, 3, 1000, 10))
		require.NoError(t, s.Seal())
		require.NoError(t, s.Close())
		require.Equal(t, 0, tr.Live())
	}
	opened, err := Open(nil, dirs[0], 0, cfg)
	require.NoError(t, err)
	budgeted := cfg
	budgeted.Budget = NewBudget(1)
	atRest, err := OpenClean(nil, dirs[1], 0, budgeted)
	require.NoError(t, err)
	require.True(t, atRest.w.openedAtRest, "OpenClean left the files closed")
	spare, err := CreateSpare(nil, root, cfg)
	require.NoError(t, err)
	require.Equal(t, 3, tr.Live())

	// A reader's reference outlives the owner's Close of a deleted segment.
	opened.Ref()
	require.NoError(t, opened.MarkDeleted())
	require.NoError(t, opened.Close())
	logPath := opened.LogPath()
	ran := 0
	require.True(t, tr.WhenIdle(func() {
		ran++
		_, err := os.Stat(logPath)
		require.ErrorIs(t, err, fs.ErrNotExist, "the files are removed before it runs")
	}))
	require.NoError(t, atRest.Close())
	require.NoError(t, spare.Discard())
	require.Equal(t, 1, tr.Live())
	require.Zero(t, ran)
	require.NoError(t, opened.Unref())
	require.Equal(t, 1, ran)
	require.Equal(t, 0, tr.Live())
}
