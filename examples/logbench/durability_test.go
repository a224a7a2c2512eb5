package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// TestDurableRecord: the durability measurement appends one record with a
// 100-byte value (its batches once held a 1,000-byte value while the raw
// loop wrote 100 zero bytes).
func TestDurableRecord(t *testing.T) {
	rec, err := durableRecord()
	require.NoError(t, err)
	b := batch.Batch(rec)
	require.NoError(t, b.Validate())
	require.EqualValues(t, 1, b.RecordsCount())
	n := 0
	for r, err := range b.All(nil) {
		require.NoError(t, err)
		assert.Len(t, r.Value, 100)
		n++
	}
	assert.Equal(t, 1, n)
	assert.Less(t, len(rec), 200)
}

// TestDurableRoundsWriteTheSameBytes: the raw baselines write exactly the
// bytes the partition appends, one fdatasync per record (or per 8
// records), and the partition
// rounds report the records they made durable and the fdatasyncs they ran.
func TestDurableRoundsWriteTheSameBytes(t *testing.T) {
	rec, err := durableRecord()
	require.NoError(t, err)

	for _, per := range []int{1, 8} {
		rawDir := t.TempDir()
		raw, err := rawSyncRound(rawDir, rec, 5, per)
		require.NoError(t, err)
		assert.EqualValues(t, 5*per, raw.records)
		assert.EqualValues(t, 5, raw.syncs)
		got, err := os.ReadFile(filepath.Join(rawDir, "raw"))
		require.NoError(t, err)
		assert.Equal(t, bytes.Repeat(rec, 5*per), got)
	}

	tests := []struct{ n, appenders int }{{4, 1}, {16, 8}}
	for _, tt := range tests {
		dir := t.TempDir()
		r, err := durableRound(dir, rec, tt.n, tt.appenders)
		require.NoError(t, err)
		assert.EqualValues(t, tt.n, r.records)
		assert.GreaterOrEqual(t, r.syncs, int64(1))
		assert.LessOrEqual(t, r.syncs, int64(tt.n))
		logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
		require.NoError(t, err)
		require.Len(t, logs, 1)
		fi, err := os.Stat(logs[0])
		require.NoError(t, err)
		assert.EqualValues(t, tt.n*len(rec), fi.Size(), "each append stores the raw loop's record bytes")
	}
}
