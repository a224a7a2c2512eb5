// Package legacy reads and writes the byte level of legacy message set
// entries (magic 0 and 1, Kafka 0.8 to 0.10): framing, field accessors,
// the CRC-32 check Kafka's log recovery makes, and encoding. A log Kafka
// wrote before the upgrade to RecordBatch v2 keeps such entries, and
// partlog serves them as stored; it never appends them, and compaction
// rewrites them as Kafka's cleaner does (AppendMessage; the magic 0 LZ4
// frame header of KAFKA-3160, SetLZ4HeaderChecksum). Decoding an entry's
// records and compressing (a wrapper's message set) is package batch's:
// batch.Decoder.AppendLegacyRecords, LegacyBaseOffset, ValidateLegacy and
// AppendLegacyFiltered, which take an entry as plain bytes.
//
// This package sits below batch, so it cannot name batch's types: a codec
// is its attribute bits (batch.Compression(e.Compression()) converts it).
package legacy

import (
	"encoding/binary"
	"hash/crc32"
	"sync/atomic"

	"github.com/partlog/partlog/internal/corrupt"
)

// Work counts what is done to legacy entries, for tests that check that a
// walk or a verification does each step once per entry (package log's
// TestVerifyLegacyDecodesOnce): CRCChecks the CRC-32s ValidateHeader
// computed (an outer message's or an inner one's), Decompressions the
// compressed wrappers package batch decompressed.
var Work struct {
	CRCChecks, Decompressions atomic.Int64
}

// Byte offsets of an entry's fields, from the start of the entry (the
// offset field). Frozen: Kafka's format.
//
//	0       8       12    16    17    18           26 (v1) / 18 (v0)
//	+-------+-------+-----+-----+-----+------------+--------+-----+----------+-------+
//	|offset |message| crc |magic|attrs| timestamp  | keyLen | key | valueLen | value |
//	|       |Size   |     | 0/1 |     | (v1 only)  |  i32   |     |   i32    |       |
//	+-------+-------+-----+-----+-----+------------+--------+-----+----------+-------+
//	messageSize counts the bytes after itself; the CRC-32 (IEEE) covers [16, end)
const (
	// OffsetOffset is the position of the entry's 8-byte offset.
	OffsetOffset = 0
	// SizeOffset is the position of the 4-byte messageSize.
	SizeOffset = OffsetOffset + 8 // 8
	// CRCOffset is the position of the 4-byte CRC-32 (IEEE).
	CRCOffset = SizeOffset + 4 // 12
	// MagicOffset is the position of the magic byte, where a v2 batch
	// has its magic too.
	MagicOffset = CRCOffset + 4 // 16
	// AttributesOffset is the position of the attribute byte.
	AttributesOffset = MagicOffset + 1 // 17

	timestampOffset = AttributesOffset + 1
	keyLenOffsetV0  = AttributesOffset + 1 // 18
	keyLenOffsetV1  = timestampOffset + 8  // 26
	crcStart        = MagicOffset          // 16
	compressionMask = 0x07                 // attribute bits 0-2
	timestampType   = 0x08                 // attribute bit 3, magic 1 only
	overheadV0      = 4 + 1 + 1 + 4 + 4    // 14: crc, magic, attrs, keyLen, valueLen
	overheadV1      = overheadV0 + 8       // 22: plus the timestamp
	peekSize        = MagicOffset + 1      // bytes needed to tell the format

	// LogOverhead is the size of the offset and messageSize fields, which
	// messageSize does not count (batch.LogOverhead too).
	LogOverhead = SizeOffset + 4 // 12
	// MinSize is the size of the smallest entry: 26 bytes.
	MinSize = LogOverhead + overheadV0
	// MaxCompression is the largest codec a legacy message may use: lz4
	// (zstd needs magic 2).
	MaxCompression = 3
	// CompressionNone is the codec of a plain (not wrapper) message.
	CompressionNone = 0
	// NoTimestamp is the timestamp of a magic 0 message, which has none
	// (batch.NoTimestamp).
	NoTimestamp = -1
)

// Message format versions (the magic byte).
const (
	MagicV0 = 0 // Kafka 0.8-0.9 messages: no timestamp, absolute inner offsets
	MagicV1 = 1 // Kafka 0.10 messages: a timestamp, relative inner offsets
)

// ieee is the table of CRC-32 (IEEE), the checksum of legacy messages.
var ieee = crc32.MakeTable(crc32.IEEE)

// IsMagic reports whether m is a legacy message format version.
func IsMagic(m int8) bool { return m == MagicV0 || m == MagicV1 }

// Is reports whether b, the start of an entry (at least its first
// MagicOffset+1 bytes), is a legacy message for recovery: its magic is 0
// or 1, unless b holds MinSize bytes in which the magic, the attributes
// and the key and value lengths (bytes 16 to 26) are all zero and the
// messageSize is not the 14 bytes those fields make. No writer wrote such
// an entry (a magic 0 message with an empty key and value is 14 bytes
// long), but a crash leaves it where an entry's bytes were never written
// after its first ones landed (a file extended with zeros): recovery
// judges it as the torn write it is, not as legacy data it cannot prove
// torn (DESIGN law 12).
func Is(b []byte) bool {
	if len(b) < peekSize || !IsMagic(int8(b[MagicOffset])) {
		return false
	}
	if len(b) < MinSize || Entry(b).messageSize() == overheadV0 {
		return true
	}
	for _, c := range b[MagicOffset:MinSize] {
		if c != 0 {
			return true
		}
	}
	return false
}

// Entry is a view over one legacy message set entry (magic 0 or 1): the
// 8-byte offset, the 4-byte message size and the message. A compressed
// entry (a wrapper) holds a nested message set, compressed, as its value;
// the wrapper's offset is the offset of its last inner message. Inner
// offsets are absolute under magic 0 and relative under magic 1 (the first
// is 0, and the wrapper's offset minus the last one is the base; a wrapper
// offset of 0, written by some old clients, means a base of 0).
//
// Accessors read fields in place and panic on a view shorter than
// MinSize, which Parse rules out.
type Entry []byte

// truncated is a *corrupt.Error wrapping corrupt.ErrTruncated.
func truncated(pos int64, field, format string, args ...any) error {
	return corrupt.Wrapf(corrupt.ErrTruncated, pos, field, format, args...)
}

// Parse frames the first entry of b as a legacy message: it checks that
// the log overhead and the magic are present, that the magic is 0 or 1,
// that the message is at least as long as its fixed fields (14 bytes under
// magic 0, 22 under magic 1) and that it fits in b. It returns the entry
// and the bytes after it. A b shorter than the entry gives an error
// wrapping corrupt.ErrTruncated. It checks neither the CRC nor the key and
// value.
func Parse(b []byte) (Entry, []byte, error) {
	if len(b) < peekSize {
		return nil, b, truncated(0, "messageSize", "have %d bytes, need %d to read the magic", len(b), peekSize)
	}
	m := int8(b[MagicOffset])
	if !IsMagic(m) {
		return nil, b, corrupt.Wrapf(corrupt.ErrUnsupportedMagic, MagicOffset, "magic", "magic %d is not a legacy message", m)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[SizeOffset:])))
	if min := overhead(m); n < int64(min) {
		return nil, b, corrupt.Errorf(SizeOffset, "messageSize",
			"message of %d bytes is shorter than the %d bytes of a magic %d message", n, min, m)
	}
	size := n + LogOverhead
	if int64(len(b)) < size {
		return nil, b, truncated(0, "messageSize", "entry of %d bytes, only %d present", size, len(b))
	}
	return Entry(b[:size:size]), b[size:], nil
}

// overhead is the size of a message's fixed fields.
func overhead(magic int8) int {
	if magic == MagicV0 {
		return overheadV0
	}
	return overheadV1
}

// Size returns the entry's total size: messageSize + LogOverhead.
func (e Entry) Size() int { return int(e.messageSize()) + LogOverhead }

// Offset returns the entry's offset: the message's own, or for a
// compressed wrapper the offset of its last inner message.
func (e Entry) Offset() int64 { return int64(binary.BigEndian.Uint64(e[OffsetOffset:])) }

// messageSize returns the size of the message after the size field.
func (e Entry) messageSize() int32 { return int32(binary.BigEndian.Uint32(e[SizeOffset:])) }

// CRC returns the stored CRC-32 (IEEE) of bytes [16, end).
func (e Entry) CRC() uint32 { return binary.BigEndian.Uint32(e[CRCOffset:]) }

// ComputeCRC returns the CRC-32 (IEEE) of bytes [16, end) as they are now.
func (e Entry) ComputeCRC() uint32 { return crc32.Checksum(e[crcStart:], ieee) }

// Magic returns the message format version, 0 or 1.
func (e Entry) Magic() int8 { return int8(e[MagicOffset]) }

// Attributes returns the message's attribute byte: bits 0-2 the codec,
// bit 3 (magic 1) LogAppendTime.
func (e Entry) Attributes() int8 { return int8(e[AttributesOffset]) }

// Compression returns the codec of a wrapper's value, as batch numbers
// its Compression values (CompressionNone for a plain message).
func (e Entry) Compression() uint8 { return e[AttributesOffset] & compressionMask }

// LogAppendTime reports whether the timestamp is the broker's append time
// (magic 1 only); inner messages of such a wrapper take its timestamp.
func (e Entry) LogAppendTime() bool {
	return e.Magic() == MagicV1 && e[AttributesOffset]&timestampType != 0
}

// Timestamp returns the message's timestamp in milliseconds (for a wrapper
// the largest of its inner messages', or the append time), or NoTimestamp
// (-1) under magic 0, which has none: Kafka's time lookups treat it so.
func (e Entry) Timestamp() int64 {
	if e.Magic() == MagicV0 {
		return NoTimestamp
	}
	return int64(binary.BigEndian.Uint64(e[timestampOffset:]))
}

// keyLenOffset returns where the key length is.
func (e Entry) keyLenOffset() int {
	if e.Magic() == MagicV0 {
		return keyLenOffsetV0
	}
	return keyLenOffsetV1
}

// KeyValue returns the message's key and value (nil for null), which alias
// e. err wraps corrupt.ErrCorrupt when the lengths do not frame the rest of
// the message exactly.
func (e Entry) KeyValue() (key, value []byte, err error) {
	p := e.keyLenOffset()
	key, p, err = e.bytesAt(p, "keyLength")
	if err != nil {
		return nil, nil, err
	}
	value, p, err = e.bytesAt(p, "valueLength")
	if err != nil {
		return nil, nil, err
	}
	if p != len(e) {
		return nil, nil, corrupt.Errorf(int64(p), "value", "%d bytes after the value", len(e)-p)
	}
	return key, value, nil
}

// bytesAt reads an int32-length-prefixed byte string at p (-1 = null, and
// so is any other negative length, as Kafka reads it).
func (e Entry) bytesAt(p int, field string) ([]byte, int, error) {
	if len(e)-p < 4 {
		return nil, p, corrupt.Errorf(int64(p), field, "%d bytes left, the length needs 4", len(e)-p)
	}
	n := int64(int32(binary.BigEndian.Uint32(e[p:])))
	p += 4
	switch {
	case n < 0:
		return nil, p, nil
	case n > int64(len(e)-p):
		return nil, p, corrupt.Errorf(int64(p-4), field, "length %d with %d bytes left", n, len(e)-p)
	}
	return e[p : p+int(n) : p+int(n)], p + int(n), nil
}

// ValidateHeader checks what Kafka's log recovery checks of a legacy
// entry: framing (as Parse, and the size matching len(e)) and the CRC-32
// (IEEE). It neither decodes the key and value nor decompresses: an entry
// whose CRC matches is byte for byte what its writer wrote.
func (e Entry) ValidateHeader() error {
	if len(e) < peekSize {
		return truncated(0, "messageSize", "have %d bytes, need %d", len(e), peekSize)
	}
	f, _, err := Parse(e)
	if err != nil {
		return err
	}
	if len(f) != len(e) {
		return corrupt.Errorf(SizeOffset, "messageSize",
			"size %d does not match the %d bytes of the entry", e.messageSize(), len(e))
	}
	Work.CRCChecks.Add(1)
	if stored, got := e.CRC(), e.ComputeCRC(); stored != got {
		return corrupt.Errorf(CRCOffset, "crc", "stored %#08x, computed %#08x (CRC-32 IEEE)", stored, got)
	}
	return nil
}
