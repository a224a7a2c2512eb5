package log_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
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
			// The budget counts the segments no one holds: the
			// background flush after a roll holds the ones it syncs
			// until it ends, so each count waits for it.
			settled := func() segment.BudgetStats {
				require.NoError(t, p.FlushRolled())
				return p.Stats().SegmentBudget
			}
			appendN(30) // 15 segments of two batches
			require.NoError(t, logtest.Check(p, m))
			st := settled()
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
			require.LessOrEqual(t, settled().Open, budget)

			require.NoError(t, p.Close())
			m.Reopen()
			p, err = plog.Open("/p", cfg)
			require.NoError(t, err)
			require.NoError(t, logtest.Check(p, m))
			appendN(3)
			require.NoError(t, logtest.Check(p, m))
			require.LessOrEqual(t, settled().Open, budget)
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

// TestDirIdlePartitionsWithinBudget: after a clean reopen of a Dir whose
// partitions hold one small segment each, the idle partitions' active
// segments are closed at rest like sealed ones, so the Dir's descriptors
// and mappings stay within what the budget allows (three per open
// segment) instead of three per partition outside it. Reading every
// partition reopens its segment on demand within the budget; a partition
// appended to unseals its active segment (whose files then stay open
// until Close), and every read matches the model, before and after
// another reopen.
func TestDirIdlePartitionsWithinBudget(t *testing.T) {
	const parts, budget, written = 120, 8, 4
	root := t.TempDir()
	bt := logtest.MakeBatch(1, 100, 1_700_000_000_000, 1)
	cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: 4096}, MaxOpenSegments: budget}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	appendTo := func(i int) {
		base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
		require.NoError(t, err)
		require.NoError(t, models[i].AppendBatch(bt, base))
	}
	for i := range parts {
		_, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		appendTo(i)
	}
	require.NoError(t, d.Close())

	// The budget's segments, three files each, and the Dir's own files.
	limit := 3*budget + 4
	within := func(step string, extra int) {
		t.Helper()
		st := d.SegmentBudget()
		assert.LessOrEqual(t, st.Open, budget, "%s: %+v", step, st)
		if fds, maps, ok := openFiles(t, root); ok {
			t.Logf("%s: %d descriptors, %d mappings for %d partitions; %+v", step, fds, maps, parts, st)
			assert.LessOrEqual(t, fds, limit+extra, step)
			assert.LessOrEqual(t, maps, limit+extra, step)
		}
	}
	reopen := func() {
		t.Helper()
		for _, m := range models {
			m.Reopen()
		}
		d, err = plog.OpenDir(root, cfg)
		require.NoError(t, err)
	}
	reopen()
	within("after the open", 0)
	for i := range parts {
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
	}
	within("after reading every partition", 0)
	for i := range written {
		appendTo(i)
		appendTo(i)
	}
	for i := range parts {
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
	}
	// A partition written since the open keeps its active segment open.
	within("after appends to a few partitions", 3*written)
	require.NoError(t, d.Close())

	reopen()
	within("after the second open", 0)
	for i := range parts {
		p := d.Partition("t", int32(i))
		require.NoError(t, logtest.Check(p, models[i]), "partition %d", i)
		if i < written {
			require.Equal(t, int64(3), p.LogEndOffset())
		}
	}
	require.NoError(t, d.Close())
}

// TestDirIdleActiveSegmentWriters runs each writer of a partition first on
// an active segment left sealed by the open (closed at rest under a budget
// of one): an append that fits, an append that rolls past a full segment,
// a truncation inside the active segment and one into a sealed segment
// before it, DeleteRecordsBefore, and Close without a write; then more
// appends, a clean reopen, and appends again. logtest.Check compares every
// read with the model after each step.
func TestDirIdleActiveSegmentWriters(t *testing.T) {
	fs := vfs.NewMem()
	bt := logtest.MakeBatch(4, 50, 1_700_000_000_000, 1) // 4 records
	cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentBytes: int64(2 * len(bt)), SegmentIndexBytes: 1024},
		MaxOpenSegments: 1}
	type step struct {
		name    string
		batches int // appended before the reopen: 5 leaves a half-full active segment, 6 a full one
		first   func(p *plog.Partition, m *logtest.Model) error
	}
	steps := []step{
		{"append", 5, nil},
		{"append rolls", 6, nil},
		{"truncate in active", 5, func(p *plog.Partition, m *logtest.Model) error {
			if err := p.TruncateTo(16); err != nil {
				return err
			}
			if err := m.TruncateTo(16); err != nil {
				return err
			}
			return m.ReloadProducers(fs, p)
		}},
		{"truncate below active", 6, func(p *plog.Partition, m *logtest.Model) error {
			if err := p.TruncateTo(12); err != nil {
				return err
			}
			if err := m.TruncateTo(12); err != nil {
				return err
			}
			return m.ReloadProducers(fs, p)
		}},
		{"delete records", 5, func(p *plog.Partition, m *logtest.Model) error {
			if err := p.DeleteRecordsBefore(10); err != nil {
				return err
			}
			return m.DeleteRecordsBefore(10)
		}},
		{"close", 5, func(*plog.Partition, *logtest.Model) error { return nil }},
	}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, len(steps))
	appendN := func(i, n int) {
		t.Helper()
		p := d.Partition("t", int32(i))
		for range n {
			base, err := p.AppendBatch(append([]byte(nil), bt...))
			require.NoError(t, err, steps[i].name)
			require.NoError(t, models[i].AppendBatch(bt, base), steps[i].name)
		}
	}
	for i, s := range steps {
		_, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		appendN(i, s.batches)
	}
	reopen := func() {
		t.Helper()
		require.NoError(t, d.Close())
		for _, m := range models {
			m.Reopen()
		}
		d, err = plog.OpenDir("/logs", cfg)
		require.NoError(t, err)
	}
	reopen()
	require.LessOrEqual(t, d.SegmentBudget().Open, 1)
	for i, s := range steps {
		p := d.Partition("t", int32(i))
		if s.first != nil {
			require.NoError(t, s.first(p, models[i]), s.name)
		} else {
			appendN(i, 1)
		}
		require.NoError(t, logtest.Check(p, models[i]), s.name)
	}
	for i, s := range steps {
		if s.name != "close" {
			appendN(i, 3)
			require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), s.name)
		}
	}
	reopen()
	for i, s := range steps {
		p := d.Partition("t", int32(i))
		require.NoError(t, logtest.Check(p, models[i]), s.name)
		appendN(i, 2)
		require.NoError(t, logtest.Check(p, models[i]), s.name)
	}
	require.LessOrEqual(t, d.SegmentBudget().Open, 1)
	require.NoError(t, d.Close())
}

// TestDirIdleCloseWritesNothing: closing a Dir whose partitions were not
// written since a clean open reopens none of their closed segments (a
// segment unchanged since a clean open has nothing to sync) and rewrites
// no producer snapshot (the one at the log end was loaded), as Kafka
// skips a snapshot at the offset of the last one; a partition written
// since still gets a new snapshot at its new end.
func TestDirIdleCloseWritesNothing(t *testing.T) {
	const parts, budget = 20, 2
	root := t.TempDir()
	bt := logtest.MakeBatch(1, 100, 1_700_000_000_000, 1)
	cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: 4096}, MaxOpenSegments: budget}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		_, err = p.AppendBatch(append([]byte(nil), bt...))
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())
	snapshot := func(i int, offset int64) string {
		return filepath.Join(root, fmt.Sprintf("t-%d", i), fmt.Sprintf("%020d.snapshot", offset))
	}
	before := make([]os.FileInfo, parts)
	for i := range parts {
		before[i], err = os.Stat(snapshot(i, 1))
		require.NoError(t, err)
	}

	d, err = plog.OpenDir(root, cfg)
	require.NoError(t, err)
	_, err = d.Partition("t", 0).AppendBatch(append([]byte(nil), bt...))
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // past the file system's clock tick
	reopens := d.SegmentBudget().Reopens
	require.NoError(t, d.Close())
	assert.Equal(t, reopens, d.SegmentBudget().Reopens, "Close reopened closed idle segments")
	for i := 1; i < parts; i++ {
		after, err := os.Stat(snapshot(i, 1))
		require.NoError(t, err)
		assert.Equal(t, before[i].ModTime(), after.ModTime(), "partition %d: snapshot rewritten", i)
	}
	_, err = os.Stat(snapshot(0, 2))
	require.NoError(t, err, "the written partition's snapshot at its new end")
}
