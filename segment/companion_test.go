package segment

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// TestTxnIndexFollowsSegment: a segment's .txnindex (written by the log
// package beside the segment's own files) is renamed by ChangeSuffix and
// MarkDeleted with the .log, .index and .timeindex, and removed with them
// at the last Unref, so compaction's swap and retention never leave one
// behind or attach it to another segment. A segment without one renames as
// before.
func TestTxnIndexFollowsSegment(t *testing.T) {
	for _, withTxn := range []bool{true, false} {
		fsys := vfs.NewMem()
		const dir = "/p/t-0"
		require.NoError(t, fsys.MkdirAll(dir, 0o755))
		s, err := CreateWithSuffix(fsys, dir, 5, CleanedSuffix, Config{})
		require.NoError(t, err)
		mustAppend(t, s, simpleBatch(t, 5, 3, 1, 10))
		txn := func(suffix string) string { return filepath.Join(dir, FileName(5, TxnIndexSuffix)+suffix) }
		if withTxn {
			f, err := fsys.Create(txn(CleanedSuffix))
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 34))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		exists := func(suffix string) bool {
			_, err := fsys.Stat(txn(suffix))
			return err == nil
		}
		require.NoError(t, s.ChangeSuffix(CleanedSuffix, SwapSuffix))
		require.Equal(t, withTxn, exists(SwapSuffix), ".txnindex.swap")
		require.False(t, exists(CleanedSuffix))
		require.NoError(t, s.ChangeSuffix(SwapSuffix, ""))
		require.Equal(t, withTxn, exists(""), ".txnindex")
		s.Ref() // a reader
		require.NoError(t, s.MarkDeleted())
		require.Equal(t, withTxn, exists(DeletedSuffix), ".txnindex.deleted while a reader holds the segment")
		require.False(t, exists(""))
		require.NoError(t, s.Unref())
		require.NoError(t, s.Unref()) // the last reference
		_, err = fsys.Stat(txn(DeletedSuffix))
		require.ErrorIs(t, err, fs.ErrNotExist, "the .txnindex outlived its segment")
	}
}
