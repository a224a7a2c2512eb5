package log_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// iterateUntil collects what p.Records yields from from until the record
// at last (inclusive) or an error.
func iterateUntil(t *testing.T, p *plog.Partition, from, last int64) []storedRecord {
	t.Helper()
	var got []storedRecord
	for r, err := range p.Records(t.Context(), from) {
		require.NoError(t, err)
		got = append(got, storedRecord{r.Offset, r.Timestamp, string(r.Key), string(r.Value)})
		if r.Offset >= last {
			break
		}
	}
	return got
}

// TestPartitionRecordsLegacy (review item 3): Partition.Records serves a
// log holding legacy messages (magic 1, gzip magic 1 wrappers, magic 0)
// and v2 batches, from every offset, with the records the batch package
// decodes (absolute offsets; timestamp -1 under magic 0). On the old code
// it yielded "unsupported magic" wrapping ErrCorrupt.
func TestPartitionRecordsLegacy(t *testing.T) {
	t.Run("mixed-0", func(t *testing.T) {
		dir := copyFixtureFrom(t, "legacy", "mixed-0")
		want := storedRecords(t, logFiles(t, dir)["00000000000000000000.log"])
		require.Len(t, want, 20)
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		for from := int64(0); from < 20; from++ {
			require.Equal(t, want[from:], iterateUntil(t, p, from, 19), "from %d", from)
		}
	})
	t.Run("magic 0", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "t-0")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		v2 := logtest.MakeBatch(1, 5, 5000, 1)
		batch.Batch(v2).SetBaseOffset(2)
		data := slices.Concat(legacyMessage(0, legacy.MagicV0, 0, "a", "1"), legacyMessage(1, legacy.MagicV0, 0, "b", "2"), v2)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644))
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		defer p.Close()
		want := storedRecords(t, data)
		require.Equal(t, int64(-1), want[0].Timestamp)
		require.Equal(t, storedRecord{0, -1, "a", "1"}, want[0])
		require.Equal(t, want, iterateUntil(t, p, 0, 2))
		require.Equal(t, want[1:], iterateUntil(t, p, 1, 2))
	})
}

// TestRecordsBatchesLegacy (review item 3): Records.Batches, whose values
// are v2 views, yields a legacy entry as an error wrapping ErrLegacyEntry
// (not ErrCorrupt: the data is valid) that carries the entry's bytes, and
// goes on with the next entry when the loop continues. The entry's bytes
// decode through batch's public Decoder methods alone (batch/doc.go).
func TestRecordsBatchesLegacy(t *testing.T) {
	dir := copyFixtureFrom(t, "legacy", "mixed-0")
	set := logFiles(t, dir)["00000000000000000000.log"]
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()

	var rebuilt []byte
	nLegacy, v2 := 0, 0
	for b, err := range r.Batches() {
		if err != nil {
			require.ErrorIs(t, err, plog.ErrLegacyEntry)
			require.NotErrorIs(t, err, batch.ErrCorrupt)
			var le *plog.LegacyEntryError
			require.ErrorAs(t, err, &le)
			require.True(t, legacy.IsMagic(le.Magic))
			require.Equal(t, legacy.Entry(le.Entry).Offset()+1, le.NextOffset)
			var d batch.Decoder
			require.NoError(t, d.ValidateLegacy(le.Entry))
			recs, err := d.AppendLegacyRecords(nil, le.Entry, true)
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			require.Equal(t, le.NextOffset-1, recs[len(recs)-1].Offset)
			first, err := d.LegacyBaseOffset(le.Entry)
			require.NoError(t, err)
			require.Equal(t, recs[0].Offset, first)
			rebuilt = append(rebuilt, le.Entry...)
			nLegacy++
			continue
		}
		rebuilt = append(rebuilt, b...)
		v2++
	}
	require.Equal(t, set, rebuilt, "every entry, in order")
	require.Positive(t, nLegacy)
	require.Positive(t, v2)

	n := 0
	for _, err := range r.Batches() {
		require.ErrorIs(t, err, plog.ErrLegacyEntry)
		n++
		break
	}
	require.Equal(t, 1, n, "the iterator goes on after break")
}

// TestPartitionRecordsMediaError (review item 4): the .log cut to 0 bytes
// while Partition.Records decodes it: the iterator yields an error
// wrapping ErrFault naming the file (the partition goes offline) and the
// process lives. On the old code it died of SIGBUS in the record decoder.
func TestPartitionRecordsMediaError(t *testing.T) {
	skipUnlessSIGBUS(t)
	p2, dir2 := openT(t, plog.Config{})
	appendBigBatches(t, p2)
	path := filepath.Join(dir2, segment.FileName(0, segment.LogSuffix))
	var got error
	n := 0
	for _, err := range p2.Records(t.Context(), 0) {
		if err != nil {
			got = err
			break
		}
		if n == 0 {
			require.NoError(t, os.Truncate(path, 0))
		}
		n++
	}
	require.Less(t, n, 8*32, "the records past the cut were served")
	requireFault(t, got, path)
}

// TestRecordsBatchesMediaError (review item 4): Records.Batches frames the
// mapped bytes under the fault guard too.
func TestRecordsBatchesMediaError(t *testing.T) {
	skipUnlessSIGBUS(t)
	p2, dir2 := openT(t, plog.Config{})
	appendBigBatches(t, p2)
	r, err := p2.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, os.Truncate(filepath.Join(dir2, segment.FileName(0, segment.LogSuffix)), 0))
	var got error
	for _, err := range r.Batches() {
		if err != nil {
			got = err
		}
	}
	require.ErrorIs(t, got, index.ErrFault)
}

// TestPartitionRecordsPanicReleasesRead (review item 5): a loop body that
// panics does not leak the iterator's read lease: after the caller
// recovers, TruncateTo into the segment the iterator was reading succeeds
// instead of waiting for a reader that is gone (ErrTruncationBlocked).
func TestPartitionRecordsPanicReleasesRead(t *testing.T) {
	p, _ := openT(t, plog.Config{TruncateWait: time.Second})
	for i := range 3 {
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1, byte(i)))
		require.NoError(t, err)
	}
	boom := errors.New("boom")
	func() {
		defer func() { require.Equal(t, boom, recover()) }()
		for _, err := range p.Records(context.Background(), 0) {
			require.NoError(t, err)
			panic(boom)
		}
	}()
	err := p.TruncateTo(2)
	require.NotErrorIs(t, err, plog.ErrTruncationBlocked)
	require.NoError(t, err)
	require.Equal(t, int64(2), p.LogEndOffset())
}

// TestRecordsBatchesFaultAfterRuns: Records.Batches frames entries a run
// at a time under one fault guard; a fault past the first runs still
// yields every batch framed before it, in order, then one error wrapping
// ErrFault that names the byte where framing stopped.
func TestRecordsBatchesFaultAfterRuns(t *testing.T) {
	skipUnlessSIGBUS(t)
	p2, dir2 := openT(t, plog.Config{})
	for i := range 200 {
		_, err := p2.AppendBatch(logtest.MakeBatch(1, 100, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	r, err := p2.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, int64(200), r.NextOffset())
	size := len(r.Bytes())
	require.NoError(t, os.Truncate(filepath.Join(dir2, segment.FileName(0, segment.LogSuffix)), 16384))
	next, pos := int64(0), 0
	var got error
	for bt, err := range r.Batches() {
		if err != nil {
			got = err
			continue
		}
		require.Equal(t, next, bt.BaseOffset())
		next, pos = bt.NextOffset(), pos+len(bt)
	}
	require.Greater(t, next, int64(2*32), "fewer batches than two runs before the cut")
	require.Less(t, pos, size)
	require.ErrorIs(t, got, index.ErrFault)
	require.ErrorContains(t, got, fmt.Sprintf("batch at byte %d of a read result", pos))
}
