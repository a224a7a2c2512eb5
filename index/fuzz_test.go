package index

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// FuzzOpenIndex opens random file bytes as an offset index and as a time
// index: Open, SanityCheck, Check, lookups, TruncateTo, Append and Close
// never panic (reads are bounded by the published entries, so a read past
// them would panic on a bounds check); the entry count is the length in
// whole entries; every lookup answers the "none" value or an entry at or
// below the target; on sorted entries the answer equals a linear scan and
// the warm-section search equals the plain binary search; a passing
// SanityCheck means the last entry follows the second last.
func FuzzOpenIndex(f *testing.F) {
	for _, p := range []string{
		"kafka-2.7.1/__consumer_offsets-17/00000000000000000000.timeindex",
		"kafka-source-code/__consumer_offsets-17/00000000000000000000.timeindex",
		"kafka-source-code/__consumer_offsets-17/00000000000000000058.timeindex",
	} {
		b, err := os.ReadFile(filepath.Join("testdata", p))
		require.NoError(f, err)
		f.Add(b, int64(0), int64(57))
	}
	f.Add(enc32(0, 0, 5, 100, 9, 4096), int64(100), int64(105))
	f.Add(append(enc32(3, 100), make([]byte, 24)...), int64(0), int64(3))
	f.Add(append(encTime(1000, 1), encTime(2000, 5)...), int64(7), int64(1500))
	f.Add([]byte{}, int64(0), int64(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(-5), int64(math.MinInt64))

	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		if len(data) > 1<<16 {
			return
		}
		if base < 0 {
			base = -(base + 1)
		}
		base %= MaxBaseOffset + 1
		fsys := vfs.NewMem()
		writeFile(t, fsys, "/x.index", data)
		writeFile(t, fsys, "/x.timeindex", data)

		// Offset index.
		idx := openOffset(t, fsys, "/x.index", base, 4096)
		n := idx.Entries()
		require.Equal(t, len(data)/OffsetEntrySize, n, "%d entries from %d bytes", n, len(data))
		es := offsetEntries(idx)
		sorted := true
		for i := 1; i < n; i++ {
			sorted = sorted && es[i].Offset > es[i-1].Offset
		}
		err := idx.SanityCheck()
		if err == nil && n > 1 {
			require.Greater(t, es[n-1].Offset, es[n-2].Offset, "SanityCheck passed %v after %v", es[n-1], es[n-2])
		}
		_ = idx.Check(int64(len(data))*100, func(pos int64) (int64, bool) { return pos, pos%2 == 0 })
		b := idx.x.view()
		targets := []int64{target, math.MinInt64, math.MaxInt64, base - 1, base}
		for _, e := range es {
			targets = append(targets, e.Offset-1, e.Offset, e.Offset+1)
		}
		for _, tg := range targets {
			got := idx.Lookup(tg)
			if got != (OffsetEntry{Offset: base}) {
				require.LessOrEqual(t, got.Offset, tg, "Lookup(%d) = %v", tg, got)
			}
			if sorted {
				want := linearOffset(es, base, tg)
				require.Equal(t, want, got, "Lookup(%d) = %v, linear scan %v", tg, got, want)
				w, p := searchOffsets(b, base, tg), searchOffsetsPlain(b, base, tg)
				require.Equal(t, p, w, "target %d: warm slot %d, plain slot %d", tg, w, p)
			}
		}
		_ = idx.TruncateTo(target)
		_ = idx.Append(target, 0)
		require.NoError(t, idx.Close())
		got, want := fileSize(t, fsys, "/x.index"), int64(idx.x.fileLen.Load())
		require.Equal(t, want, got, "closed file has %d bytes, index says %d", got, want)

		// Time index.
		tidx := openTime(t, fsys, "/x.timeindex", base, 4096)
		n = tidx.Entries()
		require.Equal(t, len(data)/TimeEntrySize, n, "%d entries from %d bytes", n, len(data))
		tes := timeEntries(tidx)
		sorted = true
		for i := 1; i < n; i++ {
			sorted = sorted && tes[i].Timestamp > tes[i-1].Timestamp
		}
		err = tidx.SanityCheck()
		if err == nil && n > 1 {
			require.Greater(t, tes[n-1].Timestamp, tes[n-2].Timestamp, "SanityCheck passed %v after %v", tes[n-1], tes[n-2])
		}
		_ = tidx.Check(target)
		b = tidx.x.view()
		targets = []int64{target, math.MinInt64, math.MaxInt64, -1, 0}
		for _, e := range tes {
			targets = append(targets, e.Timestamp-1, e.Timestamp, e.Timestamp+1)
		}
		for _, tg := range targets {
			got := tidx.Lookup(tg)
			if got != (TimeEntry{NoTimestamp, base}) {
				require.LessOrEqual(t, got.Timestamp, tg, "Lookup(%d) = %v", tg, got)
			}
			if sorted {
				want := TimeEntry{NoTimestamp, base}
				for _, e := range tes {
					if e.Timestamp <= tg {
						want = e
					}
				}
				require.Equal(t, want, got, "Lookup(%d) = %v, linear scan %v", tg, got, want)
				w, p := searchTimes(b, tg), searchTimesPlain(b, tg)
				require.Equal(t, p, w, "target %d: warm slot %d, plain slot %d", tg, w, p)
			}
		}
		_ = tidx.TruncateTo(target)
		_ = tidx.MaybeAppend(target, target, true)
		require.NoError(t, tidx.Close())
	})
}
