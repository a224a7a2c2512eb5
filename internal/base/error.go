package base

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/invariants"
)

// ErrCorrupt is the module's single corruption marker: every framing, CRC,
// varint, length or file-format failure wraps it, so callers test for
// corruption with errors.Is(err, ErrCorrupt) whatever layer found it.
// batch.ErrCorrupt is this same value. Kafka error code: CORRUPT_MESSAGE (2).
var ErrCorrupt = errors.New("partlog: corrupt data")

// ErrTornTail marks an incomplete write at the end of a file: fewer bytes
// than a header or a batch announces, or a zeroed region. After a crash this
// is expected on the active segment and recovery truncates it; it also wraps
// ErrCorrupt, so a caller that does not care about the difference sees
// corruption.
var ErrTornTail = fmt.Errorf("%w: torn tail", ErrCorrupt)

// ErrTruncated marks a buffer that ends inside a batch or a legacy
// message: a partial entry at the end of a fetch or of a file torn by a
// crash. It wraps ErrTornTail (and so ErrCorrupt). batch.ErrTruncated is
// this same value.
var ErrTruncated = fmt.Errorf("%w: truncated batch", ErrTornTail)

// ErrUnsupportedMagic marks an entry whose magic byte is not the one the
// decoder reads: a legacy message (magic 0 or 1) where a RecordBatch v2
// was expected, or garbage. It wraps ErrCorrupt. batch.ErrUnsupportedMagic
// is this same value.
var ErrUnsupportedMagic = fmt.Errorf("%w: unsupported magic", ErrCorrupt)

// IsCorruption reports whether err marks corrupt data (including a torn
// tail).
func IsCorruption(err error) bool { return errors.Is(err, ErrCorrupt) }

// IsTornTail reports whether err marks an incomplete write at the end of a
// file rather than damage in its middle.
func IsTornTail(err error) bool { return errors.Is(err, ErrTornTail) }

// CorruptionError says where corrupt data was found. It unwraps to its Err,
// which always wraps ErrCorrupt.
type CorruptionError struct {
	// File is the file's path or base name; empty for bytes that did not
	// come from a file (a produce request, a fuzz input).
	File string
	// Pos is the byte position of the damage within File, or within the
	// buffer being decoded when File is empty. -1 when unknown.
	Pos int64
	// Field names what was wrong: "crc", "magic", "batchLength",
	// "record[3].keyLength", "index entry 17" and so on.
	Field string
	// Err is the underlying error; it wraps ErrCorrupt (or ErrTornTail).
	Err error
}

// Error implements error: "partlog: corrupt data: crc at 00000000000000000000.log:4096: ...".
func (e *CorruptionError) Error() string {
	where := ""
	switch {
	case e.File != "" && e.Pos >= 0:
		where = fmt.Sprintf(" at %s:%d", e.File, e.Pos)
	case e.File != "":
		where = " in " + e.File
	case e.Pos >= 0:
		where = fmt.Sprintf(" at byte %d", e.Pos)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s (%s%s)", e.Err, e.Field, where)
	}
	return fmt.Sprintf("%s (%s)", e.Err, where[1:])
}

// Unwrap returns the wrapped error so that errors.Is(err, ErrCorrupt) holds.
func (e *CorruptionError) Unwrap() error { return e.Err }

// CorruptionErrorf returns a *CorruptionError for file at pos, naming field,
// whose message is formatted from format and args and which wraps ErrCorrupt.
func CorruptionErrorf(file string, pos int64, field, format string, args ...any) error {
	return &CorruptionError{File: file, Pos: pos, Field: field,
		Err: fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))}
}

// TornTailErrorf is CorruptionErrorf for an incomplete write at the end of a
// file; the result wraps ErrTornTail (and so ErrCorrupt).
func TornTailErrorf(file string, pos int64, field, format string, args ...any) error {
	return &CorruptionError{File: file, Pos: pos, Field: field,
		Err: fmt.Errorf("%w: %s", ErrTornTail, fmt.Sprintf(format, args...))}
}

// WithFile returns err with its location set to file, and its position
// shifted by pos, when err is a *CorruptionError without a file; otherwise
// it wraps err with the file name. Decoders that see only a buffer report
// buffer positions; the layer that knows the file adds it here.
func WithFile(err error, file string, pos int64) error {
	if err == nil {
		return nil
	}
	var ce *CorruptionError
	if errors.As(err, &ce) && ce.File == "" {
		cp := *ce
		cp.File = file
		if cp.Pos >= 0 {
			cp.Pos += pos
		}
		return &cp
	}
	return fmt.Errorf("%s: %w", file, err)
}

// ErrAssertionFailed marks a broken internal invariant: a bug in partlog,
// never bad input.
var ErrAssertionFailed = errors.New("partlog: assertion failed")

// AssertionFailedf returns an error that wraps ErrAssertionFailed. Under
// the invariants build tag it panics instead, so that tests stop at the bug.
func AssertionFailedf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s", ErrAssertionFailed, fmt.Sprintf(format, args...))
	if invariants.Enabled {
		panic(err)
	}
	return err
}
