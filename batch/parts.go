package batch

import (
	"encoding/binary"
	"math"

	"github.com/partlog/partlog/internal/crc32c"
)

// Parts returns the batch Build would return as its two parts, without
// joining them: the header (HeaderSize bytes, its CRC included) and the
// encoded records, with the range of the records' timestamps as
// ValidateBody reports it. A writer that sends a batch as two buffers (a
// vectored write, net.Buffers) skips the copy of the records Build makes;
// log.Partition.AppendBuilder appends a Builder's batch this way.
//
// records is the Builder's own buffer: do not modify it, and do not use
// it after the Builder is next changed (Add, AddAt, SetLastOffsetDelta,
// Reset). ok is false, and nothing else is set, for a batch that needs
// more than a header in front of the records: a compressed or control
// batch, a delete horizon, LogAppendTime, no record, a recordsCount other
// than lastOffsetDelta+1 (SetLastOffsetDelta, AddAt with a gap), or more
// than MaxBatchSize bytes. Build or AppendTo that one.
func (b *Builder) Parts() (header [HeaderSize]byte, records []byte, times TimeRange, ok bool) {
	o := &b.opts
	if o.Compression != CompressionNone || o.Control || o.DeleteHorizon > 0 || o.LogAppendTime ||
		b.count <= 0 || int64(b.count) != int64(b.lastOffsetDelta)+1 || HeaderSize+len(b.recs) > MaxBatchSize {
		return header, nil, TimeRange{}, false
	}
	b.putHeader(header[:])
	binary.BigEndian.PutUint32(header[batchLengthOffset:], uint32(HeaderSize+len(b.recs)-LogOverhead))
	binary.BigEndian.PutUint32(header[crcOffset:], crc32c.Update(crc32c.UpdateSmall(0, header[crcStart:]), b.recs))
	// As TimeRange: Max starts from NoTimestamp, Min skips it.
	times = TimeRange{Min: b.minTimestamp, Max: max(b.maxTimestamp, NoTimestamp)}
	if times.Min == math.MaxInt64 {
		times.Min = NoTimestamp
	}
	return header, b.recs, times, true
}
