package batch

import (
	"fmt"
	"sync"

	"github.com/partlog/partlog/internal/base"
)

// Validate checks everything about b that can be checked without context:
// what ValidateHeader checks (framing, magic, CRC-32C, header fields), then
// the record framing. For a compressed batch it decompresses the records
// first (bounded, see Decoder). Every record's length varint, attributes,
// timestampDelta, offsetDelta, key and value lengths (-1 = null), header
// count and headers must lie within the record's length and use all of it;
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

// validateTimes is Validate that also returns the range of the records'
// timestamps, found during the same walk over the records (for a
// compressed batch, over the records it decompressed): a broker learns a
// producer batch's real maxTimestamp this way without a second pass. It
// does not allocate for an uncompressed batch. On an error the range is
// meaningless.
func (b Batch) validateTimes() (timeRange, error) {
	if err := b.ValidateHeader(); err != nil {
		return timeRange{}, err
	}
	return b.validateBody()
}

// validateBody is validateTimes after ValidateHeader: the records of a
// batch whose header (framing, magic, CRC, header fields) is known valid,
// decompressed into a pooled Decoder. It checks nothing of the header and
// does not compute the CRC: for a caller that has just run ValidateHeader
// (a segment walk), so that the CRC of a batch is computed once.
// REQUIRES: b.ValidateHeader() == nil.
func (b Batch) validateBody() (timeRange, error) {
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
func (d *Decoder) validateTimes(b Batch) (timeRange, error) {
	if err := b.ValidateHeader(); err != nil {
		return timeRange{}, err
	}
	return d.validateRecords(b)
}

// validateRecords decompresses (if needed) and walks the records of a batch
// whose header is valid.
func (d *Decoder) validateRecords(b Batch) (timeRange, error) {
	if b.Attributes().Compression() == CompressionNone {
		return b.validateRecords(b[HeaderSize:], false)
	}
	data, err := d.decompress(b)
	if err != nil {
		return timeRange{}, err
	}
	return b.validateRecords(data, true)
}

func (b Batch) validateRecords(data []byte, decompressed bool) (timeRange, error) {
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
		return timeRange{}, base.AssertionFailedf("partlog/batch: fast record walk rejected what the cursor accepts")
	}
	return timeRange{}, c.error(HeaderSize, decompressed)
}

// checkMagic checks the magic byte of a batch at least HeaderSize long.
func (b Batch) checkMagic() error {
	if b.Magic() != Magic {
		return &base.CorruptionError{Pos: magicOffset, Field: "magic",
			Err: fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, b.Magic())}
	}
	return nil
}

// checkCodec checks the compression bits of a batch at least HeaderSize
// long.
func (b Batch) checkCodec() error {
	if c := b.Attributes().Compression(); c >= numCompressions {
		return base.CorruptionErrorf("", attributesOffset, "attributes", "unknown compression codec %d", c)
	}
	return nil
}
