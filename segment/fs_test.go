package segment_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
)

// countingFS is an importer's FS, written against package index/vfs.
type countingFS struct {
	vfs.FS
	creates int
}

func (c *countingFS) Create(name string) (vfs.File, error) {
	c.creates++
	return c.FS.Create(name)
}

// TestNilFS: a nil filesystem is the operating system's (it used to panic),
// and an FS of the importer's own, wrapping vfs.Default, gets the
// segment's files.
func TestNilFS(t *testing.T) {
	dir := t.TempDir()
	s, err := segment.Create(nil, dir, 5, segment.Config{})
	require.NoError(t, err)
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: 5})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: 1}))
	b, err := bld.Build()
	require.NoError(t, err)
	_, err = s.Append(b)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, segment.FileName(5, ".log")))
	require.NoError(t, err, "the segment is on the OS filesystem")

	r, err := segment.Open(nil, dir, 5, segment.Config{})
	require.NoError(t, err)
	require.Equal(t, int64(6), r.NextOffset())
	require.NoError(t, r.Close())

	fs := &countingFS{FS: vfs.Default}
	s, err = segment.Create(fs, t.TempDir(), 0, segment.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, fs.creates)
	require.NoError(t, s.Close())
}

// TestCorruptionErrorAs: an importer reaches the position of damage found
// by segment recovery with errors.As and batch.CorruptionError.
func TestCorruptionErrorAs(t *testing.T) {
	dir := t.TempDir()
	s, err := segment.Create(nil, dir, 0, segment.Config{})
	require.NoError(t, err)
	var sizes []int64
	for i := range 2 {
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: s.NextOffset()})
		require.NoError(t, bld.Add(batch.Record{Value: []byte("value"), Timestamp: int64(i)}))
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = s.Append(b)
		require.NoError(t, err)
		sizes = append(sizes, int64(len(b)))
	}
	require.NoError(t, s.Close())
	path := filepath.Join(dir, segment.FileName(0, ".log"))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[sizes[0]+batch.HeaderSize] ^= 0xff // a record byte of the second batch: its CRC fails
	require.NoError(t, os.WriteFile(path, data, 0o644))

	s, err = segment.Open(nil, dir, 0, segment.Config{})
	require.NoError(t, err)
	defer s.Close()
	rr, err := s.Recover(0)
	require.NoError(t, err)
	var ce *batch.CorruptionError
	require.True(t, errors.As(rr.Cause, &ce), "%v", rr.Cause)
	require.ErrorIs(t, ce, batch.ErrCorrupt)
	require.Contains(t, ce.File, segment.FileName(0, ".log"))
	require.Equal(t, sizes[0], rr.ValidBytes)
}
