package log_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/base"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// allRecords collects what r.All(dec) yields, and the error it ends with.
func allRecords(r plog.Records, dec *batch.Decoder) ([]storedRecord, error) {
	var out []storedRecord
	for rec, err := range r.All(dec) {
		if err != nil {
			return out, err
		}
		out = append(out, storedRecord{rec.Offset, rec.Timestamp, string(rec.Key), string(rec.Value)})
	}
	return out, nil
}

// atOrAfter is the records of want at offsets >= from.
func atOrAfter(want []storedRecord, from int64) []storedRecord {
	var out []storedRecord
	for _, r := range want {
		if r.Offset >= from {
			out = append(out, r)
		}
	}
	return out
}

// requireAllFromEveryOffset reads p from every offset below its high
// watermark and checks that Records.All yields the records the batch
// package decodes from the result's bytes (control batches skipped), at
// or after that offset, with a Decoder and without.
func requireAllFromEveryOffset(t *testing.T, p *plog.Partition, maxBytes int) {
	t.Helper()
	var dec batch.Decoder
	for from := p.LogStartOffset(); from < p.HighWatermark(); from++ {
		r, err := p.ReadFrom(from, maxBytes)
		require.NoError(t, err)
		want := atOrAfter(storedRecords(t, r.Bytes()), from)
		for _, d := range []*batch.Decoder{&dec, nil} {
			got, err := allRecords(r, d)
			require.NoError(t, err, "from %d", from)
			require.Equal(t, want, got, "from %d, decoder %v", from, d != nil)
		}
		require.NoError(t, r.Close())
	}
}

// TestRecordsAll: Records.All yields the records of a read result at or
// after the offset that was read, across one-record batches, batches
// longer than its runs, compressed and control batches and records with
// headers, as Batches and Batch.All decode them; the headers are kept.
func TestRecordsAll(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	for i := range 5 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 20, int64(1000+i), byte(i)))
		require.NoError(t, err)
	}
	_, err := p.AppendBatch(logtest.MakeBatch(70, 30, 2000, 7))
	require.NoError(t, err)
	// zstd, which synctest tests of this package (TestPartitionRecords)
	// also decode inside their bubbles: nothing of a bubble stays in the
	// codec pools.
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionZstd, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := range 3 {
		require.NoError(t, bld.Add(batch.Record{Key: fmt.Appendf(nil, "z%d", i), Value: []byte("compressed"), Timestamp: 3000}))
	}
	zstdBatch, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(zstdBatch)
	require.NoError(t, err)
	marker, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, BaseOffset: p.LogEndOffset(), ProducerID: 1, PartitionLeaderEpoch: -1})
	require.NoError(t, err)
	_, err = p.AppendAssigned(marker)
	require.NoError(t, err)
	hdrs := []batch.RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}
	bld = batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("plain"), Timestamp: 4000}))
	require.NoError(t, bld.Add(batch.Record{Value: []byte("with headers"), Timestamp: 4001, Headers: hdrs}))
	require.NoError(t, bld.Add(batch.Record{Value: []byte("plain again"), Timestamp: 4002}))
	withHeaders, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(withHeaders)
	require.NoError(t, err)

	requireAllFromEveryOffset(t, p, 1<<20)
	requireAllFromEveryOffset(t, p, 0) // one batch a read

	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	var got []batch.RecordHeader
	for rec, err := range r.All(nil) {
		require.NoError(t, err)
		if string(rec.Value) == "with headers" {
			got = rec.Headers
		} else {
			require.Nil(t, rec.Headers, "offset %d", rec.Offset)
		}
	}
	require.Equal(t, hdrs, got)
}

// TestRecordsAllLegacy: Records.All decodes the legacy messages (magic 0
// and 1, gzip wrappers) of a log Kafka wrote before 0.11, with their
// absolute offsets, from every offset.
func TestRecordsAllLegacy(t *testing.T) {
	dir := copyFixtureFrom(t, "legacy", "mixed-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	requireAllFromEveryOffset(t, p, 1<<20)
}

// TestRecordsAllStops: a break stops the iteration, a closed result yields
// one error wrapping ErrClosed, and so does one closed by the loop body.
func TestRecordsAllStops(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	for i := range 100 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 20, int64(i), byte(i)))
		require.NoError(t, err)
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	n := 0
	for range r.All(nil) {
		n++
		break
	}
	require.Equal(t, 1, n, "the iterator goes on after break")

	n = 0
	var got error
	for _, err := range r.All(nil) {
		if err != nil {
			got = err
			break
		}
		if n++; n == 3 {
			require.NoError(t, r.Close())
		}
	}
	require.ErrorIs(t, got, plog.ErrClosed, "closed by the loop body")
	require.Less(t, n, 100)

	for _, err := range r.All(nil) {
		require.ErrorIs(t, err, plog.ErrClosed)
	}
}

// TestRecordsAllAllocs: ReadFrom and Records.All over uncompressed batches
// allocate nothing, with the caller's Decoder or the Records' own.
func TestRecordsAllAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p, _ := openT(t, plog.Config{})
	for i := range 200 {
		_, err := p.AppendBatch(logtest.MakeBatch(1+i%5, 50, int64(i), byte(i)))
		require.NoError(t, err)
	}
	var dec batch.Decoder
	for _, d := range []*batch.Decoder{&dec, nil} {
		n := 0
		read := func() {
			r, err := p.ReadFrom(0, 1<<20)
			if err != nil {
				panic(err)
			}
			for _, err := range r.All(d) {
				if err != nil {
					panic(err)
				}
				n++
			}
			_ = r.Close()
		}
		read()
		require.Zero(t, testing.AllocsPerRun(50, read), "decoder %v", d != nil)
		require.Positive(t, n)
	}
}

// TestRecordsAllCorruptRecord: a record damaged on disk after it was
// appended ends the iteration with the batch decoder's error (wrapping
// batch.ErrCorrupt, naming the batch's offset), after every record before
// it.
func TestRecordsAllCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	for i := range 50 {
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	pos := batchPositions(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	// The second record's length varint of batch 20 (offsets 40 and 41):
	// 0x7f reads as -64.
	first := pos[20] + batch.HeaderSize
	var lenByte [1]byte
	_, err = f.ReadAt(lenByte[:], first)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0x7f}, first+1+int64(lenByte[0]>>1))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	p, err = plog.Open(dir, plog.Config{}) // clean: no batch is read
	require.NoError(t, err)
	defer p.Close()
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	got, err := allRecords(r, nil)
	require.ErrorIs(t, err, base.ErrCorrupt)
	assert.ErrorContains(t, err, "decode batch at offset 40")
	require.Len(t, got, 41, "the records before the damaged one")
	for i, rec := range got {
		require.Equal(t, int64(i), rec.Offset)
	}
}

// TestRecordsAllFaultAfterRuns: Records.All decodes a run of records under
// one fault guard; a fault past the first runs still yields every record
// before it, in order, then one error wrapping ErrFault that names the
// byte where decoding stopped.
func TestRecordsAllFaultAfterRuns(t *testing.T) {
	skipUnlessSIGBUS(t)
	p2, dir2 := openT(t, plog.Config{})
	for i := range 200 {
		_, err := p2.AppendBatch(logtest.MakeBatch(1, 100, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	r, err := p2.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	var sizes []int
	for bt, err := range r.Batches() {
		require.NoError(t, err)
		sizes = append(sizes, len(bt))
	}
	require.NoError(t, os.Truncate(filepath.Join(dir2, segment.FileName(0, segment.LogSuffix)), 16384))
	next := int64(0)
	var got error
	for rec, err := range r.All(nil) {
		if err != nil {
			got = err
			break
		}
		require.Equal(t, next, rec.Offset)
		next++
	}
	require.Greater(t, next, int64(2*32), "fewer records than two runs before the cut")
	require.Less(t, next, int64(200))
	// The batches before the cut whole are all yielded; decoding stops at
	// the batch the cut runs through.
	pos, whole := 0, int64(0)
	for _, s := range sizes {
		if pos+s > 16384 {
			break
		}
		pos += s
		whole++
	}
	require.Equal(t, whole, next)
	require.ErrorIs(t, got, index.ErrFault)
	require.ErrorContains(t, got, fmt.Sprintf("batch at byte %d of a read result", pos))
}
