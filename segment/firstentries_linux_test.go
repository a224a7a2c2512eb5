//go:build linux

package segment

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// indexMapped returns the resident bytes of the process's mappings of the
// segment's .index and .timeindex at base in dir.
func indexMapped(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	var total int64
	for _, suffix := range []string{".index", ".timeindex"} {
		n, err := vfs.MappedBytes(segPath(dir, base, suffix))
		require.NoError(t, err)
		total += n
	}
	return total
}

// TestAppendsTouchNoIndexPage: appends that index every batch (Append and
// AppendBatches; in a new segment and in one woken from rest by its
// Budget, whose indexes are mapped anew) map no new page of the index
// mappings for their first entries (index: a new index's first page is
// faulted in when it is created; the first entries after a mapping of an
// existing file are written through the file, and the segment's checks
// read the writer's copy of the last entry, not the mapped page): no page
// fault per index of a partition written a few times, the cost that made
// appends spread over 1,000 partitions 3x slower than to one. Reads
// through the mappings then find every batch.
func TestAppendsTouchNoIndexPage(t *testing.T) {
	tests := []struct {
		name string
		// rest rests the segment (closed at rest by its Budget) after
		// the first batches.
		rest bool
		many bool // AppendBatches instead of Append
	}{
		{"new segment", false, false},
		{"new segment, AppendBatches", false, true},
		{"woken from rest", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			b := NewBudget(1)
			cfg := Config{MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: b}
			s, err := Create(vfs.Default, dir, 0, cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			next, batches := int64(0), 0
			appendN := func(n int) {
				batches += n
				for range n {
					bt := simpleBatch(t, next, 3, 1_700_000_000_000+next, 100)
					if tt.many {
						require.NoError(t, s.AppendBatches(bt))
					} else {
						mustAppend(t, s, bt)
					}
					next = bt.NextOffset()
				}
			}
			if tt.rest {
				appendN(5)
				b.AddActive(1)
				require.NoError(t, s.Rest())
				require.False(t, s.Resident(), "closed at rest")
				b.AddActive(-1)
			}
			before := indexMapped(t, dir, 0) // a new segment's first index pages: faulted in when created
			appendN(40)
			assert.Equal(t, before, indexMapped(t, dir, 0), "resident bytes of the index mappings after the appends")
			off, tim := s.IndexEntries()
			require.Equal(t, batches-1, off, "every batch after the first indexed")
			require.Equal(t, batches-1, tim, "every batch after the first indexed by time")
			require.NoError(t, s.Flush())
			checkSegment(t, s)
			assert.Positive(t, indexMapped(t, dir, 0), "lookups read the mappings")
		})
	}
}
