//go:build linux

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilesystemSync: the OS filesystem's handle syncs the filesystems of
// directories that exist (two on one filesystem: one descriptor), names
// the directory that does not, and refuses after Close; on a kernel whose
// syncfs hides write-back errors it is not opened (errors.ErrUnsupported).
func TestFilesystemSync(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	require.NoError(t, os.Mkdir(a, 0o755))
	require.NoError(t, os.Mkdir(b, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(a, "f"), []byte("data"), 0o644))
	syncer, ok := Default.(FilesystemSyncer)
	require.True(t, ok, "the OS filesystem implements FilesystemSyncer on Linux")
	h, err := syncer.OpenFilesystemSync(root)
	if _, ok := syncfsReportsErrors(); !ok {
		require.ErrorIs(t, err, errors.ErrUnsupported)
		return
	}
	require.NoError(t, err)
	require.NoError(t, h.Sync([]string{root, a, b}))
	require.Len(t, h.(*osFilesystemSync).fds, 1, "one filesystem, one descriptor")
	require.NoError(t, h.Sync(nil))
	err = h.Sync([]string{a, filepath.Join(root, "missing")})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "missing")
	require.NoError(t, h.Close())
	require.ErrorIs(t, h.Sync([]string{a}), os.ErrClosed)
	require.ErrorIs(t, h.Close(), os.ErrClosed)

	_, err = syncer.OpenFilesystemSync(filepath.Join(root, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestReleaseAtLeast: kernel release strings as uname prints them.
func TestReleaseAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"5.8.0", true},
		{"5.8", true},
		{"5.7.19", false},
		{"4.19.0-26-amd64", false},
		{"5.10.0-28-cloud-amd64", true},
		{"6.1.0-18-amd64", true},
		{"6.18.44-fc-v1272", true},
		{"5.15.0-1051-azure", true},
		{"5.8-rc1", true},
		{"3.10.0-1160.el7.x86_64", false},
		{"", false},
		{"6", false},
		{"x.y.z", false},
		{"6.x", false},
	} {
		require.Equal(t, tc.want, releaseAtLeast(tc.release, 5, 8), tc.release)
	}
}
