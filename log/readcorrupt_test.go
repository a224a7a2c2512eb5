package log_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestReadCommittedCorruptLengthInLongRange: a batch whose length field was
// damaged on disk, in the middle of a long read range (which Read jumps
// over through the offset index without reading its header), makes a
// read_committed read that cuts the range at the last stable offset fail
// with a *base.CorruptionError naming the file and the batch. The cut
// used to walk the damaged length unchecked and return a result ending
// inside a batch, with no error (laws 3 and 8); a length negative enough
// would have sent it out of the slice.
func TestReadCommittedCorruptLengthInLongRange(t *testing.T) {
	dir := t.TempDir()
	cfg := plog.Config{IndexIntervalBytes: 512}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for i := range 400 { // about 30 KiB of one-record batches
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, pbNow(), byte(i)))
		require.NoError(t, err)
	}
	_, err = p.AppendBatch(txnBatch(t, 1, 0, 0, 1)) // open: the LSO stops here
	require.NoError(t, err)
	for i := range 5 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, pbNow(), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())

	path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	pos := batchPositions(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	var length [4]byte
	binary.BigEndian.PutUint32(length[:], uint32(0xffffff00)) // -256
	_, err = f.WriteAt(length[:], pos[100]+8)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	p, err = plog.Open(dir, cfg) // clean: no batch is read
	require.NoError(t, err)
	defer p.Close()
	require.Less(t, p.LastStableOffset(), p.HighWatermark())
	require.Len(t, p.SegmentInfos(), 1)
	recs, _, err := p.ReadCommitted(0, 1<<20)
	if err == nil {
		defer recs.Close()
	}
	require.ErrorIs(t, err, base.ErrCorrupt, "a read result of %d bytes, up to offset %d", len(recs.Bytes()), recs.NextOffset())
	var ce *base.CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.File)
	assert.Equal(t, pos[100], ce.Pos)
}

// TestReadResultCorruptBatchNamesFile: a plain ReadFrom of a long range
// jumps over the batches between offset index entries without reading
// their headers (segment.Read), so its result can carry a batch damaged on
// disk. Records.Batches, and Partition.Records, which frame the result,
// report it with a *base.CorruptionError naming the segment file and the
// damaged field's position in that file, and the offset the batch should
// have started at; they used to name only a byte of the read result.
func TestReadResultCorruptBatchNamesFile(t *testing.T) {
	tests := []struct {
		name  string
		at    int64  // byte of the batch to overwrite
		bytes []byte // what to write there
		field string
	}{
		{"negative length", 8, []byte{0xff, 0xff, 0xff, 0x00}, "batchLength"},
		{"length shorter than a header", 8, []byte{0, 0, 0, 10}, "batchLength"},
		{"unknown magic", 16, []byte{7}, "magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := plog.Config{IndexIntervalBytes: 512}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			for i := range 400 { // about 30 KiB of one-record batches
				_, err := p.AppendBatch(logtest.MakeBatch(1, 10, pbNow(), byte(i)))
				require.NoError(t, err)
			}
			require.NoError(t, p.Close())
			path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
			pos := batchPositions(t, path)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(tt.bytes, pos[100]+tt.at)
			require.NoError(t, err)
			require.NoError(t, f.Close())

			p, err = plog.Open(dir, cfg) // clean: no batch is read
			require.NoError(t, err)
			defer p.Close()
			check := func(err error, what string) {
				require.ErrorIs(t, err, base.ErrCorrupt, what)
				var ce *base.CorruptionError
				require.ErrorAs(t, err, &ce, what)
				assert.Equal(t, path, ce.File, what)
				assert.Equal(t, pos[100]+tt.at, ce.Pos, what)
				assert.Equal(t, tt.field, ce.Field, what)
				assert.ErrorContains(t, err, "offset 100", what)
			}

			r, err := p.ReadFrom(0, 1<<20)
			require.NoError(t, err, "the read jumps over the damaged batch")
			next, n := int64(0), 0
			var got error
			for bt, err := range r.Batches() {
				if err != nil {
					got = err
					break
				}
				require.Equal(t, next, bt.BaseOffset())
				next, n = bt.NextOffset(), n+1
			}
			require.NoError(t, r.Close())
			require.Equal(t, 100, n, "batches before the damaged one")
			check(got, "Records.Batches")

			next = 0
			got = nil
			for rec, err := range p.Records(context.Background(), 0) {
				if err != nil {
					got = err
					break
				}
				require.Equal(t, next, rec.Offset)
				next++
			}
			require.Equal(t, int64(100), next, "records before the damaged batch")
			check(got, "Partition.Records")
		})
	}
}

// TestReadCommittedWrappedBaseOffsetInLongRange: a batch whose baseOffset
// (outside the CRC) was damaged on disk to math.MaxInt64, in the middle of
// a long read range that Read jumps over, has a last offset that wraps to
// a negative one. A read_committed read that cuts the range at the last
// stable offset must fail with a *base.CorruptionError naming the file and
// the batch; it used to take the wrapped last offset as one below the last
// stable offset and return the damaged batch, with no error (law 8).
func TestReadCommittedWrappedBaseOffsetInLongRange(t *testing.T) {
	dir := t.TempDir()
	cfg := plog.Config{IndexIntervalBytes: 512}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for i := range 300 { // about 30 KiB of two-record batches
		_, err := p.AppendBatch(logtest.MakeBatch(2, 10, pbNow(), byte(i)))
		require.NoError(t, err)
	}
	_, err = p.AppendBatch(txnBatch(t, 1, 0, 0, 1)) // open: the LSO stops here
	require.NoError(t, err)
	require.NoError(t, p.Close())

	path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	pos := batchPositions(t, path)
	var off [8]byte
	binary.BigEndian.PutUint64(off[:], math.MaxInt64)
	writeAt(t, path, pos[100], off[:])

	p, err = plog.Open(dir, cfg) // clean: no batch is read
	require.NoError(t, err)
	defer p.Close()
	require.Less(t, p.LastStableOffset(), p.HighWatermark())
	recs, _, err := p.ReadCommitted(0, 1<<20)
	if err == nil {
		defer recs.Close()
	}
	require.ErrorIs(t, err, base.ErrCorrupt, "a read result of %d bytes, up to offset %d", len(recs.Bytes()), recs.NextOffset())
	var ce *base.CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.File)
	assert.Equal(t, pos[100], ce.Pos)
	assert.Equal(t, "baseOffset", ce.Field)
}

// TestHeaderWalksMeetDamageInsideSegment: after a clean shutdown Open
// finds a segment's end from its last offset index entry (law 5), so
// damage between two entries stays inside the segment, unread. The header
// walks that read such a segment whole, before any read reported the
// damage, must report it as a *base.CorruptionError naming the .log and
// the position (law 8): a rebuild of the producer state (no producer
// snapshot to start from) and TruncateTo into a segment holding the log
// start offset (which walks the headers below the cut). They used to fail
// with an assertion error that wrapped no corruption error, and to panic
// under -tags invariants. TruncateTo changes nothing.
func TestHeaderWalksMeetDamageInsideSegment(t *testing.T) {
	cfg := plog.Config{IndexIntervalBytes: 1} // an entry per batch: the damage lies before the last
	damaged := func(t *testing.T) (dir, path string, pos []int64) {
		dir = t.TempDir()
		p, err := plog.Open(dir, cfg)
		require.NoError(t, err)
		for i := range 8 {
			_, err := p.AppendBatch(prodBatch(t, 7, 0, int32(2*i), 2, pbNow(), false))
			require.NoError(t, err)
		}
		require.NoError(t, p.Close())
		path = filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
		pos = batchPositions(t, path)
		writeAt(t, path, pos[2]+8, []byte{0, 0, 0, 0}) // batchLength 0: no batch frames there
		return dir, path, pos
	}
	check := func(t *testing.T, err error, path string, pos int64) {
		t.Helper()
		require.ErrorIs(t, err, base.ErrCorrupt)
		var ce *base.CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, path, ce.File)
		assert.Equal(t, pos+8, ce.Pos)
		assert.Equal(t, "batchLength", ce.Field)
	}

	t.Run("producer state rebuild", func(t *testing.T) {
		dir, path, pos := damaged(t)
		require.NotEmpty(t, removeSnapshots(t, dir))
		p, err := plog.Open(dir, cfg)
		if err == nil {
			_ = p.Close()
		}
		check(t, err, path, pos[2])
	})
	t.Run("TruncateTo", func(t *testing.T) {
		dir, path, pos := damaged(t)
		p, err := plog.Open(dir, cfg) // clean: the snapshot at the log end is loaded
		require.NoError(t, err)
		defer p.Close()
		require.NoError(t, p.DeleteRecordsBefore(9)) // inside the fifth batch, [8, 9]
		err = p.TruncateTo(13)                       // the seventh batch, [12, 13]: walks from 0
		check(t, err, path, pos[2])
		require.Equal(t, int64(16), p.LogEndOffset(), "the refused truncation changed the log end")
		require.Equal(t, int64(9), p.LogStartOffset())
	})
}
