package compaction_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/segment"
)

// TestRecoverDirNilFS: RecoverDir works on the operating system's
// filesystem when the FS is nil (it used to panic).
func TestRecoverDirNilFS(t *testing.T) {
	dir := t.TempDir()
	deleted := filepath.Join(dir, segment.FileName(0, segment.LogSuffix)+segment.DeletedSuffix)
	require.NoError(t, os.WriteFile(deleted, []byte("x"), 0o644))
	require.NoError(t, compaction.RecoverDir(nil, dir))
	_, err := os.Stat(deleted)
	require.ErrorIs(t, err, os.ErrNotExist)
}
