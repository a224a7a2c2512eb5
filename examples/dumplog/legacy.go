package main

import (
	"encoding/binary"
	"hash/crc32"
)

// A legacy message (magic 0 or 1, written by Kafka before 0.11), as
// segment.Check hands it over framed: the header fields dumplog prints.
// batch.Decoder checks the message (ValidateLegacy) and decodes its
// records (AppendLegacyRecords); the fields below are read here. Kafka's
// frozen layout, big-endian:
//
//	offset int64 | messageSize int32 (counts the bytes after it) |
//	crc uint32 (CRC-32 IEEE of [16, end)) | magic int8 | attributes int8 |
//	timestamp int64 (magic 1 only) | key | value
const (
	legacyCRCPos        = 12
	legacyMagicPos      = 16
	legacyAttributesPos = 17
	legacyTimestampPos  = 18
	legacyCodecMask     = 0x07 // attribute bits 0-2: the wrapper's codec
	legacyAppendTimeBit = 0x08 // attribute bit 3 (magic 1): LogAppendTime
)

// isLegacyMagic reports whether m is a legacy message's format version.
func isLegacyMagic(m int8) bool { return m == 0 || m == 1 }

// legacyMessage is the bytes of one framed legacy message set entry: a
// plain message, or a compressed wrapper whose value is the inner
// messages and whose offset is that of the last of them. segment.Check
// frames it, so it holds at least the fixed fields read here.
type legacyMessage []byte

// Offset is the message's offset (a wrapper's: its last inner message's).
func (e legacyMessage) Offset() int64 { return int64(binary.BigEndian.Uint64(e)) }

// CRC is the CRC-32 (IEEE) the message stores.
func (e legacyMessage) CRC() uint32 { return binary.BigEndian.Uint32(e[legacyCRCPos:]) }

// ComputeCRC is the CRC-32 (IEEE) of the message's bytes as they are.
func (e legacyMessage) ComputeCRC() uint32 { return crc32.ChecksumIEEE(e[legacyMagicPos:]) }

// Magic is the message format version, 0 or 1.
func (e legacyMessage) Magic() int8 { return int8(e[legacyMagicPos]) }

// Compression is the codec of a wrapper's value, numbered as
// batch.Compression numbers codecs (none for a plain message).
func (e legacyMessage) Compression() uint8 { return e[legacyAttributesPos] & legacyCodecMask }

// LogAppendTime reports whether the timestamp is the broker's append time
// (magic 1 only).
func (e legacyMessage) LogAppendTime() bool {
	return e.Magic() == 1 && e[legacyAttributesPos]&legacyAppendTimeBit != 0
}

// Timestamp is the message's timestamp in milliseconds, -1 under magic 0,
// which has none.
func (e legacyMessage) Timestamp() int64 {
	if e.Magic() == 0 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(e[legacyTimestampPos:]))
}
