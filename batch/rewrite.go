package batch

import (
	"encoding/binary"

	"github.com/partlog/partlog/internal/batchaccess"
)

// SetLogAppendTime turns b into a LogAppendTime batch stamped with the
// broker's append time ts (milliseconds): it sets the timestamp-type bit
// and maxTimestamp, then recomputes the CRC, since both fields lie inside
// it. Every record of b then reads as timestamp ts; the record bytes are
// not touched. A broker does this to a producer's batch on a topic with
// message.timestamp.type=LogAppendTime (log.Partition does it itself under
// its Config.LogAppendTime). It panics if b is shorter than HeaderSize.
func (b Batch) SetLogAppendTime(ts int64) {
	b.SetAttributes(b.Attributes() | timestampTypeBit)
	batchaccess.SetMaxTimestamp(b, ts)
	b.SetCRC()
}

// SetAttributes rewrites the attributes field in place. It lies inside the
// CRC range: store a new CRC afterwards (SetCRC). It panics if b is
// shorter than HeaderSize.
func (b Batch) SetAttributes(a Attributes) {
	binary.BigEndian.PutUint16(b[attributesOffset:attributesOffset+2], uint16(a))
}
