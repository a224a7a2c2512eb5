package vfstest

import (
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/index/vfs"

	"github.com/stretchr/testify/require"
)

// TestWriteVAtFallback: the in-memory and fault-injecting filesystems do
// not offer VectorWriterAt, so their callers take the WriteAt fallback
// (the OS file's WriteVAt is tested in index/vfs).
func TestWriteVAtFallback(t *testing.T) {
	mf, err := NewMem().Create("/m")
	require.NoError(t, err)
	_, ok := mf.(vfs.VectorWriterAt)
	require.False(t, ok, "MemFS files take the WriteAt fallback")
	inf, err := NewInjector(vfs.Default).Create(filepath.Join(t.TempDir(), "i"))
	require.NoError(t, err)
	defer inf.Close()
	_, ok = inf.(vfs.VectorWriterAt)
	require.False(t, ok, "the injector sees every write: it takes the WriteAt fallback")
}
