package log_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// spareDir is the partition directory of the spare segment tests.
const spareDir = "/kafka/spare-0"

// spareCfg is a configuration whose segments hold a few batches, with the
// background work (the rolls' flush, the spare) left to the test.
func spareCfg(fs vfs.FS) plog.Config {
	return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentBytes: 700, IndexIntervalBytes: 1, SegmentIndexBytes: 4096})
}

// buildSpare opens a partition on fs with two sealed segments, a synced
// prefix and a spare made ahead of the next roll.
func buildSpare(t *testing.T, fs vfs.FS) (*plog.Partition, *logtest.Model) {
	t.Helper()
	p, err := plog.Open(spareDir, spareCfg(fs))
	require.NoError(t, err)
	m := logtest.NewModel(0, false)
	appendSyncedPrefix(t, p, m, 14)
	require.GreaterOrEqual(t, len(p.SegmentInfos()), 3)
	p.PrepareSpare()
	require.True(t, p.HasSpare())
	return p, m
}

// TestRollAdoptsSpare: with a spare made ahead, a roll does no filesystem
// operation at all (the test's configuration runs no background work, so
// every operation during Roll is under the partition lock): the spare
// becomes the active segment at the new base in memory, and appends go to
// its files under the spare's names. The adoption's operations (removing
// a stale .txnindex of the base's name, renaming the spare's three files
// to the base's names) come later, first in the roll's background flush
// and before its directory sync. Before, the roll did the remove and the
// three renames under the lock (~30 us each; before that it created the
// three files, 0.3-15 ms). The new segment works and a clean reopen finds
// the same log.
func TestRollAdoptsSpare(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	p, m := buildSpare(t, in)
	require.Len(t, spareNames(t, mem, spareDir), 3, ".log, .index and .timeindex")
	// A second preparation (a goroutine a roll started before the first
	// one had installed its spare) makes none over the first one's files.
	p.PrepareSpare()
	require.Len(t, spareNames(t, mem, spareDir), 3)
	newBase := p.LogEndOffset()
	// A stale .txnindex of the new base's name (a crash can leave one),
	// which the adoption removes.
	writeFileT(t, mem, filepath.Join(spareDir, segment.FileName(newBase, segment.TxnIndexSuffix)), make([]byte, 34))

	var ops []vfs.Op
	in.SetHook(func(op vfs.Op) error {
		ops = append(ops, op)
		return nil
	})
	require.NoError(t, p.Roll())
	assert.Empty(t, ops, "the roll's filesystem operations (under the partition lock)")
	assert.False(t, p.HasSpare())
	infos := p.SegmentInfos()
	require.Equal(t, newBase, infos[len(infos)-1].BaseOffset)
	assert.Len(t, spareNames(t, mem, spareDir), 3, "the adoption is pending: the files keep the spare's names")
	for _, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		_, err := mem.Stat(filepath.Join(spareDir, segment.FileName(newBase, kind)))
		require.ErrorIs(t, err, fs.ErrNotExist, kind)
	}

	ops = nil
	n := 0
	for i := range 3 {
		b := logtest.MakeBatch(2, 30, int64(2000+i), byte(i))
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, off))
		n += len(b)
	}
	r, err := p.ReadFrom(newBase, 1<<20)
	require.NoError(t, err)
	require.Equal(t, newBase+6, r.NextOffset(), "read under the temporary names")
	require.Len(t, r.Bytes(), n)
	require.NoError(t, r.Close())
	assert.Len(t, spareNames(t, mem, spareDir), 3, "appends leave the adoption pending")
	for _, op := range ops {
		assert.NotContains(t, []vfs.OpKind{vfs.OpRemove, vfs.OpRename, vfs.OpCreate, vfs.OpSync}, op.Kind, "append: %v", op)
	}

	ops = nil
	require.NoError(t, p.FlushRolled())
	in.SetHook(nil)
	require.GreaterOrEqual(t, len(ops), 4)
	kinds := []vfs.OpKind{ops[0].Kind, ops[1].Kind, ops[2].Kind, ops[3].Kind}
	assert.Equal(t, []vfs.OpKind{vfs.OpRemove, vfs.OpRename, vfs.OpRename, vfs.OpRename}, kinds, "the adoption comes first in the roll's flush")
	assert.Equal(t, filepath.Join(spareDir, segment.FileName(newBase, segment.TxnIndexSuffix)), ops[0].Path)
	for i, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		assert.Equal(t, filepath.Join(spareDir, segment.FileName(0, kind)+segment.SpareSuffix), ops[1+i].Path)
		assert.Equal(t, filepath.Join(spareDir, segment.FileName(newBase, kind)), ops[1+i].NewPath)
	}
	dirSync := slices.IndexFunc(ops, func(op vfs.Op) bool { return op.Kind == vfs.OpSync && op.Path == spareDir })
	assert.Greater(t, dirSync, 3, "the directory sync follows the renames")
	assert.Empty(t, spareNames(t, mem, spareDir))
	for _, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		_, err := mem.Stat(filepath.Join(spareDir, segment.FileName(newBase, kind)))
		require.NoError(t, err, kind)
	}
	_, err = mem.Stat(filepath.Join(spareDir, segment.FileName(newBase, segment.TxnIndexSuffix)))
	require.ErrorIs(t, err, fs.ErrNotExist, "the stale .txnindex is gone")

	require.NoError(t, p.Verify())
	require.NoError(t, logtest.Check(p, m))
	require.NoError(t, p.Close())

	p, err = plog.Open(spareDir, spareCfg(mem))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.NoError(t, logtest.Check(p, m))
	require.NoError(t, p.Verify())
}

// TestSpareRemovedAtClose: Close removes the spare, so a cleanly closed
// directory holds only Kafka's files.
func TestSpareRemovedAtClose(t *testing.T) {
	mem := vfs.NewMem()
	p, _ := buildSpare(t, mem)
	require.NotEmpty(t, spareNames(t, mem, spareDir))
	require.NoError(t, p.Close())
	assert.Empty(t, spareNames(t, mem, spareDir))
}

// TestSpareRemovedWhenIdle: a spare no append used between two idle
// checks is removed (a partition at rest holds only its active segment's
// descriptors and mappings); one that saw an append is kept; the roll after
// the removal creates its segment as before.
func TestSpareRemovedWhenIdle(t *testing.T) {
	mem := vfs.NewMem()
	p, m := buildSpare(t, mem)
	defer func() { require.NoError(t, p.Close()) }()
	b := logtest.MakeBatch(1, 10, 4000, 1)
	off, err := p.AppendBatch(b)
	require.NoError(t, err)
	require.NoError(t, m.AppendBatch(b, off))
	p.SpareIdleCheck()
	assert.True(t, p.HasSpare(), "an append came since the spare was made")
	assert.Len(t, spareNames(t, mem, spareDir), 3)
	p.SpareIdleCheck()
	assert.False(t, p.HasSpare(), "no append since the last check")
	assert.Empty(t, spareNames(t, mem, spareDir))
	require.NoError(t, p.Roll())
	require.NoError(t, p.Verify())
	require.NoError(t, logtest.Check(p, m))
}

// TestSpareNeverTakenForData: spare files a crash left, whatever they hold
// (here a copy of a segment full of batches, under the spare's names),
// are removed by Open, after a clean shutdown as after a crash, and never
// read as a segment.
func TestSpareNeverTakenForData(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			mem := vfs.NewMem()
			p, m := buildSpare(t, mem)
			var state *vfs.MemFS
			if clean {
				p.PrepareSpare() // a second call makes none: one spare at a time
				require.NoError(t, p.Close())
				state = mem
			} else {
				state = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
				require.NoError(t, p.Close())
			}
			// Put batches under every spare name.
			data := readFileT(t, state, filepath.Join(spareDir, segment.FileName(0, segment.LogSuffix)))
			require.NotEmpty(t, data)
			for _, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
				writeFileT(t, state, filepath.Join(spareDir, segment.FileName(0, kind)+segment.SpareSuffix), data)
			}
			p, err := plog.Open(spareDir, spareCfg(state))
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			assert.Empty(t, spareNames(t, state, spareDir), "Open removes spare files")
			if !clean {
				require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
			}
			require.NoError(t, logtest.Check(p, m))
			require.NoError(t, p.Verify())
		})
	}
}

// TestCrashAtEveryOpOfSpareAndRoll crashes at every filesystem operation
// of making a spare (in the background, while appends go on), of the roll
// that adopts it (none: the roll does no filesystem operation), of the
// appends into the adopted segment while its files carry the spare's
// names, of the deferred adoption (the remove and the renames, run by the
// roll's flush, by the goroutine making the next spare, or by the sync of
// a FlushMessages: 1 append) and of the flushes after it, keeping none,
// all or a random part of what was not synced: Open must accept every
// state, remove the spare's files, never read them as data, and find a
// prefix of what was appended that holds every synced batch.
func TestCrashAtEveryOpOfSpareAndRoll(t *testing.T) {
	appendN := func(t *testing.T, p *plog.Partition, m *logtest.Model, n int, seed int) {
		for i := range n {
			b := logtest.MakeBatch(2, 30, int64(3000+seed+i), byte(seed+i))
			off, err := p.AppendBatch(b)
			require.NoError(t, err)
			require.NoError(t, m.AppendBatch(b, off))
		}
	}
	// A sync binds the model only when it returned before the crash
	// state was taken.
	syncAll := func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool) {
		require.NoError(t, p.Sync())
		if !crashed() {
			m.Sync()
		}
	}
	for _, tc := range []struct {
		name string
		cfg  func(vfs.FS) plog.Config
		run  func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool)
	}{{
		// The roll's flush settles the adoption (so a crash lands before
		// and after the recovery point passes the adopted segment), then
		// a full flush syncs the segment.
		name: "flush",
		cfg:  spareCfg,
		run: func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool) {
			p.PrepareSpare()
			require.NoError(t, p.Roll())
			appendN(t, p, m, 4, 0)
			require.NoError(t, p.FlushRolled())
			appendN(t, p, m, 1, 10)
			syncAll(t, p, m, crashed)
		},
	}, {
		// A second roll before the first adoption settled (the segment
		// whose files carry the spare's names is sealed); the flush of
		// both rolls settles it before it syncs the sealed segments and
		// raises the recovery point past them.
		name: "second-roll",
		cfg:  spareCfg,
		run: func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool) {
			p.PrepareSpare()
			require.NoError(t, p.Roll())
			appendN(t, p, m, 3, 0)
			require.NoError(t, p.Roll())
			appendN(t, p, m, 2, 10)
			require.NoError(t, p.FlushRolled())
			appendN(t, p, m, 1, 20)
			syncAll(t, p, m, crashed)
		},
	}, {
		// The goroutine making the next spare settles the adoption first
		// (the spare's names are the same).
		name: "next-spare",
		cfg:  spareCfg,
		run: func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool) {
			p.PrepareSpare()
			require.NoError(t, p.Roll())
			appendN(t, p, m, 2, 0)
			p.PrepareSpare()
			require.NoError(t, p.Roll())
			appendN(t, p, m, 2, 10)
			require.NoError(t, p.FlushRolled())
			syncAll(t, p, m, crashed)
		},
	}, {
		// FlushMessages: 1: every append returns once synced, across
		// rolls onto spares, so its sync settles the adoption the roll
		// of that append left and syncs the directory after it.
		name: "flush-messages-1",
		cfg: func(fs vfs.FS) plog.Config {
			cfg := spareCfg(fs)
			cfg.FlushMessages = 1
			return cfg
		},
		run: func(t *testing.T, p *plog.Partition, m *logtest.Model, crashed func() bool) {
			rolls := p.Stats().Rolls
			for i := range 12 {
				p.PrepareSpare()
				appendN(t, p, m, 1, 100*i)
				if !crashed() {
					m.Sync()
				}
			}
			require.GreaterOrEqual(t, p.Stats().Rolls-rolls, int64(2))
			require.NoError(t, p.FlushRolled())
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			crashAtEveryOp(t, crashWalk[partModel]{
				setup: func(t *testing.T, fs vfs.FS) partModel {
					p, err := plog.Open(spareDir, tc.cfg(fs))
					require.NoError(t, err)
					m := logtest.NewModel(0, false)
					appendSyncedPrefix(t, p, m, 14)
					return partModel{p, m}
				},
				run: func(t *testing.T, _ vfs.FS, f partModel, crashed func() bool) {
					tc.run(t, f.p, f.m, crashed)
				},
				finish: func(t *testing.T, f partModel) { require.NoError(t, f.p.Close()) },
				options: func(k, _ int64) []vfs.CrashOptions {
					return []vfs.CrashOptions{
						{UnsyncedDataPercent: 0},
						{UnsyncedDataPercent: 100},
						{UnsyncedDataPercent: 50, TornPercent: 30, Seed: uint64(k)},
						{UnsyncedDataPercent: 70, TornPercent: 50, Seed: uint64(k) + 1000},
						{UnsyncedDataPercent: 50, TornPercent: 50, Reorder: true, TornPages: true, OrderedEntries: true, Seed: uint64(k) + 2000},
					}
				},
				check: func(t *testing.T, f partModel, state *vfs.MemFS, at crashPoint) {
					p, err := plog.Open(spareDir, tc.cfg(state))
					require.NoError(t, err, "%s", at)
					assert.Empty(t, spareNames(t, state, spareDir), "%s", at)
					require.NoError(t, f.m.Crash(p.LogEndOffset(), p.HighWatermark()), "%s", at)
					require.NoError(t, logtest.Check(p, f.m), "%s", at)
					require.NoError(t, p.Verify(), "%s", at)
					_, err = p.AppendBatch(logtest.MakeBatch(1, 5, 5000, 1))
					require.NoError(t, err, "%s", at)
					require.NoError(t, p.Verify(), "%s", at)
					require.NoError(t, p.Close(), "%s", at)
				},
			})
		})
	}
}

// TestSpareInBackground appends across many rolls with the spares made by
// their goroutines (not by the test), on the operating system's
// filesystem (mapped files) and on MemFS, then closes while one may be
// in the making: the log is intact, Close leaves no spare file, and the
// directory reopens to the same log.
func TestSpareInBackground(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
	}{
		{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, filepath.Join(t.TempDir(), "p-0") }},
		{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), spareDir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := tc.fs(t)
			cfg := plog.Config{FS: fs, SegmentBytes: 2000, SegmentIndexBytes: 4096}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			m := logtest.NewModel(0, false)
			for i := range 300 {
				b := logtest.MakeBatch(2, 40, int64(1000+i), byte(i))
				off, err := p.AppendBatch(b)
				require.NoError(t, err)
				require.NoError(t, m.AppendBatch(b, off))
			}
			require.Greater(t, p.Stats().Rolls, int64(20))
			require.NoError(t, p.Verify())
			require.NoError(t, logtest.Check(p, m))
			require.NoError(t, p.Close())
			names, err := fs.List(dir)
			require.NoError(t, err)
			for _, n := range names {
				assert.NotContains(t, n, ".spare", "Close removes the spare")
			}
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			require.NoError(t, logtest.Check(p, m))
			require.NoError(t, p.Verify())
		})
	}
}

// TestDirSparesOutsideBudgetAndStats: in a Dir whose partitions share an
// open-segment budget, the spares of the partitions that rolled are not
// segments: Stats counts the log's segments only, the budget counts sealed
// segments only (a spare, like the active segment, is not in it), and the
// idle check leaves each partition at rest with its active segment's files
// alone. Closing the Dir leaves no spare file.
func TestDirSparesOutsideBudgetAndStats(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{
		Config:          plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 700, SegmentIndexBytes: 1024}),
		MaxOpenSegments: 2,
	}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	var parts []*plog.Partition
	for i := range 4 {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		for j := range 12 {
			_, err := p.AppendBatch(logtest.MakeBatch(2, 30, int64(1000+j), byte(j)))
			require.NoError(t, err)
		}
		p.PrepareSpare()
		require.True(t, p.HasSpare())
		parts = append(parts, p)
	}
	for i, p := range parts {
		st := p.Stats()
		assert.Equal(t, len(p.SegmentInfos()), st.Segments, "partition %d", i)
		assert.LessOrEqual(t, st.SegmentBudget.Open, 2, "partition %d: sealed segments open at rest", i)
		names, err := mem.List(fmt.Sprintf("/logs/t-%d", i))
		require.NoError(t, err)
		logs := 0
		for _, n := range names {
			if strings.HasSuffix(n, segment.LogSuffix) {
				logs++
			}
		}
		assert.Equal(t, st.Segments, logs, "partition %d: the spare's .log is not a segment", i)
		p.SpareIdleCheck() // no append since the spare was made
		assert.False(t, p.HasSpare(), "partition %d at rest", i)
		assert.Empty(t, spareNames(t, mem, fmt.Sprintf("/logs/t-%d", i)))
	}
	parts[0].PrepareSpare()
	require.NoError(t, d.Close())
	assert.Empty(t, spareNames(t, mem, "/logs/t-0"), "Close removes the spare")
}

// TestSyncWhileAdoptionSettles: under FlushMessages: 1 the group syncer
// opens the active .log by its path to fdatasync it; when the adoption of
// a segment a roll just adopted renames the file between the syncer
// reading its path and opening it (here the next spare's goroutine,
// which settles the adoption first, runs at that very moment), the
// syncer must still sync it. Before, it found the spare's name gone, took
// the segment for deleted and skipped the fdatasync: the append returned
// synced and a crash lost it (TestCrashPoints caught it once).
func TestSyncWhileAdoptionSettles(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := spareCfg(in)
	cfg.FlushMessages = 1
	p, err := plog.Open(spareDir, cfg)
	require.NoError(t, err)
	m := logtest.NewModel(0, false)
	appendSyncedPrefix(t, p, m, 4)
	m.Sync() // every append was synced
	p.PrepareSpare()
	require.True(t, p.HasSpare())
	settled := false
	in.SetHook(func(op vfs.Op) error {
		if !settled && op.Kind == vfs.OpOpen && strings.HasSuffix(op.Path, segment.LogSuffix+segment.SpareSuffix) {
			settled = true
			p.PrepareSpare() // renames the adopted segment's files now
		}
		return nil
	})
	rolls := p.Stats().Rolls
	for p.Stats().Rolls == rolls {
		b := logtest.MakeBatch(2, 30, int64(6000+p.LogEndOffset()), 7)
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, off))
		m.Sync()
	}
	in.SetHook(nil)
	state := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 0})
	require.NoError(t, p.Close())
	p2, err := plog.Open(spareDir, spareCfg(state))
	require.NoError(t, err)
	defer func() { require.NoError(t, p2.Close()) }()
	require.NoError(t, m.Crash(p2.LogEndOffset(), p2.HighWatermark()))
	require.NoError(t, logtest.Check(p2, m))
}
