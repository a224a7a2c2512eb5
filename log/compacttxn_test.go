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

// dropAllCleaner plans a round up to the high watermark and drops every
// batch: whatever a round rewrites is gone afterwards.
type dropAllCleaner struct{ lso *int64 }

func (c dropAllCleaner) Plan(_ context.Context, v *plog.View) (int64, error) {
	*c.lso = v.LastStableOffset()
	return v.HighWatermark(), nil
}

func (dropAllCleaner) Batch(batch.Batch) plog.BatchDecision {
	return plog.BatchDecision{Action: plog.BatchDrop}
}

func (dropAllCleaner) Keep(batch.Batch, batch.Record) plog.RecordVerdict { return plog.RecordDrop }

// TestCompactStopsAtLastStableOffset: Compact rewrites no segment that
// reaches the last stable offset, whatever the Cleaner plans (law 11),
// also when the open transaction's data lies below the log start
// (DeleteRecordsBefore is bounded by the high watermark only, as in Kafka),
// where no batch header shows it: the last stable offset is then the log
// start and nothing is rewritten. The View gives the Cleaner that offset.
func TestCompactStopsAtLastStableOffset(t *testing.T) {
	for _, tc := range []struct {
		name        string
		deleteTo    int64 // DeleteRecordsBefore, 0 for none
		wantLSO     int64
		wantOffsets []int64 // the records' offsets after the round
	}{
		{"open transaction in the second segment", 0, 2, []int64{2, 3, 4, 5, 6}},
		{"open transaction below the log start", 4, 4, []int64{4, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plog.Open(t.TempDir(), plog.Config{})
			require.NoError(t, err)
			defer p.Close()
			app := func(b []byte) {
				_, err := p.AppendBatch(b)
				require.NoError(t, err)
			}
			app(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 0-1
			require.NoError(t, p.Roll())
			app(txnBatch(t, 7, 0, 0, 2)) // 2-3, never ended
			require.NoError(t, p.Roll())
			app(prodBatch(t, -1, -1, -1, 2, pbNow(), false)) // 4-5
			require.NoError(t, p.Roll())
			app(prodBatch(t, -1, -1, -1, 1, pbNow(), false)) // 6, active
			if tc.deleteTo > 0 {
				require.NoError(t, p.DeleteRecordsBefore(tc.deleteTo))
			}
			require.Equal(t, tc.wantLSO, p.LastStableOffset())

			var seen int64
			_, err = p.Compact(context.Background(), dropAllCleaner{lso: &seen})
			require.NoError(t, err)
			assert.Equal(t, tc.wantLSO, seen, "View.LastStableOffset")
			var got []int64
			var dec batch.Decoder
			for off := p.LogStartOffset(); off < p.HighWatermark(); {
				r, err := p.ReadFrom(off, 1<<20)
				require.NoError(t, err)
				for rec, err := range r.All(&dec) {
					require.NoError(t, err)
					got = append(got, rec.Offset)
				}
				off = r.NextOffset()
				require.NoError(t, r.Close())
			}
			assert.Equal(t, tc.wantOffsets, got, "the records left")
		})
	}
}
