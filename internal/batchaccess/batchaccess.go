// Package batchaccess gives the partition (package log, its reference
// model in log/logtest, and their tests) the RecordBatch v2 operations of
// package batch that are not part of batch's public API: the header-copy
// patches of an append that never writes the caller's bytes, the
// LogAppendTime stamp, validation that also reports the records'
// timestamps, the header-only batch compaction keeps, and the framing of
// either message format. The header-copy patches are plain functions here
// (a function variable would make the copy on the appender's stack escape
// to the heap); the rest stay in package batch, which sets the variables
// below when it is initialized, so every importer of this package that
// also imports batch (as any caller with a batch in hand does) finds them
// set.
//
// Every function takes the batch as its bytes: a batch.Batch is passed as
// it is ([]byte is its underlying type).
package batchaccess

import (
	"encoding/binary"

	"github.com/partlog/partlog/internal/crc32c"
)

// The RecordBatch v2 header fields the patches touch (Kafka's frozen
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
)

// Attribute bits the partition and the example broker set on a batch they
// build or stamp (Kafka's frozen values; package batch's tests check them
// against its own).
const (
	// TimestampTypeBit marks LogAppendTime timestamps.
	TimestampTypeBit = 0x08
	// ControlBit marks a control batch (a transaction marker or a KRaft
	// control record).
	ControlBit = 0x20
)

// Castagnoli is the CRC-32C table, shared by every checksum in the module
// (package batch uses it too).
var Castagnoli = crc32c.Table

// SetMaxTimestamp rewrites maxTimestamp in place. It lies inside the CRC
// range: store a new CRC afterwards (batch.Batch.SetCRC, or PutCRC with
// CRCWithHeader when b is a header copy). It panics if b is shorter than
// HeaderSize.
func SetMaxTimestamp(b []byte, ts int64) {
	binary.BigEndian.PutUint64(b[MaxTimestampOffset:MaxTimestampOffset+8], uint64(ts))
}

// PutCRC stores crc in b's CRC field as it is, computing nothing: for a
// header copy whose CRC came from CRCWithHeader. It panics if b is shorter
// than HeaderSize.
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
	crc := crc32c.UpdateSmall(0, h[CRCStart:HeaderSize])
	return crc32c.Update(crc, b[HeaderSize:])
}

// TimeRange is the range of a batch's record timestamps as the records
// carry them: each record's create time, baseTimestamp + timestampDelta
// (computed with wrapping int64 arithmetic, as Kafka's long arithmetic
// does), in milliseconds, whatever the batch's timestamp type.
type TimeRange struct {
	// Max is the largest record timestamp, or -1 (batch.NoTimestamp) when
	// no record has a larger one: what a Kafka broker computes as a
	// CreateTime batch's maxTimestamp (it starts from -1 and takes larger
	// values).
	Max int64
	// Min is the smallest record timestamp other than -1, or -1 when every
	// record has -1 (a record without a timestamp is exempt from a
	// broker's time bounds).
	Min int64
}

// Set by package batch in its init: they need its decoders and its
// format knowledge beyond the header. See each one's implementation there
// for the full contract.
var (
	// ValidateTimes is batch.Batch.Validate that also returns the range of
	// the records' timestamps, found during the same walk (for a
	// compressed batch, over the records it decompressed), so that a
	// producer batch's real maxTimestamp needs no second pass. It does not
	// allocate for an uncompressed batch. On an error the range is
	// meaningless.
	ValidateTimes func(b []byte) (TimeRange, error)

	// ValidateBody is batch.Batch.Validate without the header checks, for
	// a batch whose header batch.Batch.ValidateHeader has just accepted
	// (Partition.Verify's segment walk): the records alone, so the CRC of
	// a batch is computed once. It never checks the header; b must have
	// passed ValidateHeader.
	ValidateBody func(b []byte) error

	// SetLogAppendTime stamps b with the broker's append time ts
	// (milliseconds): the timestamp-type bit and maxTimestamp, then a new
	// CRC. Every record of b then reads as timestamp ts. It panics if b is
	// shorter than HeaderSize.
	SetLogAppendTime func(b []byte, ts int64)

	// AppendEmptyBatch appends the header-only batch that stands in for b
	// once compaction has removed every one of its records but must keep
	// the batch (Kafka's rules: the last batch of an active producer, the
	// last batch of a cleaned range).
	AppendEmptyBatch func(dst, b []byte) []byte

	// FrameEntry frames the first entry of b in either message format (a
	// v2 batch or a legacy magic 0/1 message): its total size, its magic
	// and its next offset.
	FrameEntry func(b []byte) (size int, magic int8, next int64, err error)
)

// RunState is where DecodeRun stopped in a record set, for the next call.
// A RunState{Last: -1} starts at the set's first entry.
type RunState struct {
	// Pos is the byte position in the set of the entry being decoded, or
	// of the next one.
	Pos int
	// Rec is how many records of the batch at Pos were decoded; 0 when
	// none (At and Prev are then unused).
	Rec int32
	// At is the position of the batch's next record within its records
	// (after the header).
	At int
	// Prev is the offsetDelta of the batch's last record decoded.
	Prev int32
	// Last is the position of the last entry passed whole (by DecodeRun
	// or by its caller, which sets it), -1 before the first: a framing
	// error at Pos is reported with the offset that entry ends at.
	Last int
}

// DecodeRun is set by package batch: it is its
//
//	func(dst []batch.Record, dec *batch.Decoder, set []byte, st *RunState) (n int, other bool, err error)
//
// (held as any: this package cannot name batch's types, and package log
// asserts the type once when it is initialized). It decodes the records
// of the uncompressed, non-control v2 batches of set from st on into dst,
// checking each as batch.Iter.Next does, and stops at a full dst, the end
// of set, after a record with headers, at a record problem (err, in
// Next's words, after the batch's records before it) or at any other
// entry (other: st.Pos is at it, for the caller to frame and handle).
var DecodeRun any
