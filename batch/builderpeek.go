package batch

import (
	"encoding/binary"
	"math"

	"github.com/partlog/partlog/internal/builderpeek"
	"github.com/partlog/partlog/internal/crc32c"
)

// The hooks log.Partition.AppendBuilder reaches a Builder through (see
// package internal/builderpeek): the header and records of a batch that
// needs no compression, so that the partition can append them without a
// copy and without validating what the Builder encoded.

// builderpeek.HeaderSize must be HeaderSize: both array lengths are
// non-negative only when they are equal.
var (
	_ [HeaderSize - builderpeek.HeaderSize]struct{}
	_ [builderpeek.HeaderSize - HeaderSize]struct{}
)

func init() {
	builderpeek.Plain = func(b any) (h [HeaderSize]byte, records []byte, minTS, maxTS int64, ok bool) {
		return b.(*Builder).plain()
	}
	builderpeek.CRC = func(h [HeaderSize]byte, records []byte) uint32 {
		return crc32c.Update(crc32c.UpdateSmall(0, h[crcStart:]), records)
	}
}

// plain implements builderpeek.Plain.
func (b *Builder) plain() (h [HeaderSize]byte, records []byte, minTS, maxTS int64, ok bool) {
	o := &b.opts
	if o.Compression != CompressionNone || o.Control || o.DeleteHorizon > 0 || o.LogAppendTime ||
		b.count <= 0 || int64(b.count) != int64(b.lastOffsetDelta)+1 || HeaderSize+len(b.recs) > MaxBatchSize {
		return h, nil, 0, 0, false
	}
	b.putHeader(h[:])
	binary.BigEndian.PutUint32(h[batchLengthOffset:], uint32(HeaderSize+len(b.recs)-LogOverhead))
	// As TimeRange: Max starts from NoTimestamp, Min skips it.
	minTS, maxTS = b.minTimestamp, max(b.maxTimestamp, NoTimestamp)
	if minTS == math.MaxInt64 {
		minTS = NoTimestamp
	}
	return h, b.recs, minTS, maxTS, true
}
