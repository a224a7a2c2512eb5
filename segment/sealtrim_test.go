package segment

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/vfs"
)

// sealTrimMaxIndexBytes is the preallocated index size of these tests.
const sealTrimMaxIndexBytes = 4096

// sealedWithPendingTrim creates a segment at base 5 on mem, appends n
// batches (an index entry for each), flushes and seals it: Seal leaves
// both index files at their preallocated length.
func sealedWithPendingTrim(t *testing.T, mem *vfs.MemFS, n int) *Segment {
	t.Helper()
	mustMkdir(t, mem, "/p")
	s, err := Create(mem, "/p", 5, Config{IndexIntervalBytes: 1, MaxIndexBytes: sealTrimMaxIndexBytes})
	require.NoError(t, err)
	mem.SyncAll() // the directory entries
	next := int64(5)
	for i := range n {
		b := simpleBatch(t, next, 1+i%3, int64(1000+i), 40)
		mustAppend(t, s, b)
		next = b.NextOffset()
	}
	require.NoError(t, s.Flush())
	require.NoError(t, s.Seal())
	return s
}

// indexFileSizes returns the lengths of the segment's .index and
// .timeindex files.
func indexFileSizes(t *testing.T, fsys vfs.FS, s *Segment) (off, tim int64) {
	t.Helper()
	size := func(suffix string) int64 {
		st, err := fsys.Stat(segPath("/p", s.BaseOffset(), suffix))
		require.NoError(t, err)
		return st.Size()
	}
	return size(IndexSuffix), size(TimeIndexSuffix)
}

// TestSealLeavesIndexTrimPending: Seal no longer cuts the index files
// (a roll must not spend the ftruncate under the partition's lock); the
// trim is pending until TrimSealedIndexes or a writer-side method that
// touches the index files settles it, and lookups answer the same
// before and after.
func TestSealLeavesIndexTrimPending(t *testing.T) {
	const batches = 7
	trimmed := func(t *testing.T, mem *vfs.MemFS, s *Segment) {
		t.Helper()
		assert.False(t, s.TrimPending())
		off, tim := indexFileSizes(t, mem, s)
		offN, timeN := s.IndexEntries()
		assert.Equal(t, int64(offN*index.OffsetEntrySize), off, ".index cut to its entries")
		assert.Equal(t, int64(timeN*index.TimeEntrySize), tim, ".timeindex cut to its entries")
	}
	full := func(t *testing.T, mem *vfs.MemFS, s *Segment) {
		t.Helper()
		assert.False(t, s.TrimPending())
		off, tim := indexFileSizes(t, mem, s)
		assert.Equal(t, int64(sealTrimMaxIndexBytes), off)
		assert.Equal(t, int64(sealTrimMaxIndexBytes/index.TimeEntrySize*index.TimeEntrySize), tim)
	}
	tests := []struct {
		name  string
		do    func(t *testing.T, s *Segment)
		check func(t *testing.T, mem *vfs.MemFS, s *Segment)
	}{
		{"TrimSealedIndexes", func(t *testing.T, s *Segment) { require.NoError(t, s.TrimSealedIndexes()) }, trimmed},
		{"TrimSealedIndexes twice", func(t *testing.T, s *Segment) {
			require.NoError(t, s.TrimSealedIndexes())
			require.NoError(t, s.TrimSealedIndexes())
		}, trimmed},
		{"Flush trims first", func(t *testing.T, s *Segment) { require.NoError(t, s.Flush()) }, trimmed},
		{"ChangeSuffix trims first", func(t *testing.T, s *Segment) {
			require.NoError(t, s.ChangeSuffix("", CleanedSuffix))
			require.NoError(t, s.ChangeSuffix(CleanedSuffix, ""))
		}, trimmed},
		{"Unseal drops it", func(t *testing.T, s *Segment) { require.NoError(t, s.Unseal()) }, full},
		{"TruncateTo drops it", func(t *testing.T, s *Segment) {
			_, err := s.TruncateTo(s.NextOffset() - 1)
			require.NoError(t, err)
		}, full},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			s := sealedWithPendingTrim(t, mem, batches)
			defer mustClose(t, s)
			require.True(t, s.TrimPending())
			off, tim := indexFileSizes(t, mem, s)
			assert.Equal(t, int64(sealTrimMaxIndexBytes), off, "Seal leaves the .index preallocated")
			assert.Greater(t, tim, int64(batches*index.TimeEntrySize), "Seal leaves the .timeindex preallocated")
			m := checkSegment(t, s)
			checkLookups(t, s, m)

			tt.do(t, s)
			tt.check(t, mem, s)
			checkLookups(t, s, checkSegment(t, s))
			if !s.Sealed() {
				// An unsealed segment takes appends and seals again.
				mustAppend(t, s, simpleBatch(t, s.NextOffset(), 2, 2000, 40))
				require.NoError(t, s.Seal())
				require.True(t, s.TrimPending())
				require.NoError(t, s.TrimSealedIndexes())
				trimmed(t, mem, s)
			}
		})
	}
}

// TestCloseTrimsPendingIndexes: a segment closed with its trim pending
// leaves trimmed index files, which Open takes as they are.
func TestCloseTrimsPendingIndexes(t *testing.T) {
	mem := vfs.NewMem()
	s := sealedWithPendingTrim(t, mem, 5)
	offN, timeN := s.IndexEntries()
	require.NoError(t, s.Close())
	off, tim := indexFileSizes(t, mem, s)
	assert.Equal(t, int64(offN*index.OffsetEntrySize), off)
	assert.Equal(t, int64(timeN*index.TimeEntrySize), tim)
}

// TestCrashBeforeSealTrim: a crash after Seal and before the trim (or
// after a trim that was not synced) leaves a sealed segment whose index
// files are still preallocated: zeros past the entries. Opening and
// recovering it finds every batch and rebuilds indexes that match them,
// as for the active segment's preallocated indexes after a crash.
func TestCrashBeforeSealTrim(t *testing.T) {
	for _, trim := range []bool{false, true} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("trim=%v/%d", trim, seed), func(t *testing.T) {
				mem := vfs.NewMem()
				s := sealedWithPendingTrim(t, mem, 9)
				want := checkSegment(t, s)
				if trim {
					require.NoError(t, s.TrimSealedIndexes()) // not synced
				}
				clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: int(seed * 14), TornPercent: int(seed * 12), Seed: seed})
				mustClose(t, s)

				r, err := Open(clone, "/p", 5, Config{IndexIntervalBytes: 1, MaxIndexBytes: sealTrimMaxIndexBytes})
				require.NoError(t, err)
				defer mustClose(t, r)
				_, err = r.Recover(0)
				require.NoError(t, err)
				got := checkSegment(t, r)
				require.Len(t, got.batches, len(want.batches), "every flushed batch survives")
				checkLookups(t, r, got)
			})
		}
	}
}

// TestTrimSealedIndexesConcurrent runs the background trim while readers
// look up offsets and timestamps and the writer flushes the segment: the
// race detector sees no unordered access, and every lookup answers as
// before.
func TestTrimSealedIndexesConcurrent(t *testing.T) {
	for range 20 {
		mem := vfs.NewMem()
		s := sealedWithPendingTrim(t, mem, 30)
		m := checkSegment(t, s)
		var wg sync.WaitGroup
		start := make(chan struct{})
		s.Ref()
		wg.Go(func() {
			defer func() { assert.NoError(t, s.Unref()) }()
			<-start
			assert.NoError(t, s.TrimSealedIndexes())
		})
		wg.Go(func() {
			<-start
			for range 3 {
				checkLookups(t, s, m)
			}
		})
		close(start)
		require.NoError(t, s.Flush()) // the writer: trims first or after
		wg.Wait()
		assert.False(t, s.TrimPending())
		mustClose(t, s)
	}
}
