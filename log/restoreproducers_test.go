package log_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// A log restarted above its end takes another replica's producer state:
// a retry of the producer's last batch below the restart point is a
// duplicate (with its original offsets), before and after a reopen, and
// the next sequence is accepted; a log that holds batches, or entries at
// or past the log end, are refused and change nothing.
func TestRestoreProducers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	src, err := plog.Open(filepath.Join(t.TempDir(), "src-0"), plog.Config{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := src.AppendBatch(pb{pid: 7, epoch: 2, seq: int32(4 * i), n: 4}.bytes(t))
		require.NoError(t, err)
	}
	srcEnd := src.LogEndOffset()
	states, err := src.Producers()
	require.NoError(t, err)
	require.NoError(t, src.Close())
	var entries []plog.ProducerSnapshotEntry
	for _, st := range states {
		last := st.Batches[len(st.Batches)-1]
		entries = append(entries, plog.ProducerSnapshotEntry{ProducerID: st.ProducerID, ProducerEpoch: st.Epoch,
			LastSequence: last.LastSequence, LastOffset: last.LastOffset, OffsetDelta: int32(last.LastOffset - last.FirstOffset),
			Timestamp: st.LastTimestamp, CoordinatorEpoch: st.CoordinatorEpoch, CurrentTxnFirstOffset: st.CurrentTxnFirstOffset})
	}

	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 9, epoch: 0, seq: 0, n: 1}.bytes(t))
	require.NoError(t, err)
	require.ErrorIs(t, p.RestoreProducers(entries), plog.ErrUnexpectedOffset, "the log holds a batch")
	require.NoError(t, p.TruncateFullyAndStartAt(srcEnd))
	bad := append([]plog.ProducerSnapshotEntry(nil), entries...)
	bad[0].LastOffset = srcEnd
	require.ErrorIs(t, p.RestoreProducers(bad), plog.ErrInvalidBatch)
	_, ok, err := p.ProducerState(7)
	require.NoError(t, err)
	require.False(t, ok, "a refused restore changes nothing")
	require.NoError(t, p.RestoreProducers(entries))

	check := func(p *plog.Partition) {
		t.Helper()
		info, err := p.AppendBatchInfo(pb{pid: 7, epoch: 2, seq: 8, n: 4}.bytes(t))
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "a retry of the last batch below the restart point")
		assert.Equal(t, srcEnd-4, info.Base)
		assert.Equal(t, srcEnd, p.LogEndOffset(), "nothing written")
	}
	check(p)
	require.NoError(t, p.Close())
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	check(p)
	_, err = p.AppendBatch(pb{pid: 7, epoch: 2, seq: 12, n: 1}.bytes(t))
	require.NoError(t, err, "the next sequence follows the restored state")
	_, err = p.AppendBatch(pb{pid: 7, epoch: 2, seq: 20, n: 1}.bytes(t))
	require.ErrorIs(t, err, plog.ErrOutOfOrderSequence)
}
