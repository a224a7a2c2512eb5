package segment

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// walkBenchSegment writes a closed segment of n batches of 4 KiB (8
// records each, increasing timestamps) in a temporary directory and
// returns the directory and the .log's size.
func walkBenchSegment(b *testing.B, n int) (string, int64) {
	dir := b.TempDir()
	s, err := Create(vfs.Default, dir, 0, Config{MaxSegmentBytes: 1 << 30})
	require.NoError(b, err)
	for i := range n {
		mustAppend(b, s, simpleBatch(b, s.NextOffset(), 8, int64(1000+i), 460))
	}
	size := s.Size()
	mustClose(b, s)
	return dir, size
}

// BenchmarkBatches walks every entry of a 16 MiB segment with Batches, and
// every header with Headers.
func BenchmarkBatches(b *testing.B) {
	dir, size := walkBenchSegment(b, 4096)
	s, err := Open(vfs.Default, dir, 0, Config{MaxSegmentBytes: 1 << 30})
	require.NoError(b, err)
	defer mustClose(b, s)
	for _, bc := range []struct {
		name string
		walk func() int
	}{
		{"Batches", func() int {
			n := 0
			for _, err := range s.Batches(0) {
				require.NoError(b, err)
				n++
			}
			return n
		}},
		{"Headers", func() int {
			n := 0
			for _, err := range s.Headers() {
				require.NoError(b, err)
				n++
			}
			return n
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				require.Equal(b, 4096, bc.walk())
			}
		})
	}
}

// BenchmarkOpen opens a closed 16 MiB segment: clean (nothing after the
// last index entries is read), unclean (the header scan from the last
// offset index entry and from the time index's batch), and with its offset
// index lost (the rebuild: every header).
func BenchmarkOpen(b *testing.B) {
	dir, _ := walkBenchSegment(b, 4096)
	cfg := Config{MaxSegmentBytes: 1 << 30}
	idx := segPath(dir, 0, IndexSuffix)
	saved, err := os.ReadFile(idx)
	require.NoError(b, err)
	for _, bc := range []struct {
		name    string
		open    func(vfs.FS, string, int64, Config) (*Segment, error)
		rebuild bool
	}{
		{"Clean", OpenClean, false},
		{"Unclean", Open, false},
		{"Rebuild", Open, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if bc.rebuild {
					b.StopTimer()
					require.NoError(b, os.Truncate(idx, 0))
					b.StartTimer()
				}
				s, err := bc.open(vfs.Default, dir, 0, cfg)
				require.NoError(b, err)
				b.StopTimer()
				mustClose(b, s)
				require.NoError(b, os.WriteFile(idx, saved, 0o644))
				b.StartTimer()
			}
		})
	}
}
