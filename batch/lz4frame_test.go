package batch

import (
	"encoding/binary"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/legacy"
)

// TestLZ4PayloadAsKafkaReadsIt: an LZ4 batch decodes as Kafka's
// Lz4BlockInputStream reads it: one frame of independent blocks, version
// 01, no reserved or dictionary id bit, and whatever follows the frame's
// end mark ignored. The decoder used to take frames Kafka refuses (linked
// blocks, which python-lz4 and Rust's lz4 write by default; the LZ4 legacy
// format; records split over two frames), so that a broker stored batches
// Java consumers cannot read, and to refuse bytes after the end mark,
// which Kafka never reads.
func TestLZ4PayloadAsKafkaReadsIt(t *testing.T) {
	records := func(n int) (Batch, []byte) {
		compressed := NewBuilder(BuilderOptions{Compression: CompressionLZ4})
		plain := NewBuilder(BuilderOptions{})
		for i := range n {
			r := Record{Offset: int64(i), Key: []byte{'k', byte(i)}, Value: []byte("value value value"), Timestamp: 1_700_000_000_000}
			require.NoError(t, compressed.AddAt(r))
			require.NoError(t, plain.AddAt(r))
		}
		b, err := compressed.Build()
		require.NoError(t, err)
		p, err := plain.Build()
		require.NoError(t, err)
		return append(Batch(nil), b...), append([]byte(nil), p[HeaderSize:]...)
	}
	withPayload := func(b Batch, payload []byte) Batch {
		out := append(append(Batch(nil), b[:HeaderSize]...), payload...)
		binary.BigEndian.PutUint32(out[batchLengthOffset:], uint32(len(out)-LogOverhead))
		out.SetCRC()
		return out
	}
	// twoFrames returns recs, two records, as two LZ4 frames of one
	// record each.
	twoFrames := func(recs []byte) (f1, f2 []byte) {
		var f recordFields
		end := fastRecord(recs, 0, &f, new([]RecordHeader))
		require.Positive(t, end)
		f1, err := appendLZ4(nil, 0, recs[:end])
		require.NoError(t, err)
		f2, err = appendLZ4(nil, 0, recs[end:])
		require.NoError(t, err)
		return f1, f2
	}
	for _, tc := range []struct {
		name    string
		payload func(b Batch, recs []byte) []byte
		ok      bool
	}{
		{"as built", func(b Batch, _ []byte) []byte { return b[HeaderSize:] }, true},
		{"bytes after the end mark", func(b Batch, _ []byte) []byte {
			return append(append([]byte(nil), b[HeaderSize:]...), 0xde, 0xad, 0xbe, 0xef, 0)
		}, true},
		{"dependent blocks", func(b Batch, _ []byte) []byte {
			p := append([]byte(nil), b[HeaderSize:]...)
			p[4] &^= 0x20
			require.NoError(t, legacy.SetLZ4HeaderChecksum(p, legacy.MagicV1))
			return p
		}, false},
		{"dictionary id bit", func(b Batch, _ []byte) []byte {
			p := append([]byte(nil), b[HeaderSize:HeaderSize+6]...)
			p[4] |= 0x01
			p = append(p, 0, 0, 0, 0) // the dictionary id
			p = append(p, b[HeaderSize+6:]...)
			require.NoError(t, legacy.SetLZ4HeaderChecksum(p, legacy.MagicV1))
			return p
		}, false},
		{"legacy frame format", func(_ Batch, recs []byte) []byte {
			blk := make([]byte, lz4.CompressBlockBound(len(recs)))
			n, err := lz4.CompressBlock(recs, blk, nil)
			require.NoError(t, err)
			p := binary.LittleEndian.AppendUint32(nil, 0x184C2102)
			p = binary.LittleEndian.AppendUint32(p, uint32(n))
			return append(p, blk[:n]...)
		}, false},
		{"records over two frames", func(_ Batch, recs []byte) []byte {
			f1, f2 := twoFrames(recs)
			return append(f1, f2...)
		}, false},
		{"no end mark", func(b Batch, _ []byte) []byte { return b[HeaderSize : len(b)-4] }, false},
		{"end mark with the uncompressed bit", func(_ Batch, recs []byte) []byte {
			// 0x80000000 ends the frame for Kafka, which reads the first
			// record only, and is an empty block to the decoder, which
			// would read both.
			f1, f2 := twoFrames(recs)
			p := binary.LittleEndian.AppendUint32(f1[:len(f1)-4:len(f1)-4], 0x80000000)
			return append(p, f2[7:]...) // f2's blocks and end mark, after its header
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, recs := records(2)
			got := withPayload(b, tc.payload(b, recs))
			err := got.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
		})
	}
}
