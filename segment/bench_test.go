package segment

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// rotateBytes is where both append loops of BenchmarkAppend start over
// (a new segment; a truncated file), so the benchmark does not fill the
// disk.
const rotateBytes = 64 << 20

// stamp returns a copy of tmpl with base offset off and its timestamps
// shifted so that maxTimestamp is ts (the CRC is recomputed).
func stamp(tmpl batch.Batch, off, ts int64) batch.Batch {
	b := batch.Batch(append([]byte(nil), tmpl...))
	shift := ts - tmpl.MaxTimestamp()
	binary.BigEndian.PutUint64(b[hdrLastOffsetDeltaAt+4:], uint64(tmpl.BaseTimestamp()+shift)) // baseTimestamp
	binary.BigEndian.PutUint64(b[hdrMaxTimestampAt:], uint64(ts))
	b.SetBaseOffset(off)
	b.SetCRC()
	return b
}

// BenchmarkAppend appends 16 KiB batches to a segment (no fsync) and, in
// the same run, writes the same bytes with a plain os.File write loop; it
// reports the segment's throughput as a fraction of the plain loop's
// (os-ratio; DESIGN.md's target is >= 0.85).
func BenchmarkAppend(b *testing.B) {
	const size = 16 << 10
	tmpl := build(b, spec{offsets: []int64{0, 1, 2, 3}, timestamps: []int64{1, 2, 3, 4}, valueSize: size/4 - 40})
	tmpl = stamp(tmpl, 0, 1000)
	b.Logf("batch of %d bytes", len(tmpl))
	dir := b.TempDir()
	cfg := Config{MaxSegmentBytes: rotateBytes + size}
	newSeg := func(base int64) *Segment {
		s, err := Create(vfs.Default, dir, base, cfg)
		require.NoError(b, err)
		return s
	}
	s := newSeg(0)
	bt := batch.Batch(append([]byte(nil), tmpl...))
	next := int64(0)
	n := 0
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		if s.Size() >= rotateBytes {
			b.StopTimer()
			require.NoError(b, s.MarkDeleted())
			mustClose(b, s)
			s = newSeg(next)
			b.StartTimer()
		}
		bt.SetBaseOffset(next)
		_, err := s.Append(bt)
		require.NoError(b, err)
		next = bt.NextOffset()
		n++
	}
	segTime := b.Elapsed() // excludes the stopped rotations
	b.StopTimer()
	mustClose(b, s)

	// The plain loop: the same bytes, the same number of writes.
	f, err := os.Create(filepath.Join(dir, "plain"))
	require.NoError(b, err)
	defer f.Close()
	written := int64(0)
	start := time.Now()
	for range n {
		if written >= rotateBytes {
			require.NoError(b, f.Truncate(0))
			_, err := f.Seek(0, 0)
			require.NoError(b, err)
			written = 0
		}
		m, err := f.Write(bt)
		require.NoError(b, err)
		written += int64(m)
	}
	osTime := time.Since(start)
	if segTime > 0 {
		b.ReportMetric(float64(osTime)/float64(segTime), "os-ratio")
	}
	b.ReportMetric(float64(osTime.Nanoseconds())/float64(max(n, 1)), "os-ns/op")
}

// bigSegment fills a segment with count small batches, one index entry
// per batch when interval is 0.
func bigSegment(b *testing.B, count int, interval int, cfg Config) (*Segment, []batch.Batch) {
	tmpl := build(b, spec{offsets: []int64{0, 1}, timestamps: []int64{1, 2}, valueSize: 20})
	cfg.IndexIntervalBytes = interval
	if interval == 0 {
		cfg.IndexIntervalBytes = -1
	}
	cfg.MaxIndexBytes = max(count*12+1024, 10<<20)
	s, err := Create(vfs.Default, b.TempDir(), 0, cfg)
	require.NoError(b, err)
	all := make([]batch.Batch, 0, count)
	for i := range count {
		bt := stamp(tmpl, int64(i)*2, int64(1_000_000+i*10))
		_, err := s.Append(bt)
		require.NoError(b, err)
		all = append(all, bt)
	}
	return s, all
}

// BenchmarkReadBytes is a consumer's fetch: Read (index lookup, header
// scan of 1 MiB of 16 KiB batches) then Bytes, zero-copy from the mapping:
// 0 allocations.
func BenchmarkReadBytes(b *testing.B) {
	tmpl := build(b, spec{offsets: []int64{0, 1, 2, 3}, timestamps: []int64{1, 2, 3, 4}, valueSize: 4000})
	s, err := Create(vfs.Default, b.TempDir(), 0, Config{})
	require.NoError(b, err)
	defer mustClose(b, s)
	const count = 4096
	for i := range count {
		_, err := s.Append(stamp(tmpl, int64(i)*4, int64(i)))
		require.NoError(b, err)
	}
	if !s.Mapped() {
		b.Skip("no mapping")
	}
	rng := rand.New(rand.NewPCG(1, 1))
	size := s.Size()
	var total int64
	b.ReportAllocs()
	for b.Loop() {
		off := rng.Int64N(count*4 - 64*4)
		s.AcquireRead()
		sl, err := s.Read(off, 1<<20, size, true)
		require.NoError(b, err)
		p, err := s.Bytes(sl.Start, sl.End, nil)
		require.NoError(b, err)
		total += int64(len(p))
		s.ReleaseRead()
	}
	b.SetBytes(total / int64(max(b.N, 1)))
}

// BenchmarkTranslate looks up random offsets in a segment of 500,000
// batches with an index entry for each (the index's warm-section search,
// then at most one header read), and in one indexed every 4 KiB.
func BenchmarkTranslate(b *testing.B) {
	for _, tc := range []struct {
		name     string
		count    int
		interval int
	}{{"500k-batches/every-batch", 500_000, 0}, {"500k-batches/interval-4KiB", 500_000, 4096}} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := bigSegment(b, tc.count, tc.interval, Config{})
			defer mustClose(b, s)
			b.Logf("%d index entries, %d MiB", s.offIdx.Entries(), s.Size()>>20)
			rng := rand.New(rand.NewPCG(2, 2))
			next := s.NextOffset()
			b.ReportAllocs()
			for b.Loop() {
				_, _, found, err := s.Translate(rng.Int64N(next), 0)
				require.NoError(b, err)
				require.True(b, found, "Translate found no batch")
			}
		})
	}
}

// BenchmarkFindOffsetByTimestamp looks up random timestamps in the same
// segment (time index, offset index, header scan, record iteration).
func BenchmarkFindOffsetByTimestamp(b *testing.B) {
	s, _ := bigSegment(b, 500_000, 4096, Config{})
	defer mustClose(b, s)
	rng := rand.New(rand.NewPCG(3, 3))
	b.ReportAllocs()
	for b.Loop() {
		ts := 1_000_000 + rng.Int64N(500_000*10)
		_, _, found, err := s.FindOffsetByTimestamp(ts, 0)
		require.NoError(b, err) // no message arguments: they would allocate in the loop
		require.True(b, found, "FindOffsetByTimestamp found no offset")
	}
}

// TestZeroAllocs backs the benchmarks' zero-allocation claims: Append,
// Read+Bytes, Translate and FindOffsetByTimestamp (uncompressed batches)
// on a mapped segment allocate nothing.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s, err := Create(vfs.Default, t.TempDir(), 0, Config{IndexIntervalBytes: 100})
	require.NoError(t, err)
	defer mustClose(t, s)
	bt := simpleBatch(t, 0, 4, 100, 500)
	next := int64(0)
	appendAllocs := testing.AllocsPerRun(500, func() {
		bt.SetBaseOffset(next)
		_, err := s.Append(bt)
		require.NoError(t, err)
		next = bt.NextOffset()
	})
	size := s.Size()
	readAllocs := testing.AllocsPerRun(500, func() {
		sl, err := s.Read(next/2, 64<<10, size, true)
		require.NoError(t, err)
		_, err = s.Bytes(sl.Start, sl.End, nil)
		require.NoError(t, err)
		_, _, _, err = s.Translate(next/3, 0)
		require.NoError(t, err)
		_, _, found, err := s.FindOffsetByTimestamp(101, next/2)
		require.NoError(t, err)
		require.True(t, found, "FindOffsetByTimestamp found no offset")
	})
	require.Zero(t, appendAllocs, "allocations per op: Append %v, Read+Bytes+Translate+FindOffsetByTimestamp %v", appendAllocs, readAllocs)
	require.Zero(t, readAllocs, "allocations per op: Append %v, Read+Bytes+Translate+FindOffsetByTimestamp %v", appendAllocs, readAllocs)
}
