//go:build linux

package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteVAt: the OS file writes the buffers back to back at the offset
// (an empty buffer included), leaves their bytes alone, and reports the
// error of a closed file. (That the test filesystems do not offer it is
// TestWriteVAtFallback's, in internal/vfs.)
func TestWriteVAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Default.Create(path)
	require.NoError(t, err)
	defer f.Close()
	vw, ok := f.(VectorWriterAt)
	require.True(t, ok, "the OS file implements VectorWriterAt")
	hdr := bytes.Repeat([]byte{'h'}, 61)
	body := bytes.Repeat([]byte{'b'}, 70_000)
	bufs := [][]byte{hdr, {}, body}
	n, err := vw.WriteVAt(bufs, 10)
	require.NoError(t, err)
	require.Equal(t, 61+70_000, n)
	require.Equal(t, bytes.Repeat([]byte{'h'}, 61), hdr)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := append(append(make([]byte, 10), hdr...), body...)
	require.Equal(t, want, got)

	_, ok = File(nil).(VectorWriterAt)
	require.False(t, ok)

	// A closed file reports the error.
	g, err := Default.Create(filepath.Join(t.TempDir(), "g"))
	require.NoError(t, err)
	require.NoError(t, g.Close())
	_, err = g.(VectorWriterAt).WriteVAt([][]byte{hdr}, 0)
	require.Error(t, err)
}
