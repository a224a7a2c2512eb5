package log_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestBudgetReadsEverySegment opens a log of 10,000 segments (2,000 with
// -short or -race) under a budget of 16 open segments and reads every
// one: at rest, after the open and after the reads, the log holds fewer
// than one descriptor and one mapping per sealed segment (the open
// segments of the budget, the active one, the lock), and while reading it
// never holds more than the budget allows. Without the budget the open
// needs three descriptors per segment: 30,000 for this log, past the
// usual limit of open files.
func TestBudgetReadsEverySegment(t *testing.T) {
	n := 10_000
	if testing.Short() || raceEnabled {
		n = 2_000
	}
	const budget = 16
	dir := filepath.Join(t.TempDir(), "topic-0")
	batches := writeSegments(t, dir, n)
	cfg := plog.Config{SegmentBytes: 1 << 20, SegmentIndexBytes: 1024, MaxOpenSegments: budget}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.Equal(t, int64(n), p.LogEndOffset())

	// The budget's segments (3 files each), the active segment and its
	// producer snapshot, the lock, and room for one reader.
	limit := 3*(budget+2) + 2
	fds, maps, ok := openFiles(t, dir)
	if ok {
		t.Logf("after open: %d descriptors, %d mappings for %d segments", fds, maps, n)
		assert.LessOrEqual(t, fds, limit)
		assert.LessOrEqual(t, maps, limit)
		assert.Less(t, float64(fds)/float64(n-1), 1.0)
		assert.Less(t, float64(maps)/float64(n-1), 1.0)
	}
	for off := range int64(n) {
		r, err := p.ReadFrom(off, 1)
		require.NoError(t, err)
		require.Equal(t, off, r.FirstOffset())
		require.True(t, bytes.Equal(batches[off], r.Bytes()), "offset %d", off)
		if off%1000 == 0 && ok {
			fds, maps, _ := openFiles(t, dir)
			require.LessOrEqual(t, fds, limit, "descriptors while reading offset %d", off)
			require.LessOrEqual(t, maps, limit, "mappings while reading offset %d", off)
		}
		require.NoError(t, r.Close())
	}
	st := p.Stats().SegmentBudget
	assert.LessOrEqual(t, st.Open, budget)
	assert.GreaterOrEqual(t, st.Reopens, int64(n-budget-1), "every segment reopened to be read: %+v", st)
	if ok {
		fds, maps, _ := openFiles(t, dir)
		t.Logf("after reading: %d descriptors, %d mappings; %+v", fds, maps, st)
		assert.LessOrEqual(t, fds, limit)
		assert.LessOrEqual(t, maps, limit)
	}
	require.NoError(t, p.Verify(), "Verify reads every segment within the budget too")
	assert.LessOrEqual(t, p.Stats().SegmentBudget.Open, budget)
}

// TestBudgetWriterPaths runs the partition's writers over segments a
// budget of one has closed: a truncation into a closed sealed segment (it
// is reopened and becomes active), appends after it, DeleteRecordsBefore
// and retention (DeleteSegments) of closed segments, Close and a clean
// reopen; logtest.Check compares every read with the model after each
// step. On MemFS a closed segment's heap mapping is poisoned under the
// invariants tag, so a read of a closed segment's bytes would fail the
// check.
func TestBudgetWriterPaths(t *testing.T) {
	for _, budget := range []int{1, 3} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			fs := vfs.NewMem()
			bt := logtest.MakeBatch(4, 50, 1_700_000_000_000, 1)
			cfg := plog.Config{FS: fs, SegmentBytes: int64(2 * len(bt)), SegmentIndexBytes: 1024, MaxOpenSegments: budget}
			p, err := plog.Open("/p", cfg)
			require.NoError(t, err)
			m := logtest.NewModel(0, false)
			appendN := func(n int) {
				for range n {
					base, err := p.AppendBatch(append([]byte(nil), bt...))
					require.NoError(t, err)
					require.NoError(t, m.AppendBatch(bt, base))
				}
			}
			appendN(30) // 15 segments of two batches
			require.NoError(t, logtest.Check(p, m))
			st := p.Stats().SegmentBudget
			require.LessOrEqual(t, st.Open, budget)
			require.Positive(t, st.Closes)

			require.NoError(t, p.TruncateTo(22)) // inside a closed segment
			require.NoError(t, m.TruncateTo(22))
			require.NoError(t, m.ReloadProducers(fs, p))
			require.NoError(t, logtest.Check(p, m))
			appendN(6)
			require.NoError(t, logtest.Check(p, m))

			require.NoError(t, p.DeleteRecordsBefore(9))
			require.NoError(t, m.DeleteRecordsBefore(9))
			require.NoError(t, logtest.Check(p, m))
			segs, err := p.Segments()
			require.NoError(t, err)
			require.NoError(t, p.DeleteSegments(segs[:3]))
			require.NoError(t, m.DeleteSegmentsBefore(segs[3].BaseOffset()))
			for _, s := range segs {
				require.NoError(t, s.Unref())
			}
			require.NoError(t, logtest.Check(p, m))
			require.LessOrEqual(t, p.Stats().SegmentBudget.Open, budget)

			require.NoError(t, p.Close())
			m.Reopen()
			p, err = plog.Open("/p", cfg)
			require.NoError(t, err)
			require.NoError(t, logtest.Check(p, m))
			appendN(3)
			require.NoError(t, logtest.Check(p, m))
			require.LessOrEqual(t, p.Stats().SegmentBudget.Open, budget)
			require.NoError(t, p.Close())
		})
	}
}

// TestDirBudgetShared: DirConfig.MaxOpenSegments is one budget for every
// partition of the Dir (a partition's own Config.MaxOpenSegments is
// ignored there); a negative value is refused.
func TestDirBudgetShared(t *testing.T) {
	fs := vfs.NewMem()
	bt := logtest.MakeBatch(4, 50, 1_700_000_000_000, 1)
	cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentBytes: int64(len(bt)), SegmentIndexBytes: 1024, MaxOpenSegments: 100},
		MaxOpenSegments: 2}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	var parts []*plog.Partition
	for i := range 4 {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		for range 5 {
			_, err := p.AppendBatch(append([]byte(nil), bt...))
			require.NoError(t, err)
		}
		parts = append(parts, p)
	}
	// The rolls left their flushes to the Dir's flush workers, which
	// reopen closed segments to fsync them: Sync does that work now (a
	// queued flush then finds nothing to do), so the two snapshots of the
	// budget below see the same counts.
	for _, p := range parts {
		require.NoError(t, p.Sync())
	}
	st := d.SegmentBudget()
	require.LessOrEqual(t, st.Open, 2, "%+v", st)
	require.Equal(t, st, parts[0].Stats().SegmentBudget)
	for _, p := range parts {
		for off := int64(0); off < 20; off += 4 { // 4 records a batch
			r, err := p.ReadFrom(off, 1)
			require.NoError(t, err)
			require.Equal(t, off, r.FirstOffset())
			require.NoError(t, r.Close())
		}
	}
	require.LessOrEqual(t, d.SegmentBudget().Open, 2)
	require.Positive(t, d.SegmentBudget().Reopens)
	require.NoError(t, d.Close())

	_, err = plog.OpenDir("/other", plog.DirConfig{Config: plog.Config{FS: fs}, MaxOpenSegments: -1})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)
	_, err = plog.Open("/single", plog.Config{FS: fs, MaxOpenSegments: -1})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)
}
