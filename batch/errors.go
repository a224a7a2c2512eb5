package batch

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/base"
)

// Errors returned by Parse and Validate. Every one of them wraps ErrCorrupt,
// so errors.Is(err, ErrCorrupt) catches them all; the concrete error is a
// *base.CorruptionError that names the field and its byte position.
var (
	// ErrCorrupt marks bytes that are not a well-formed RecordBatch v2: bad
	// framing, CRC, varints, lengths or compressed payload. It is the
	// module's single corruption marker. Kafka error code: CORRUPT_MESSAGE.
	ErrCorrupt = base.ErrCorrupt

	// ErrTruncated marks a buffer that ends inside a batch: a partial batch
	// at the end of a fetch or of a file torn by a crash. It wraps
	// base.ErrTornTail.
	ErrTruncated = fmt.Errorf("%w: truncated batch", base.ErrTornTail)

	// ErrUnsupportedMagic marks a batch whose magic byte is not 2: a legacy
	// MessageSet (magic 0 or 1) or garbage. Kafka error code:
	// UNSUPPORTED_VERSION for produce requests, CORRUPT_MESSAGE on disk.
	ErrUnsupportedMagic = fmt.Errorf("%w: unsupported magic", base.ErrCorrupt)
)

// IsTruncated reports whether err says the input ended inside a batch.
func IsTruncated(err error) bool { return errors.Is(err, ErrTruncated) }
