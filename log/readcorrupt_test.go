package log_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/segment"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestReadCommittedCorruptLengthInLongRange: a batch whose length field was
// damaged on disk, in the middle of a long read range (which Read jumps
// over through the offset index without reading its header), makes a
// read_committed read that cuts the range at the last stable offset fail
// with a *base.CorruptionError naming the file and the batch. The cut
// used to walk the damaged length unchecked and return a result ending
// inside a batch, with no error (laws 3 and 8); a length negative enough
// would have sent it out of the slice.
func TestReadCommittedCorruptLengthInLongRange(t *testing.T) {
	dir := t.TempDir()
	cfg := plog.Config{IndexIntervalBytes: 512}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for i := range 400 { // about 30 KiB of one-record batches
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, pbNow(), byte(i)))
		require.NoError(t, err)
	}
	_, err = p.AppendBatch(txnBatch(t, 1, 0, 0, 1)) // open: the LSO stops here
	require.NoError(t, err)
	for i := range 5 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, pbNow(), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())

	path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	pos := batchPositions(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	var length [4]byte
	binary.BigEndian.PutUint32(length[:], uint32(0xffffff00)) // -256
	_, err = f.WriteAt(length[:], pos[100]+8)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	p, err = plog.Open(dir, cfg) // clean: no batch is read
	require.NoError(t, err)
	defer p.Close()
	require.Less(t, p.LastStableOffset(), p.HighWatermark())
	require.Len(t, p.SegmentInfos(), 1)
	recs, _, err := p.ReadCommitted(0, 1<<20)
	if err == nil {
		defer recs.Close()
	}
	require.ErrorIs(t, err, base.ErrCorrupt, "a read result of %d bytes, up to offset %d", len(recs.Bytes()), recs.NextOffset())
	var ce *base.CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.File)
	assert.Equal(t, pos[100], ce.Pos)
}
