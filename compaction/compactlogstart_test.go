package compaction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// TestCompactPolicyDeletesSegmentsBelowLogStart: under cleanup.policy
// compact alone, a segment wholly below the log start offset is deleted,
// as Kafka's cleaner deletes the log-start-breached segments of every
// compacted log (UnifiedLog.deleteOldSegments runs that rule whatever the
// policy; LogCleanerManager.deletableLogs hands it the compacted logs).
// DeleteRecordsBefore of every record leaves the active segment, which a
// roll then leaves wholly below the log start: the compact policy used to
// keep it, and its disk space, for ever. Time and size stay off: the
// other segments are kept however old.
func TestCompactPolicyDeletesSegmentsBelowLogStart(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	defer l.close()
	old := time.Now().Add(-365 * 24 * time.Hour).UnixMilli()
	for i := range 3 {
		_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint(i)), value: k("v"), ts: old}))
		require.NoError(t, err)
	}
	require.NoError(t, l.roll())
	for i := range 3 {
		_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint(i)), value: k("w"), ts: old}))
		require.NoError(t, err)
	}
	require.NoError(t, l.DeleteRecordsBefore(l.LogEndOffset())) // every record: the active segment stays
	require.Equal(t, "[3]", fmt.Sprint(bases(t, l)))
	require.NoError(t, l.roll()) // segment 3 now lies wholly below the log start, 6
	_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("x"), value: k("v"), ts: old}))
	require.NoError(t, err)
	require.NoError(t, l.roll())

	now := time.Now()
	r, err := NewRunner(compactCfg(&now), RunnerOptions{})
	require.NoError(t, err)
	res, errs, err := r.Run(context.Background(), []Partition{l})
	require.NoError(t, err)
	require.Empty(t, errs)
	require.Equal(t, "[6 7]", fmt.Sprint(bases(t, l)), "segments left: %+v", res)
	require.Equal(t, int64(6), l.LogStartOffset())
	require.Len(t, l.readAll(t), 1)
}
