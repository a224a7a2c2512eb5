package batch

import (
	"errors"

	"github.com/partlog/partlog/internal/base"
)

// Errors returned by Parse and Validate. Every one of them wraps ErrCorrupt,
// so errors.Is(err, ErrCorrupt) catches them all; the concrete error is a
// *CorruptionError that names the field and its byte position.
var (
	// ErrCorrupt marks bytes that are not a well-formed RecordBatch v2: bad
	// framing, CRC, varints, lengths or compressed payload. It is the
	// module's single corruption marker. Kafka error code: CORRUPT_MESSAGE.
	ErrCorrupt = base.ErrCorrupt

	// ErrTruncated marks a buffer that ends inside a batch: a partial batch
	// at the end of a fetch or of a file torn by a crash. It wraps
	// ErrCorrupt. Kafka error code:
	// CORRUPT_MESSAGE (2) in a request; on disk, recovery truncates it.
	ErrTruncated = base.ErrTruncated

	// ErrUnsupportedMagic marks a batch whose magic byte is not 2: a legacy
	// MessageSet (magic 0 or 1) or garbage. Kafka error code:
	// INVALID_RECORD (87) for a produce request (Kafka accepts only magic 2
	// batches in produce requests v3 and later), CORRUPT_MESSAGE (2) on
	// disk.
	ErrUnsupportedMagic = base.ErrUnsupportedMagic
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
type CorruptionError = base.CorruptionError

// isTruncated reports whether err says the input ended inside a batch.
func isTruncated(err error) bool { return errors.Is(err, ErrTruncated) }
