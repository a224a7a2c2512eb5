package log

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
)

// TestRecordsAllRunAfterFault: after a fault in a run, All decodes that
// run again a record at a time, and the runs after it are long again. A
// fault injected once (as a media error that clears would be) into the
// second run of a read of 200 one-record batches: every record is
// yielded in order, the run that faulted again as 32 runs of one record,
// the rest as runs of 32. On the old code every run after the fault
// decoded one record.
func TestRecordsAllRunAfterFault(t *testing.T) {
	p, err := Open("/d/t-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{})
	for i := range 200 {
		bld.Reset(batch.BuilderOptions{})
		require.NoError(t, bld.Add(batch.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: 1000}))
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
	var runs []int // the length of each run asked for
	calls := 0
	defer func(f func([]batch.Record, *batch.Decoder, []byte, *batch.RunState) (int, bool, int64, error)) {
		decodeRecords = f
	}(decodeRecords)
	decodeRecords = func(dst []batch.Record, dec *batch.Decoder, set []byte, st *batch.RunState) (int, bool, int64, error) {
		runs = append(runs, len(dst))
		if calls++; calls == 2 {
			return 0, false, 0, fmt.Errorf("%w: injected", errFault)
		}
		return runRecords(dst, dec, set, st)
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	next := int64(0)
	for rec, err := range r.All(nil) {
		require.NoError(t, err)
		require.Equal(t, next, rec.Offset)
		require.Equal(t, fmt.Sprintf("v%d", next), string(rec.Value))
		next++
	}
	require.Equal(t, int64(200), next)
	want := []int{runLen, runLen}
	for range runLen {
		want = append(want, 1)
	}
	for left := 200 - 2*runLen; left > 0; left -= runLen {
		want = append(want, runLen)
	}
	require.Equal(t, want, runs)
}

// TestRecordsLegacyScratchBounded: a Records keeps its legacy record
// scratch pooled up to maxPooledLegacyRecs records (cleared: the records
// alias the mapping or a decompression buffer), and drops a larger one at
// Close. On the old code a wrapper of many records left its scratch
// pooled for good.
func TestRecordsLegacyScratchBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  int
		kept bool
	}{
		{"small", 16, true},
		{"at the bound", maxPooledLegacyRecs, true},
		{"past the bound", maxPooledLegacyRecs + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecords()
			h := r.handle()
			r.legacyRecs = make([]batch.Record, 3, tc.cap)
			r.legacyRecs[2].Value = []byte("x")
			r.legacyUsed = true
			require.NoError(t, h.Close())
			require.False(t, r.legacyUsed)
			if !tc.kept {
				require.Nil(t, r.legacyRecs)
				return
			}
			require.Equal(t, 0, len(r.legacyRecs))
			require.Equal(t, tc.cap, cap(r.legacyRecs))
			require.Nil(t, r.legacyRecs[:3][2].Value, "cleared")
		})
	}
}
