package log

import (
	"errors"
	"fmt"
)

// Errors returned by the append paths (AppendBatch, AppendAssigned). Each
// one is returned before any byte is written: the partition is unchanged and
// the next good append succeeds. Test for them with errors.Is; the returned
// error adds context (sizes, offsets, the field that was wrong).
var (
	// ErrInvalidBatch marks bytes that are not exactly one well-formed
	// RecordBatch v2 fit to append: bad framing or CRC (the error then also
	// wraps batch.ErrCorrupt, and a *base.CorruptionError naming the field),
	// a magic other than 2, trailing bytes after the batch, an empty batch,
	// or a records count that disagrees with lastOffsetDelta. Kafka error
	// code: CORRUPT_MESSAGE (2) when the CRC or framing is bad, otherwise
	// INVALID_RECORD (87); UNSUPPORTED_FOR_MESSAGE_FORMAT (43) for a legacy
	// magic.
	ErrInvalidBatch = errors.New("partlog/log: invalid batch")

	// ErrBatchTooLarge marks a batch larger than Config.MaxMessageBytes
	// (producer path) or than Config.SegmentBytes (both paths). Kafka error
	// code: MESSAGE_TOO_LARGE (10); RECORD_LIST_TOO_LARGE (18) when larger
	// than a segment.
	ErrBatchTooLarge = errors.New("partlog/log: batch too large")

	// ErrControlBatch marks a control batch (a transaction marker) given to
	// AppendBatch: producers may not write control records; coordinators
	// and followers use AppendAssigned. Kafka error code: INVALID_RECORD
	// (87).
	ErrControlBatch = errors.New("partlog/log: control batch from a producer")

	// ErrUnexpectedOffset marks an AppendAssigned record set whose first
	// base offset is not the log end offset, or whose batches do not follow
	// one another (base == previous batch's last offset + 1). Kafka raises
	// UnexpectedAppendOffsetException on a follower; it has no wire code of
	// its own (a broker answers UNKNOWN_SERVER_ERROR (-1)).
	ErrUnexpectedOffset = errors.New("partlog/log: unexpected append offset")
)

// Errors returned by reads and offset operations.
var (
	// ErrOffsetOutOfRange is returned for an offset outside
	// [LogStartOffset, LogEndOffset] by ReadFrom, outside
	// [LogStartOffset, LogEndOffset] by SetHighWatermark and TruncateTo,
	// and past the high watermark by DeleteRecordsBefore. Kafka error
	// code: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("partlog/log: offset out of range")

	// ErrInvalidTimestamp is returned by OffsetForTimestamp for a negative
	// timestamp that is not one of the sentinels LatestTimestamp,
	// EarliestTimestamp, MaxTimestamp. Kafka error code: INVALID_REQUEST
	// (42).
	ErrInvalidTimestamp = errors.New("partlog/log: invalid timestamp")
)

// Errors about the partition itself.
var (
	// ErrClosed is returned by every method of a closed Partition, by a
	// second Records.Close and by Records.WriteTo after Close. Kafka has
	// no code for it; a broker whose partition is gone answers
	// NOT_LEADER_OR_FOLLOWER (6) or KAFKA_STORAGE_ERROR (56).
	ErrClosed = errors.New("partlog/log: closed")

	// ErrFailed marks the sticky failure of a partition whose files may
	// no longer match what it acknowledged: an fsync failed (after a failed
	// fsync the kernel may have dropped the dirty pages and cleared the
	// error, so retrying cannot be trusted: "fsyncgate"), or a truncation,
	// roll or compaction swap failed halfway. Every later write returns
	// an error wrapping ErrFailed and the cause; reads keep working. Close
	// and reopen the partition: Open recovers from the files. Kafka marks
	// the log directory offline: KAFKA_STORAGE_ERROR (56).
	ErrFailed = errors.New("partlog/log: partition failed")

	// ErrInvalidConfig is returned by Open for a Config value outside what
	// Kafka accepts (or what the format can hold). Kafka error code:
	// INVALID_CONFIG (40).
	ErrInvalidConfig = errors.New("partlog/log: invalid config")

	// ErrTruncationBlocked is returned by TruncateTo and TruncateToContext
	// when readers held Records on the segment to cut for longer than
	// Config.TruncateWait (or the context ended first): the truncation
	// gave up and nothing changed; retry once the readers let go. The
	// message names how many readers still held the segment. Retriable;
	// Kafka has no code for it (a broker answers REQUEST_TIMED_OUT (7)).
	ErrTruncationBlocked = errors.New("partlog/log: truncation blocked by readers")
)

// I/O errors from the filesystem are returned wrapped with the operation
// and the partition directory; they map to Kafka's KAFKA_STORAGE_ERROR (56).
// Corruption found in files wraps base.ErrCorrupt (batch.ErrCorrupt), Kafka's
// CORRUPT_MESSAGE (2).

// failedf wraps cause in ErrFailed.
func failedf(cause error) error {
	if errors.Is(cause, ErrFailed) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrFailed, cause)
}

// invalidBatchf returns an error wrapping ErrInvalidBatch (and cause, when
// not nil, so that errors.Is(err, batch.ErrCorrupt) holds for framing and
// CRC failures).
func invalidBatchf(cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidBatch, msg, cause)
	}
	return fmt.Errorf("%w: %s", ErrInvalidBatch, msg)
}
