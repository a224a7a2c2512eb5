package log_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// txnBatch is a transactional batch of n records from producer pid.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	return prodBatch(t, pid, epoch, seq, n, pbNow(), true)
}

// pbNow is the timestamp test batches carry.
func pbNow() int64 { return pb{}.ts() }

// marker is a transaction marker for producer pid.
func marker(typ batch.ControlType, pid int64, epoch int16, coord int32) batch.TxnMarker {
	return batch.TxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coord}
}

// readCommittedAll reads read_committed from offset to the last stable
// offset and returns every batch's (base, producer id, control) with the
// aborted transactions each read reported.
func readCommittedAll(t testing.TB, p *plog.Partition, from int64) (bases []int64, aborted []plog.AbortedTxn) {
	t.Helper()
	for off := from; ; {
		recs, ab, err := p.ReadCommitted(off, 1<<20)
		require.NoError(t, err)
		if recs.Empty() {
			require.NoError(t, recs.Close())
			return bases, aborted
		}
		aborted = append(aborted, ab...)
		for rest := recs.Bytes(); len(rest) > 0; {
			bt, r, err := batch.Parse(rest)
			require.NoError(t, err)
			bases = append(bases, bt.BaseOffset())
			rest = r
		}
		off = recs.NextOffset()
		require.NoError(t, recs.Close())
	}
}

// TestAppendMarkerRules is Kafka's appendEndTxnMarker on the leader path,
// case by case: after the setup (data batches and markers, all accepted),
// the probe marker is written at the log end or refused with the sentinel
// (nothing written, the log end unchanged).
func TestAppendMarkerRules(t *testing.T) {
	const pid = 9
	type step struct {
		data   bool // a transactional batch of producer pid, epoch 1 (else the marker)
		marker batch.TxnMarker
	}
	commit := func(epoch int16, coord int32) step {
		return step{marker: marker(batch.ControlCommit, pid, epoch, coord)}
	}
	data := step{data: true}
	tests := []struct {
		name    string
		setup   []step
		probe   batch.TxnMarker
		wantErr error
		// wantLSO is the last stable offset after the probe; wantOpen
		// whether the producer's transaction is still open.
		wantLSO  int64
		wantOpen bool
	}{
		{name: "commit ends the open transaction", setup: []step{data}, probe: marker(batch.ControlCommit, pid, 1, 0), wantLSO: 2},
		{name: "abort ends the open transaction", setup: []step{data}, probe: marker(batch.ControlAbort, pid, 1, 0), wantLSO: 2},
		{name: "marker without an open transaction is written", setup: []step{data, commit(1, 0)}, probe: marker(batch.ControlAbort, pid, 1, 0), wantLSO: 3},
		{name: "marker for an unknown producer is written", probe: marker(batch.ControlCommit, 77, 0, 0), wantLSO: 1},
		{name: "newer producer epoch ends the transaction (coordinator bumped it)", setup: []step{data}, probe: marker(batch.ControlAbort, pid, 2, 0), wantLSO: 2},
		{name: "older producer epoch is fenced", setup: []step{data}, probe: marker(batch.ControlCommit, pid, 0, 0),
			wantErr: plog.ErrInvalidProducerEpoch, wantLSO: 0, wantOpen: true},
		{name: "older coordinator epoch is fenced", setup: []step{data, commit(1, 5), data}, probe: marker(batch.ControlCommit, pid, 1, 4),
			wantErr: plog.ErrTransactionCoordinatorFenced, wantLSO: 2, wantOpen: true},
		{name: "same coordinator epoch is accepted", setup: []step{data, commit(1, 5), data}, probe: marker(batch.ControlCommit, pid, 1, 5), wantLSO: 4},
		{name: "not a marker type", setup: []step{data}, probe: marker(batch.ControlLeaderChange, pid, 1, 0),
			wantErr: plog.ErrInvalidBatch, wantLSO: 0, wantOpen: true},
		{name: "negative producer id", probe: marker(batch.ControlCommit, -1, 1, 0), wantErr: plog.ErrInvalidBatch, wantLSO: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plog.Open(t.TempDir(), plog.Config{})
			require.NoError(t, err)
			defer p.Close()
			seq := int32(0)
			for _, s := range tc.setup {
				if s.data {
					_, err := p.AppendBatch(txnBatch(t, pid, 1, seq, 1))
					require.NoError(t, err)
					seq++
					continue
				}
				_, err := p.AppendMarker(s.marker)
				require.NoError(t, err)
			}
			end := p.LogEndOffset()
			off, err := p.AppendMarker(tc.probe)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, int64(-1), off)
				assert.Equal(t, end, p.LogEndOffset(), "nothing written")
			} else {
				require.NoError(t, err)
				assert.Equal(t, end, off)
				assert.Equal(t, end+1, p.LogEndOffset())
			}
			assert.Equal(t, tc.wantLSO, p.LastStableOffset())
			open, err := p.OpenTransactions()
			require.NoError(t, err)
			assert.Equal(t, tc.wantOpen, len(open) == 1, "open transactions %v", open)
		})
	}
}

// TestReadCommittedStopsAtLSOAndReportsAborts: an open transaction holds
// read_committed reads back at its first offset (read_uncommitted reads
// past it); an abort is reported with the range it covers, a commit is not.
func TestReadCommittedStopsAtLSOAndReportsAborts(t *testing.T) {
	p, err := plog.Open(t.TempDir(), plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	app := func(b []byte) int64 {
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		return off
	}
	app(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 0-1 plain
	a1 := app(txnBatch(t, 1, 0, 0, 3))               // 2-4 producer 1 (will abort)
	c1 := app(txnBatch(t, 2, 0, 0, 2))               // 5-6 producer 2 (will commit)
	app(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 7 plain
	assert.Equal(t, a1, p.LastStableOffset())
	assert.Equal(t, int64(8), p.HighWatermark())

	bases, aborted := readCommittedAll(t, p, 0)
	assert.Equal(t, []int64{0}, bases, "nothing at or past the LSO")
	assert.Empty(t, aborted)
	to, found, err := p.OffsetForTimestampCommitted(plog.LatestTimestamp)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, a1, to.Offset, "latest for read_committed is the LSO")

	abortAt, err := p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, c1, p.LastStableOffset(), "producer 2 still open")
	commitAt, err := p.AppendMarker(marker(batch.ControlCommit, 2, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, p.HighWatermark(), p.LastStableOffset())

	bases, aborted = readCommittedAll(t, p, 0)
	assert.Equal(t, []int64{0, a1, c1, 7, abortAt, commitAt}, bases)
	assert.Equal(t, []plog.AbortedTxn{{ProducerID: 1, FirstOffset: a1, LastOffset: abortAt, LastStableOffset: c1}}, aborted)
	_, aborted = readCommittedAll(t, p, commitAt)
	assert.Empty(t, aborted, "no aborted transaction overlaps a read past its marker")
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	assert.Empty(t, open)
}
