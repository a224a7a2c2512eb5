package log_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestDirCleanOpenAtRest: a Dir of many partitions (one to three segments
// each, with index entries) opened after a clean shutdown holds no
// descriptor and no mapping per idle partition (a few for the Dir, none
// open in the segment budget, none reopened), and afterwards every
// partition reads what was written and appends, within the budget, and
// does so again after the next clean open.
func TestDirCleanOpenAtRest(t *testing.T) {
	parts := 200
	if testing.Short() {
		parts = 60
	}
	const (
		budget = 8
		// dirFiles bounds what the open Dir itself holds open under its
		// root (its lock), whatever its partitions.
		dirFiles = 4
	)
	root := t.TempDir()
	cfg := plog.DirConfig{
		Config:          plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 512, SegmentIndexBytes: 4096},
		MaxOpenSegments: budget,
	}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	appendTo := func(i int, ts int64) {
		t.Helper()
		bt := logtest.MakeBatch(4, 200, ts, byte(i))
		base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
		require.NoError(t, err)
		require.NoError(t, models[i].AppendBatch(bt, base))
	}
	for i := range parts {
		_, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		for j := range 1 + i%8 { // up to 7 KiB: one to three segments
			appendTo(i, 1_700_000_000_000+int64(j*1000-i%3*5000))
		}
	}
	require.NoError(t, d.Close())

	reopen := func() {
		t.Helper()
		for _, m := range models {
			m.Reopen()
		}
		d, err = plog.OpenDir(root, cfg)
		require.NoError(t, err)
		st := d.SegmentBudget()
		assert.Zero(t, st.Open, "segments open in the budget after a clean open: %+v", st)
		assert.Zero(t, st.Reopens, "segments reopened by the open: %+v", st)
		if fds, maps, ok := openFiles(t, root); ok {
			t.Logf("after a clean open of %d partitions: %d descriptors, %d mappings; %+v", parts, fds, maps, st)
			assert.LessOrEqual(t, fds, dirFiles, "descriptors")
			assert.Zero(t, maps, "mappings")
		}
	}
	checkAll := func(step string) {
		t.Helper()
		for i := range parts {
			require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "%s: partition %d", step, i)
		}
		st := d.SegmentBudget()
		assert.LessOrEqual(t, st.Open, budget, "%s: %+v", step, st)
		assert.Positive(t, st.Reopens, "%s: the reads reopen segments", step)
	}

	reopen()
	checkAll("after the open")
	for i := range parts {
		appendTo(i, 1_700_000_100_000)
	}
	checkAll("after an append to each")
	require.NoError(t, d.Close())

	reopen()
	checkAll("after the second open")
	require.NoError(t, d.Close())
}

// TestDirCleanOpenFileOps counts what a clean OpenDir does to each idle
// partition's files: nothing is mapped (or copied to the heap as a
// mapping), each segment file is opened at most twice (the directory
// check's probe of the .log and its .index, then the segment's read of
// it), the partition's lock file name is looked up once, and its
// directory, which exists, is not made again.
func TestDirCleanOpenFileOps(t *testing.T) {
	const parts = 20
	in := vfs.NewInjector(vfs.NewMem())
	cfg := plog.DirConfig{Config: plog.Config{FS: in}, MaxOpenSegments: 4}
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 1000, 1))
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())

	var mu sync.Mutex
	ops := map[vfs.Op]int{}
	in.SetHook(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		ops[vfs.Op{Kind: op.Kind, Path: op.Path}]++
		return nil
	})
	d, err = plog.OpenDir("/data", cfg)
	in.SetHook(nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()

	for op, n := range ops {
		assert.NotEqual(t, vfs.OpMap, op.Kind, "%s mapped %d times", op.Path, n)
		if op.Kind == vfs.OpOpen || op.Kind == vfs.OpOpenReadWrite {
			assert.LessOrEqual(t, n, 2, "%s opened %d times", op.Path, n)
		}
	}
	for i := range parts {
		dir := filepath.Join("/data", plog.TopicPartition{Topic: "t", Partition: int32(i)}.String())
		assert.Equal(t, 1, ops[vfs.Op{Kind: vfs.OpStat, Path: filepath.Join(dir, ".partlog.lock")}], "stats of the lock file of %s", dir)
		assert.Zero(t, ops[vfs.Op{Kind: vfs.OpMkdirAll, Path: dir}], "MkdirAll of %s", dir)
	}
}
