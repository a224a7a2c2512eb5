package segment

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestGrowIndexes: an active segment whose indexes are full takes more
// entries once GrowIndexes doubled them past MaxIndexBytes (what a
// compaction's rewrite does); its lookups stay right, sealed and
// reopened with the same, smaller, MaxIndexBytes.
func TestGrowIndexes(t *testing.T) {
	fsys := vfs.NewMem()
	dir := "/p"
	mustMkdir(t, fsys, dir)
	cfg := Config{IndexIntervalBytes: 1, MaxIndexBytes: 48}
	s, err := Create(fsys, dir, 0, cfg)
	require.NoError(t, err)
	ts := int64(1000)
	next := int64(0)
	appendOne := func() {
		t.Helper()
		mustAppend(t, s, simpleBatch(t, next, 2, ts+next, 10))
		next += 2
	}
	for s.FreeIndexEntries() > 0 {
		appendOne()
	}
	_, err = s.Append(simpleBatch(t, next, 2, ts+next, 10))
	require.ErrorIs(t, err, ErrSegmentFull, "the indexes are full")
	full, _ := s.IndexEntries()

	require.NoError(t, s.GrowIndexes())
	require.Positive(t, s.FreeIndexEntries())
	for range 3 * full {
		if s.FreeIndexEntries() == 0 {
			require.NoError(t, s.GrowIndexes())
		}
		appendOne()
	}
	offs, _ := s.IndexEntries()
	require.Greater(t, offs, full)
	m := checkSegment(t, s)
	checkLookups(t, s, m)
	require.NoError(t, s.Seal())
	require.ErrorIs(t, s.GrowIndexes(), ErrSealed)
	mustClose(t, s)

	s, err = Open(fsys, dir, 0, cfg)
	require.NoError(t, err)
	defer mustClose(t, s)
	require.Equal(t, next, s.NextOffset())
	reopened, _ := s.IndexEntries()
	require.Equal(t, offs, reopened, "the index kept its entries")
	checkLookups(t, s, checkSegment(t, s))
}
