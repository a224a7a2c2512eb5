package vfstest

import (
	"io"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/require"
)

// readFile returns the named file's contents, or nil and the error.
func readFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFile creates name with data; sync syncs the file (not the directory).
func writeFile(t *testing.T, fsys vfs.FS, name string, data []byte, sync bool) {
	t.Helper()
	f, err := fsys.Create(name)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// exists reports whether name exists on fsys.
func exists(fsys vfs.FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}
