package segment

import (
	"errors"
	"path/filepath"
	"strings"
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

// TestBeginAdoptAsDefersRenames: BeginAdoptAs does no filesystem
// operation; the adopted segment takes appends and serves reads at its new
// base under the spare's names, and SettleAdoption (once: later calls do
// nothing) removes the stale .txnindex and renames the three files, while
// appends go on. Close settles an adoption still pending, so the files a
// start-up reads hold the data.
func TestBeginAdoptAsDefersRenames(t *testing.T) {
	for _, settle := range []string{"settle", "close"} {
		t.Run(settle, func(t *testing.T) {
			mem := vfs.NewMem()
			mustMkdir(t, mem, "/p")
			in := vfs.NewInjector(mem)
			cfg := Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20}
			const base = 500
			stale, err := mem.Create(filepath.Join("/p", FileName(base, TxnIndexSuffix)))
			require.NoError(t, err)
			require.NoError(t, stale.Close())
			s, err := CreateSpare(in, "/p", cfg)
			require.NoError(t, err)
			spareNames, err := mem.List("/p")
			require.NoError(t, err)

			var ops []vfs.Op
			in.SetHook(func(op vfs.Op) error { ops = append(ops, op); return nil })
			require.NoError(t, s.BeginAdoptAs(base))
			assert.Empty(t, ops, "BeginAdoptAs")
			assert.True(t, s.AdoptionPending())
			assert.Equal(t, int64(base), s.BaseOffset())
			next := int64(base)
			for i := range 3 {
				b := simpleBatch(t, next, 2, int64(100+i), 30)
				mustAppend(t, s, b)
				next = b.NextOffset()
			}
			checkLookups(t, s, checkSegment(t, s))
			names, err := mem.List("/p")
			require.NoError(t, err)
			assert.ElementsMatch(t, spareNames, names, "the files keep the spare's names")

			if settle == "settle" {
				ops = nil
				require.NoError(t, s.SettleAdoption())
				var kinds []vfs.OpKind
				for _, op := range ops {
					kinds = append(kinds, op.Kind)
				}
				assert.Equal(t, []vfs.OpKind{vfs.OpRemove, vfs.OpRename, vfs.OpRename, vfs.OpRename}, kinds)
				assert.False(t, s.AdoptionPending())
				ops = nil
				require.NoError(t, s.SettleAdoption())
				assert.Empty(t, ops, "a settled adoption does nothing")
				assert.Equal(t, filepath.Join("/p", FileName(base, LogSuffix)), s.LogPath())
				b := simpleBatch(t, next, 2, 200, 30)
				mustAppend(t, s, b)
				next = b.NextOffset()
				require.NoError(t, s.Flush())
			}
			in.SetHook(nil)
			require.NoError(t, s.Close())
			names, err = mem.List("/p")
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{FileName(base, LogSuffix), FileName(base, IndexSuffix), FileName(base, TimeIndexSuffix)}, names)

			r, err := Open(mem, "/p", base, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			assert.Equal(t, next, r.NextOffset())
			checkLookups(t, r, checkSegment(t, r))
		})
	}
}

// TestSettleAdoptionFailure: a failed rename is undone, the segment keeps
// the spare's names and every later settlement, and every method that
// needs the names (Flush), returns the error: the data can no longer be
// called durable.
func TestSettleAdoptionFailure(t *testing.T) {
	mem := vfs.NewMem()
	mustMkdir(t, mem, "/p")
	in := vfs.NewInjector(mem)
	s, err := CreateSpare(in, "/p", Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20})
	require.NoError(t, err)
	spare, err := mem.List("/p")
	require.NoError(t, err)
	require.NoError(t, s.BeginAdoptAs(42))
	mustAppend(t, s, simpleBatch(t, 42, 2, 100, 30))
	boom := errors.New("injected")
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpRename && strings.Contains(op.Path, IndexSuffix) {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, s.SettleAdoption(), boom)
	in.SetHook(nil)
	names, err := mem.List("/p")
	require.NoError(t, err)
	assert.ElementsMatch(t, spare, names, "the .log's rename was undone")
	require.ErrorIs(t, s.SettleAdoption(), boom, "sticky")
	require.ErrorIs(t, s.Flush(), boom)
	assert.True(t, s.AdoptionPending())
	require.ErrorIs(t, s.Close(), boom)
}

// TestSettleAdoptionConcurrentWithAppends: SettleAdoption runs in another
// goroutine while the writer appends and readers read (for the race
// detector): the data is intact under the base's names.
func TestSettleAdoptionConcurrentWithAppends(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{IndexIntervalBytes: 1, MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}
	s, err := CreateSpare(vfs.Default, dir, cfg)
	require.NoError(t, err)
	const base = 7000
	require.NoError(t, s.BeginAdoptAs(base))
	done := make(chan error, 1)
	go func() { done <- s.SettleAdoption() }()
	next := int64(base)
	for i := range 50 {
		b := simpleBatch(t, next, 2, int64(100+i), 30)
		mustAppend(t, s, b)
		next = b.NextOffset()
		_, _, found, err := s.Translate(next-1, 0)
		require.NoError(t, err)
		require.True(t, found)
	}
	require.NoError(t, <-done)
	require.NoError(t, s.Close())
	r, err := Open(vfs.Default, dir, base, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	assert.Equal(t, next, r.NextOffset())
	checkLookups(t, r, checkSegment(t, r))
}
