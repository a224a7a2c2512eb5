package log_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// recoverDir opens and closes the partition in dir: Open finishes or
// undoes what a crash left of a swap or a deletion (the partition's one
// crash cleanup).
func recoverDir(fs vfs.FS, dir string) error {
	p, err := plog.Open(dir, plog.Config{FS: fs})
	if err != nil {
		return err
	}
	return p.Close()
}

// TestOpenRefusesUnsafeSwaps (issue 12, item 11): Open never lets any
// NNN.log.swap replace the live segment NNN. An empty stray swap is
// removed and the segment stays; a swap that ends below the segment it
// would replace (not its compaction) is refused with an error wrapping
// base.ErrCorrupt naming it, and nothing changes; a real compaction swap
// still completes.
func TestOpenRefusesUnsafeSwaps(t *testing.T) {
	const dir = "/p/t-0"
	setup := func(t *testing.T) (*vfs.MemFS, []byte) {
		fs := vfs.NewMem()
		require.NoError(t, fs.MkdirAll(dir, 0o755))
		seg, err := segment.Create(fs, dir, 0, segment.Config{})
		require.NoError(t, err)
		var all []byte
		for i := 0; i < 4; i++ {
			b := batch.Batch(makeBatchT(t, int64(i*2), 2))
			_, err := seg.Append(b)
			require.NoError(t, err)
			all = append(all, b...)
		}
		require.NoError(t, seg.Seal())
		require.NoError(t, seg.Flush())
		require.NoError(t, seg.Close())
		return fs, all
	}
	logPath := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	swapPath := logPath + segment.SwapSuffix

	t.Run("empty swap", func(t *testing.T) {
		fs, all := setup(t)
		writeFileT(t, fs, swapPath, nil)
		require.NoError(t, recoverDir(fs, dir))
		require.Equal(t, all, readFileT(t, fs, logPath))
		_, err := fs.Stat(swapPath)
		require.Error(t, err)
	})
	t.Run("swap ending below the segment", func(t *testing.T) {
		fs, all := setup(t)
		short := all[:len(all)/2]
		writeFileT(t, fs, swapPath, short)
		err := recoverDir(fs, dir)
		require.ErrorIs(t, err, base.ErrCorrupt)
		require.Contains(t, err.Error(), segment.FileName(0, segment.LogSuffix+segment.SwapSuffix))
		require.Equal(t, all, readFileT(t, fs, logPath))
		require.Equal(t, short, readFileT(t, fs, swapPath))
	})
	t.Run("compaction swap", func(t *testing.T) {
		fs, all := setup(t)
		// The compaction kept the first and the last batch.
		first := batch.Batch(all).Size()
		last := all[len(all)-first:]
		compacted := append(append([]byte(nil), all[:first]...), last...)
		writeFileT(t, fs, swapPath, compacted)
		require.NoError(t, recoverDir(fs, dir))
		require.Equal(t, compacted, readFileT(t, fs, logPath))
	})
}

// TestOpenRespectsLiveCompaction (review item 6): with the directory open
// (Open holds lockFile) and a live compaction's .cleaned file present, a
// second Open — the only code that cleans up after a crashed swap —
// returns an error wrapping ErrLocked and changes nothing; once the
// partition is closed, Open removes the leftover.
func TestOpenRespectsLiveCompaction(t *testing.T) {
	const dir = "/p/t-0"
	fs := vfs.NewMem()
	p, err := plog.Open(dir, plog.Config{FS: fs})
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		_, err := p.AppendBatch(makeBatchT(t, 0, 2))
		require.NoError(t, err)
	}
	cleaned := filepath.Join(dir, segment.FileName(0, segment.LogSuffix)+segment.CleanedSuffix)
	writeFileT(t, fs, cleaned, []byte("in progress"))

	err = recoverDir(fs, dir)
	require.ErrorIs(t, err, plog.ErrLocked)
	require.Equal(t, []byte("in progress"), readFileT(t, fs, cleaned), "a second Open touched a live compaction's file")

	require.NoError(t, p.Close())
	require.NoError(t, recoverDir(fs, dir))
	_, err = fs.Stat(cleaned)
	require.Error(t, err, "the .cleaned file of a crashed swap stays")
}
