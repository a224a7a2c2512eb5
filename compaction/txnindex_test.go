package compaction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// TestRemovedMarkerTakesItsTxnIndexEntry (law 11): three aborted
// transactions whose data the first round removes, whose ABORT markers the
// second stamps and a round past the horizon removes. The rewrite used to
// copy every .txnindex entry of the segments it replaced whatever became
// of their markers, so the new segment kept an entry for each transaction
// the log no longer held (the index never shrank) and Verify took the
// segment, with more entries than batches, for corrupt. An entry now
// stays only with its marker, as in Kafka's cleaned transaction index.
func TestRemovedMarkerTakesItsTxnIndexEntry(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	// The producer wrote two days ago: it has expired, so nothing keeps
	// its last data batch as an empty header.
	x := newTxnLog(t, now.Add(-48*time.Hour).UnixMilli())
	var aborts []int64
	for i := range 3 {
		x.data(7, true, kv{key: k(fmt.Sprint("A", i)), value: k("aborted")})
		aborts = append(aborts, x.marker(7, batch.ControlAbort))
	}
	x.data(-1, false, kv{key: k("B"), value: k("b")})
	require.NoError(t, x.l.roll())
	x.ts = now.UnixMilli() - 1000

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	aborted := func() []int64 {
		t.Helper()
		var out []int64
		for off := x.l.LogStartOffset(); off < x.l.LastStableOffset(); {
			rs, ab, err := x.l.ReadCommitted(off, 1<<20)
			require.NoError(t, err)
			for _, a := range ab {
				out = append(out, a.LastOffset)
			}
			next := rs.NextOffset()
			require.NoError(t, rs.Close())
			require.Greater(t, next, off)
			off = next
		}
		return out
	}
	round := func() {
		t.Helper()
		x.data(-1, false, kv{key: k("D"), value: k("d")})
		require.NoError(t, x.l.roll())
		res, err := c.Apply(context.Background(), x.l)
		require.NoError(t, err)
		require.True(t, res.Compacted, "%+v", res)
		require.NoError(t, x.l.Verify())
	}

	round()
	assert.Equal(t, map[int64]bool{aborts[0]: false, aborts[1]: false, aborts[2]: false}, markers(t, x.l), "data gone, markers kept")
	assert.Equal(t, aborts, aborted(), "the markers stay, so do their entries")
	round()
	assert.Equal(t, map[int64]bool{aborts[0]: true, aborts[1]: true, aborts[2]: true}, markers(t, x.l), "horizons stamped")
	now = now.Add(2 * time.Hour) // past the horizon (compactCfg: 1 hour)
	round()
	assert.Empty(t, markers(t, x.l), "the markers went past their horizon")
	assert.Empty(t, aborted(), "an entry outlived its marker")
}
