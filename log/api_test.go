package log_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestCorruptionErrorAsFromOpen: the corruption a strict Open refuses is
// reachable by an importer with errors.As and batch.CorruptionError,
// naming the damaged file.
func TestCorruptionErrorAsFromOpen(t *testing.T) {
	dir, _, segs := corruptionFixture(t)
	makeUnclean(t, dir)
	name := segment.FileName(segs[1].BaseOffset, segment.LogSuffix)
	pos := batchPositions(t, filepath.Join(dir, name))
	flipByte(t, filepath.Join(dir, name), pos[1]+30)

	_, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, Recovery: plog.StrictRecovery{}})
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)
	var ce *batch.CorruptionError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, name, filepath.Base(ce.File))
	require.Equal(t, "crc", ce.Field)
	require.Equal(t, pos[1]+17, ce.Pos, "the position of the batch's crc field")
}

// openCounter is an importer's filesystem for Config.FS: it names only
// package index/vfs and wraps the OS filesystem.
type openCounter struct {
	vfs.FS
	opens int
}

func (c *openCounter) OpenReadWrite(name string) (vfs.File, error) {
	c.opens++
	return c.FS.OpenReadWrite(name)
}

// TestConfigFSAlias: Config.FS takes an FS written against index/vfs.
func TestConfigFSAlias(t *testing.T) {
	fs := &openCounter{FS: vfs.Default}
	p, err := plog.Open(filepath.Join(t.TempDir(), "t-0"), plog.Config{FS: fs})
	require.NoError(t, err)
	require.Same(t, fs, p.FS().(*openCounter))
	require.NoError(t, p.Close())
	require.Positive(t, fs.opens, "the index files are opened through the FS")
}
