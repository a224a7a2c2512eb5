package index

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestReadIndexMatchesOpen: ReadOffsetIndex and ReadTimeIndex return the
// entries OpenOffsetIndex and OpenTimeIndex find in the same trimmed file
// (what a segment's close leaves), for empty, small and larger indexes,
// on every backing.
func TestReadIndexMatchesOpen(t *testing.T) {
	const base = 1000
	forEachMode(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for _, n := range []int{0, 1, 2, 37, 1500} {
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			offPath := filepath.Join(dir, "o.index")
			timePath := filepath.Join(dir, "t.timeindex")
			oi := openOffset(t, fsys, offPath, base, DefaultMaxIndexSize)
			ti := openTime(t, fsys, timePath, base, DefaultMaxIndexSize)
			off, pos, ts := int64(base), int64(0), int64(1_700_000_000_000)
			for range n {
				off += 1 + rng.Int64N(50)
				pos += 1 + rng.Int64N(5000)
				ts += 1 + rng.Int64N(1000)
				require.NoError(t, oi.Append(off, pos))
				require.NoError(t, ti.MaybeAppend(ts, off, false))
			}
			require.NoError(t, oi.Close())
			require.NoError(t, ti.Close())

			oi = openOffset(t, fsys, offPath, base, DefaultMaxIndexSize)
			ti = openTime(t, fsys, timePath, base, DefaultMaxIndexSize)
			wantOff, wantTime := offsetEntries(oi), timeEntries(ti)
			require.NoError(t, oi.Close())
			require.NoError(t, ti.Close())
			require.Len(t, wantOff, n)

			gotOff, err := ReadOffsetIndex(fsys, offPath, base, math.MaxInt32)
			require.NoError(t, err)
			assert.Equal(t, wantOff, gotOff, "%d offset entries", n)
			gotTime, err := ReadTimeIndex(fsys, timePath, base, math.MaxInt32)
			require.NoError(t, err)
			assert.Equal(t, wantTime, gotTime, "%d time entries", n)

			// Exactly at the limit is read.
			_, err = ReadOffsetIndex(fsys, offPath, base, n*OffsetEntrySize)
			require.NoError(t, err)
			require.NoError(t, fsys.Remove(offPath))
			require.NoError(t, fsys.Remove(timePath))
		}
	})
}

// TestReadIndexRefuses: each damaged file is refused by the read with an
// error naming the file and the failed rule; the mapped index refuses the
// same file (SanityCheck or the ordering rules of Check), except for a
// negative timestamp, which only a segment's check of its time index
// refuses. A file over the limit is refused without being read, and a
// missing one is the filesystem's error.
func TestReadIndexRefuses(t *testing.T) {
	const base = 500
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tooLarge := errors.New("too large")
	tests := []struct {
		name  string
		time  bool
		file  []byte // nil: no file
		limit int
		want  error // batch.ErrCorrupt, tooLarge (ErrTooLarge) or fs.ErrNotExist
		// mappedToo: the mapped index's checks refuse it as well.
		mappedToo bool
	}{
		{name: "offset/partial entry", file: cat(enc32(1, 100), []byte{0}), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/zero tail KAFKA-12734", file: enc32(1, 100, 7, 900, 0, 0, 0, 0), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/offset decreasing inside", file: enc32(5, 100, 3, 200, 8, 300), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/offset repeated", file: enc32(5, 100, 5, 200), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/position decreasing inside", file: enc32(1, 100, 2, 50, 3, 300), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/below the base", file: enc32(-1, 10), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/negative position", file: enc32(1, -5), want: batch.ErrCorrupt, mappedToo: true},
		{name: "offset/over the limit", file: enc32(1, 100, 2, 200, 3, 300), limit: 16, want: tooLarge},
		{name: "offset/missing", want: fs.ErrNotExist},
		{name: "time/partial entry", time: true, file: cat(encTime(1000, 1), []byte{0, 0}), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/zero tail KAFKA-12734", time: true, file: cat(encTime(1000, 1), encTime(2000, 4), encTime(0, 0)), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/timestamp decreasing inside", time: true, file: cat(encTime(1000, 1), encTime(900, 2), encTime(2000, 3)), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/timestamp repeated", time: true, file: cat(encTime(1000, 1), encTime(1000, 2)), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/offset decreasing inside", time: true, file: cat(encTime(1000, 5), encTime(2000, 3), encTime(3000, 6)), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/below the base", time: true, file: encTime(1000, -1), want: batch.ErrCorrupt, mappedToo: true},
		{name: "time/negative timestamp", time: true, file: encTime(-5, 0), want: batch.ErrCorrupt},
		{name: "time/over the limit", time: true, file: cat(encTime(1000, 1), encTime(2000, 2)), limit: 12, want: tooLarge},
		{name: "time/missing", time: true, want: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, dir := vfs.Default, t.TempDir()
			path := filepath.Join(dir, "00000000000000000500.index")
			if tt.file != nil {
				writeFile(t, fsys, path, tt.file)
			}
			limit := tt.limit
			if limit == 0 {
				limit = 64 << 10
			}
			var err error
			if tt.time {
				var es []TimeEntry
				es, err = ReadTimeIndex(fsys, path, base, limit)
				assert.Nil(t, es)
			} else {
				var es []OffsetEntry
				es, err = ReadOffsetIndex(fsys, path, base, limit)
				assert.Nil(t, es)
			}
			require.Error(t, err)
			switch tt.want {
			case tooLarge:
				require.ErrorIs(t, err, ErrTooLarge)
				require.NotErrorIs(t, err, batch.ErrCorrupt)
			case batch.ErrCorrupt:
				require.ErrorIs(t, err, batch.ErrCorrupt)
				var ce *batch.CorruptionError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, path, ce.File)
			default:
				require.ErrorIs(t, err, tt.want)
			}
			if !tt.mappedToo {
				return
			}
			if tt.time {
				idx := openTime(t, fsys, path, base, DefaultMaxIndexSize)
				defer idx.Close()
				assert.True(t, idx.SanityCheck() != nil || idx.Check(math.MaxInt64) != nil, "the mapped index accepts it")
				return
			}
			idx := openOffset(t, fsys, path, base, DefaultMaxIndexSize)
			defer idx.Close()
			batchAt := func(int64) (int64, bool) { return base - 1, true } // the log agrees with any entry
			assert.True(t, idx.SanityCheck() != nil || idx.Check(math.MaxInt32, batchAt) != nil, "the mapped index accepts it")
		})
	}
}
