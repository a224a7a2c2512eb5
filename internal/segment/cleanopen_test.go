package segment

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// truncateFile cuts the file at path to size bytes.
func truncateFile(t *testing.T, fsys vfs.FS, path string, size int64) {
	t.Helper()
	f, err := fsys.OpenReadWrite(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
}

// An offset index without entries is valid for a segment whose batches all
// start within the first IndexIntervalBytes (closing such a segment trims
// its .index to zero bytes): Open keeps it and rebuilds nothing. An empty
// .index under a segment with batches further in is missing entries and is
// rebuilt, as before.
func TestOpenKeepsEmptyIndexOfSmallSegment(t *testing.T) {
	for _, tc := range []struct {
		name        string
		batches     int
		wantRebuild bool
	}{
		{"within the interval", 3, false},
		{"past the interval", 40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs_NewMemForTest(t)
			var logs bytes.Buffer
			cfg := Config{IndexIntervalBytes: 1024, MaxSegmentBytes: 1 << 20,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			s, err := Create(fsys, "/x", 0, cfg)
			require.NoError(t, err)
			for i := range tc.batches {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, 1000-int64(i), 200))
			}
			mustClose(t, s)
			// A damaged index: the entries of a large segment lost.
			truncateFile(t, fsys, segPath("/x", 0, IndexSuffix), 0)

			for _, clean := range []bool{false, true} {
				logs.Reset()
				open := Open
				if clean {
					open = OpenClean
				}
				s, err = open(fsys, "/x", 0, cfg)
				require.NoError(t, err)
				off, _ := s.IndexEntries()
				if tc.wantRebuild {
					assert.Contains(t, logs.String(), "rebuilt index")
					assert.Positive(t, off)
				} else {
					assert.NotContains(t, logs.String(), "rebuilt index")
					assert.Zero(t, off)
				}
				ts, at := s.MaxTimestamp()
				assert.Equal(t, int64(1000), ts)
				assert.Equal(t, int64(0), at)
				checkLookups(t, s, checkSegment(t, s))
				mustClose(t, s)
				truncateFile(t, fsys, segPath("/x", 0, IndexSuffix), 0)
			}
		})
	}
}
