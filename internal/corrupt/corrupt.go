// Package corrupt holds the corruption markers of partlog, below every
// package that reports corruption: the one marker ([ErrCorrupt]) that every
// framing, CRC, varint, length or file-format failure of the module wraps,
// its refinements ([ErrTornTail], [ErrTruncated], [ErrUnsupportedMagic]),
// and the position error ([Error]) of the code below package batch (the
// legacy message format), which has no file to name.
//
// The error type callers see is batch.CorruptionError, declared where its
// fields are documented to them; package batch and internal/base (the
// vocabulary of the layers above batch) turn an [Error] into one, and
// re-export the markers here under their own names: batch.ErrCorrupt and
// base.ErrCorrupt are ErrCorrupt.
//
// Everything here is safe for concurrent use.
package corrupt

import (
	"errors"
	"fmt"
)

// ErrCorrupt is the module's single corruption marker: every framing, CRC,
// varint, length or file-format failure wraps it, so callers test for
// corruption with errors.Is(err, batch.ErrCorrupt) whatever layer found it.
// Kafka error code: CORRUPT_MESSAGE (2).
var ErrCorrupt = errors.New("partlog: corrupt data")

// ErrTornTail marks an incomplete write at the end of a file: fewer bytes
// than a header or a batch announces, or a zeroed region. After a crash this
// is expected on the active segment and recovery truncates it; it also wraps
// ErrCorrupt, so a caller that does not care about the difference sees
// corruption.
var ErrTornTail = fmt.Errorf("%w: torn tail", ErrCorrupt)

// ErrTruncated marks a buffer that ends inside a batch or a legacy
// message: a partial entry at the end of a fetch or of a file torn by a
// crash. It wraps ErrTornTail (and so ErrCorrupt).
var ErrTruncated = fmt.Errorf("%w: truncated batch", ErrTornTail)

// ErrUnsupportedMagic marks an entry whose magic byte is not the one the
// decoder reads: a legacy message (magic 0 or 1) where a RecordBatch v2
// was expected, or garbage. It wraps ErrCorrupt.
var ErrUnsupportedMagic = fmt.Errorf("%w: unsupported magic", ErrCorrupt)

// Error is damage found by code below package batch in a buffer: the byte
// position and the field. Its Err wraps ErrCorrupt. It never reaches a
// caller of the module's packages as it is: package batch and base.WithFile
// turn it into a batch.CorruptionError with the same position, field and
// Err.
type Error struct {
	// Pos is the byte position of the damage within the buffer decoded.
	Pos int64
	// Field names what was wrong: "crc", "magic", "messageSize" and so on.
	Field string
	// Err is the underlying error; it wraps ErrCorrupt.
	Err error
}

// Error implements error: "partlog: corrupt data: ... (crc at byte 17)".
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s at byte %d)", e.Err, e.Field, e.Pos)
}

// Unwrap returns Err, so that errors.Is(err, ErrCorrupt) holds.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error at pos naming field, whose message is formatted
// from format and args and which wraps ErrCorrupt.
func Errorf(pos int64, field, format string, args ...any) error {
	return &Error{Pos: pos, Field: field, Err: fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))}
}

// Wrapf is Errorf wrapping marker (ErrTruncated, ErrUnsupportedMagic:
// ErrCorrupt or an error that wraps it) instead of ErrCorrupt.
func Wrapf(marker error, pos int64, field, format string, args ...any) error {
	return &Error{Pos: pos, Field: field, Err: fmt.Errorf("%w: %s", marker, fmt.Sprintf(format, args...))}
}
