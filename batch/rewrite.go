package batch

import "encoding/binary"

// SetLogAppendTime turns b into a LogAppendTime batch stamped with the
// broker's append time ts (milliseconds): it sets the timestamp-type bit
// and maxTimestamp, then recomputes the CRC, since both fields lie inside
// it. Every record of b then reads as timestamp ts; the record bytes are
// not touched. A broker does this on a topic with
// message.timestamp.type=LogAppendTime. It panics if b is shorter than
// HeaderSize.
func (b Batch) SetLogAppendTime(ts int64) {
	a := b.Attributes() | TimestampTypeBit
	binary.BigEndian.PutUint16(b[attributesOffset:attributesOffset+2], uint16(a))
	binary.BigEndian.PutUint64(b[maxTimestampOffset:maxTimestampOffset+8], uint64(ts))
	b.SetCRC()
}
