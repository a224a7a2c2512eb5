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
// (empty buffers included), leaves their bytes alone, and reports the
// error of a closed file, on both of its paths: pwritev(2) and, for
// smallWriteV bytes or fewer, one gathered pwrite(2). (That the test
// filesystems do not offer it is TestWriteVAtFallback's, in
// index/vfs/vfstest.)
func TestWriteVAt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"a one-record batch", []int{61, 109}},
		{"an empty part between", []int{61, 0, 109}},
		{"at the gathering limit", []int{61, smallWriteV - 61}},
		{"one byte past it", []int{61, smallWriteV - 60}},
		{"a large body", []int{61, 0, 70_000}},
		{"one part", []int{300}},
		{"nothing", []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			f, err := Default.Create(path)
			require.NoError(t, err)
			defer f.Close()
			vw, ok := f.(VectorWriterAt)
			require.True(t, ok, "the OS file implements VectorWriterAt")
			var bufs, copies [][]byte
			want := make([]byte, 10)
			for i, n := range tc.sizes {
				b := bytes.Repeat([]byte{byte('a' + i)}, n)
				bufs = append(bufs, b)
				copies = append(copies, bytes.Clone(b))
				want = append(want, b...)
			}
			n, err := vw.WriteVAt(bufs, 10)
			require.NoError(t, err)
			require.Equal(t, len(want)-10, n)
			for i := range bufs {
				require.Equal(t, copies[i], bufs[i][:len(copies[i])], "part %d's bytes", i)
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			if len(want) == 10 {
				require.Empty(t, got, "nothing written: the file stays empty")
				return
			}
			require.Equal(t, want, got)
		})
	}

	_, ok := File(nil).(VectorWriterAt)
	require.False(t, ok)

	// A closed file reports the error, on either path.
	g, err := Default.Create(filepath.Join(t.TempDir(), "g"))
	require.NoError(t, err)
	require.NoError(t, g.Close())
	for _, size := range []int{61, smallWriteV + 1} {
		_, err = g.(VectorWriterAt).WriteVAt([][]byte{make([]byte, size)}, 0)
		require.Error(t, err, "%d bytes", size)
	}
}
