package log

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
)

// readMem returns a MemFS file's bytes.
func readMem(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

// TestRootCheckpointKafkaGolden: the Dir's root file writer, given the
// entries of a root checkpoint a Kafka broker wrote, writes Kafka's bytes:
// the same version and count lines and the same entry lines (Kafka writes
// them in its hash map's order, the Dir sorted).
func TestRootCheckpointKafkaGolden(t *testing.T) {
	for _, set := range []string{"kafka-2.7.1", "kafka-source-code"} {
		for _, name := range rootCheckpointFiles {
			kafka, err := os.ReadFile(filepath.Join("testdata", set, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			require.NoError(t, err)
			t.Run(set+"/"+name, func(t *testing.T) {
				osfs := vfs.Default
				m, err := readRootCheckpoint(osfs, filepath.Join("testdata", set), name)
				require.NoError(t, err)
				mem := vfs.NewMem()
				require.NoError(t, mem.MkdirAll("/logs", 0o755))
				rc := newRootCheckpoints(mem, "/logs", map[string]map[TopicPartition]int64{name: m})
				require.NoError(t, rc.release(true))
				ours := string(readMem(t, mem, "/logs/"+name))

				kl := strings.Split(strings.TrimSuffix(string(kafka), "\n"), "\n")
				ol := strings.Split(strings.TrimSuffix(ours, "\n"), "\n")
				require.Equal(t, kl[:2], ol[:2], "version and count")
				slices.Sort(kl[2:])
				sorted := slices.Clone(ol[2:])
				slices.Sort(sorted)
				require.Equal(t, kl[2:], sorted, "entries")
				require.True(t, strings.HasSuffix(ours, "\n"))
				require.Len(t, ours, len(kafka))

				// What the Dir wrote reads back as Kafka's file does.
				back, err := checkpoint.ReadOffsets(mem, "/logs/"+name)
				require.NoError(t, err)
				require.Len(t, back, len(m))
			})
		}
	}
}

// TestRootCheckpointGroupCommit: partitions setting their entries at once
// all end up in the file, each write durable when it returns (run with
// -race); the writes are batched, so fewer files are written than
// entries set.
func TestRootCheckpointGroupCommit(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	require.NoError(t, mem.MkdirAll("/logs", 0o755))
	rc := newRootCheckpoints(in, "/logs", nil)
	var renames int
	var mu sync.Mutex
	in.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpRename {
			mu.Lock()
			renames++
			mu.Unlock()
		}
		return nil
	})
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := dirEntries{root: rc, tp: TopicPartition{"t", int32(i)}}
			require.NoError(t, s.write(recoveryPointCheckpointFile, int64(i)*10, false))
			off, ok, err := s.read(recoveryPointCheckpointFile)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, int64(i)*10, off)
		})
	}
	wg.Wait()
	entries, err := checkpoint.ReadOffsets(mem, "/logs/"+recoveryPointCheckpointFile)
	require.NoError(t, err)
	require.Len(t, entries, n)
	for i, e := range entries {
		require.Equal(t, checkpoint.PartitionOffset{Topic: "t", Partition: int32(i), Offset: int64(i) * 10}, e)
	}
	require.LessOrEqual(t, renames, n)
	t.Logf("%d entries set, %d files written", n, renames)

	// Lazy writes wait while held; release writes them.
	rc.hold()
	s := dirEntries{root: rc, tp: TopicPartition{"t", 0}}
	require.NoError(t, s.write(recoveryPointCheckpointFile, 99, true))
	entries, err = checkpoint.ReadOffsets(mem, "/logs/"+recoveryPointCheckpointFile)
	require.NoError(t, err)
	require.Equal(t, int64(0), entries[0].Offset, "deferred while held")
	// A lowering is never deferred; the written value is below it
	// already, and the deferred one is lowered with it.
	require.NoError(t, s.lower(recoveryPointCheckpointFile, 5))
	entries, err = checkpoint.ReadOffsets(mem, "/logs/"+recoveryPointCheckpointFile)
	require.NoError(t, err)
	require.Equal(t, int64(0), entries[0].Offset)
	off, _, err := s.read(recoveryPointCheckpointFile)
	require.NoError(t, err)
	require.Equal(t, int64(5), off)
	require.NoError(t, s.write(recoveryPointCheckpointFile, 99, true))
	require.NoError(t, rc.release(false))
	entries, err = checkpoint.ReadOffsets(mem, "/logs/"+recoveryPointCheckpointFile)
	require.NoError(t, err)
	require.Equal(t, int64(99), entries[0].Offset)
}

// TestRootCheckpointHeldDefersLazyWrites: while the root files are held
// (Dir.Close, OpenDir), a lazy write stays out of what any write of the
// file puts on disk until release, as what it records may become durable
// only with the Dir's filesystem sync before release: a durable write of
// another partition's entry, or of the same partition's, does not carry
// it; a lowering lowers it and the written value independently; read
// sees it; release writes it.
func TestRootCheckpointHeldDefersLazyWrites(t *testing.T) {
	a, b := TopicPartition{"a", 0}, TopicPartition{"b", 0}
	name := recoveryPointCheckpointFile
	onDisk := func(t *testing.T, mem vfs.FS) map[TopicPartition]int64 {
		t.Helper()
		m, err := readRootCheckpoint(mem, "/logs", name)
		require.NoError(t, err)
		return m
	}
	setup := func(t *testing.T) (vfs.FS, *rootCheckpoints, dirEntries, dirEntries) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/logs", 0o755))
		rc := newRootCheckpoints(mem, "/logs", map[string]map[TopicPartition]int64{name: {a: 3, b: 3}})
		require.NoError(t, rc.release(true))
		rc.hold()
		ea, eb := dirEntries{rc, a}, dirEntries{rc, b}
		require.NoError(t, ea.write(name, 10, true))
		return mem, rc, ea, eb
	}
	t.Run("another partition's durable write", func(t *testing.T) {
		mem, rc, ea, eb := setup(t)
		require.NoError(t, eb.write(name, 5, false))
		require.Equal(t, map[TopicPartition]int64{a: 3, b: 5}, onDisk(t, mem))
		off, ok, err := ea.read(name)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(10), off, "read sees the deferred value")
		require.NoError(t, rc.release(false))
		require.Equal(t, map[TopicPartition]int64{a: 10, b: 5}, onDisk(t, mem))
	})
	t.Run("another partition's lowering", func(t *testing.T) {
		mem, rc, _, eb := setup(t)
		require.NoError(t, eb.lower(name, 2))
		require.Equal(t, map[TopicPartition]int64{a: 3, b: 2}, onDisk(t, mem))
		require.NoError(t, rc.release(false))
		require.Equal(t, map[TopicPartition]int64{a: 10, b: 2}, onDisk(t, mem))
	})
	t.Run("lowering below the deferred value", func(t *testing.T) {
		mem, rc, ea, _ := setup(t)
		require.NoError(t, ea.lower(name, 7))
		require.Equal(t, map[TopicPartition]int64{a: 3, b: 3}, onDisk(t, mem), "the written value is below 7 already")
		require.NoError(t, rc.release(false))
		require.Equal(t, map[TopicPartition]int64{a: 7, b: 3}, onDisk(t, mem))
	})
	t.Run("the same partition's durable write", func(t *testing.T) {
		mem, rc, ea, _ := setup(t)
		require.NoError(t, ea.write(name, 8, false))
		require.Equal(t, map[TopicPartition]int64{a: 8, b: 3}, onDisk(t, mem))
		require.NoError(t, rc.release(false))
		require.Equal(t, map[TopicPartition]int64{a: 8, b: 3}, onDisk(t, mem), "the durable write superseded the deferred one")
	})
	t.Run("removed", func(t *testing.T) {
		mem, rc, _, _ := setup(t)
		require.NoError(t, rc.remove(a))
		require.NoError(t, rc.release(false))
		require.Equal(t, map[TopicPartition]int64{b: 3}, onDisk(t, mem))
	})
}
