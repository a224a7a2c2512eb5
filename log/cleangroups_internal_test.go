package log

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// TestGroupForCleaningLimits: a compaction's runs are cut where the next
// segment would pass segment.bytes, the index entries one segment holds,
// or an offset span of MaxInt32 from the run's base (Kafka's
// groupSegmentsBySize); a limit <= 0 is the default's.
func TestGroupForCleaningLimits(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(partDir, 0o755))
	cfg := Config{FS: mem, SegmentBytes: 1 << 16, SegmentIndexBytes: 4 << 10, IndexIntervalBytes: 1}
	cfg.ensureDefaults()
	// seg makes a sealed segment at base holding n one-record batches
	// from base, all with one timestamp: an offset index entry for each
	// batch after the first, one time index entry (the seal's).
	seg := func(base int64, n int) *segment.Segment {
		t.Helper()
		s, err := segment.Create(mem, partDir, base, cfg.segmentConfig())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		for i := range n {
			bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base + int64(i), PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
			require.NoError(t, bld.Add(batch.Record{Value: make([]byte, 100), Timestamp: 1}))
			b, err := bld.AppendTo(nil)
			require.NoError(t, err)
			_, err = s.Append(b)
			require.NoError(t, err)
		}
		require.NoError(t, s.Seal())
		return s
	}
	three := []*segment.Segment{seg(0, 1), seg(1, 1), seg(2, 1)}
	size := three[0].Size()
	for _, s := range three {
		o, ti := s.IndexEntries()
		require.Equal(t, [2]int{0, 1}, [2]int{o, ti}, "one batch: no offset entry, the seal's time entry")
	}
	dense := []*segment.Segment{seg(100, 8), seg(200, 8), seg(300, 8)}
	o, ti := dense[0].IndexEntries()
	require.Equal(t, [2]int{7, 1}, [2]int{o, ti})
	// Two dense segments take 2o+1 offset entries and 3 time entries,
	// three 3o+2 and 5: room for 2o+1 offset entries (and 8 time
	// entries) holds two.
	denseTwo := 8 * (2*o + 2)
	farBase, farSpan := seg(1<<31, 1), seg(math.MaxInt32, 1) // 2^31 and 2^31-1 offsets after 0's base

	// bases lists the runs as their segments' base offsets.
	bases := func(groups [][]*segment.Segment) [][]int64 {
		var out [][]int64
		for _, g := range groups {
			var b []int64
			for _, s := range g {
				b = append(b, s.BaseOffset())
			}
			out = append(out, b)
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		segs          []*segment.Segment
		segmentBytes  int64
		maxIndexBytes int
		want          [][]int64
	}{
		{name: "all fit", segs: three, segmentBytes: 3 * size, maxIndexBytes: 1 << 20, want: [][]int64{{0, 1, 2}}},
		{name: "two fit", segs: three, segmentBytes: 3*size - 1, maxIndexBytes: 1 << 20, want: [][]int64{{0, 1}, {2}}},
		{name: "one fits", segs: three, segmentBytes: 2*size - 1, maxIndexBytes: 1 << 20, want: [][]int64{{0}, {1}, {2}}},
		{name: "default limits", segs: three, want: [][]int64{{0, 1, 2}}},
		// 60 bytes: room for 6 offset entries and 3 time entries; the
		// first segment has 1 time entry, each added one takes 2.
		{name: "time index room", segs: three, segmentBytes: 1 << 20, maxIndexBytes: 60, want: [][]int64{{0, 1}, {2}}},
		{name: "offset index room", segs: dense, segmentBytes: 1 << 20, maxIndexBytes: denseTwo, want: [][]int64{{100, 200}, {300}}},
		{name: "offset index room for one", segs: dense, segmentBytes: 1 << 20, maxIndexBytes: denseTwo - 8, want: [][]int64{{100}, {200}, {300}}},
		{name: "span of MaxInt32", segs: []*segment.Segment{three[0], farSpan}, want: [][]int64{{0, math.MaxInt32}}},
		{name: "span past MaxInt32", segs: []*segment.Segment{three[0], farBase}, want: [][]int64{{0}, {1 << 31}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, bases(groupForCleaning(tc.segs, tc.segmentBytes, tc.maxIndexBytes)))
		})
	}
}
