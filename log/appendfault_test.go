package log_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestAppendBatchMappedSourceFault (review item 7): AppendBatch given the
// zero-copy bytes of another partition's read whose file was cut under
// them returns an error wrapping ErrFault instead of killing the process;
// the bytes are the caller's, so the target partition stays online.
func TestAppendBatchMappedSourceFault(t *testing.T) {
	skipUnlessSIGBUS(t)
	a, dirA := openT(t, plog.Config{})
	appendBigBatches(t, a)
	r, err := a.ReadFrom(a.LogEndOffset()-1, 1) // the last batch, past the first pages
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, os.Truncate(filepath.Join(dirA, segment.FileName(0, segment.LogSuffix)), 0))

	b, _ := openT(t, plog.Config{})
	_, err = b.AppendBatch(r.Bytes())
	require.ErrorIs(t, err, index.ErrFault)
	require.NotErrorIs(t, err, plog.ErrFailed, "the target partition is not at fault")
	require.Equal(t, int64(0), b.LogEndOffset())
	_, err = b.AppendBatch(logtest.MakeBatch(1, 10, 1, 1))
	require.NoError(t, err, "the target partition stays online")
}

// TestAppendBatchFaultInsideChecksum: the caller's batch is a mapped file
// whose first page is readable and the rest cut away, so Parse reads the
// header and the fault comes inside the CRC-32C of the records (on amd64
// with AVX-512, in batch's own folding assembly). AppendBatch returns an
// error wrapping ErrFault, writes nothing and the process lives.
func TestAppendBatchFaultInsideChecksum(t *testing.T) {
	skipUnlessSIGBUS(t)
	a, dirA := openT(t, plog.Config{})
	_, err := a.AppendBatch(logtest.MakeBatch(32, 1000, 1_700_000_000_000, 1)) // about 32 KiB at position 0
	require.NoError(t, err)
	r, err := a.ReadFrom(0, 1)
	require.NoError(t, err)
	defer r.Close()
	require.Greater(t, len(r.Bytes()), 4*os.Getpagesize(), "the batch spans pages")
	require.NoError(t, os.Truncate(filepath.Join(dirA, segment.FileName(0, segment.LogSuffix)), int64(os.Getpagesize())))

	b, _ := openT(t, plog.Config{})
	_, err = b.AppendBatch(r.Bytes())
	require.ErrorIs(t, err, index.ErrFault)
	require.Equal(t, int64(0), b.LogEndOffset())
}
