package index

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// Lookup benchmarks in full default-size (10 MiB) indexes on OS files,
// mapped: 1,310,720 offset entries, 873,813 time entries. "warm" is
// Lookup (Kafka's warm-section search), "plain" a plain binary search over
// all entries plus the same decoding. "tail" targets lie in the last 512
// entries (in-sync followers and consumers); "random" targets are uniform
// over the whole index. Both report 0 allocs/op. The page-cache effect the
// warm section exists for (no cold page faults) does not show in a hot
// benchmark: here it only saves the binary search's first ~10 steps.

const benchTargets = 1 << 12

func fullOffsetIndex(b *testing.B) (*OffsetIndex, int64) {
	b.Helper()
	idx := openOffset(b, vfs.Default, filepath.Join(b.TempDir(), "00000000000000000000.index"), 0, DefaultMaxIndexSize)
	b.Cleanup(func() { _ = idx.Close() })
	for i := range idx.MaxEntries() {
		// Offsets step by 3 (batches of 3 records), positions by 4 KiB.
		require.NoError(b, idx.Append(int64(3*i+2), int64(i)*1024))
	}
	require.True(b, idx.IsFull(), "%d entries", idx.Entries())
	require.Equal(b, 1_310_720, idx.Entries(), "%d entries", idx.Entries())
	return idx, int64(3*idx.Entries() + 2)
}

func fullTimeIndex(b *testing.B) (*TimeIndex, int64) {
	b.Helper()
	idx := openTime(b, vfs.Default, filepath.Join(b.TempDir(), "00000000000000000000.timeindex"), 0, DefaultMaxIndexSize)
	b.Cleanup(func() { _ = idx.Close() })
	const t0 = 1_700_000_000_000
	n := idx.MaxEntries()
	for i := range n {
		require.NoError(b, idx.MaybeAppend(t0+int64(5*i), int64(3*i+2), i == n-1))
	}
	require.Equal(b, 873_813, idx.Entries(), "%d entries", idx.Entries())
	return idx, t0 + int64(5*n)
}

func BenchmarkOffsetLookup(b *testing.B) {
	idx, end := fullOffsetIndex(b)
	tail := targets(end-3*512, end)
	random := targets(0, end)
	for _, tc := range []struct {
		name    string
		targets []int64
	}{{"tail", tail}, {"random", random}} {
		b.Run("warm/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			i := 0
			for b.Loop() {
				sink += idx.Lookup(tc.targets[i&(benchTargets-1)]).Position
				i++
			}
			_ = sink
		})
		b.Run("plain/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			i := 0
			for b.Loop() {
				v := idx.x.view()
				if s := searchOffsetsPlain(v, 0, tc.targets[i&(benchTargets-1)]); s >= 0 {
					sink += offsetAt(v, 0, s) + positionAt(v, s)
				}
				i++
			}
			_ = sink
		})
	}
}

func BenchmarkTimeLookup(b *testing.B) {
	idx, end := fullTimeIndex(b)
	const t0 = 1_700_000_000_000
	tail := targets(end-5*512, end)
	random := targets(t0, end)
	for _, tc := range []struct {
		name    string
		targets []int64
	}{{"tail", tail}, {"random", random}} {
		b.Run("warm/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			i := 0
			for b.Loop() {
				sink += idx.Lookup(tc.targets[i&(benchTargets-1)]).Offset
				i++
			}
			_ = sink
		})
		b.Run("plain/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			i := 0
			for b.Loop() {
				v := idx.x.view()
				if s := searchTimesPlain(v, tc.targets[i&(benchTargets-1)]); s >= 0 {
					sink += timestampAt(v, s) + timeOffsetAt(v, 0, s)
				}
				i++
			}
			_ = sink
		})
	}
}

// BenchmarkAppend measures OffsetIndex.Append plus TimeIndex.MaybeAppend
// into mapped files, reset every time the index fills.
func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	idx := openOffset(b, vfs.Default, filepath.Join(dir, "a.index"), 0, DefaultMaxIndexSize)
	defer idx.Close()
	tidx := openTime(b, vfs.Default, filepath.Join(dir, "a.timeindex"), 0, DefaultMaxIndexSize)
	defer tidx.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if idx.IsFull() || tidx.IsFull() {
			require.NoError(b, idx.Reset())
			require.NoError(b, tidx.Reset())
			i = 0
		}
		require.NoError(b, idx.Append(int64(i), int64(i)))
		require.NoError(b, tidx.MaybeAppend(int64(i), int64(i), false))
		i++
	}
}
