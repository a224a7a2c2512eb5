package segment

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestAdoptAs: a spare adopted at a base offset is that base's segment:
// its files carry the base's names (a stale .txnindex of that name is
// gone), appends and lookups work relative to the base, and it reopens as
// the segment at that base. AdoptAs refuses a segment that is not an empty
// spare, and a base an index cannot hold, changing nothing.
func TestAdoptAs(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fsys vfs.FS
			dir := "/p"
			if fsName == "os" {
				fsys, dir = vfs.Default, t.TempDir()
			} else {
				mem := vfs.NewMem()
				mustMkdir(t, mem, dir)
				fsys = mem
			}
			cfg := Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20}
			const base = 1000
			stale, err := fsys.Create(filepath.Join(dir, FileName(base, TxnIndexSuffix)))
			require.NoError(t, err)
			require.NoError(t, stale.Close())

			s, err := CreateSpare(fsys, dir, cfg)
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, FileName(0, LogSuffix)+SpareSuffix), s.LogPath())
			require.ErrorIs(t, s.AdoptAs(-1), ErrOffsetOverflow)
			assert.Equal(t, SpareSuffix, s.Suffix(), "unchanged")

			require.NoError(t, s.AdoptAs(base))
			assert.Equal(t, int64(base), s.BaseOffset())
			assert.Equal(t, int64(base), s.NextOffset())
			assert.Equal(t, "", s.Suffix())
			names, err := fsys.List(dir)
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{FileName(base, LogSuffix), FileName(base, IndexSuffix), FileName(base, TimeIndexSuffix)}, names)
			require.ErrorIs(t, s.AdoptAs(base+1), ErrSuffix, "no longer a spare")

			next := int64(base)
			for i := range 5 {
				b := simpleBatch(t, next, 2, int64(100+i), 30)
				mustAppend(t, s, b)
				next = b.NextOffset()
			}
			m := checkSegment(t, s)
			checkLookups(t, s, m)
			require.NoError(t, s.Flush())
			require.NoError(t, s.Close())

			r, err := Open(fsys, dir, base, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			assert.Equal(t, next, r.NextOffset())
			checkLookups(t, r, checkSegment(t, r))
		})
	}
}

// TestAdoptAsRefusesNonEmpty: a spare that was written to is no longer
// adoptable (its index entries are relative to the placeholder base).
func TestAdoptAsRefusesNonEmpty(t *testing.T) {
	mem := vfs.NewMem()
	mustMkdir(t, mem, "/p")
	s, err := CreateSpare(mem, "/p", Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096})
	require.NoError(t, err)
	mustAppend(t, s, simpleBatch(t, 0, 1, 100, 10))
	require.ErrorIs(t, s.AdoptAs(7), ErrSuffix)
	require.NoError(t, s.Discard())
	names, err := mem.List("/p")
	require.NoError(t, err)
	assert.Empty(t, names, "Discard removes the spare's files")
}
