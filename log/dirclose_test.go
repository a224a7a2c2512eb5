package log_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestDirCloseSyncsOnce: Dir.Close on a filesystem that syncs whole
// filesystems syncs none of its partitions' files (.log, indexes,
// producer snapshot, directory): one SyncFilesystems covers them all, a
// second the producer snapshots written after it (a snapshot only follows
// durable batches), before the root checkpoints and the clean-shutdown
// marker are written.
// A crash right after Close that loses every unsynced byte leaves a
// cleanly closed Dir: the next open recovers nothing and rebuilds no
// index (Close trimmed them), and every record, the producer state and
// the lookup by time are there. On a filesystem without the call, Close
// syncs each partition as Partition.Close does.
func TestDirCloseSyncsOnce(t *testing.T) {
	const parts = 3
	for _, tc := range []struct {
		name string
		hide bool // the filesystem does not sync whole filesystems
	}{
		{name: "one filesystem sync"},
		{name: "each partition's syncs", hide: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var inner vfs.FS = mem
			if tc.hide {
				inner = struct{ vfs.FS }{mem}
			}
			in := vfs.NewInjector(inner)
			cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: memIndexBytes}}
			d, batches := openWrittenDir(t, parts, cfg)

			var mu sync.Mutex
			partSyncs, fsSyncs := 0, 0
			in.SetHook(func(op vfs.Op) error {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case op.Kind == vfs.OpSync && strings.HasPrefix(op.Path, "/data/t-"):
					partSyncs++
				case op.Kind == vfs.OpSyncFilesystems && op.Path != "":
					fsSyncs++
				}
				return nil
			})
			require.NoError(t, d.Close())
			in.SetHook(nil)
			if tc.hide {
				assert.Zero(t, fsSyncs, "SyncFilesystems calls")
				assert.GreaterOrEqual(t, partSyncs, 3*parts, "syncs of the partitions' files and directories")
			} else {
				assert.Equal(t, 2, fsSyncs, "SyncFilesystems calls (the second for the producer snapshots)")
				assert.Zero(t, partSyncs, "syncs of the partitions' files and directories")
			}

			var logs bytes.Buffer
			cfg.Config.FS = mem.CrashClone(vfs.CrashOptions{})
			cfg.Config.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, d.Close()) }()
			for i := range parts {
				assert.True(t, d.Partition("t", int32(i)).Stats().Recovery.Clean, "partition %d: a clean open", i)
			}
			// Close trimmed the indexes: one record, below the index
			// interval, makes no offset index entry and one time index
			// entry (12 bytes).
			for i := range parts {
				dir := filepath.Join("/data", plog.TopicPartition{Topic: "t", Partition: int32(i)}.String())
				for suffix, want := range map[string]int64{segment.IndexSuffix: 0, segment.TimeIndexSuffix: 12} {
					st, err := cfg.Config.FS.Stat(filepath.Join(dir, segment.FileName(0, suffix)))
					require.NoError(t, err)
					assert.Equal(t, want, st.Size(), "%s's %s", dir, suffix)
				}
			}
			assert.NotContains(t, logs.String(), "rebuilding", "an index the Close left untrimmed")
			requireRecovered(t, d, batches)
		})
	}
}

// TestDirCloseIdleSyncsNothing: a Dir of idle partitions opened after a
// clean shutdown, under a segment budget (many partitions' configuration:
// an idle active segment stays at rest, as the clean shutdown left it),
// closes without any sync, the filesystem's included (a syncfs would wait
// for every dirty page of the filesystem, other programs' too), and
// writes nothing in the partitions; the next open is clean.
func TestDirCloseIdleSyncsNothing(t *testing.T) {
	const parts = 3
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentIndexBytes: memIndexBytes}, MaxOpenSegments: 2}
	d, batches := openWrittenDir(t, parts, cfg)
	require.NoError(t, d.Close())

	in := vfs.NewInjector(mem)
	var mu sync.Mutex
	var seen []string
	in.SetHook(func(op vfs.Op) error {
		if (op.Kind == vfs.OpSyncFilesystems && op.Path != "") || op.Kind == vfs.OpSync ||
			op.Kind == vfs.OpCreate || op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt {
			mu.Lock()
			seen = append(seen, op.String())
			mu.Unlock()
		}
		return nil
	})
	cfg.Config.FS = in
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	mu.Lock()
	seen = nil // the open's own writes (the marker's removal, the root files) aside
	mu.Unlock()
	require.NoError(t, d.Close())
	in.SetHook(nil)
	for _, op := range seen {
		assert.False(t, strings.HasPrefix(op, "syncFilesystems") || strings.Contains(op, "/data/t-"),
			"an idle Close: %s (all: %v)", op, seen)
	}

	cfg.Config.FS = mem.CrashClone(vfs.CrashOptions{})
	d, err = plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	for i := range parts {
		assert.True(t, d.Partition("t", int32(i)).Stats().Recovery.Clean, "partition %d: a clean open", i)
	}
	requireRecovered(t, d, batches)
}

// TestDirCloseFilesystemSyncFails: when a sync of Dir.Close fails (the
// first, or the second, for the producer snapshots), Close
// returns its error and writes neither the root checkpoints it held nor
// the clean-shutdown marker, so the next open recovers: without a crash
// it finds every record; after a machine crash at the failed sync that
// keeps any part of the unsynced writes (12 seeds, torn writes too) each
// partition holds its batch whole or nothing, and nothing looks lost (no
// producer snapshot lies past the log end: they are written after the
// first sync).
func TestDirCloseFilesystemSyncFails(t *testing.T) {
	const parts = 3
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: memIndexBytes}}
			d, batches := openWrittenDir(t, parts, cfg)
			atSync := crashAtFilesystemSync(in, mem, seed)
			err := d.Close()
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.ErrorContains(t, err, "close dir /data")
			require.NotNil(t, *atSync, "Close reached the filesystem sync")
			in.SetHook(nil)
			afterClose := mem.CrashClone(vfs.CrashOptions{})

			// No crash: the marker is missing, the open recovers
			// everything the dead Close wrote.
			cfg.Config.FS = mem
			d, err = plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			for i := range parts {
				assert.False(t, d.Partition("t", int32(i)).Stats().Recovery.Clean, "partition %d: recovered", i)
			}
			requireRecovered(t, d, batches)
			require.NoError(t, d.Close())

			// A crash at the sync, or after the failed Close (losing
			// every unsynced byte, which no root checkpoint may claim):
			// a prefix of each partition.
			for name, crashed := range map[string]*vfs.MemFS{"at the sync": *atSync, "after Close": afterClose} {
				cfg.Config.FS = crashed
				var logs bytes.Buffer
				cfg.Config.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				d, err = plog.OpenDir("/data", cfg)
				require.NoError(t, err, "the Dir a crash %s left", name)
				// A producer snapshot past the log end would say that
				// synced batches are missing (lostend.go).
				require.NotContains(t, logs.String(), "past the log end", "a crash %s", name)
				requirePrefixes(t, d, batches)
				require.NoError(t, d.Close())
			}
		})
	}
}
