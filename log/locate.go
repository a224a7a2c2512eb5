package log

import (
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/segment"
)

// locate returns the position in seg of the batch holding offset (the first
// batch whose last offset is >= offset); found is false when offset is past
// the segment's last batch.
func locate(seg *segment.Segment, offset int64) (pos int64, found bool, err error) {
	pos, _, found, err = seg.Translate(offset, 0)
	return pos, found, err
}

// locateBatch is locate that also returns the base offset of that batch.
func locateBatch(seg *segment.Segment, offset int64) (pos, batchBase int64, found bool, err error) {
	pos, info, found, err := seg.Translate(offset, 0)
	return pos, info.BaseOffset, found, err
}

// segmentBytes returns bytes [start, end) of seg's .log: an alias of the
// mapping when the segment is mapped, else read into *scratch (grown when
// short, and kept for the next use).
func segmentBytes(seg *segment.Segment, start, end int64, scratch *[]byte) ([]byte, error) {
	if seg.Mapped() {
		return seg.Bytes(start, end, nil)
	}
	n := int(end - start)
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	return seg.Bytes(start, end, (*scratch)[:n])
}

// validate checks a batch before it is appended: framing, magic, CRC-32C
// and the record framing (decompressing a compressed batch into a pooled
// buffer), and returns the range of its record timestamps, found in the
// same walk. An uncompressed batch is validated without allocating.
func validate(bt batch.Batch) (batchaccess.TimeRange, error) { return batchaccess.ValidateTimes(bt) }
