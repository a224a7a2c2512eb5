package compaction

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/partlog/partlog/batch"
)

// Byte offsets of the RecordBatch v2 header fields this file writes.
// Frozen: Kafka's format (see package batch).
const (
	hdrBaseOffsetAt      = 0
	hdrLengthAt          = hdrBaseOffsetAt + 8      // 8
	hdrLeaderEpochAt     = hdrLengthAt + 4          // 12
	hdrMagicAt           = hdrLeaderEpochAt + 4     // 16
	hdrCRCAt             = hdrMagicAt + 1           // 17
	hdrAttributesAt      = hdrCRCAt + 4             // 21
	hdrLastOffsetDeltaAt = hdrAttributesAt + 2      // 23
	hdrBaseTimestampAt   = hdrLastOffsetDeltaAt + 4 // 27
	hdrMaxTimestampAt    = hdrBaseTimestampAt + 8   // 35
	hdrProducerIDAt      = hdrMaxTimestampAt + 8    // 43
	hdrProducerEpochAt   = hdrProducerIDAt + 8      // 51
	hdrBaseSequenceAt    = hdrProducerEpochAt + 2   // 53
	hdrRecordsCountAt    = hdrBaseSequenceAt + 4    // 57
	hdrRecordsAt         = hdrRecordsCountAt + 4    // 61
)

// keepAttrs are the attribute bits a rewritten batch carries over: the
// timestamp type, transactional and control bits.
const keepAttrs = batch.TimestampTypeBit | batch.TransactionalBit | batch.ControlBit

// putHeader writes the header of a batch rewritten from orig into h (61
// bytes): the offsets, leader epoch, producer fields and kept attribute
// bits of orig, with the given attributes extra bits, base and max
// timestamps and record count. The length and CRC are set by finish.
func putHeader(h []byte, orig batch.Batch, attrs batch.Attributes, baseTs, maxTs int64, count int32) {
	binary.BigEndian.PutUint64(h[hdrBaseOffsetAt:], uint64(orig.BaseOffset()))
	binary.BigEndian.PutUint32(h[hdrLeaderEpochAt:], uint32(orig.PartitionLeaderEpoch()))
	h[hdrMagicAt] = batch.Magic
	binary.BigEndian.PutUint16(h[hdrAttributesAt:], uint16(orig.Attributes()&keepAttrs|attrs))
	binary.BigEndian.PutUint32(h[hdrLastOffsetDeltaAt:], uint32(orig.LastOffsetDelta()))
	binary.BigEndian.PutUint64(h[hdrBaseTimestampAt:], uint64(baseTs))
	binary.BigEndian.PutUint64(h[hdrMaxTimestampAt:], uint64(maxTs))
	binary.BigEndian.PutUint64(h[hdrProducerIDAt:], uint64(orig.ProducerID()))
	binary.BigEndian.PutUint16(h[hdrProducerEpochAt:], uint16(orig.ProducerEpoch()))
	binary.BigEndian.PutUint32(h[hdrBaseSequenceAt:], uint32(orig.BaseSequence()))
	binary.BigEndian.PutUint32(h[hdrRecordsCountAt:], uint32(count))
}

// finish sets the length and CRC of the batch dst[start:].
func finish(dst []byte, start int) (batch.Batch, error) {
	b := batch.Batch(dst[start:])
	if len(b)-batch.LogOverhead > batch.MaxBatchSize-batch.LogOverhead {
		return nil, fmt.Errorf("partlog/compaction: rewritten batch of %d bytes: %w", len(b), batch.ErrBatchTooLarge)
	}
	binary.BigEndian.PutUint32(b[hdrLengthAt:], uint32(len(b)-batch.LogOverhead))
	b.SetCRC()
	return b, nil
}

// appendEmptyBatch appends the header-only batch Kafka leaves when
// compaction removed every record of a batch it must keep (an active
// producer's last batch, the last batch of the round): no records, no
// codec, baseTimestamp -1, orig's maxTimestamp, offsets and producer
// fields (Kafka's writeEmptyHeader).
func appendEmptyBatch(dst []byte, orig batch.Batch) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, batch.HeaderSize)...)
	putHeader(dst[start:], orig, 0, batch.NoTimestamp, orig.MaxTimestamp(), 0)
	if _, err := finish(dst, start); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// horizonEncoder encodes a rewritten batch whose baseTimestamp is a
// delete horizon (attribute bit 6), which batch.Builder cannot write yet:
// every record's timestampDelta is relative to the horizon, as Kafka's
// MemoryRecordsBuilder writes it, so readers still decode each record's
// own timestamp. Records are compressed with orig's codec at the codec's
// default level.
type horizonEncoder struct {
	recs  []byte // uncompressed records
	out   []byte
	count int32
	maxTs int64
}

// reset starts a batch.
func (e *horizonEncoder) reset() {
	e.recs = e.recs[:0]
	e.count = 0
	e.maxTs = batch.NoTimestamp
}

// add appends rec (offsets relative to base, timestamps to horizon).
func (e *horizonEncoder) add(rec batch.Record, base, horizon int64) error {
	var err error
	e.recs, err = batch.AppendRecord(e.recs, rec, int32(rec.Offset-base), rec.Timestamp-horizon)
	if err != nil {
		return err
	}
	e.count++
	e.maxTs = max(e.maxTs, rec.Timestamp)
	return nil
}

// build returns the batch; it aliases the encoder until the next reset.
func (e *horizonEncoder) build(orig batch.Batch, horizon int64) (batch.Batch, error) {
	maxTs := e.maxTs
	if orig.Attributes().LogAppendTime() {
		maxTs = orig.MaxTimestamp()
	}
	codec := orig.Attributes().Compression()
	e.out = append(e.out[:0], make([]byte, batch.HeaderSize)...)
	putHeader(e.out, orig, batch.Attributes(0).WithCompression(codec)|batch.DeleteHorizonBit, horizon, maxTs, e.count)
	var err error
	e.out, err = appendCompressed(e.out, codec, e.recs)
	if err != nil {
		return nil, err
	}
	return finish(e.out, 0)
}

// Xerial snappy framing as the Java client writes it (frozen): magic,
// version 1, compatible version 1, then chunks of a 4-byte big-endian
// length and a raw snappy block of at most 32 KiB of input.
const (
	xerialMagic     = "\x82SNAPPY\x00"
	xerialVersion   = 1
	xerialCompat    = 1
	xerialBlockSize = 32 << 10
)

// zstdEncoder is shared; EncodeAll is safe for concurrent use.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

// appendCompressed appends src compressed with codec c.
func appendCompressed(dst []byte, c batch.Compression, src []byte) ([]byte, error) {
	switch c {
	case batch.CompressionNone:
		return append(dst, src...), nil
	case batch.CompressionGzip:
		buf := bytes.NewBuffer(dst)
		w := gzip.NewWriter(buf)
		return closeWriter(buf, w, src)
	case batch.CompressionSnappy:
		dst = append(dst, xerialMagic...)
		dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
		dst = binary.BigEndian.AppendUint32(dst, xerialCompat)
		for len(src) > 0 {
			chunk := src[:min(len(src), xerialBlockSize)]
			src = src[len(chunk):]
			enc := snappy.Encode(nil, chunk)
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(enc)))
			dst = append(dst, enc...)
		}
		return dst, nil
	case batch.CompressionLZ4:
		buf := bytes.NewBuffer(dst)
		return closeWriter(buf, lz4.NewWriter(buf), src)
	case batch.CompressionZstd:
		return zstdEncoder.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("partlog/compaction: %w: codec %d", batch.ErrBadCompression, c)
}

// closeWriter writes src through w into buf and closes w.
func closeWriter(buf *bytes.Buffer, w io.WriteCloser, src []byte) ([]byte, error) {
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
