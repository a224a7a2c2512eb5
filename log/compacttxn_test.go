package log_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// TestCompactKeepsAbortedTxns: a compaction that keeps an aborted
// transaction's records (a Cleaner that keeps everything) carries the
// replaced segments' .txnindex entries into the new segment, as Kafka's
// cleaner does, also across a reopen: read_committed reads still report the
// aborted transaction. The new segment used to have no transaction index,
// so read_committed consumers got the aborted records as committed.
func TestCompactKeepsAbortedTxns(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	app := func(b []byte) int64 {
		off, err := p.AppendBatch(b)
		require.NoError(t, err)
		return off
	}
	app(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 0-1 plain
	a1 := app(txnBatch(t, 1, 0, 0, 3))               // 2-4 producer 1
	abortAt, err := p.AppendMarker(marker(batch.ControlAbort, 1, 0, 0))
	require.NoError(t, err)
	app(prodBatch(t, -1, -1, -1, 1, pbNow(), false))
	require.NoError(t, p.Roll())
	app(prodBatch(t, -1, -1, -1, 1, pbNow(), false))

	want := []plog.AbortedTxn{{ProducerID: 1, FirstOffset: a1, LastOffset: abortAt, LastStableOffset: abortAt + 1}}
	_, aborted := readCommittedAll(t, p, 0)
	require.Equal(t, want, aborted)

	res, err := p.Compact(context.Background(), horizonCleaner{horizon: 1 << 50})
	require.NoError(t, err)
	require.Equal(t, 1, res.SegmentsWritten)
	_, aborted = readCommittedAll(t, p, 0)
	assert.Equal(t, want, aborted, "after the compaction")

	require.NoError(t, p.Close())
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	_, aborted = readCommittedAll(t, p, 0)
	assert.Equal(t, want, aborted, "after a reopen")
}
