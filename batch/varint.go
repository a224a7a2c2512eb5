package batch

import (
	"fmt"
	"math"
)

// Record fields are zig-zag varints (32-bit values, at most 5 bytes) and
// varlongs (64-bit values, at most 10 bytes), the encoding of protobuf's
// sint32/sint64 and of encoding/binary's AppendVarint.
const (
	maxVarintLen  = 5
	maxVarlongLen = 10
)

// cursor walks a record region with a sticky failure: after the first bad
// field every read returns a zero value and the failure is kept, so a
// caller decodes a whole record and checks once (the franz-go kbin.Reader
// and archive/zip readBuf pattern). Failing never allocates; the error is
// built only when a caller asks for it.
type cursor struct {
	b   []byte // the bytes being read; narrowed to a record's end while inside it
	pos int    // next byte to read, an index into b

	failed  bool
	why     failure // what was wrong, set with failed
	failPos int     // index into b of the bad field
	val     int64   // the offending value, for the message
	field   string  // the record field, e.g. "keyLength"
	rec     int     // record index of the failure
	hdr     int     // header index of the failure, -1 outside headers
	curRec  int     // record being decoded
	curHdr  int     // header being decoded, -1 outside headers
}

// failure enumerates the ways a record field can be malformed.
type failure uint8

const (
	failNone failure = iota
	failTruncated
	failVarintTooLong
	failVarintOverflow
	failNegativeLength
	failLengthTooLong
	failLengthMismatch
	failDeltaOutOfRange
	failDeltaNotIncreasing
	failTooManyRecords
	failTooFewRecords
	failTrailingBytes
	failControlKey
	numFailures
)

var failureText = [...]string{
	failNone:               "no failure",
	failTruncated:          "truncated",
	failVarintTooLong:      "varint longer than its maximum encoded size",
	failVarintOverflow:     "varint overflows its type",
	failNegativeLength:     "negative length",
	failLengthTooLong:      "length exceeds the bytes that remain",
	failLengthMismatch:     "record length does not match its fields",
	failDeltaOutOfRange:    "offsetDelta outside [0, lastOffsetDelta]",
	failDeltaNotIncreasing: "offsetDelta not greater than the previous record's",
	failTooManyRecords:     "recordsCount cannot fit in the bytes that remain",
	failTooFewRecords:      "fewer records than recordsCount",
	failTrailingBytes:      "bytes after the last record",
	failControlKey:         "control record key is not a version and a type",
}

func init() {
	if len(failureText) != int(numFailures) {
		panic(fmt.Sprintf("batch: %d failure texts for %d failures", len(failureText), numFailures))
	}
}

// fail records the first failure; later ones are ignored.
func (c *cursor) fail(why failure, field string, pos int, val int64) {
	if c.failed {
		return
	}
	c.failed = true
	c.why, c.field, c.failPos, c.val = why, field, pos, val
	c.rec, c.hdr = c.curRec, c.curHdr
}

// error returns the recorded failure as a *CorruptionError, or nil.
// posBase is the position of c.b[0] in the batch. When decompressed is
// true, c.b is the decompressed record stream: the error then points at the
// start of the compressed payload and its message gives the decompressed
// byte.
func (c *cursor) error(posBase int, decompressed bool) error {
	if !c.failed {
		return nil
	}
	field := c.field
	switch {
	case c.rec < 0:
	case c.hdr >= 0:
		field = fmt.Sprintf("record[%d].header[%d].%s", c.rec, c.hdr, c.field)
	default:
		field = fmt.Sprintf("record[%d].%s", c.rec, c.field)
	}
	msg := failureText[c.why]
	switch c.why {
	case failNegativeLength, failLengthTooLong, failDeltaOutOfRange, failDeltaNotIncreasing,
		failTooManyRecords, failTooFewRecords, failTrailingBytes, failVarintOverflow:
		msg = fmt.Sprintf("%s (%d)", msg, c.val)
	}
	if decompressed {
		return corruptf(int64(posBase), field, "%s at decompressed byte %d", msg, c.failPos)
	}
	return corruptf(int64(posBase+c.failPos), field, "%s", msg)
}

// int8 reads one byte as an int8.
func (c *cursor) int8(field string) int8 {
	if c.pos >= len(c.b) {
		c.fail(failTruncated, field, c.pos, 0)
		return 0
	}
	v := int8(c.b[c.pos])
	c.pos++
	return v
}

// varint reads a zig-zag varint that must fit an int32.
func (c *cursor) varint(field string) int32 {
	if p := c.pos; p < len(c.b) && c.b[p] < 0x80 {
		c.pos = p + 1
		u := uint32(c.b[p])
		return int32(u>>1) ^ -int32(u&1)
	}
	return c.varintSlow(field)
}

func (c *cursor) varintSlow(field string) int32 {
	if c.failed {
		return 0
	}
	start := c.pos
	var x uint64
	for i := 0; i < maxVarintLen; i++ {
		if c.pos >= len(c.b) {
			c.fail(failTruncated, field, start, 0)
			return 0
		}
		b := c.b[c.pos]
		c.pos++
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if x > math.MaxUint32 {
				c.fail(failVarintOverflow, field, start, int64(x))
				return 0
			}
			u := uint32(x)
			return int32(u>>1) ^ -int32(u&1)
		}
	}
	c.fail(failVarintTooLong, field, start, 0)
	return 0
}

// varlong reads a zig-zag varlong (an int64).
func (c *cursor) varlong(field string) int64 {
	if p := c.pos; p < len(c.b) && c.b[p] < 0x80 {
		c.pos = p + 1
		u := uint64(c.b[p])
		return int64(u>>1) ^ -int64(u&1)
	}
	return c.varlongSlow(field)
}

func (c *cursor) varlongSlow(field string) int64 {
	if c.failed {
		return 0
	}
	start := c.pos
	var x uint64
	for i := 0; i < maxVarlongLen; i++ {
		if c.pos >= len(c.b) {
			c.fail(failTruncated, field, start, 0)
			return 0
		}
		b := c.b[c.pos]
		c.pos++
		if i == maxVarlongLen-1 && b > 1 {
			c.fail(failVarintOverflow, field, start, int64(b))
			return 0
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return int64(x>>1) ^ -int64(x&1)
		}
	}
	c.fail(failVarintTooLong, field, start, 0)
	return 0
}

// length reads a length varint. nullable allows a negative length (null:
// Kafka reads -1 and every other negative length so), returned as -1. A
// length longer than what remains of c.b fails.
func (c *cursor) length(field string, nullable bool) int {
	start := c.pos
	n := c.varint(field)
	if c.failed {
		return 0
	}
	if n < 0 {
		if nullable {
			return -1
		}
		c.fail(failNegativeLength, field, start, int64(n))
		return 0
	}
	if int(n) > len(c.b)-c.pos {
		c.fail(failLengthTooLong, field, start, int64(n))
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed byte string; a negative length gives nil
// when nullable.
// The result aliases c.b and has its capacity clipped, so appending to it
// never writes into the batch.
func (c *cursor) bytes(field string, nullable bool) []byte {
	n := c.length(field, nullable)
	if n < 0 || c.failed {
		return nil
	}
	p := c.pos
	c.pos = p + n
	return c.b[p : p+n : p+n]
}

// skip reads a length-prefixed byte string without returning it.
func (c *cursor) skip(field string, nullable bool) {
	if n := c.length(field, nullable); n > 0 {
		c.pos += n
	}
}

// appendVarint appends v as a zig-zag varint.
func appendVarint(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32(v<<1^(v>>31))))
}

// appendVarlong appends v as a zig-zag varlong.
func appendVarlong(dst []byte, v int64) []byte { return appendUvarint(dst, uint64(v<<1^(v>>63))) }

func appendUvarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

// putVarint writes v as a zig-zag varint at b[p], which must have room,
// and returns the position after it.
func putVarint(b []byte, p int, v int32) int { return putUvarint(b, p, uint64(uint32(v<<1^(v>>31)))) }

// putVarlong writes v as a zig-zag varlong at b[p], which must have room,
// and returns the position after it.
func putVarlong(b []byte, p int, v int64) int { return putUvarint(b, p, uint64(v<<1^(v>>63))) }

func putUvarint(b []byte, p int, x uint64) int {
	for x >= 0x80 {
		b[p] = byte(x) | 0x80
		x >>= 7
		p++
	}
	b[p] = byte(x)
	return p + 1
}

// varintSize returns the encoded size of v as a zig-zag varint.
func varintSize(v int32) int { return uvarintSize(uint64(uint32(v<<1 ^ (v >> 31)))) }

// varlongSize returns the encoded size of v as a zig-zag varlong.
func varlongSize(v int64) int { return uvarintSize(uint64(v<<1 ^ (v >> 63))) }

func uvarintSize(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
