package batch

import (
	"fmt"
	"sync"

	"github.com/partlog/partlog/internal/invariants"
)

// Validate checks everything about b that can be checked without context:
// what ValidateHeader checks (framing, magic, CRC-32C, header fields), then
// the record framing. For a compressed batch it decompresses the records
// first (bounded, see Decoder). Every record's length varint, attributes,
// timestampDelta, offsetDelta, key and value lengths (negative = null, as
// Kafka reads them), header count and headers must lie within the record's
// length and use all of it;
// offsetDeltas must increase strictly within [0, lastOffsetDelta]; the
// batch must hold exactly recordsCount records and no byte after them;
// varints must fit their 32-bit (at most 5 bytes) or 64-bit (at most 10
// bytes) type. A control batch's record keys must be control keys.
//
// Every failure is a *CorruptionError that wraps ErrCorrupt (and
// ErrTruncated or ErrUnsupportedMagic where they apply) and names the field
// and its byte position in b.
//
// Validate of an uncompressed batch does not allocate. A compressed batch
// is decompressed into a pooled buffer; use Decoder.Validate to choose the
// buffer and the decompression limit.
func (b Batch) Validate() error {
	_, err := b.validateTimes()
	return err
}

// TimeRange is the range of a batch's record timestamps as the records
// carry them: each record's create time, baseTimestamp + timestampDelta
// (computed with wrapping int64 arithmetic, as Kafka's long arithmetic
// does), in milliseconds, whatever the batch's timestamp type.
type TimeRange struct {
	// Max is the largest record timestamp, or NoTimestamp (-1) when no
	// record has a larger one: what a Kafka broker computes as a
	// CreateTime batch's maxTimestamp (it starts from -1 and takes larger
	// values).
	Max int64
	// Min is the smallest record timestamp other than NoTimestamp, or
	// NoTimestamp when every record has it (a record without a timestamp
	// is exempt from a broker's time bounds).
	Min int64
}

// validateTimes is Validate that also returns the range of the records'
// timestamps (ValidateHeader, then ValidateBody).
func (b Batch) validateTimes() (TimeRange, error) {
	if err := b.ValidateHeader(); err != nil {
		return TimeRange{}, err
	}
	return b.ValidateBody()
}

// ValidateBody checks b's records as Validate checks them, and returns the
// range of their timestamps, found during the same walk (for a compressed
// batch, over the records it decompressed, into a pooled buffer). It
// trusts the header and does not compute the CRC: ValidateHeader followed
// by ValidateBody is Validate, for a caller that checks the header first
// anyway (a walk over stored batches reads their offsets) and so computes
// the CRC once. A broker applying its timestamp rules learns a producer
// batch's real maxTimestamp (Max) and earliest record (Min) here without a
// second pass. On a header ValidateHeader refuses, the result means
// nothing, but ValidateBody does not panic.
//
// An error is a *CorruptionError naming the field, as Validate's. On an
// error the range is meaningless. ValidateBody of an uncompressed batch
// does not allocate.
func (b Batch) ValidateBody() (TimeRange, error) {
	if len(b) < HeaderSize {
		return TimeRange{}, corruptTruncated(0, "header", "have %d bytes, need %d", len(b), HeaderSize)
	}
	if b.Attributes().Compression() == CompressionNone {
		return b.validateRecords(b[HeaderSize:], false)
	}
	d := validatePool.Get().(*Decoder)
	tr, err := d.validateRecords(b)
	if cap(d.buf) > maxPooledBuffer {
		d.buf = nil
	}
	validatePool.Put(d)
	return tr, err
}

// maxPooledBuffer bounds the buffers Validate keeps in its pool.
const maxPooledBuffer = 4 << 20

var validatePool = sync.Pool{New: func() any { return new(Decoder) }}

// Validate is Batch.Validate decompressing into d's buffer under d's
// limit.
func (d *Decoder) Validate(b Batch) error {
	_, err := d.validateTimes(b)
	return err
}

// validateTimes is Batch.validateTimes decompressing into d's buffer under
// d's limit.
func (d *Decoder) validateTimes(b Batch) (TimeRange, error) {
	if err := b.ValidateHeader(); err != nil {
		return TimeRange{}, err
	}
	return d.validateRecords(b)
}

// validateRecords decompresses (if needed) and walks the records of a batch
// whose header is valid.
func (d *Decoder) validateRecords(b Batch) (TimeRange, error) {
	if b.Attributes().Compression() == CompressionNone {
		return b.validateRecords(b[HeaderSize:], false)
	}
	data, err := d.decompress(b)
	if err != nil {
		return TimeRange{}, err
	}
	return b.validateRecords(data, true)
}

func (b Batch) validateRecords(data []byte, decompressed bool) (TimeRange, error) {
	count, last, control := b.RecordsCount(), b.LastOffsetDelta(), b.Attributes().IsControl()
	if !control {
		if tr, ok := walkShort(data, count, last, b.BaseTimestamp()); ok {
			return tr, nil
		}
	}
	if tr, ok := fastWalk(data, count, last, control, b.BaseTimestamp()); ok {
		return tr, nil
	}
	c := walkRecords(data, count, last, control)
	if !c.failed {
		// The fast walk and the cursor disagree: a bug, not bad input.
		return TimeRange{}, invariants.AssertionFailedf("partlog/batch: fast record walk rejected what the cursor accepts")
	}
	return TimeRange{}, c.error(HeaderSize, decompressed)
}

// checkMagic checks the magic byte of a batch at least HeaderSize long.
func (b Batch) checkMagic() error {
	if b.Magic() != Magic {
		return &CorruptionError{Pos: magicOffset, Field: "magic",
			Err: fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, b.Magic())}
	}
	return nil
}

// checkCodec checks the compression bits of a batch at least HeaderSize
// long.
func (b Batch) checkCodec() error {
	if c := b.Attributes().Compression(); c >= numCompressions {
		return corruptf(attributesOffset, "attributes", "unknown compression codec %d", c)
	}
	return nil
}
