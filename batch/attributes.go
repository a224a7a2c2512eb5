package batch

import "fmt"

// Attributes is the batch's 16-bit attributes field:
//
//	bit  0-2  compression codec (Compression)
//	bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime
//	bit  4    transactional
//	bit  5    control (a transaction marker or KRaft control record)
//	bit  6    hasDeleteHorizonMs: baseTimestamp is a delete horizon
//	bit  7-15 unused, zero
type Attributes uint16

// Attribute bits. Frozen: Kafka's format.
const (
	compressionMask  Attributes = 0x07
	timestampTypeBit Attributes = 0x08 // LogAppendTime
	transactionalBit Attributes = 0x10
	controlBit       Attributes = 0x20
	deleteHorizonBit Attributes = 0x40
)

// Compression returns the codec of the batch's records.
func (a Attributes) Compression() Compression { return Compression(a & compressionMask) }

// LogAppendTime reports whether the broker's append time replaces every
// record's timestamp (timestamp type 1); false means CreateTime.
func (a Attributes) LogAppendTime() bool { return a&timestampTypeBit != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (a Attributes) IsTransactional() bool { return a&transactionalBit != 0 }

// IsControl reports whether the batch holds control records (transaction
// markers) rather than user data.
func (a Attributes) IsControl() bool { return a&controlBit != 0 }

// HasDeleteHorizon reports whether baseTimestamp holds the time after which
// compaction may drop the batch's tombstones and markers.
func (a Attributes) HasDeleteHorizon() bool { return a&deleteHorizonBit != 0 }

// WithCompression returns a with its codec bits set to c.
func (a Attributes) WithCompression(c Compression) Attributes {
	return a&^compressionMask | Attributes(c)&compressionMask
}

// String formats the attributes as "codec=gzip|LogAppendTime|transactional".
func (a Attributes) String() string {
	s := "codec=" + a.Compression().String()
	if a.LogAppendTime() {
		s += "|LogAppendTime"
	}
	if a.IsTransactional() {
		s += "|transactional"
	}
	if a.IsControl() {
		s += "|control"
	}
	if a.HasDeleteHorizon() {
		s += "|deleteHorizon"
	}
	return s
}

// Compression is a record codec, the low three bits of Attributes.
type Compression uint8

// Codecs, numbered as Kafka numbers them. Frozen.
const (
	CompressionNone Compression = iota
	CompressionGzip
	CompressionSnappy
	CompressionLZ4
	CompressionZstd
	numCompressions
)

var compressionNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

func init() {
	if len(compressionNames) != int(numCompressions) {
		panic(fmt.Sprintf("batch: %d compression names for %d codecs", len(compressionNames), numCompressions))
	}
}

// String returns Kafka's name for the codec ("none", "gzip", ...).
func (c Compression) String() string {
	if c < numCompressions {
		return compressionNames[c]
	}
	return fmt.Sprintf("unknown(%d)", uint8(c))
}
