package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// txnBatch returns producer pid's transactional batch of n records at
// base, its first sequence seq.
func txnBatch(t *testing.T, pid int64, base int64, seq int32, n int) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, Transactional: true,
		Producer: &batch.Producer{ID: pid, BaseSequence: seq}})
	for range n {
		require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: testNow}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

// txnMarker returns producer pid's marker of type typ at offset.
func txnMarker(t *testing.T, pid int64, typ batch.ControlType, offset int64) batch.Batch {
	t.Helper()
	b, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: typ, ProducerID: pid, BaseOffset: offset, Timestamp: testNow})
	require.NoError(t, err)
	return b
}

// TestTxnStateUnstable: the value the bounds publish for the last stable
// offset (txnState.unstable) is the first offset of the oldest transaction
// that is open, or whose marker the high watermark has not passed, plus
// one; 0 when there is none; 1 (the log start) while held, whatever the
// producer state says. hold publishes the 1 at once; noteAbortedIn marks
// the partition as having aborted transactions once a segment holds one,
// and never clears the mark.
func TestTxnStateUnstable(t *testing.T) {
	st := producer.NewState(producer.Config{})
	var txn txnState
	require.Equal(t, int64(0), txn.unstable(st), "no transaction")

	st.Apply(txnBatch(t, 1, 10, 0, 2)) // producer 1: 10-11
	require.Equal(t, int64(11), txn.unstable(st), "open at 10")
	st.Apply(txnBatch(t, 2, 12, 0, 1)) // producer 2: 12
	require.Equal(t, int64(11), txn.unstable(st), "the oldest open one")

	_, ok := st.Apply(txnMarker(t, 1, batch.ControlCommit, 13))
	require.True(t, ok)
	st.SetHighWatermark(13)
	require.Equal(t, int64(11), txn.unstable(st), "ended by a marker the high watermark has not passed")
	st.SetHighWatermark(14)
	require.Equal(t, int64(13), txn.unstable(st), "producer 2's is the oldest once the marker is below the high watermark")

	var b bounds
	b.storeQuiet(position{Offset: 14}, position{Offset: 14}, txn.unstable(st))
	txn.hold(&b)
	require.Equal(t, int64(1), txn.unstable(st), "held")
	_, u := b.loadStable()
	require.Equal(t, int64(1), u, "hold publishes the log start at once")
	txn.held = false // what the core's publishUnstableLocked does
	_, ok = st.Apply(txnMarker(t, 2, batch.ControlAbort, 14))
	require.True(t, ok)
	st.SetHighWatermark(15)
	require.Equal(t, int64(0), txn.unstable(st), "every transaction ended below the high watermark")

	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/p-0", 0o755))
	var list []*segment.Segment
	for _, base := range []int64{0, 20} {
		list = append(list, createTestSegment(t, fs, "/p-0", segment.Config{MaxIndexBytes: memTestIndexBytes}, base, true, txnBatch(t, 3, base, 0, 2)))
	}
	release(t, list)
	txn.noteAbortedIn(list)
	require.False(t, txn.aborted.Load(), "no segment holds an aborted transaction")
	require.NoError(t, list[1].AppendAbortedTxn(AbortedTxn{ProducerID: 3, FirstOffset: 20, LastOffset: 21, LastStableOffset: 20}))
	txn.noteAbortedIn(list)
	require.True(t, txn.aborted.Load(), "a segment holds an aborted transaction")
	txn.noteAbortedIn(list[:1])
	require.True(t, txn.aborted.Load(), "the mark was cleared")
}
