// Package batchaccess holds the RecordBatch v2 operations on a batch's
// bytes that the partition (package log, its reference model in
// log/logtest) needs and a user of package batch does not: the patches of
// a header copy an append stores instead of writing into the caller's
// bytes, with the CRC such a copy gets, and the header-only batch
// compaction keeps in place of a batch whose records it all removed.
//
// They are plain functions over bytes. Package batch imports this package
// too (its LogAppendTime stamp patches maxTimestamp here), and its tests
// check the layout constants below against its own. What needs batch's
// record decoding (validation with the records' time range, the framing of
// either message format, a record set decoded a run at a time, a
// Builder's header and records) is exported by package batch.
package batchaccess

import (
	"encoding/binary"

	"github.com/partlog/partlog/internal/crc32c"
)

// The RecordBatch v2 header fields the operations touch (Kafka's frozen
// layout; package batch's tests check them against its own).
const (
	// CRCOffset is the position of the 4-byte CRC-32C field.
	CRCOffset = 17
	// CRCStart is the first byte the CRC covers (attributes).
	CRCStart = 21
	// MaxTimestampOffset is the position of the 8-byte maxTimestamp.
	MaxTimestampOffset = 35
	// HeaderSize is the size of the header: every byte before the first
	// record.
	HeaderSize = 61

	// batchLengthOffset is the position of the 4-byte batchLength.
	batchLengthOffset = 8
	// logOverhead is the bytes before batchLength's count starts
	// (baseOffset and batchLength).
	logOverhead = 12
	// attributesOffset is the position of the 2-byte attributes.
	attributesOffset = CRCStart
	// baseTimestampOffset is the position of the 8-byte baseTimestamp.
	baseTimestampOffset = 27
	// recordsCountOffset is the position of the 4-byte recordsCount.
	recordsCountOffset = 57
)

// Attribute bits the partition sets on a batch it stamps or builds
// (Kafka's frozen values; package batch's tests check them against its
// own).
const (
	// TimestampTypeBit marks LogAppendTime timestamps.
	TimestampTypeBit = 0x08
	// TransactionalBit marks a transactional batch.
	TransactionalBit = 0x10
	// ControlBit marks a control batch (a transaction marker or a KRaft
	// control record).
	ControlBit = 0x20
)

// SetMaxTimestamp rewrites maxTimestamp in place. It lies inside the CRC
// range: store a new CRC afterwards (batch.Batch.SetCRC, or PutCRC with
// CRCWithHeader when b is a header copy). It panics if b is shorter than
// HeaderSize.
func SetMaxTimestamp(b []byte, ts int64) {
	binary.BigEndian.PutUint64(b[MaxTimestampOffset:MaxTimestampOffset+8], uint64(ts))
}

// PutCRC stores crc in b's CRC field as it is, computing nothing: for a
// header copy whose CRC came from CRCWithHeader or CRCWithRecords. It
// panics if b is shorter than HeaderSize.
func PutCRC(b []byte, crc uint32) {
	binary.BigEndian.PutUint32(b[CRCOffset:CRCOffset+4], crc)
}

// CRCWithHeader returns the CRC-32C the batch b would have with the header
// h (at least HeaderSize bytes: a patched copy of b's header) in place of
// its own: the checksum of h's bytes [CRCStart, HeaderSize) followed by
// b's records. An append that must not write into b (the caller's memory,
// even a read-only mapping) patches a copy of the header and stores it
// with this CRC, writing b's records as they are. It panics if b or h is
// shorter than HeaderSize.
//
// h does not escape: its 40 checksummed bytes go through a plain table
// loop, so a header copy on the caller's stack stays there.
func CRCWithHeader(b, h []byte) uint32 {
	return CRCWithRecords(h, b[HeaderSize:])
}

// CRCWithRecords returns the CRC-32C of the batch made of the header h (at
// least HeaderSize bytes) followed by records: what batch.Batch.ComputeCRC
// computes over the two joined, for a header and records kept apart (a
// batch.Builder's parts). It panics if h is shorter than HeaderSize. h
// does not escape (see CRCWithHeader).
func CRCWithRecords(h, records []byte) uint32 {
	crc := crc32c.UpdateSmall(0, h[CRCStart:HeaderSize])
	return crc32c.Update(crc, records)
}

// AppendEmptyBatch appends to dst the header-only batch that stands in for
// the batch b once compaction has removed every one of its records but
// must keep the batch (Kafka's rules: the last batch of an active
// producer, whose sequence numbers the broker still checks; the last batch
// of a cleaned range). It keeps b's base offset, lastOffsetDelta, leader
// epoch, producer fields, maxTimestamp, timestamp type and transactional
// and control bits; it has no codec, no delete horizon, baseTimestamp -1
// and no records, as Kafka writes it, and its own CRC. It panics if b is
// shorter than HeaderSize.
func AppendEmptyBatch(dst, b []byte) []byte {
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	e := dst[start:]
	binary.BigEndian.PutUint32(e[batchLengthOffset:], uint32(HeaderSize-logOverhead))
	attrs := binary.BigEndian.Uint16(b[attributesOffset:])
	binary.BigEndian.PutUint16(e[attributesOffset:], attrs&(TimestampTypeBit|TransactionalBit|ControlBit))
	binary.BigEndian.PutUint64(e[baseTimestampOffset:], ^uint64(0)) // batch.NoTimestamp, -1
	binary.BigEndian.PutUint32(e[recordsCountOffset:], 0)
	PutCRC(e, crc32c.Update(0, e[CRCStart:]))
	return dst
}
