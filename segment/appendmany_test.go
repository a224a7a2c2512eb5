package segment

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestAppendBatchesMatchesAppend checks that AppendBatches of groups of
// batches leaves the same files (.log, .index, .timeindex) and the same
// metadata as Append of each batch, with one write per group.
func TestAppendBatchesMatchesAppend(t *testing.T) {
	cfg := Config{IndexIntervalBytes: 300}
	var batches []batch.Batch
	off := int64(100)
	for i := range 40 {
		n := 1 + i%4
		batches = append(batches, simpleBatch(t, off, n, 1_000+int64(i*10)-int64(i%3*7), 60))
		off += int64(n) + int64(i%2) // gaps too, as a follower's log has
	}

	oneFS, manyFS := vfs.NewMem(), vfs.NewMem()
	mustMkdir(t, oneFS, "/x")
	mustMkdir(t, manyFS, "/x")
	one, err := Create(oneFS, "/x", 100, cfg)
	require.NoError(t, err)
	defer mustClose(t, one)
	for _, b := range batches {
		mustAppend(t, one, b)
	}

	in := vfs.NewInjector(manyFS)
	many, err := Create(in, "/x", 100, cfg)
	require.NoError(t, err)
	defer mustClose(t, many)
	writes := 0
	in.SetHook(func(op vfs.Op) error {
		if strings.HasSuffix(op.Path, LogSuffix) && (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) {
			writes++
		}
		return nil
	})
	groups := 0
	for i := 0; i < len(batches); {
		k := min(1+groups%5, len(batches)-i)
		var buf []byte
		for _, b := range batches[i : i+k] {
			buf = append(buf, b...)
		}
		require.NoError(t, many.AppendBatches(buf))
		i += k
		groups++
	}
	require.Equal(t, groups, writes, "one write per group")

	require.Equal(t, one.Size(), many.Size())
	require.Equal(t, one.NextOffset(), many.NextOffset())
	ts1, off1 := one.MaxTimestamp()
	ts2, off2 := many.MaxTimestamp()
	require.Equal(t, [2]int64{ts1, off1}, [2]int64{ts2, off2})
	require.Equal(t, one.offIdx.Entries(), many.offIdx.Entries())
	require.Equal(t, one.timeIdx.Entries(), many.timeIdx.Entries())
	require.Greater(t, many.offIdx.Entries(), 3)
	for i := range one.offIdx.Entries() {
		require.Equal(t, one.offIdx.Entry(i), many.offIdx.Entry(i), "offset index entry %d", i)
	}
	for i := range one.timeIdx.Entries() {
		require.Equal(t, one.timeIdx.Entry(i), many.timeIdx.Entry(i), "time index entry %d", i)
	}
	require.Equal(t, readAll(t, oneFS, one.LogPath()), readAll(t, manyFS, many.LogPath()))
	checkLookups(t, many, checkSegment(t, many))
}

// TestAppendBatchesRefuses checks that a group with a bad batch, offsets
// that do not increase, or more bytes than the segment holds is refused
// whole before anything is written, and that a failed write publishes
// nothing and cuts what it wrote.
func TestAppendBatchesRefuses(t *testing.T) {
	good := func(base int64) []byte { return simpleBatch(t, base, 2, 1_000, 20) }
	join := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	cut := good(12)
	cut = cut[:len(cut)-3]
	for _, c := range []struct {
		name string
		buf  []byte
		want error
	}{
		{"torn last batch", join(good(10), cut), nil},
		{"offsets go back", join(good(10), good(11)), ErrOffsetNotIncreasing},
		{"below the segment's next offset", good(1), ErrOffsetNotIncreasing},
		{"past 2^31 offsets from the base", good(1 << 32), ErrOffsetOverflow},
		{"more than the segment holds", join(good(10), simpleBatch(t, 12, 1, 1_000, 5000)), ErrSegmentFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := vfs_NewMemForTest(t)
			s, err := Create(fsys, "/x", 0, Config{MaxSegmentBytes: 4096})
			require.NoError(t, err)
			defer mustClose(t, s)
			mustAppend(t, s, good(0))
			size, next := s.Size(), s.NextOffset()
			err = s.AppendBatches(c.buf)
			require.Error(t, err)
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
			}
			require.Equal(t, size, s.Size())
			require.Equal(t, next, s.NextOffset())
			require.Len(t, readAll(t, fsys, s.LogPath()), int(size), "nothing written")
			require.NoError(t, s.AppendBatches(join(good(10), good(12))), "the segment takes the next group")
			checkSegment(t, s)
		})
	}

	t.Run("failed write", func(t *testing.T) {
		mem := vfs.NewMem()
		mustMkdir(t, mem, "/x")
		in := vfs.NewInjector(mem)
		s, err := Create(in, "/x", 0, Config{})
		require.NoError(t, err)
		defer mustClose(t, s)
		mustAppend(t, s, good(0))
		size := s.Size()
		in.FailOnce(func(op vfs.Op) bool { return op.Kind == vfs.OpWriteAt && strings.HasSuffix(op.Path, LogSuffix) })
		require.ErrorIs(t, s.AppendBatches(join(good(2), good(4))), vfs.ErrInjected)
		require.Equal(t, size, s.Size())
		require.Equal(t, int64(2), s.NextOffset())
		require.NoError(t, s.AppendBatches(join(good(2), good(4))))
		checkSegment(t, s)
	})
}
