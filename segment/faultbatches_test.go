package segment_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/segment"
)

// TestFaultWrapsIndexErrFault maps a sealed segment, cuts its .log to 0
// bytes behind its back (every mapped page then lies past the end of the
// file, which faults as a media error does) and reads: the error is the
// module's one fault sentinel, index.ErrFault, with a *segment.FaultError
// naming the .log. An importer of package segment tests for a fault
// without a sentinel of segment's own.
func TestFaultWrapsIndexErrFault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	dir := t.TempDir()
	s, err := segment.Create(nil, dir, 0, segment.Config{IndexIntervalBytes: 1})
	require.NoError(t, err)
	defer s.Close()
	for i := range 8 {
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: s.NextOffset()})
		require.NoError(t, bld.Add(batch.Record{Value: make([]byte, 1000), Timestamp: int64(i)}))
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = s.Append(b)
		require.NoError(t, err)
	}
	require.NoError(t, s.Seal())
	logPath := filepath.Join(dir, segment.FileName(0, ".log"))
	require.NoError(t, os.Truncate(logPath, 0))

	faulted := false
	for _, err := range s.Batches(3) {
		if err != nil {
			require.ErrorIs(t, err, index.ErrFault)
			var fe *segment.FaultError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, logPath, fe.File)
			faulted = true
			break
		}
	}
	require.True(t, faulted, "Batches over a cut mapping yielded no fault")
}
