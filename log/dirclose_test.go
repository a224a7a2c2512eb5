package log_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
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

// unsyncedRolledDir is a Dir whose partition t-0 holds two producer
// batches of five records in segment 0, rolled to segment 10 with the
// roll's background flush failing (segment 0 never synced), and a second,
// empty partition u-0; then the process dies (nothing more written).
func unsyncedRolledDir(t *testing.T, cfg plog.DirConfig) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg.Config.FS = in
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = d.CreatePartition("u", 0)
	require.NoError(t, err)
	for seq := int32(0); seq < 10; seq += 5 {
		_, err = p.AppendBatch(prodBatch(t, 100, 0, seq, 5, pbNow(), false))
		require.NoError(t, err)
	}
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpSync), Times: -1,
		Match: func(op vfs.Op) bool { return strings.HasPrefix(op.Path, "/data/t-0") }})
	require.NoError(t, p.Roll())
	in.Add(vfs.Rule{Kinds: vfs.MutatingOps, Times: -1})
	require.Error(t, d.Close())
	return mem
}

// TestOpenDirFailureAfterRecovery: an OpenDir that recovered a partition
// without syncing (its filesystem syncs whole) and then fails, at its
// filesystem sync or at another partition's open, closes the recovered
// partition as a Close would: every segment recovery touched is flushed
// before the producer snapshot at the log end is written, so a machine
// crash right after leaves no snapshot past what is durable. The next
// open, under a strict policy, is not refused.
func TestOpenDirFailureAfterRecovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(op vfs.Op) bool
	}{
		{"the filesystem sync", func(op vfs.Op) bool { return op.Kind == vfs.OpSyncFilesystems }},
		{"another partition", func(op vfs.Op) bool { return op.Kind == vfs.OpList && op.Path == "/data/u-0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: memIndexBytes}}
			mem := unsyncedRolledDir(t, cfg)
			in := vfs.NewInjector(mem)
			in.SetHook(func(op vfs.Op) error {
				if tc.fail(op) {
					return fmt.Errorf("%w: EIO", vfs.ErrInjected)
				}
				return nil
			})
			cfg.Config.FS = in
			_, err := plog.OpenDir("/data", cfg)
			require.ErrorIs(t, err, vfs.ErrInjected)

			var logs bytes.Buffer
			cfg.Config.FS = mem.CrashClone(vfs.CrashOptions{})
			cfg.Config.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			cfg.Config.Recovery = plog.StrictRecovery{}
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err, "the open after the crash")
			defer func() { require.NoError(t, d.Close()) }()
			assert.Equal(t, int64(10), d.Partition("t", 0).LogEndOffset(), "the failed open's Close flushed segment 0")
			assert.NotContains(t, logs.String(), "past the log end")
		})
	}
}

// TestDirCloseAnswersSyncWaiters: under FlushMessages 1 an append waiting
// for its fdatasync when Dir.Close starts is answered by Close's own flush
// of its partition, as by Partition.Close, with the filesystem sync or
// without: the appends that succeeded are exactly the records the log
// keeps after the clean close and a crash (20 rounds each, the second
// append and the Close racing the first append's blocked fdatasync).
func TestDirCloseAnswersSyncWaiters(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hide=%v", hide), func(t *testing.T) {
			for round := range 20 {
				closeWithSyncWaiters(t, hide, round)
			}
		})
	}
}

func closeWithSyncWaiters(t *testing.T, hide bool, round int) {
	mem := vfs.NewMem()
	var inner vfs.FS = mem
	if hide {
		inner = struct{ vfs.FS }{mem}
	}
	in := vfs.NewInjector(inner)
	cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: memIndexBytes, FlushMessages: 1}}
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	// The first append's fdatasync blocks until released; the second
	// append and the Close start meanwhile.
	release := make(chan struct{})
	inSync := holdFirstLogSync(in, release)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			if i == 1 {
				<-inSync
			}
			_, err := p.AppendBatch(prodBatch(t, int64(1+i), 0, 0, 1, pbNow(), false))
			errs <- err
		}()
	}
	<-inSync
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	for range round % 4 {
		runtime.Gosched()
	}
	close(release)
	acked := int64(0)
	for range 2 {
		if err := <-errs; err == nil {
			acked++
		} else {
			require.ErrorIs(t, err, plog.ErrClosed, "round %d", round)
		}
	}
	require.NoError(t, <-closed, "round %d", round)
	in.SetHook(nil)

	d, err = plog.OpenDir("/data", plog.DirConfig{Config: plog.Config{FS: mem.CrashClone(vfs.CrashOptions{}), SegmentIndexBytes: memIndexBytes}})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	assert.Equal(t, acked, d.Partition("t", 0).LogEndOffset(), "round %d: appends that succeeded, against records kept", round)
}

// TestDirCloseDeclinedSyncFallsBack: when the filesystem declines the
// whole sync at Close (errors.ErrUnsupported) although it opened the
// handle, Close syncs every file and directory itself and succeeds; a
// crash right after finds a clean Dir with every record.
func TestDirCloseDeclinedSyncFallsBack(t *testing.T) {
	const parts = 2
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: memIndexBytes}}
	d, batches := openWrittenDir(t, parts, cfg)
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncFilesystems {
			return fmt.Errorf("declined: %w", errors.ErrUnsupported)
		}
		return nil
	})
	require.NoError(t, d.Close())
	in.SetHook(nil)

	cfg.Config.FS = mem.CrashClone(vfs.CrashOptions{})
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	for i := range parts {
		assert.True(t, d.Partition("t", int32(i)).Stats().Recovery.Clean, "partition %d: a clean open", i)
	}
	requireRecovered(t, d, batches)
}

// closeBlockedInPartition starts d.Close in the background with in's hook
// blocking it at its first file operation in the directory of the k-th
// partition of names it reaches (k from 1). It returns the partitions it
// reached in order, and a function that lets the Close go on and returns
// its error. The other partitions stay open and take writes meanwhile,
// as a Dir allows.
func closeBlockedInPartition(t *testing.T, d *plog.Dir, in *vfs.Injector, names []string, k int) (reached []string, finish func() error) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	blocked := make(chan []string, 1)
	release := make(chan struct{})
	in.SetHook(func(op vfs.Op) error {
		for _, n := range names {
			if !strings.HasPrefix(op.Path, "/logs/"+n+"-0/") {
				continue
			}
			mu.Lock()
			first := !seen[n]
			seen[n] = true
			if first {
				reached = append(reached, n)
			}
			block := first && len(reached) == k
			order := slices.Clone(reached)
			mu.Unlock()
			if block {
				blocked <- order
				<-release
			}
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- d.Close() }()
	reached = <-blocked
	return reached, func() error {
		close(release)
		return <-done
	}
}

// TestDirCloseRacesFollowerGapSync: while Dir.Close holds the root
// checkpoint files (it defers lazy writes until the Dir's sync), a
// partition it has not closed yet takes a follower's batch past an offset
// gap of 2^31 and a Sync. The roll across the gap must put the recovery
// point past the sealed segment below the gap durably before writing after
// it, or a crash leaves that segment above the recovery point, where the
// next open takes its early end for a lost tail and cuts the log there,
// losing the batch the Sync covered (law 4). It used to write the
// recovery point lazily.
func TestDirCloseRacesFollowerGapSync(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	names := []string{"a", "b"}
	parts := map[string]*plog.Partition{}
	for _, n := range names {
		p, err := d.CreatePartition(n, 0)
		require.NoError(t, err)
		_, err = p.AppendAssigned(recordSet(t, 0, assigned{base: 0, n: 10}))
		require.NoError(t, err)
		require.NoError(t, p.Sync())
		_, err = p.AppendAssigned(recordSet(t, 0, assigned{base: 10, n: 2})) // for Close to write
		require.NoError(t, err)
		parts[n] = p
	}
	reached, finish := closeBlockedInPartition(t, d, in, names, 1)
	other := "a"
	if reached[0] == "a" {
		other = "b"
	}
	p := parts[other]
	gap := int64(math.MaxInt32) + 100
	_, err = p.AppendAssigned(recordSet(t, 0, assigned{base: gap, n: 1}))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	crashed := mem.CrashClone(vfs.CrashOptions{}) // only what was synced
	require.NoError(t, finish())

	d2, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: crashed, SegmentIndexBytes: 1024}})
	require.NoError(t, err)
	defer d2.Close()
	assert.Equal(t, gap+1, d2.Partition(other, 0).LogEndOffset(), "the synced batch past the gap")
}

// TestDirCloseRacesDurableRootWrite: Dir.Close on a filesystem that syncs
// whole filesystems closes its partitions without syncing them and raises
// their recovery points lazily, to be written after its one sync. A
// durable write of the recovery-point file meanwhile (here the truncation
// of a partition the Close has not reached, which lowers its recovery
// point at once) must not carry those raised values: on disk before the
// sync, they would put unsynced segments of the closed partitions below
// the recovery point, and after a crash OpenDir would refuse them (a
// sealed segment that ends early, offsets missing). Every crash state
// must open and verify.
func TestDirCloseRacesDurableRootWrite(t *testing.T) {
	for seed := range uint64(24) {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		pcfg := plog.WithManualRollFlush(plog.Config{FS: in, SegmentBytes: 400, SegmentIndexBytes: 1024})
		d, err := plog.OpenDir("/logs", plog.DirConfig{Config: pcfg})
		require.NoError(t, err)
		names := []string{"a", "b", "c"}
		parts := map[string]*plog.Partition{}
		for i, n := range names {
			p, err := d.CreatePartition(n, 0)
			require.NoError(t, err)
			_, err = p.AppendBatch(logtest.MakeBatch(3, 30, 1, byte(i)))
			require.NoError(t, err)
			require.NoError(t, p.Sync())
			for j := range 8 { // rolls, left unsynced (manual roll flush)
				_, err = p.AppendBatch(logtest.MakeBatch(3, 30, int64(2+j), byte(i)))
				require.NoError(t, err)
			}
			require.Greater(t, len(p.SegmentInfos()), 2)
			parts[n] = p
		}
		reached, finish := closeBlockedInPartition(t, d, in, names, 2)
		var third string
		for _, n := range names {
			if !slices.Contains(reached, n) {
				third = n
			}
		}
		require.NoError(t, parts[third].TruncateTo(2))
		crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, Reorder: true, Seed: seed})
		require.NoError(t, finish())

		d2, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: crashed, SegmentBytes: 400, SegmentIndexBytes: 1024}})
		require.NoError(t, err, "seed %d: %s closed first", seed, reached[0])
		for _, n := range names {
			require.NoError(t, d2.Partition(n, 0).Verify(), "seed %d: %s", seed, n)
		}
		require.NoError(t, d2.Close())
	}
}
