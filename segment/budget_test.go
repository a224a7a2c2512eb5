package segment

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// openResources counts the descriptors and the mappings of this process
// that refer to files under dir (Linux: /proc/self/fd and
// /proc/self/maps); ok is false elsewhere.
func openResources(t testing.TB, dir string) (fds, maps int, ok bool) {
	t.Helper()
	fds, maps, err := vfs.OpenFiles(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return 0, 0, false
	}
	require.NoError(t, err)
	return fds, maps, true
}

// budgetSegments writes n sealed segments of one batch each under a Budget
// and returns them with their batches.
func budgetSegments(t *testing.T, fsys vfs.FS, dir string, n int, b *Budget) ([]*Segment, []batch.Batch) {
	t.Helper()
	cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: b}
	var segs []*Segment
	var bs []batch.Batch
	for i := range n {
		base := int64(i * 10)
		s, err := Create(fsys, dir, base, cfg)
		require.NoError(t, err)
		bt := simpleBatch(t, base, 10, 1_700_000_000_000+base, 50)
		mustAppend(t, s, bt)
		require.NoError(t, s.Seal())
		segs = append(segs, s)
		bs = append(bs, bt)
	}
	return segs, bs
}

// readSegment reads s's one batch under a read lease and checks it.
func readSegment(t testing.TB, s *Segment, want batch.Batch) {
	s.AcquireRead()
	defer s.ReleaseRead()
	sl, err := s.Read(s.BaseOffset(), len(want), s.Size(), true)
	require.NoError(t, err)
	got, err := s.Bytes(sl.Start, sl.End, nil)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "segment %d: bytes differ", s.BaseOffset())
	off, ts, found, err := s.FindOffsetByTimestamp(want.MaxTimestamp(), 0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, want.LastOffset(), off)
	require.Equal(t, want.MaxTimestamp(), ts)
}

// TestBudgetClosesUnusedSegments: under a Budget of 3, sealed segments
// close their files when unused (no descriptor, no mapping), at most 3 stay
// open, every one reads back through a clean reopen, and what a closed
// segment answers without its files (size, offsets, index counts) is
// unchanged. Without the Budget every sealed segment held three
// descriptors and up to three mappings.
func TestBudgetClosesUnusedSegments(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const n, budget = 40, 3
		b := NewBudget(budget)
		segs, bs := budgetSegments(t, fsys, dir, n, b)
		assert.LessOrEqual(t, b.Stats().Open, budget)
		resident := 0
		for _, s := range segs {
			if s.Resident() {
				resident++
			}
		}
		assert.LessOrEqual(t, resident, budget)
		if fds, maps, ok := openResources(t, dir); ok && fsys == vfs.Default {
			assert.LessOrEqual(t, fds, 3*budget, "descriptors at rest")
			assert.LessOrEqual(t, maps, 3*budget, "mappings at rest")
		}
		for i, s := range segs {
			offs, times := s.IndexEntries()
			assert.Equal(t, 0, offs, "segment %d: the first batch gets no offset entry", i)
			assert.Equal(t, 1, times, "segment %d", i)
			assert.Equal(t, int64(i*10+10), s.NextOffset())
			assert.Equal(t, int64(len(bs[i])), s.Size())
			assert.True(t, s.Mapped() == (fsys == vfs.Default), "Mapped")
		}
		for round := range 2 {
			for i, s := range segs {
				readSegment(t, s, bs[i])
				_, _, _, err := s.Translate(int64(i*10+5), 0)
				require.NoError(t, err, "round %d", round)
			}
		}
		st := b.Stats()
		assert.GreaterOrEqual(t, st.Reopens, int64(2*n-2*budget))
		assert.GreaterOrEqual(t, st.Closes, int64(2*n-2*budget))
		assert.LessOrEqual(t, st.Open, budget)
		if fds, maps, ok := openResources(t, dir); ok && fsys == vfs.Default {
			assert.LessOrEqual(t, fds, 3*budget, "descriptors at rest after reading")
			assert.LessOrEqual(t, maps, 3*budget, "mappings at rest after reading")
		}
		for _, s := range segs {
			s.AcquireRead() // checkSegment uses bytes aliasing the mapping
			checkSegment(t, s)
			s.ReleaseRead()
			mustClose(t, s)
		}
		assert.Equal(t, 0, b.Stats().Open)
		if fds, maps, ok := openResources(t, dir); ok && fsys == vfs.Default {
			assert.Zero(t, fds)
			assert.Zero(t, maps)
		}
	})
}

// TestBudgetPinKeepsBytes: a read lease (and Pin) keeps a segment open
// while the budget closes the others, so bytes aliasing its mapping stay
// valid; the last release lets the budget close it.
func TestBudgetPinKeepsBytes(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(0)
		segs, bs := budgetSegments(t, fsys, dir, 5, b)
		s := segs[0]
		s.AcquireRead()
		got, err := s.Bytes(0, s.Size(), nil)
		require.NoError(t, err)
		require.NoError(t, segs[1].Pin())
		for i := 2; i < len(segs); i++ {
			readSegment(t, segs[i], bs[i])
		}
		require.True(t, s.Resident())
		require.True(t, segs[1].Resident())
		require.True(t, bytes.Equal(bs[0], got))
		s.ReleaseRead()
		segs[1].Unpin()
		assert.False(t, s.Resident())
		assert.False(t, segs[1].Resident())
		assert.Equal(t, 0, b.Stats().Open)
		for _, s := range segs {
			mustClose(t, s)
		}
	})
}

// TestBudgetReopenChecksFiles: a segment closed at rest whose .log changed
// length, or whose index lost entries, behind its back reports corruption
// naming the file when it is read, instead of serving other bytes.
func TestBudgetReopenChecksFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		file func(dir string) string
		size int64
	}{
		{"log cut", func(dir string) string { return segPath(dir, 0, LogSuffix) }, 20},
		{"index grown", func(dir string) string { return segPath(dir, 0, IndexSuffix) }, 8},
		{"time index cut", func(dir string) string { return segPath(dir, 0, TimeIndexSuffix) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := NewBudget(0)
			segs, _ := budgetSegments(t, vfs.Default, dir, 2, b)
			require.False(t, segs[0].Resident())
			require.NoError(t, os.Truncate(tc.file(dir), tc.size))
			_, err := segs[0].Read(0, 1<<20, segs[0].Size(), true)
			require.ErrorIs(t, err, base.ErrCorrupt)
			require.ErrorContains(t, err, tc.file(dir))
			require.False(t, segs[0].Resident())
			if fds, _, ok := openResources(t, dir); ok {
				assert.Zero(t, fds, "a failed reopen leaves nothing open")
			}
			for _, s := range segs {
				mustClose(t, s)
			}
		})
	}
}

// TestBudgetConcurrentReaders: readers of many segments under a budget of
// one race with each other's reopens and closes (run with -race, and with
// the invariants tag, which poisons closed heap regions).
func TestBudgetConcurrentReaders(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(1)
		segs, bs := budgetSegments(t, fsys, dir, 8, b)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for k := range 200 {
					i := (g*7 + k*3) % len(segs)
					readSegment(t, segs[i], bs[i])
					offs, _ := segs[i].IndexEntries()
					assert.Equal(t, 0, offs)
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, b.Stats().Open, 1)
		for _, s := range segs {
			mustClose(t, s)
		}
	})
}

// TestBudgetWriterMethodsReopen: the writer-side methods a partition calls
// on a sealed segment (Flush, Unseal to append again, TruncateTo) reopen a
// segment closed at rest; an unsealed segment is never closed; MarkDeleted
// renames a closed segment's files without opening them (issue 28, case
// 3), a deleted segment is read through its new names and closes again
// once unused, and its files go at the last Unref.
func TestBudgetWriterMethodsReopen(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(0)
		segs, bs := budgetSegments(t, fsys, dir, 3, b)
		for _, s := range segs {
			require.False(t, s.Resident())
		}
		require.NoError(t, segs[0].Flush())
		require.False(t, segs[0].Resident(), "closed again once unused")

		require.NoError(t, segs[1].Unseal())
		require.True(t, segs[1].Resident())
		mustAppend(t, segs[1], simpleBatch(t, 20, 5, 1_700_000_000_100, 10))
		readSegment(t, segs[1], bs[1])
		require.True(t, segs[1].Resident(), "the active segment stays open")
		_, err := segs[1].TruncateTo(20)
		require.NoError(t, err)
		require.NoError(t, segs[1].Seal())
		require.False(t, segs[1].Resident())
		segs[1].AcquireRead()
		checkSegment(t, segs[1])
		segs[1].ReleaseRead()

		reopens := b.Stats().Reopens
		require.NoError(t, segs[2].MarkDeleted())
		require.False(t, segs[2].Resident(), "renamed without being opened")
		require.Equal(t, reopens, b.Stats().Reopens)
		_, err = fsys.Stat(segPath(dir, 20, LogSuffix+DeletedSuffix))
		require.NoError(t, err)
		readSegment(t, segs[2], bs[2]) // reopened by its new names
		require.False(t, segs[2].Resident(), "a deleted segment closes once unused")
		require.NoError(t, segs[2].Unref())
		_, err = fsys.Stat(segPath(dir, 20, LogSuffix+DeletedSuffix))
		require.ErrorIs(t, err, os.ErrNotExist)

		mustClose(t, segs[0])
		mustClose(t, segs[1])
		assert.Equal(t, 0, b.Stats().Open)
	})
}

// TestBudgetDeletedSegmentClosesWhenUnpinned (issue 28, case 3): a
// segment deleted while open under a Budget, and held by a reference,
// closes its files as soon as no one pins it (it no longer needs the
// budget's room, nor holds descriptors for a holder that reads nothing),
// reopens for a read, and closes again after it. Its files used to stay
// open until the last reference went.
func TestBudgetDeletedSegmentClosesWhenUnpinned(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(4)
		segs, bs := budgetSegments(t, fsys, dir, 2, b)
		s := segs[0]
		require.True(t, s.Resident())
		s.Ref() // a reader's
		require.NoError(t, s.MarkDeleted())
		require.False(t, s.Resident(), "closed once renamed")
		require.Equal(t, 1, b.Stats().Open, "a deleted segment leaves the budget")
		if fds, _, ok := openResources(t, dir); ok && fsys == vfs.Default {
			require.Equal(t, 3, fds, "only the other segment's files are open")
		}
		s.AcquireRead()
		require.True(t, s.Resident())
		s.ReleaseRead()
		require.False(t, s.Resident())
		readSegment(t, s, bs[0])
		require.NoError(t, s.Unref())
		require.NoError(t, s.Unref())
		for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			_, err := fsys.Stat(segPath(dir, 0, kind+DeletedSuffix))
			require.ErrorIs(t, err, os.ErrNotExist, kind)
		}
		mustClose(t, segs[1])
	})
}

// TestBudgetDeletedSegmentNamesReplaced: a deleted segment closed at rest
// whose .deleted names another segment of the same base took over (it was
// deleted while the first was still held) is not reopened from the other's
// files: reads return ErrDeleted. On Linux the files are told apart by
// their identity even when lengths and entry counts match; elsewhere (and
// on MemFS) by the length.
func TestBudgetDeletedSegmentNamesReplaced(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(0)
		cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: b}
		first := simpleBatch(t, 0, 10, 1_700_000_000_000, 50)
		second := simpleBatch(t, 0, 10, 1_700_000_000_999, 50) // same length, other bytes
		if fsys != vfs.Default || runtime.GOOS != "linux" {
			second = simpleBatch(t, 0, 10, 1_700_000_000_999, 60)
		}
		a, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		mustAppend(t, a, first)
		require.NoError(t, a.Seal())
		require.False(t, a.Resident())
		a.Ref() // a reader's
		require.NoError(t, a.MarkDeleted())
		require.NoError(t, a.Unref()) // the owner's

		a2, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		mustAppend(t, a2, second)
		require.NoError(t, a2.Seal())
		require.NoError(t, a2.MarkDeleted()) // over a's names
		readSegment(t, a2, second)

		_, err = a.Read(0, 1<<20, a.Size(), true)
		require.ErrorIs(t, err, ErrDeleted)
		require.NoError(t, a.Unref()) // removes the names, now a2's
		_, err = a2.Read(0, 1<<20, a2.Size(), true)
		require.ErrorIs(t, err, ErrDeleted)
		require.NoError(t, a2.Unref())
	})
}

// TestUnsealOnWrite: a sealed segment opened as a partition's active one
// with UnsealOnWrite keeps its sealed files and is closed at rest by its
// Budget; its indexes do not count as full for ShouldRoll (they grow back
// at the first write), Seal and Close need no write, and the first Append
// reopens and unseals it transparently (the active segment then stays
// open). Without a Budget UnsealOnWrite is Unseal.
func TestUnsealOnWrite(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(0)
		cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: b}
		s, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		first := simpleBatch(t, 0, 10, 1_700_000_000_000, 50)
		second := simpleBatch(t, 10, 10, 1_700_000_000_100, 50)
		mustAppend(t, s, first)
		mustAppend(t, s, second)
		mustClose(t, s)
		next := simpleBatch(t, 20, 5, 1_700_000_000_200, 10)

		open := func() *Segment {
			t.Helper()
			s, err := OpenClean(fsys, dir, 0, cfg)
			require.NoError(t, err)
			require.NoError(t, s.UnsealOnWrite())
			require.True(t, s.Sealed(), "the files stay sealed until a write")
			require.False(t, s.Resident(), "closed at rest under a budget of 0")
			require.Equal(t, RollNone, s.ShouldRoll(next, 1<<20, 0, time.Now()))
			return s
		}
		s = open()
		require.NoError(t, s.Seal())
		require.False(t, s.Resident())
		readSegment(t, s, first)
		mustClose(t, s)

		s = open()
		mustClose(t, s)

		s = open()
		mustAppend(t, s, next)
		require.False(t, s.Sealed())
		require.True(t, s.Resident(), "the active segment stays open")
		checkSegment(t, s)
		require.Equal(t, int64(25), s.NextOffset())
		require.NoError(t, s.Seal())
		mustClose(t, s)
		assert.Equal(t, 0, b.Stats().Open)

		cfg.Budget = nil
		s, err = OpenClean(fsys, dir, 0, cfg)
		require.NoError(t, err)
		require.NoError(t, s.UnsealOnWrite())
		require.False(t, s.Sealed(), "without a budget it unseals")
		mustClose(t, s)
	})
}

// TestRestActiveSegment: an active segment written and then rested goes
// back to the sealed form (its time index ends with the largest timestamp)
// and is closed at rest by its Budget; it reads as written, Flush reopens
// it, the next Append reopens and unseals it, and a clean reopen after
// Close finds every batch. Active segments counted with AddActive take
// room from the ring. Without a Budget Rest does nothing.
func TestRestActiveSegment(t *testing.T) {
	forBudgetFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		b := NewBudget(1)
		cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: b}
		s, err := Create(fsys, dir, 0, cfg)
		require.NoError(t, err)
		first := simpleBatch(t, 0, 10, 1_700_000_000_000, 50)
		next := simpleBatch(t, 10, 5, 1_700_000_000_100, 10)
		mustAppend(t, s, first)
		b.AddActive(1) // the owner counts it while it writes
		require.NoError(t, s.Rest())
		require.True(t, s.Sealed())
		require.False(t, s.Resident(), "the ring has no room beside the active segment counted")
		b.AddActive(-1)
		readSegment(t, s, first)
		require.Equal(t, RollNone, s.ShouldRoll(next, 1<<20, 0, time.Now()))
		require.NoError(t, s.Flush())
		mustAppend(t, s, next)
		require.False(t, s.Sealed(), "the append unseals it")
		require.True(t, s.Resident())
		require.Equal(t, int64(15), s.NextOffset())
		checkSegment(t, s)
		require.NoError(t, s.Rest())
		ts, _ := s.MaxTimestamp()
		require.NoError(t, s.Flush())
		mustClose(t, s)
		assert.Equal(t, BudgetStats{Max: 1, Reopens: b.Stats().Reopens, Closes: b.Stats().Closes}, b.Stats())

		s, err = OpenClean(fsys, dir, 0, Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1})
		require.NoError(t, err)
		require.Equal(t, int64(15), s.NextOffset())
		got, _ := s.MaxTimestamp()
		require.Equal(t, ts, got, "the time index ends with the largest timestamp")
		require.NoError(t, s.Rest())
		require.True(t, s.Sealed(), "without a budget Rest does nothing")
		require.NoError(t, s.Unseal())
		mustAppend(t, s, simpleBatch(t, 15, 1, 1_700_000_000_200, 10))
		require.NoError(t, s.Rest())
		require.False(t, s.Sealed(), "without a budget Rest does nothing")
		mustClose(t, s)
	})
}

// TestRestDropsOldMappings: an active segment returned to rest that its
// budget does not close (it has room) and that the next append wakes again
// kept every mapping a wake replaced (Unseal maps the .log and both indexes
// anew) until the budget closed it: three more mappings at every rest and
// wake, without bound. Rest now unmaps them when no reader pins the
// segment. While a reader holds a read lease they stay, and the bytes it
// holds stay readable; the first rest after it lets go unmaps them.
func TestRestDropsOldMappings(t *testing.T) {
	dir := t.TempDir()
	if _, _, ok := openResources(t, dir); !ok {
		t.Skip("counts the process's mappings in /proc")
	}
	cfg := Config{MaxIndexBytes: 1 << 20, MaxSegmentBytes: 1 << 20, IndexIntervalBytes: 1, Budget: NewBudget(4)}
	s, err := Create(nil, dir, 0, cfg)
	require.NoError(t, err)
	defer mustClose(t, s)
	first := simpleBatch(t, 0, 10, 1_700_000_000_000, 50)
	mustAppend(t, s, first)
	require.NoError(t, s.Rest())
	maps := func() int {
		_, n, _ := openResources(t, dir)
		return n
	}
	next := int64(10)
	restAndWake := func() {
		mustAppend(t, s, simpleBatch(t, next, 1, 1_700_000_000_000+next, 50))
		next++
		require.NoError(t, s.Rest())
		require.True(t, s.Resident(), "the budget has room: it keeps the segment open")
	}
	restAndWake()
	atRest := maps() // the .log and both indexes, each mapped at its length
	for i := range 5 {
		restAndWake()
		require.LessOrEqual(t, maps(), atRest, "mappings after rest and wake %d", i+1)
	}

	s.AcquireRead()
	held, err := s.Bytes(0, int64(len(first)), nil)
	require.NoError(t, err)
	restAndWake()
	restAndWake()
	require.Greater(t, maps(), atRest, "a reader's lease keeps the mappings its bytes may lie in")
	require.Equal(t, []byte(first), held)
	s.ReleaseRead()
	restAndWake()
	require.LessOrEqual(t, maps(), atRest)
	checkSegment(t, s)
}
