package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/partlog/partlog/internal/base"
)

// Legacy message sets (magic 0 and 1, Kafka 0.8 to 0.10) are read, never
// written: a log Kafka wrote before the upgrade to RecordBatch v2 keeps
// them, and they are served as stored. Byte offsets of an entry's fields,
// from the start of the entry (the offset field). Frozen: Kafka's format.
//
//	0       8       12    16    17    18           26 (v1) / 18 (v0)
//	+-------+-------+-----+-----+-----+------------+--------+-----+----------+-------+
//	|offset |message| crc |magic|attrs| timestamp  | keyLen | key | valueLen | value |
//	|       |Size   |     | 0/1 |     | (v1 only)  |  i32   |     |   i32    |       |
//	+-------+-------+-----+-----+-----+------------+--------+-----+----------+-------+
//	messageSize counts the bytes after itself; the CRC-32 (IEEE) covers [16, end)
const (
	legacyOffsetOffset      = 0
	legacySizeOffset        = legacyOffsetOffset + 8 // 8
	legacyCRCOffset         = legacySizeOffset + 4   // 12
	legacyMagicOffset       = legacyCRCOffset + 4    // 16, where a v2 batch has its magic too
	legacyAttributesOffset  = legacyMagicOffset + 1  // 17
	legacyTimestampOffset   = legacyAttributesOffset + 1
	legacyKeyLenOffsetV0    = legacyAttributesOffset + 1            // 18
	legacyKeyLenOffsetV1    = legacyTimestampOffset + 8             // 26
	legacyCRCStart          = legacyMagicOffset                     // 16
	legacyCompressionMask   = 0x07                                  // attribute bits 0-2
	legacyTimestampTypeBit  = 0x08                                  // attribute bit 3, magic 1 only
	legacyMessageOverheadV0 = 4 + 1 + 1 + 4 + 4                     // 14: crc, magic, attrs, keyLen, valueLen
	legacyMessageOverheadV1 = legacyMessageOverheadV0 + 8           // 22: plus the timestamp
	legacyMaxCompression    = CompressionLZ4                        // zstd needs magic 2
	legacyPeekSize          = legacyMagicOffset + 1                 // bytes needed to tell the format
	LegacyMinSize           = LogOverhead + legacyMessageOverheadV0 // 26: the smallest entry
)

// Message format versions (the magic byte).
const (
	MagicV0 = 0 // Kafka 0.8-0.9 messages: no timestamp, absolute inner offsets
	MagicV1 = 1 // Kafka 0.10 messages: a timestamp, relative inner offsets
)

// ieee is the table of CRC-32 (IEEE), the checksum of legacy messages.
var ieee = crc32.MakeTable(crc32.IEEE)

// PeekMagic returns the magic byte of the entry at the start of b (a v2
// batch and a legacy message both hold it at byte 16); ok is false when b
// is too short to hold it.
func PeekMagic(b []byte) (magic int8, ok bool) {
	if len(b) < legacyPeekSize {
		return 0, false
	}
	return int8(b[legacyMagicOffset]), true
}

// IsLegacyMagic reports whether m is a legacy message format version.
func IsLegacyMagic(m int8) bool { return m == MagicV0 || m == MagicV1 }

// frameEntry frames the first entry of a record set as stored on disk or
// sent in a fetch response: a RecordBatch v2 or a legacy message. It
// returns the entry's total size, its magic and the offset after it (a v2
// batch's NextOffset; a legacy entry's offset + 1, the offset of a
// compressed wrapper being that of its last inner message). It checks
// framing only (no CRC); a b shorter than the entry wraps ErrTruncated.
func frameEntry(b []byte) (size int, magic int8, next int64, err error) {
	m, ok := PeekMagic(b)
	if !ok {
		return 0, 0, 0, corruptTruncated(0, "batchLength", "have %d bytes, need %d to read the magic", len(b), legacyPeekSize)
	}
	if IsLegacyMagic(m) {
		e, _, err := ParseLegacy(b)
		if err != nil {
			return 0, m, 0, err
		}
		return len(e), m, e.Offset() + 1, nil
	}
	bt, _, err := Parse(b)
	if err != nil {
		return 0, m, 0, err
	}
	return len(bt), m, bt.NextOffset(), nil
}

// Legacy is a view over one legacy message set entry (magic 0 or 1): the
// 8-byte offset, the 4-byte message size and the message. A compressed
// entry (a wrapper) holds a nested message set, compressed, as its value;
// the wrapper's offset is the offset of its last inner message. Inner
// offsets are absolute under magic 0 and relative under magic 1 (the first
// is 0, and the wrapper's offset minus the last one is the base; a wrapper
// offset of 0, written by some old clients, means a base of 0).
//
// Accessors read fields in place and panic on a view shorter than
// LegacyMinSize, which ParseLegacy rules out.
type Legacy []byte

// ParseLegacy frames the first entry of b as a legacy message: it checks
// that the log overhead and the magic are present, that the magic is 0 or
// 1, that the message is at least as long as its fixed fields (14 bytes
// under magic 0, 22 under magic 1) and that it fits in b. It returns the
// entry and the bytes after it. A b shorter than the entry gives an error
// wrapping ErrTruncated. It checks neither the CRC nor the key and value.
func ParseLegacy(b []byte) (Legacy, []byte, error) {
	m, ok := PeekMagic(b)
	if !ok {
		return nil, b, corruptTruncated(0, "messageSize", "have %d bytes, need %d to read the magic", len(b), legacyPeekSize)
	}
	if !IsLegacyMagic(m) {
		return nil, b, &base.CorruptionError{Pos: legacyMagicOffset, Field: "magic",
			Err: fmt.Errorf("%w: magic %d is not a legacy message", ErrUnsupportedMagic, m)}
	}
	n := int64(int32(binary.BigEndian.Uint32(b[legacySizeOffset:])))
	if min := legacyMessageOverhead(m); n < int64(min) {
		return nil, b, base.CorruptionErrorf("", legacySizeOffset, "messageSize",
			"message of %d bytes is shorter than the %d bytes of a magic %d message", n, min, m)
	}
	size := n + LogOverhead
	if int64(len(b)) < size {
		return nil, b, corruptTruncated(0, "messageSize", "entry of %d bytes, only %d present", size, len(b))
	}
	return Legacy(b[:size:size]), b[size:], nil
}

// legacyMessageOverhead is the size of a message's fixed fields.
func legacyMessageOverhead(magic int8) int {
	if magic == MagicV0 {
		return legacyMessageOverheadV0
	}
	return legacyMessageOverheadV1
}

// Size returns the entry's total size: messageSize + LogOverhead.
func (e Legacy) Size() int { return int(e.messageSize()) + LogOverhead }

// Offset returns the entry's offset: the message's own, or for a
// compressed wrapper the offset of its last inner message.
func (e Legacy) Offset() int64 { return int64(binary.BigEndian.Uint64(e[legacyOffsetOffset:])) }

// messageSize returns the size of the message after the size field.
func (e Legacy) messageSize() int32 { return int32(binary.BigEndian.Uint32(e[legacySizeOffset:])) }

// CRC returns the stored CRC-32 (IEEE) of bytes [16, end).
func (e Legacy) CRC() uint32 { return binary.BigEndian.Uint32(e[legacyCRCOffset:]) }

// ComputeCRC returns the CRC-32 (IEEE) of bytes [16, end) as they are now.
func (e Legacy) ComputeCRC() uint32 { return crc32.Checksum(e[legacyCRCStart:], ieee) }

// Magic returns the message format version, 0 or 1.
func (e Legacy) Magic() int8 { return int8(e[legacyMagicOffset]) }

// Attributes returns the message's attribute byte: bits 0-2 the codec,
// bit 3 (magic 1) LogAppendTime.
func (e Legacy) Attributes() int8 { return int8(e[legacyAttributesOffset]) }

// Compression returns the codec of a wrapper's value (CompressionNone for
// a plain message).
func (e Legacy) Compression() Compression {
	return Compression(e[legacyAttributesOffset] & legacyCompressionMask)
}

// LogAppendTime reports whether the timestamp is the broker's append time
// (magic 1 only); inner messages of such a wrapper take its timestamp.
func (e Legacy) LogAppendTime() bool {
	return e.Magic() == MagicV1 && e[legacyAttributesOffset]&legacyTimestampTypeBit != 0
}

// Timestamp returns the message's timestamp in milliseconds (for a wrapper
// the largest of its inner messages', or the append time), or NoTimestamp
// (-1) under magic 0, which has none: Kafka's time lookups treat it so.
func (e Legacy) Timestamp() int64 {
	if e.Magic() == MagicV0 {
		return NoTimestamp
	}
	return int64(binary.BigEndian.Uint64(e[legacyTimestampOffset:]))
}

// keyLenOffset returns where the key length is.
func (e Legacy) keyLenOffset() int {
	if e.Magic() == MagicV0 {
		return legacyKeyLenOffsetV0
	}
	return legacyKeyLenOffsetV1
}

// keyValue returns the message's key and value (nil for null), which alias
// e. err wraps ErrCorrupt when the lengths do not frame the rest of the
// message exactly.
func (e Legacy) keyValue() (key, value []byte, err error) {
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
		return nil, nil, base.CorruptionErrorf("", int64(p), "value", "%d bytes after the value", len(e)-p)
	}
	return key, value, nil
}

// bytesAt reads an int32-length-prefixed byte string at p (-1 = null).
func (e Legacy) bytesAt(p int, field string) ([]byte, int, error) {
	if len(e)-p < 4 {
		return nil, p, base.CorruptionErrorf("", int64(p), field, "%d bytes left, the length needs 4", len(e)-p)
	}
	n := int64(int32(binary.BigEndian.Uint32(e[p:])))
	p += 4
	switch {
	case n == -1:
		return nil, p, nil
	case n < 0 || n > int64(len(e)-p):
		return nil, p, base.CorruptionErrorf("", int64(p-4), field, "length %d with %d bytes left", n, len(e)-p)
	}
	return e[p : p+int(n) : p+int(n)], p + int(n), nil
}

// ValidateHeader checks what Kafka's log recovery checks of a legacy
// entry: framing (as ParseLegacy, and the size matching len(e)) and the
// CRC-32 (IEEE). It neither decodes the key and value nor decompresses:
// an entry whose CRC matches is byte for byte what its writer wrote.
func (e Legacy) ValidateHeader() error {
	if len(e) < legacyPeekSize {
		return corruptTruncated(0, "messageSize", "have %d bytes, need %d", len(e), legacyPeekSize)
	}
	f, _, err := ParseLegacy(e)
	if err != nil {
		return err
	}
	if len(f) != len(e) {
		return base.CorruptionErrorf("", legacySizeOffset, "messageSize",
			"size %d does not match the %d bytes of the entry", e.messageSize(), len(e))
	}
	if stored, got := e.CRC(), e.ComputeCRC(); stored != got {
		return base.CorruptionErrorf("", legacyCRCOffset, "crc", "stored %#08x, computed %#08x (CRC-32 IEEE)", stored, got)
	}
	return nil
}

// Validate checks the entry as a consumer decodes it: what ValidateHeader
// checks, a known codec (none, gzip, snappy, lz4: zstd needs magic 2),
// the key and value framing and, for a compressed wrapper, its nested
// message set (decompressed under d's limit; nil uses a default Decoder):
// at least one inner message, each framing, matching its CRC-32, having
// the wrapper's magic and no codec of its own, offsets strictly
// increasing and ending at the wrapper's offset (magic 1: relative,
// starting at 0 or above).
func (e Legacy) Validate(d *Decoder) error {
	if err := e.ValidateHeader(); err != nil {
		return err
	}
	if c := e.Compression(); c > legacyMaxCompression {
		return base.CorruptionErrorf("", legacyAttributesOffset, "attributes", "codec %d in a magic %d message", c, e.Magic())
	}
	if d == nil {
		d = new(Decoder)
	}
	_, err := d.AppendLegacyRecords(nil, e, true)
	return err
}

// LegacyBaseOffset returns the first offset e covers: its own offset for
// a plain message, the first inner message's offset for a compressed
// wrapper (which means decompressing it into d's buffer).
func (d *Decoder) LegacyBaseOffset(e Legacy) (int64, error) {
	if e.Compression() == CompressionNone {
		return e.Offset(), nil
	}
	recs, err := d.AppendLegacyRecords(d.legacy[:0], e, false)
	d.legacy = recs[:0]
	if err != nil {
		return 0, err
	}
	return recs[0].Offset, nil
}

// AppendLegacyRecords appends the records of e to dst, in offset order:
// e itself for a plain message, its inner messages for a compressed
// wrapper (decompressed into d's buffer, under d's limit). Each Record
// has its absolute offset, its timestamp (NoTimestamp under magic 0; the
// wrapper's under LogAppendTime), key and value (aliasing e or d's buffer,
// valid until d's next use) and attribute byte; Headers is nil. With
// check, every inner message's CRC-32 and magic are checked too (Validate).
func (d *Decoder) AppendLegacyRecords(dst []Record, e Legacy, check bool) ([]Record, error) {
	if e.Compression() == CompressionNone {
		k, v, err := e.keyValue()
		if err != nil {
			return dst, err
		}
		return append(dst, Record{Offset: e.Offset(), Timestamp: e.Timestamp(), Key: k, Value: v, Attributes: e.Attributes()}), nil
	}
	c := e.Compression()
	if c > legacyMaxCompression {
		return dst, base.CorruptionErrorf("", legacyAttributesOffset, "attributes", "codec %d in a magic %d message", c, e.Magic())
	}
	_, value, err := e.keyValue()
	if err != nil {
		return dst, err
	}
	valuePos := int64(len(e) - len(value))
	if value == nil {
		return dst, base.CorruptionErrorf("", valuePos, "value", "compressed wrapper with a null value")
	}
	out, err := decompress(d.buf[:0], c, value, d.limit(len(value)))
	d.buf = out[:0]
	if err != nil {
		return dst, base.CorruptionErrorf("", valuePos, "value", "%s wrapper: %v", c, err)
	}
	first := len(dst)
	for p := 0; p < len(out); {
		in, _, err := ParseLegacy(out[p:])
		if err != nil {
			return dst, base.CorruptionErrorf("", valuePos, fmt.Sprintf("inner[%d]", len(dst)-first), "at byte %d of the decompressed value: %v", p, err)
		}
		field := fmt.Sprintf("inner[%d]", len(dst)-first)
		if check {
			if err := in.ValidateHeader(); err != nil {
				return dst, base.CorruptionErrorf("", valuePos, field, "%v", err)
			}
			if in.Magic() != e.Magic() {
				return dst, base.CorruptionErrorf("", valuePos, field, "magic %d in a magic %d wrapper", in.Magic(), e.Magic())
			}
		}
		if in.Compression() != CompressionNone {
			return dst, base.CorruptionErrorf("", valuePos, field, "inner message compressed with %s", in.Compression())
		}
		k, v, err := in.keyValue()
		if err != nil {
			return dst, base.CorruptionErrorf("", valuePos, field, "%v", err)
		}
		ts := in.Timestamp()
		if e.LogAppendTime() {
			ts = e.Timestamp()
		}
		dst = append(dst, Record{Offset: in.Offset(), Timestamp: ts, Key: k, Value: v, Attributes: in.Attributes()})
		p += len(in)
	}
	inner := dst[first:]
	if len(inner) == 0 {
		return dst, base.CorruptionErrorf("", valuePos, "value", "compressed wrapper holds no message")
	}
	wrapper := e.Offset()
	if e.Magic() == MagicV1 {
		// Relative inner offsets: the wrapper's offset is the last one's.
		baseOff := int64(0)
		if wrapper != 0 {
			lastRel := inner[len(inner)-1].Offset
			if lastRel < 0 || lastRel > wrapper {
				return dst, base.CorruptionErrorf("", legacyOffsetOffset, "offset",
					"wrapper offset %d below its last inner relative offset %d", wrapper, lastRel)
			}
			baseOff = wrapper - lastRel
		}
		for i := range inner {
			inner[i].Offset += baseOff
		}
	}
	prev := int64(-1)
	for i, r := range inner {
		if r.Offset <= prev || r.Offset < 0 {
			return dst, base.CorruptionErrorf("", valuePos, fmt.Sprintf("inner[%d]", i), "offset %d after %d", r.Offset, prev)
		}
		prev = r.Offset
	}
	if check && prev != wrapper && wrapper != 0 {
		return dst, base.CorruptionErrorf("", legacyOffsetOffset, "offset", "wrapper offset %d, its last inner message has %d", wrapper, prev)
	}
	return dst, nil
}
