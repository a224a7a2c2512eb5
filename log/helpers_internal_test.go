package log

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// Helpers of the package's internal tests (the tests of a part built
// without a Partition).

// memTestIndexBytes keeps the preallocated indexes of segments on MemFS
// small.
const memTestIndexBytes = 4096

// span is a batch of n records at base.
type span struct{ base, n int64 }

// batch encodes s, leader epoch 1, record i of it at timestamp
// 1000 + base + i.
func (s span) batch(t *testing.T) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: s.base, PartitionLeaderEpoch: 1})
	for i := range s.n {
		require.NoError(t, bld.Add(batch.Record{Value: []byte{byte(i)}, Timestamp: 1000 + s.base + i}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// createTestSegment creates the segment at base in dir holding batches,
// sealed unless active, with the reference the caller releases
// (release).
func createTestSegment(t *testing.T, fs vfs.FS, dir string, cfg segment.Config, base int64, active bool, batches ...batch.Batch) *segment.Segment {
	t.Helper()
	seg, err := segment.Create(fs, dir, base, cfg)
	require.NoError(t, err)
	for _, b := range batches {
		_, err = seg.Append(b)
		require.NoError(t, err)
	}
	if !active {
		require.NoError(t, seg.Seal())
	}
	return seg
}

// release drops the references on list at the end of the test.
func release(t *testing.T, list []*segment.Segment) {
	t.Cleanup(func() {
		for _, s := range list {
			_ = s.Unref()
		}
	})
}

// bases returns the base offsets of list.
func bases(list []*segment.Segment) []int64 {
	out := make([]int64, len(list))
	for i, s := range list {
		out[i] = s.BaseOffset()
	}
	return out
}

// memFiles returns every file of dir with its bytes.
func memFiles(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range names {
		f, err := fs.Open(filepath.Join(dir, n))
		require.NoError(t, err)
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		out[n] = string(b)
	}
	return out
}

// writeMemFile writes data as the file at path.
func writeMemFile(t *testing.T, fs vfs.FS, path, data string) {
	t.Helper()
	f, err := fs.Create(path)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// testNow is the fixed clock of the tests of the append rules and the
// transaction state, in ms.
const testNow = int64(1_700_000_000_000)

// timedBatch builds a batch with opts holding one record per timestamp in
// ts.
func timedBatch(t *testing.T, opts batch.BuilderOptions, ts ...int64) []byte {
	t.Helper()
	bld := batch.NewBuilder(opts)
	for _, x := range ts {
		require.NoError(t, bld.Add(batch.Record{Value: []byte("value"), Timestamp: x}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}
