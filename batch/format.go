package batch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/crc32c"
)

// Byte offsets of the RecordBatch v2 header fields. Frozen: they are Kafka's
// on-disk and wire format.
const (
	baseOffsetOffset           = 0
	batchLengthOffset          = baseOffsetOffset + 8           // 8
	partitionLeaderEpochOffset = batchLengthOffset + 4          // 12
	magicOffset                = partitionLeaderEpochOffset + 4 // 16
	crcOffset                  = magicOffset + 1                // 17
	attributesOffset           = crcOffset + 4                  // 21
	lastOffsetDeltaOffset      = attributesOffset + 2           // 23
	baseTimestampOffset        = lastOffsetDeltaOffset + 4      // 27
	maxTimestampOffset         = baseTimestampOffset + 8        // 35
	producerIDOffset           = maxTimestampOffset + 8         // 43
	producerEpochOffset        = producerIDOffset + 8           // 51
	baseSequenceOffset         = producerEpochOffset + 2        // 53
	recordsCountOffset         = baseSequenceOffset + 4         // 57
	recordsOffset              = recordsCountOffset + 4         // 61
)

const (
	// HeaderSize is the size of a RecordBatch v2 header: every byte before
	// the first record.
	HeaderSize = recordsOffset
	// LogOverhead is the size of the two fields before the length-counted
	// part of a batch: baseOffset (8) and batchLength (4). A batch's total
	// size is batchLength + LogOverhead.
	LogOverhead = partitionLeaderEpochOffset
	// crcStart is the first byte the CRC-32C covers; it covers everything
	// from there to the end of the batch. baseOffset, batchLength,
	// partitionLeaderEpoch and magic lie before it, so a broker rewrites
	// them without recomputing the checksum.
	crcStart = attributesOffset
	// Magic is the only message format version this package encodes, and
	// the only one Parse and Batch accept: Parse rejects magic 0 and 1
	// (legacy MessageSets) with ErrUnsupportedMagic. Legacy messages are
	// read through Decoder's Legacy methods, and rewritten (never written
	// anew) by Decoder.AppendLegacyFiltered for compaction (see the package
	// documentation, "Legacy messages").
	Magic = 2
	// MaxBatchSize bounds the total size of one batch this package will
	// frame: batchLength is an int32, so no batch is larger than this.
	MaxBatchSize = math.MaxInt32
)

// Sentinel values Kafka uses for absent header fields.
const (
	NoTimestamp            int64 = -1 // baseTimestamp / maxTimestamp / record timestamp
	NoProducerID           int64 = -1
	NoProducerEpoch        int16 = -1
	NoSequence             int32 = -1
	NoPartitionLeaderEpoch int32 = -1
)

// checksum returns the CRC-32C (Castagnoli) of p, the checksum Kafka uses
// for RecordBatch v2 and producer-state snapshots.
func checksum(p []byte) uint32 { return crc32c.Update(0, p) }

// Batch is a view over the bytes of one encoded RecordBatch v2: no copy,
// no decoding until asked. A Batch obtained from Parse is framed (it holds
// at least a header and exactly batchLength+12 bytes); only Validate checks
// the CRC and the records.
//
// The header, byte for byte (big-endian; the CRC-32C covers [21, end)):
//
//	0       8     12           16    17    21    23               27
//	+-------+-----+------------+-----+-----+-----+----------------+
//	|base   |batch|partition   |magic| crc |attrs|lastOffsetDelta |
//	|Offset |Len  |LeaderEpoch | =2  |     |     |                |
//	+-------+-----+------------+-----+-----+-----+----------------+
//	27              35             43          51      53      57     61
//	+---------------+--------------+-----------+-------+-------+------+
//	|baseTimestamp  |maxTimestamp  |producerId |prodEp |baseSeq|count |
//	+---------------+--------------+-----------+-------+-------+------+
//	61: records (compressed as one stream when the codec bits are set)
//
// The accessors read fields in place; they do not allocate and they panic if
// the view is shorter than HeaderSize, which Parse rules out.
type Batch []byte

// Parse frames the first batch of a record set: it returns that batch and
// the bytes after it. It checks that the 12-byte log overhead is present,
// that batchLength is not negative, that the batch is at least a header
// long and that it fits in b, and that the magic byte is 2. It does not
// check the CRC or the records; call Validate for that.
//
// A b shorter than a whole batch gives an error wrapping ErrTruncated (and
// so ErrCorrupt): in a record set fetched with a byte limit, or at the end
// of a file after a crash, that is a partial batch, not damage.
func Parse(b []byte) (Batch, []byte, error) {
	if len(b) < LogOverhead {
		return nil, b, corruptTruncated(0, "batchLength", "have %d bytes, need %d for the log overhead", len(b), LogOverhead)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
	if n < 0 {
		return nil, b, base.CorruptionErrorf("", batchLengthOffset, "batchLength", "negative length %d", n)
	}
	size := n + LogOverhead
	if size < HeaderSize {
		return nil, b, base.CorruptionErrorf("", batchLengthOffset, "batchLength", "length %d is shorter than the %d-byte header", n, HeaderSize-LogOverhead)
	}
	if len(b) > magicOffset {
		if m := b[magicOffset]; m != Magic {
			return nil, b, &base.CorruptionError{Pos: magicOffset, Field: "magic",
				Err: fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)}
		}
	}
	if int64(len(b)) < size {
		return nil, b, corruptTruncated(0, "batchLength", "batch of %d bytes, only %d present", size, len(b))
	}
	return Batch(b[:size:size]), b[size:], nil
}

func corruptTruncated(pos int64, field, format string, args ...any) error {
	return &base.CorruptionError{Pos: pos, Field: field,
		Err: fmt.Errorf("%w: %s", ErrTruncated, fmt.Sprintf(format, args...))}
}

// Size returns the batch's total size in bytes: batchLength + LogOverhead.
func (b Batch) Size() int { return int(b.length()) + LogOverhead }

// BaseOffset returns the offset of the batch's first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[baseOffsetOffset:])) }

// length returns batchLength: the number of bytes after the length field.
func (b Batch) length() int32 { return int32(binary.BigEndian.Uint32(b[batchLengthOffset:])) }

// PartitionLeaderEpoch returns the leader epoch the broker stamped on the
// batch when it appended it (-1 in a producer's request).
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[partitionLeaderEpochOffset:]))
}

// Magic returns the message format version byte (2 for every Batch Parse
// accepts).
func (b Batch) Magic() int8 { return int8(b[magicOffset]) }

// CRC returns the stored CRC-32C of bytes [21, end): the attributes onwards.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[crcOffset:]) }

// ComputeCRC returns the CRC-32C of bytes [21, end) as they are now.
func (b Batch) ComputeCRC() uint32 { return checksum(b[crcStart:]) }

// Attributes returns the attribute bits; see Attributes for what they mean.
func (b Batch) Attributes() Attributes {
	return Attributes(binary.BigEndian.Uint16(b[attributesOffset:]))
}

// LastOffsetDelta returns the offset delta of the batch's last record as
// the producer assigned it. It stays the same when compaction removes
// records, so the batch keeps covering the same offsets.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:]))
}

// BaseTimestamp returns the timestamp record timestamp deltas are relative
// to, or, when Attributes().HasDeleteHorizon(), the delete horizon in
// milliseconds.
func (b Batch) BaseTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[baseTimestampOffset:]))
}

// MaxTimestamp returns the largest record timestamp in the batch, or under
// LogAppendTime the time the broker appended it.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[maxTimestampOffset:])) }

// ProducerID returns the idempotent or transactional producer id, or -1.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[producerIDOffset:])) }

// ProducerEpoch returns the producer's epoch, or -1.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[producerEpochOffset:])) }

// BaseSequence returns the producer sequence number of the first record,
// or -1.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[baseSequenceOffset:])) }

// LastSequence returns the sequence number of the last record:
// BaseSequence + LastOffsetDelta, wrapping from MaxInt32 to 0 as Kafka
// does; -1 when the batch has no sequence.
func (b Batch) LastSequence() int32 {
	seq := b.BaseSequence()
	if seq == NoSequence {
		return NoSequence
	}
	d := b.LastOffsetDelta()
	if int64(seq)+int64(d) > math.MaxInt32 {
		return int32(int64(seq) + int64(d) - math.MaxInt32 - 1)
	}
	return seq + d
}

// RecordsCount returns the number of records the header announces.
func (b Batch) RecordsCount() int32 { return int32(binary.BigEndian.Uint32(b[recordsCountOffset:])) }

// LastOffset returns BaseOffset + LastOffsetDelta: the last offset the batch
// covers, whether or not compaction kept its record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset + 1: the offset the next batch starts at.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// SetBaseOffset rewrites baseOffset in place. The field lies before the
// CRC range, so the batch stays valid. It panics if b is shorter than 8
// bytes.
func (b Batch) SetBaseOffset(off int64) {
	binary.BigEndian.PutUint64(b[baseOffsetOffset:baseOffsetOffset+8], uint64(off))
}

// SetPartitionLeaderEpoch rewrites partitionLeaderEpoch in place. The field
// lies before the CRC range, so the batch stays valid. It panics if b is
// shorter than 16 bytes.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b[partitionLeaderEpochOffset:partitionLeaderEpochOffset+4], uint32(epoch))
}

// SetCRC recomputes and stores the CRC-32C. Needed after changing a field
// inside the CRC range (attributes, maxTimestamp for LogAppendTime).
func (b Batch) SetCRC() {
	binary.BigEndian.PutUint32(b[crcOffset:crcOffset+4], b.ComputeCRC())
}

// Header is the decoded batch header, for callers that want the fields as
// a value (printing, comparing); the accessors on Batch read them in place.
//
// Each field is the accessor of the same name: see it for units and
// sentinels.
type Header struct {
	BaseOffset           int64      // offset of the first record
	Length               int32      // batchLength: total size - LogOverhead
	PartitionLeaderEpoch int32      // broker's leader epoch, -1 from a producer
	Magic                int8       // 2
	CRC                  uint32     // stored CRC-32C of bytes [21, end)
	Attributes           Attributes // codec and flag bits
	LastOffsetDelta      int32      // offset of the last record - BaseOffset
	BaseTimestamp        int64      // ms; the delete horizon when Attributes.HasDeleteHorizon
	MaxTimestamp         int64      // ms; the append time under LogAppendTime
	ProducerID           int64      // -1 when none
	ProducerEpoch        int16      // -1 when none
	BaseSequence         int32      // -1 when none
	RecordsCount         int32      // records in the batch
}

// Header decodes every header field.
func (b Batch) Header() Header {
	return Header{
		BaseOffset: b.BaseOffset(), Length: b.length(), PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Magic: b.Magic(), CRC: b.CRC(), Attributes: b.Attributes(), LastOffsetDelta: b.LastOffsetDelta(),
		BaseTimestamp: b.BaseTimestamp(), MaxTimestamp: b.MaxTimestamp(), ProducerID: b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(), RecordsCount: b.RecordsCount(),
	}
}

// ValidateHeader checks what can be checked without reading the records:
// framing (as Parse), magic, the CRC-32C, a non-negative records count and
// lastOffsetDelta, and a control batch being uncompressed. It is the cheap
// check recovery runs on every batch; Validate does it and more.
func (b Batch) ValidateHeader() error {
	if len(b) < HeaderSize {
		return corruptTruncated(0, "header", "have %d bytes, need %d", len(b), HeaderSize)
	}
	if b.Magic() != Magic {
		return &base.CorruptionError{Pos: magicOffset, Field: "magic",
			Err: fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, b.Magic())}
	}
	if n := b.length(); n < HeaderSize-LogOverhead || int64(n)+LogOverhead != int64(len(b)) {
		return base.CorruptionErrorf("", batchLengthOffset, "batchLength", "length %d does not match the %d bytes of the batch", n, len(b))
	}
	if stored, got := b.CRC(), b.ComputeCRC(); stored != got {
		return base.CorruptionErrorf("", crcOffset, "crc", "stored %#08x, computed %#08x", stored, got)
	}
	if c := b.RecordsCount(); c < 0 {
		return base.CorruptionErrorf("", recordsCountOffset, "recordsCount", "negative count %d", c)
	}
	if d := b.LastOffsetDelta(); d < 0 {
		return base.CorruptionErrorf("", lastOffsetDeltaOffset, "lastOffsetDelta", "negative delta %d", d)
	}
	a := b.Attributes()
	if a.Compression() >= numCompressions {
		return base.CorruptionErrorf("", attributesOffset, "attributes", "unknown compression codec %d", a.Compression())
	}
	if a.IsControl() && a.Compression() != CompressionNone {
		return base.CorruptionErrorf("", attributesOffset, "attributes", "control batch compressed with %s", a.Compression())
	}
	return nil
}
