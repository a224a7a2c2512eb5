package base

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/corrupt"
	"github.com/partlog/partlog/internal/invariants"
)

// The corruption markers (see internal/corrupt, where they are declared):
// batch.ErrCorrupt, batch.ErrTruncated and batch.ErrUnsupportedMagic are
// these same values.
var (
	// ErrCorrupt is the module's single corruption marker: every framing,
	// CRC, varint, length or file-format failure wraps it. Kafka error
	// code: CORRUPT_MESSAGE (2).
	ErrCorrupt = corrupt.ErrCorrupt
	// ErrTornTail marks an incomplete write at the end of a file, which
	// recovery truncates after a crash; it wraps ErrCorrupt.
	ErrTornTail = corrupt.ErrTornTail
	// ErrTruncated marks a buffer that ends inside a batch or a legacy
	// message; it wraps ErrTornTail.
	ErrTruncated = corrupt.ErrTruncated
	// ErrUnsupportedMagic marks an entry whose magic byte is not the one
	// the decoder reads; it wraps ErrCorrupt.
	ErrUnsupportedMagic = corrupt.ErrUnsupportedMagic
)

// IsCorruption reports whether err marks corrupt data (including a torn
// tail).
func IsCorruption(err error) bool { return errors.Is(err, ErrCorrupt) }

// IsTornTail reports whether err marks an incomplete write at the end of a
// file rather than damage in its middle.
func IsTornTail(err error) bool { return errors.Is(err, ErrTornTail) }

// CorruptionError is batch.CorruptionError: where corrupt data was found
// (file, byte position, field). It unwraps to its Err, which always wraps
// ErrCorrupt.
type CorruptionError = batch.CorruptionError

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
// shifted by pos, when err is a *CorruptionError without a file or the
// position error of internal/legacy (a *corrupt.Error, which becomes a
// *CorruptionError here); otherwise it wraps err with the file name.
// Decoders that see only a buffer report buffer positions; the layer that
// knows the file adds it here.
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
	var le *corrupt.Error
	if errors.As(err, &le) {
		return &CorruptionError{File: file, Pos: le.Pos + pos, Field: le.Field, Err: le.Err}
	}
	return fmt.Errorf("%s: %w", file, err)
}

// ErrAssertionFailed marks a broken internal invariant: a bug in partlog,
// never bad input (invariants.ErrAssertionFailed).
var ErrAssertionFailed = invariants.ErrAssertionFailed

// AssertionFailedf returns an error that wraps ErrAssertionFailed. Under
// the invariants build tag it panics instead, so that tests stop at the
// bug (invariants.AssertionFailedf).
func AssertionFailedf(format string, args ...any) error {
	return invariants.AssertionFailedf(format, args...)
}
