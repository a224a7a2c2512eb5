package epochs_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/epochs"
	"github.com/partlog/partlog/internal/vfs"
)

const dir = "/p"

// newCache returns an empty cache kept in dir/leader-epoch-checkpoint of a
// fresh in-memory filesystem.
func newCache(t *testing.T) (*epochs.Cache, vfs.FS, string) {
	t.Helper()
	fsys := vfs.NewMem()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, checkpoint.LeaderEpochFile)
	c := epochs.New(fsys, path)
	return &c, fsys, path
}

func entries(pairs ...int64) []epochs.Entry {
	var out []epochs.Entry
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, epochs.Entry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

// onDisk reads the file back (nil when there is none).
func onDisk(t *testing.T, fsys vfs.FS, path string) []epochs.Entry {
	t.Helper()
	c := epochs.New(fsys, path)
	dropped, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, -1, dropped)
	return c.Entries()
}

func TestAssignIsDurableAtOnce(t *testing.T) {
	c, fsys, path := newCache(t)
	require.NoError(t, c.Assign(0, 0))
	require.NoError(t, c.Assign(3, 1207))
	require.False(t, c.Dirty())
	require.Equal(t, entries(0, 0, 3, 1207), c.Entries())
	require.Equal(t, entries(0, 0, 3, 1207), onDisk(t, fsys, path))

	// The latest epoch again, later, or a negative one: nothing changes,
	// nothing is written.
	require.NoError(t, c.Assign(3, 2000))
	require.NoError(t, c.Assign(-1, 2000))
	require.Equal(t, entries(0, 0, 3, 1207), c.Entries())

	// At most one epoch starts at an offset: a higher epoch at 1207
	// replaces epoch 3.
	require.NoError(t, c.Assign(4, 1207))
	require.Equal(t, entries(0, 0, 4, 1207), c.Entries())
	require.Equal(t, entries(0, 0, 4, 1207), onDisk(t, fsys, path))
}

// TestAssignLowerEpochCutsBack: Kafka's LeaderEpochFileCache.assign takes
// an epoch lower than the latest (a follower copying a leader whose log
// went back to an older epoch): the entries of an epoch at or above it,
// or starting at or after its start, go, then it is added, durably. On
// 86b910c a lower epoch was ignored.
func TestAssignLowerEpochCutsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch int32
		start int64
		want  []epochs.Entry
	}{
		{"lower epoch after the latest start", 2, 2000, entries(0, 0, 2, 2000)},
		{"lower epoch before the latest start", 2, 1000, entries(0, 0, 2, 1000)},
		{"latest epoch earlier", 3, 1000, entries(0, 0, 3, 1000)},
		{"lowest epoch at its own start", 0, 0, entries(0, 0)},
		{"lower epoch below every start", 1, 0, entries(1, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fsys, path := newCache(t)
			require.NoError(t, c.Assign(0, 0))
			require.NoError(t, c.Assign(3, 1207))
			require.NoError(t, c.Assign(tc.epoch, tc.start))
			require.Equal(t, tc.want, c.Entries())
			require.Equal(t, tc.want, onDisk(t, fsys, path))
			// Observe (recovery's replay) takes only a higher epoch, as
			// Kafka's LogSegment.recover does.
			o, _, _ := newCache(t)
			o.Observe(0, 0)
			o.Observe(3, 1207)
			o.Observe(tc.epoch, tc.start)
			require.Equal(t, entries(0, 0, 3, 1207), o.Entries())
		})
	}
}

func TestAssignFailedWriteChangesNothing(t *testing.T) {
	c, fsys, path := newCache(t)
	require.NoError(t, c.Assign(1, 10))
	require.NoError(t, c.Assign(2, 20))
	before := c.Entries()
	// A directory where the file should go makes every write fail.
	require.NoError(t, fsys.Remove(path))
	require.NoError(t, fsys.MkdirAll(path, 0o755))
	for _, a := range []epochs.Entry{{Epoch: 3, StartOffset: 30}, {Epoch: 3, StartOffset: 20}, {Epoch: 3, StartOffset: 5}} {
		err := c.Assign(a.Epoch, a.StartOffset)
		require.Error(t, err, "assign %+v", a)
		require.Equal(t, before, c.Entries(), "assign %+v", a)
		require.False(t, c.Dirty())
	}
}

func TestObserveIsInMemory(t *testing.T) {
	c, fsys, path := newCache(t)
	c.Observe(-1, 0) // a batch without a leader epoch adds nothing
	require.Zero(t, c.Len())
	require.False(t, c.Dirty())
	c.Observe(1, 0)
	c.Observe(1, 5) // same epoch: nothing
	c.Observe(4, 9)
	require.True(t, c.Dirty())
	require.Nil(t, onDisk(t, fsys, path))
	// A replay from below an entry already held: the entries starting at
	// or after the batch go.
	c.Observe(5, 9)
	require.Equal(t, entries(1, 0, 5, 9), c.Entries())
	require.NoError(t, c.Persist())
	require.False(t, c.Dirty())
	require.Equal(t, entries(1, 0, 5, 9), onDisk(t, fsys, path))
	require.NoError(t, c.Persist()) // clean: nothing to write
}

func TestTruncate(t *testing.T) {
	c, _, _ := newCache(t)
	for _, e := range entries(0, 0, 2, 10, 5, 20, 7, 30) {
		require.NoError(t, c.Assign(e.Epoch, e.StartOffset))
	}
	c.TruncateFromEnd(31) // nothing starts at or past 31
	require.False(t, c.Dirty())
	c.TruncateFromEnd(30)
	require.True(t, c.Dirty())
	require.Equal(t, entries(0, 0, 2, 10, 5, 20), c.Entries())

	// Kafka's truncateFromStart: entries wholly below go, the one holding
	// the start moves up to it.
	c.TruncateFromStart(15)
	require.Equal(t, entries(2, 15, 5, 20), c.Entries())
	c.TruncateFromStart(20) // an entry starting exactly there: the one before goes
	require.Equal(t, entries(5, 20), c.Entries())
	c.TruncateFromStart(100)
	require.Equal(t, entries(5, 100), c.Entries())

	first, ok := c.First()
	require.True(t, ok)
	require.Equal(t, epochs.Entry{Epoch: 5, StartOffset: 100}, first)
	c.Clear()
	require.Zero(t, c.Len())
	require.True(t, c.Dirty())
	c.TruncateFromStart(200) // empty: nothing
	_, ok = c.First()
	require.False(t, ok)
}

func TestEndOffsetFor(t *testing.T) {
	c, _, _ := newCache(t)
	got := func(req int32) [2]int64 {
		e, off := c.EndOffsetFor(req, 100)
		return [2]int64{int64(e), off}
	}
	undef := [2]int64{int64(epochs.Undefined), epochs.UndefinedOffset}
	require.Equal(t, undef, got(0), "empty cache")
	for _, e := range entries(2, 10, 5, 40, 7, 60) {
		require.NoError(t, c.Assign(e.Epoch, e.StartOffset))
	}
	require.Equal(t, undef, got(epochs.Undefined))
	require.Equal(t, [2]int64{7, 100}, got(7), "latest: the log end")
	require.Equal(t, undef, got(8), "above every epoch")
	require.Equal(t, [2]int64{1, 10}, got(1), "below the first: its start")
	require.Equal(t, [2]int64{2, 40}, got(2))
	require.Equal(t, [2]int64{2, 40}, got(3), "between: the entry below, the start above")
	require.Equal(t, [2]int64{5, 60}, got(6))
}

func TestListOffsetsEpochs(t *testing.T) {
	c, _, _ := newCache(t)
	l, e := c.ListOffsetsEpochs(0)
	require.Equal(t, [2]int32{epochs.Undefined, epochs.Undefined}, [2]int32{l, e})
	require.NoError(t, c.Assign(2, 10))
	require.NoError(t, c.Assign(5, 40))
	l, e = c.ListOffsetsEpochs(5)
	require.Equal(t, [2]int32{5, epochs.Undefined}, [2]int32{l, e}, "first entry above the log start")
	l, e = c.ListOffsetsEpochs(10)
	require.Equal(t, [2]int32{5, 2}, [2]int32{l, e})
	// Entries below the log start (a tiered log's cache starts at the
	// whole log's start): the epoch of the log start's own entry, Kafka's
	// epochForOffset.
	l, e = c.ListOffsetsEpochs(50)
	require.Equal(t, [2]int32{5, 5}, [2]int32{l, e})
	l, e = c.ListOffsetsEpochs(39)
	require.Equal(t, [2]int32{5, 2}, [2]int32{l, e})
}

func TestStartsEpoch(t *testing.T) {
	c, _, _ := newCache(t)
	require.True(t, c.StartsEpoch(0))
	require.False(t, c.StartsEpoch(-1))
	require.NoError(t, c.Assign(3, 0))
	require.False(t, c.StartsEpoch(3))
	require.True(t, c.StartsEpoch(4))
	latest, ok := c.Latest()
	require.True(t, ok)
	require.Equal(t, int32(3), latest)
}

func TestLoad(t *testing.T) {
	c, fsys, path := newCache(t)
	dropped, err := c.Load()
	require.NoError(t, err, "no file: an empty cache")
	require.Equal(t, -1, dropped)
	require.Zero(t, c.Len())

	require.NoError(t, checkpoint.WriteLeaderEpochs(fsys, path, entries(0, 0, 3, 12)))
	dropped, err = c.Load()
	require.NoError(t, err)
	require.Equal(t, -1, dropped)
	require.Equal(t, entries(0, 0, 3, 12), c.Entries())
	require.False(t, c.Dirty())

	f, err := fsys.Create(path)
	require.NoError(t, err)
	_, err = f.Write([]byte("0\n2\n0 0\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = c.Load()
	require.True(t, errors.Is(err, base.ErrCorrupt), "%v", err)
	require.Zero(t, c.Len(), "a file that does not parse leaves the cache empty")
}

// TestLoadKeepsOrderedPrefix: a file whose entries go out of order keeps
// the entries before the first that does, marks the cache dirty and says
// which entry went. The checkpoint reader's order check used to refuse the
// whole file, so the cache lost every entry. Kafka's empty file and a file
// that ends after its version line are no entries, as Kafka reads them.
func TestLoadKeepsOrderedPrefix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    []epochs.Entry
		dropped int
	}{
		{"epoch goes back", "0\n3\n0 0\n5 10\n3 20\n", entries(0, 0, 5, 10), 2},
		{"start offset goes back", "0\n3\n0 0\n5 10\n6 8\n", entries(0, 0, 5, 10), 2},
		{"first entries equal", "0\n2\n4 0\n4 10\n", entries(4, 0), 1},
		{"empty file", "", nil, -1},
		{"version line only", "0\n", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fsys, path := newCache(t)
			f, err := fsys.Create(path)
			require.NoError(t, err)
			_, err = f.Write([]byte(tc.file))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			dropped, err := c.Load()
			require.NoError(t, err)
			require.Equal(t, tc.dropped, dropped)
			require.Equal(t, tc.want, c.Entries())
			require.Equal(t, tc.dropped >= 0, c.Dirty())
		})
	}
}
