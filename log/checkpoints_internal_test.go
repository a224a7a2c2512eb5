package log

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
)

// The checkpoints part without a Partition: its store over an in-memory
// directory, and a fake of the core's flushes (cleanerFlusher).

// ckptPartDir is the directory of a partition opened alone; its entries
// are named t-0.
const ckptPartDir = "/d/t-0"

// fakeFlusher records the flushes the cleaner checkpoint asks for.
type fakeFlusher struct {
	full        int
	sealedBelow []int64
	err         error
}

func (f *fakeFlusher) fullFlushLocked() error { f.full++; return f.err }
func (f *fakeFlusher) flushSealedBelowLocked(off int64) error {
	f.sealedBelow = append(f.sealedBelow, off)
	return f.err
}

// newCheckpointsPart returns the part over the files of a partition alone
// in a fresh in-memory directory, and the filesystem.
func newCheckpointsPart(t *testing.T) (*checkpoints, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(ckptPartDir, 0o755))
	c := &checkpoints{}
	c.init(partitionFiles{fs: mem, dir: ckptPartDir, logger: slog.New(slog.DiscardHandler)})
	return c, mem
}

// TestCheckpointsCleanerRules: the cleaner checkpoint is dropped after a
// truncation, clamped to the log end, written only after the flush that
// makes what it covers durable (everything when it passes the active
// segment's base, the sealed segments below it otherwise), never after a
// failed flush; a clamp only lowers it; a partition alone reads only its
// own entry of the file.
func TestCheckpointsCleanerRules(t *testing.T) {
	const end, activeBase = 100, 80
	errFlush := errors.New("flush failed")
	for _, tc := range []struct {
		name             string
		offset           int64
		then, now        uint64
		flushErr         error
		wantWritten      bool
		wantAt           int64 // the file's offset after (-1: no file)
		wantFull         int
		wantSealedBelow  []int64
		wantErrIsFlushed bool
	}{
		{name: "below the active segment", offset: 60, wantWritten: true, wantAt: 60, wantSealedBelow: []int64{60}},
		{name: "at the active base", offset: activeBase, wantWritten: true, wantAt: activeBase, wantSealedBelow: []int64{activeBase}},
		{name: "inside the active segment", offset: 90, wantWritten: true, wantAt: 90, wantFull: 1},
		{name: "past the log end, clamped", offset: 500, wantWritten: true, wantAt: end, wantFull: 1},
		{name: "a truncation since the round", offset: 60, then: 1, now: 2, wantAt: -1},
		{name: "flush failed", offset: 60, flushErr: errFlush, wantAt: -1, wantSealedBelow: []int64{60}, wantErrIsFlushed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCheckpointsPart(t)
			f := &fakeFlusher{err: tc.flushErr}
			written, err := c.writeCleanerLocked(tc.offset, tc.then, tc.now, end, activeBase, f)
			if tc.wantErrIsFlushed {
				require.ErrorIs(t, err, errFlush)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantWritten, written)
			require.Equal(t, tc.wantFull, f.full, "full flushes")
			require.Equal(t, tc.wantSealedBelow, f.sealedBelow, "flushes of the sealed segments below")
			off, found, err := c.readCleaner()
			require.NoError(t, err)
			if tc.wantAt < 0 {
				require.False(t, found, "no checkpoint written")
				return
			}
			require.True(t, found)
			require.Equal(t, tc.wantAt, off)
		})
	}

	t.Run("clamp only lowers", func(t *testing.T) {
		c, _ := newCheckpointsPart(t)
		_, err := c.writeCleanerLocked(50, 0, 0, end, activeBase, &fakeFlusher{})
		require.NoError(t, err)
		require.NoError(t, c.clampCleanerLocked(70))
		off, _, err := c.readCleaner()
		require.NoError(t, err)
		require.Equal(t, int64(50), off)
		require.NoError(t, c.clampCleanerLocked(30))
		off, _, err = c.readCleaner()
		require.NoError(t, err)
		require.Equal(t, int64(30), off)
	})

	t.Run("only the partition's own entry", func(t *testing.T) {
		c, mem := newCheckpointsPart(t)
		_, found, err := c.readCleaner()
		require.NoError(t, err, "no file is no checkpoint")
		require.False(t, found)
		path := filepath.Join(ckptPartDir, cleanerCheckpointFile)
		require.NoError(t, checkpoint.WriteOffsets(mem, path, []checkpoint.PartitionOffset{{Topic: "other", Partition: 3, Offset: 40}}))
		_, found, err = c.readCleaner()
		require.NoError(t, err)
		require.False(t, found, "another partition's only entry is not this one's")
		require.NoError(t, checkpoint.WriteOffsets(mem, path, []checkpoint.PartitionOffset{
			{Topic: "other", Partition: 3, Offset: 40}, {Topic: "t", Partition: 0, Offset: 25}}))
		off, found, err := c.readCleaner()
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, int64(25), off)
	})
}

// TestCheckpointsLogStartDurable: the log start is written to disk at
// once, also while a Dir defers its lazy writes (as it does while it opens
// or closes its partitions), where a lazy write of the same store is not.
func TestCheckpointsLogStartDurable(t *testing.T) {
	mem := vfs.NewMem()
	const root = "/logs"
	require.NoError(t, mkdirDurable(mem, root))
	rc := newRootCheckpoints(mem, root, nil)
	rc.hold()
	tp := TopicPartition{Topic: "t", Partition: 0}
	store := dirEntries{root: rc, tp: tp}
	c := &checkpoints{}
	c.init(store)

	onDisk := func(name string) (int64, bool) {
		t.Helper()
		m, err := readRootCheckpoint(mem.CrashClone(vfs.CrashOptions{}), root, name)
		require.NoError(t, err)
		off, ok := m[tp]
		return off, ok
	}
	// A lazy write (a raised recovery point) waits for the release.
	require.NoError(t, store.write(recoveryPointCheckpointFile, 9, true))
	_, ok := onDisk(recoveryPointCheckpointFile)
	require.False(t, ok, "the store defers lazy writes while held")

	require.NoError(t, c.writeLogStart(7))
	off, ok := onDisk(logStartOffsetCheckpointFile)
	require.True(t, ok, "the log start survives a crash right after the write")
	require.Equal(t, int64(7), off)
}
