package log_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestVerifyReportsDamage: Verify walks each .log with the walk that
// defines damage for recovery and validates every batch's records on top:
// damage in a .log served after a clean shutdown (so no recovery ran) is a
// *base.CorruptionError wrapping ErrCorrupt that names the file, the field
// and its position, whether the walk finds it (a CRC that does not match,
// a length that does not frame) or only the record check does (a record
// framing error under a matching CRC: the walk, like recovery, does not
// read records). The partition stays online: damage is not a fault.
func TestVerifyReportsDamage(t *testing.T) {
	tests := []struct {
		name  string
		field string
		// damage changes the batch b (at pos in the file) in data and
		// returns the expected position of the error.
		damage func(data []byte, pos int64, b batch.Batch) int64
	}{
		{"CRC does not match", "crc", func(data []byte, pos int64, b batch.Batch) int64 {
			data[pos+int64(len(b))-1] ^= 0xff
			return pos + 17 // the CRC field
		}},
		{"length does not frame", "batchLength", func(data []byte, pos int64, b batch.Batch) int64 {
			data[pos+8], data[pos+9] = 0x7f, 0xff // a length past the file
			return pos + 8
		}},
		{"record length under a matching CRC", "record[0].length", func(data []byte, pos int64, b batch.Batch) int64 {
			data[pos+batch.HeaderSize] = 0x7f // zigzag -64: a negative record length
			batch.Batch(data[pos : pos+int64(len(b))]).SetCRC()
			return pos + batch.HeaderSize
		}},
		// The header checks past the CRC, which the walk makes (the
		// records check takes the header as the walk left it).
		{"negative recordsCount under a matching CRC", "recordsCount", func(data []byte, pos int64, b batch.Batch) int64 {
			binary.BigEndian.PutUint32(data[pos+57:], 0xffffffff)
			batch.Batch(data[pos : pos+int64(len(b))]).SetCRC()
			return pos + 57
		}},
		{"unknown codec under a matching CRC", "attributes", func(data []byte, pos int64, b batch.Batch) int64 {
			data[pos+22] |= 0x07
			batch.Batch(data[pos : pos+int64(len(b))]).SetCRC()
			return pos + 21
		}},
		// Records the record check decompresses and rejects.
		{"zstd bits over plain records under a matching CRC", "records", func(data []byte, pos int64, b batch.Batch) int64 {
			data[pos+22] |= byte(batch.CompressionZstd)
			batch.Batch(data[pos : pos+int64(len(b))]).SetCRC()
			return pos + batch.HeaderSize
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, segs := corruptionFixture(t) // closed cleanly: Open recovers nothing
			path := filepath.Join(dir, segment.FileName(segs[0].BaseOffset, segment.LogSuffix))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			first, rest, err := batch.Parse(data)
			require.NoError(t, err)
			second, _, err := batch.Parse(rest)
			require.NoError(t, err)
			want := tc.damage(data, int64(len(first)), second)
			require.NoError(t, os.WriteFile(path, data, 0o644))

			p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 200, DisableAutoHighWatermark: true})
			require.NoError(t, err)
			defer p.Close()
			err = p.Verify()
			require.ErrorIs(t, err, base.ErrCorrupt)
			var ce *base.CorruptionError
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Equal(t, path, ce.File)
			require.Equal(t, tc.field, ce.Field)
			require.Equal(t, want, ce.Pos)
			require.NotErrorIs(t, err, plog.ErrFailed, "damage is not a fault: the partition stays online")
			_, err = p.ReadFrom(segs[len(segs)-1].BaseOffset, 1<<20)
			require.NoError(t, err)
		})
	}
}

// TestVerifyKafkaAppendIndexEntries: Kafka before 3.0 wrote one offset
// index entry per append, naming the last offset of the append's last
// batch at the position of its first batch (a follower appends what it
// fetched, many batches, at once). Such an entry is valid, as the segment
// layer takes it (index.OffsetEntry, OffsetIndex.Check, checkOffsetIndex):
// Verify accepts it too, where it reported it as an offset outside its
// batch.
func TestVerifyKafkaAppendIndexEntries(t *testing.T) {
	cfg := plog.Config{IndexIntervalBytes: 1}
	p, dir := openT(t, cfg)
	const n = 8
	var positions []uint32
	pos := uint32(0)
	for i := range int64(n) {
		b := makeBatchT(t, i, 1)
		_, err := p.AppendBatch(b)
		require.NoError(t, err)
		positions = append(positions, pos)
		pos += uint32(len(b))
	}
	require.NoError(t, p.Roll())
	_, err := p.AppendBatch(makeBatchT(t, n, 1))
	require.NoError(t, err)
	require.NoError(t, p.Close())

	// Appends of two batches each: the entry of batches 2k and 2k+1 is
	// (2k+1, the position of batch 2k), for every append after the first.
	var idx []byte
	for k := 1; 2*k+1 < n; k++ {
		idx = binary.BigEndian.AppendUint32(idx, uint32(2*k+1))
		idx = binary.BigEndian.AppendUint32(idx, positions[2*k])
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, segment.FileName(0, segment.IndexSuffix)), idx, 0o644))

	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	require.NoError(t, p.Verify())
	for off := range int64(n + 1) {
		r, err := p.ReadFrom(off, 1)
		require.NoError(t, err)
		first, _, err := batch.Parse(r.Bytes())
		require.NoError(t, err)
		require.Equal(t, off, first.BaseOffset())
		require.NoError(t, r.Close())
	}
	require.NoError(t, p.Close())

	// An entry naming an offset no batch of the segment holds is still
	// reported.
	binary.BigEndian.PutUint32(idx[len(idx)-8:], n+100)
	require.NoError(t, os.WriteFile(filepath.Join(dir, segment.FileName(0, segment.IndexSuffix)), idx, 0o644))
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer p.Close()
	require.ErrorIs(t, p.Verify(), base.ErrCorrupt)
}
