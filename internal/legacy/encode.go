package legacy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The writing side. partlog never appends legacy messages; compaction
// rewrites the ones a log holds, as Kafka's cleaner does: a message is
// kept or dropped whole, and a compressed wrapper from which some inner
// messages go is written again with the ones that stay.

// Message is the content of one legacy message to encode.
type Message struct {
	// Offset is the entry's offset: the message's own, for a wrapper its
	// last inner message's; for an inner message of a magic 1 wrapper,
	// its offset relative to the wrapper's first.
	Offset int64
	// Magic is MagicV0 or MagicV1.
	Magic int8
	// Attributes is the attribute byte: bits 0-2 the codec of a
	// wrapper's value, bit 3 (magic 1) LogAppendTime.
	Attributes int8
	// Timestamp is the message's timestamp in milliseconds; magic 0
	// messages have none and ignore it.
	Timestamp int64
	// Key is the message's key, nil for null (a wrapper's key is null).
	Key []byte
	// Value is the message's value, nil for null (a tombstone). A
	// wrapper's value is its compressed message set.
	Value []byte
}

// ErrTooLarge is returned for a message whose size does not fit the
// entry's 32-bit size field.
var ErrTooLarge = errors.New("partlog/legacy: message too large")

// AppendMessage appends m as one entry to dst: offset, messageSize, the
// CRC-32 (IEEE) of the message, the fixed fields of m's magic, the key and
// the value. An error (a magic that is not 0 or 1, or ErrTooLarge)
// returns dst as it was.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	return appendMessage(dst, m, m.Value == nil, func(b []byte) ([]byte, error) { return append(b, m.Value...), nil })
}

// AppendMessageFunc is AppendMessage with the value appended by
// appendValue instead of taken from m.Value: a wrapper's value compressed
// straight into place. appendValue gets dst extended with the fields
// before the value and returns it extended with the value, which is never
// null. An error from appendValue is returned as it is, with dst as it
// was.
func AppendMessageFunc(dst []byte, m Message, appendValue func([]byte) ([]byte, error)) ([]byte, error) {
	return appendMessage(dst, m, false, appendValue)
}

// appendMessage is AppendMessageFunc; null writes a null value (length -1)
// whatever appendValue appends.
func appendMessage(dst []byte, m Message, null bool, appendValue func([]byte) ([]byte, error)) ([]byte, error) {
	if !IsMagic(m.Magic) {
		return dst, fmt.Errorf("partlog/legacy: magic %d is not a legacy message", m.Magic)
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Offset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // messageSize, set below
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, set below
	dst = append(dst, byte(m.Magic), byte(m.Attributes))
	if m.Magic == MagicV1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(m.Timestamp))
	}
	dst = appendBytes(dst, m.Key)
	lenAt := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // valueLength: null unless a value follows
	if !null {
		valueAt := len(dst)
		var err error
		if dst, err = appendValue(dst); err != nil {
			return dst[:start], err
		}
		n := len(dst) - valueAt
		if n > math.MaxInt32 {
			return dst[:start], fmt.Errorf("%w: a value of %d bytes", ErrTooLarge, n)
		}
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(n))
	}
	size := len(dst) - start - LogOverhead
	if size > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	e := Entry(dst[start:])
	binary.BigEndian.PutUint32(e[SizeOffset:], uint32(size))
	binary.BigEndian.PutUint32(e[CRCOffset:], e.ComputeCRC())
	return dst, nil
}

// appendBytes appends b with its int32 length, -1 for nil.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.BigEndian.AppendUint32(dst, math.MaxUint32)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// SetOffset overwrites the entry's offset. The offset lies outside what
// the CRC-32 covers, so the entry stays valid: rewriting a wrapper moves
// inner messages this way.
func (e Entry) SetOffset(off int64) { binary.BigEndian.PutUint64(e[OffsetOffset:], uint64(off)) }
