package batch

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/corrupt"
)

// Errors returned by Parse and Validate. Every one of them wraps ErrCorrupt,
// so errors.Is(err, ErrCorrupt) catches them all; the concrete error is a
// *CorruptionError that names the field and its byte position.
var (
	// ErrCorrupt marks bytes that are not a well-formed RecordBatch v2: bad
	// framing, CRC, varints, lengths or compressed payload. It is the
	// module's single corruption marker: every corruption error of
	// partlog's packages wraps it. Kafka error code: CORRUPT_MESSAGE.
	ErrCorrupt = corrupt.ErrCorrupt

	// ErrTruncated marks a buffer that ends inside a batch: a partial batch
	// at the end of a fetch or of a file torn by a crash. It wraps
	// ErrCorrupt. Kafka error code: CORRUPT_MESSAGE (2) in a request; on
	// disk, recovery truncates it.
	ErrTruncated = corrupt.ErrTruncated

	// ErrUnsupportedMagic marks a batch whose magic byte is not 2: a legacy
	// MessageSet (magic 0 or 1) or garbage. Kafka error code:
	// INVALID_RECORD (87) for a produce request (Kafka accepts only magic 2
	// batches in produce requests v3 and later), CORRUPT_MESSAGE (2) on
	// disk.
	ErrUnsupportedMagic = corrupt.ErrUnsupportedMagic
)

// CorruptionError says where corrupt data was found: the file (empty for
// bytes that did not come from a file), the byte position and the field.
// Every corruption error of partlog's packages (batch, index, segment, log,
// compaction) is one, possibly wrapped, and unwraps to an error wrapping
// ErrCorrupt; reach its fields with errors.As:
//
//	var ce *batch.CorruptionError
//	if errors.As(err, &ce) {
//		fmt.Println(ce.File, ce.Pos, ce.Field)
//	}
type CorruptionError struct {
	// File is the file's path or base name; empty for bytes that did not
	// come from a file (a produce request, a fuzz input).
	File string
	// Pos is the byte position of the damage within File, or within the
	// buffer being decoded when File is empty. -1 when unknown.
	Pos int64
	// Field names what was wrong: "crc", "magic", "batchLength",
	// "record[3].keyLength", "index entry 17" and so on; empty when the
	// whole file is at fault (a checkpoint file too large to read).
	Field string
	// Err is the underlying error; it wraps ErrCorrupt (and ErrTruncated
	// or ErrUnsupportedMagic where they apply).
	Err error
}

// Error implements error: "partlog: corrupt data: ... (crc at
// 00000000000000000000.log:4096)".
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
	if where == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s (%s)", e.Err, where[1:])
}

// Unwrap returns Err, so that errors.Is(err, ErrCorrupt) holds.
func (e *CorruptionError) Unwrap() error { return e.Err }

// corruptf returns a *CorruptionError at pos of the buffer being decoded,
// naming field, whose message is formatted from format and args and which
// wraps ErrCorrupt.
func corruptf(pos int64, field, format string, args ...any) error {
	return &CorruptionError{Pos: pos, Field: field, Err: fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))}
}

// located returns err as a *CorruptionError when it holds the position
// error of internal/legacy (a *corrupt.Error) and no *CorruptionError,
// with the same position, field and Err; any other err as it is. The
// exported functions of legacy.go return every error through it.
func located(err error) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return err
	}
	var e *corrupt.Error
	if errors.As(err, &e) {
		return &CorruptionError{Pos: e.Pos, Field: e.Field, Err: e.Err}
	}
	return err
}

// isTruncated reports whether err says the input ended inside a batch.
func isTruncated(err error) bool { return errors.Is(err, ErrTruncated) }
