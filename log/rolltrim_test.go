package log_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestCrashBetweenRollAndTrim covers the window a roll leaves open: the
// sealed segment's index files stay preallocated (segment.index.bytes)
// until the background flush cuts them to their entries, fsyncs them and
// raises the recovery point. A crash anywhere in that window, before the
// flush or at any filesystem operation of it, must reopen to a prefix of
// what was appended that holds every synced batch, with indexes that
// verify; after the flush the sealed segments' index files are trimmed
// on disk.
func TestCrashBetweenRollAndTrim(t *testing.T) {
	const (
		dir        = "/kafka/roll-trim-0"
		indexBytes = 4096
	)
	cfg := func(fs vfs.FS) plog.Config {
		return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentBytes: 700, IndexIntervalBytes: 1, SegmentIndexBytes: indexBytes})
	}
	// build opens a partition on fs, appends until at least three
	// segments are sealed, and syncs the first batches; the rolls'
	// background flush has not run.
	build := func(t *testing.T, fs vfs.FS) (*plog.Partition, *logtest.Model) {
		p, err := plog.Open(dir, cfg(fs))
		require.NoError(t, err)
		m := logtest.NewModel(0, false)
		appendSyncedPrefix(t, p, m, 16)
		require.GreaterOrEqual(t, len(p.SegmentInfos()), 4)
		return p, m
	}
	indexSize := func(t *testing.T, fs vfs.FS, base int64, suffix string) int64 {
		st, err := fs.Stat(filepath.Join(dir, segment.FileName(base, suffix)))
		require.NoError(t, err)
		return st.Size()
	}
	// reopen opens the crashed state and checks it against m.
	reopen := func(t *testing.T, state *vfs.MemFS, m *logtest.Model, what string) {
		p, err := plog.Open(dir, cfg(state))
		require.NoError(t, err, what)
		defer func() { require.NoError(t, p.Close()) }()
		require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()), what)
		require.NoError(t, logtest.Check(p, m), what)
		require.NoError(t, p.Verify(), what)
		_, err = p.AppendBatch(logtest.MakeBatch(1, 5, 2000, 1))
		require.NoError(t, err, what)
		require.NoError(t, p.Verify(), what)
	}

	t.Run("the roll leaves the trim to the flush", func(t *testing.T) {
		mem := vfs.NewMem()
		p, _ := build(t, mem)
		defer func() { require.NoError(t, p.Close()) }()
		infos := p.SegmentInfos()
		sealed := infos[len(infos)-2].BaseOffset
		assert.Equal(t, int64(indexBytes), indexSize(t, mem, sealed, segment.IndexSuffix), "preallocated until the flush")
		require.NoError(t, p.Verify())
		require.NoError(t, p.FlushRolled())
		for _, info := range infos[:len(infos)-1] {
			assert.Less(t, indexSize(t, mem, info.BaseOffset, segment.IndexSuffix), int64(indexBytes), "segment %d", info.BaseOffset)
			assert.Less(t, indexSize(t, mem, info.BaseOffset, segment.TimeIndexSuffix), int64(indexBytes/12*12), "segment %d", info.BaseOffset)
		}
		require.Equal(t, infos[len(infos)-1].BaseOffset, p.RecoveryPoint())
		require.NoError(t, p.Verify())
	})

	t.Run("crash before the flush", func(t *testing.T) {
		for _, opts := range []vfs.CrashOptions{
			{UnsyncedDataPercent: 100},
			{UnsyncedDataPercent: 0},
			{UnsyncedDataPercent: 50, TornPercent: 30, Seed: 3},
			{UnsyncedDataPercent: 80, TornPercent: 60, Reorder: true, Seed: 9},
		} {
			mem := vfs.NewMem()
			p, m := build(t, mem)
			state := mem.CrashClone(opts)
			require.NoError(t, p.Close())
			reopen(t, state, m, "crash before the flush")
		}
	})

	t.Run("crash at every operation of the flush", func(t *testing.T) {
		crashAtEveryOp(t, crashWalk[partModel]{
			setup: func(t *testing.T, fs vfs.FS) partModel {
				p, m := build(t, fs)
				return partModel{p, m}
			},
			run: func(t *testing.T, _ vfs.FS, f partModel, _ func() bool) {
				require.NoError(t, f.p.FlushRolled())
			},
			finish: func(t *testing.T, f partModel) { require.NoError(t, f.p.Close()) },
			options: func(int64, int64) []vfs.CrashOptions {
				return []vfs.CrashOptions{{UnsyncedDataPercent: 0}, {UnsyncedDataPercent: 100}}
			},
			check: func(t *testing.T, f partModel, state *vfs.MemFS, at crashPoint) {
				reopen(t, state, f.m, "crash in the flush: "+at.String())
			},
		})
	})
}
