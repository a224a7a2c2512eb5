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
	b.SetAttributes(b.Attributes() | TimestampTypeBit)
	b.SetMaxTimestamp(ts)
	b.SetCRC()
}

// SetAttributes rewrites the attributes field in place. It lies inside the
// CRC range: store a new CRC afterwards (SetCRC, or PutCRC with
// CRCWithHeader when b is a header copy). It panics if b is shorter than
// HeaderSize.
func (b Batch) SetAttributes(a Attributes) {
	binary.BigEndian.PutUint16(b[attributesOffset:attributesOffset+2], uint16(a))
}

// SetMaxTimestamp rewrites maxTimestamp in place. It lies inside the CRC
// range: store a new CRC afterwards (SetCRC, or PutCRC with CRCWithHeader
// when b is a header copy). It panics if b is shorter than HeaderSize.
func (b Batch) SetMaxTimestamp(ts int64) {
	binary.BigEndian.PutUint64(b[maxTimestampOffset:maxTimestampOffset+8], uint64(ts))
}

// PutCRC stores crc in the CRC field as it is, computing nothing: for a
// header copy whose CRC came from CRCWithHeader. It panics if b is shorter
// than HeaderSize.
func (b Batch) PutCRC(crc uint32) {
	binary.BigEndian.PutUint32(b[crcOffset:crcOffset+4], crc)
}

// CRCWithHeader returns the CRC-32C b would have with the header h (at
// least HeaderSize bytes: a patched copy of b's header) in place of its
// own: the checksum of h's bytes [CRCStart, HeaderSize) followed by b's
// records. A broker that must not write into b (b may be the caller's
// memory, even a read-only mapping) patches a copy of the header and
// stores it with this CRC, writing b's records as they are. It panics if
// b or h is shorter than HeaderSize.
//
// h does not escape: its 40 checksummed bytes go through a plain table
// loop, so a header copy on the caller's stack stays there.
func (b Batch) CRCWithHeader(h []byte) uint32 {
	crc := updateCRCSmall(0, h[CRCStart:HeaderSize])
	return updateCRC(crc, b[HeaderSize:])
}

// updateCRCSmall is crc32.Update(crc, castagnoli, p) for a few bytes, one
// table lookup a byte (the reflected CRC-32C, with the same pre- and
// post-inversion), written out so that p does not escape.
func updateCRCSmall(crc uint32, p []byte) uint32 {
	crc = ^crc
	for _, v := range p {
		crc = castagnoli[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}
