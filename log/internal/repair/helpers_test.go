package repair

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// v2Batch returns the bytes of a RecordBatch v2 of n records at offset at.
func v2Batch(t *testing.T, at int64, n int) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: at, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		require.NoError(t, bld.Add(batch.Record{Value: []byte("value"), Timestamp: 1}))
	}
	b, err := bld.AppendTo(nil)
	require.NoError(t, err)
	return b
}

// write creates path on fs holding parts, back to back.
func write(t *testing.T, fs vfs.FS, path string, parts ...[]byte) {
	t.Helper()
	f, err := fs.Create(path)
	require.NoError(t, err)
	for _, p := range parts {
		_, err := f.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
}
