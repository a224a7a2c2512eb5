package log

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/producer"
)

// Errors returned by the append paths (AppendBatch, AppendAssigned). Each
// one is returned before any byte is written: the partition is unchanged and
// the next good append succeeds. Test for them with errors.Is; the returned
// error adds context (sizes, offsets, the field that was wrong).
var (
	// ErrInvalidBatch marks bytes that are not exactly one well-formed
	// RecordBatch v2 fit to append: bad framing or CRC (the error then also
	// wraps batch.ErrCorrupt, and a *batch.CorruptionError naming the field),
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

	// ErrInvalidBatchTimestamp marks a producer batch whose timestamps a
	// Kafka leader refuses (LogValidator's timestamp rules): the
	// LogAppendTime attribute bit set by the producer (only the partition
	// sets it, under Config.LogAppendTime), or, on a CreateTime partition,
	// a record timestamp more than Config.MessageTimestampBeforeMax before
	// or Config.MessageTimestampAfterMax after the clock (Config.Now);
	// records without a timestamp (-1) are exempt. Kafka error code:
	// INVALID_TIMESTAMP (32).
	ErrInvalidBatchTimestamp = errors.New("partlog/log: invalid batch timestamp")

	// ErrUnexpectedOffset marks an AppendAssigned record set whose first
	// base offset is not the log end offset, or whose batches do not follow
	// one another (base == previous batch's last offset + 1). Kafka raises
	// UnexpectedAppendOffsetException on a follower; it has no wire code of
	// its own (a broker answers UNKNOWN_SERVER_ERROR (-1)).
	ErrUnexpectedOffset = errors.New("partlog/log: unexpected append offset")

	// ErrLogFull marks a batch the log cannot take because no segment is
	// left to hold it, near the end of the offsets (DESIGN law 1). A
	// segment's base offset is at most math.MaxInt64 - math.MaxInt32
	// (index.MaxBaseOffset: base + any 32-bit relative offset an index
	// holds must fit an int64), so once the log end offset passes it no
	// segment can start at the log end: the active segment is the log's
	// last. The append that takes the log end past that bound first rolls
	// to a segment starting as high as it can (at its base, or just below
	// it after an offset gap), and no roll happens after it: the last
	// segment takes every later batch whose last offset lies within
	// math.MaxInt32 of its base offset while its .log stays within
	// segment.MaxSegmentBytesLimit bytes (2 GiB - 1, what 32-bit index
	// positions allow; segment.bytes no longer applies) and its indexes
	// have room for an entry. A batch it cannot hold is refused with an
	// error wrapping ErrLogFull, before anything is written (for
	// AppendAssigned, before any batch of the record set is): the
	// partition is unchanged and stays usable (reads, appends that still
	// fit, TruncateTo, TruncateFullyAndStartAt at a lower offset). Roll
	// returns it too, and changes nothing. So a log never reaches every
	// offset up to the documented limit (a last offset of
	// math.MaxInt64 - 1): how many it reaches depends on where its last
	// segment starts and on the size of its batches. Kafka has no such
	// bound (its segments may start at any offset; its leader assigns
	// offsets past Long.MaxValue without a check, which no log reaches)
	// and no error for it; a broker answers UNKNOWN_SERVER_ERROR (-1).
	ErrLogFull = errors.New("partlog/log: log full: no segment can start past the largest segment base offset")
)

// Errors returned by reads and offset operations.
var (
	// ErrOffsetOutOfRange is returned for an offset outside
	// [LogStartOffset, LogEndOffset] by ReadFrom and SetHighWatermark,
	// for a negative offset by TruncateTo (which accepts any other: at or
	// past LogEndOffset it cuts nothing, below LogStartOffset it lowers
	// the log start and restarts the log there), for an offset outside
	// [0, math.MaxInt64 - math.MaxInt32] by TruncateFullyAndStartAt, past
	// the high watermark by DeleteRecordsBefore, and by Poll and Wait when
	// a truncation or retention moves the log under them. Kafka error
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
	// the log directory offline: KAFKA_STORAGE_ERROR (56). After a fault
	// reading a mapped file (index.ErrFault) reads fail too: the partition
	// is offline (see "Media errors" in the package documentation).
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

// Errors returned by AppendBatch for a batch with a producer id (>= 0) that
// the producer state refuses (see "Idempotent producers" in the package
// documentation). Like the errors above, each is returned before anything
// is written and consumes no offset. The error names the producer id, the
// epochs and the sequences.
var (
	// ErrOutOfOrderSequence marks a batch whose first sequence does not
	// follow the producer's last one (a gap, or a sequence from the past
	// that is not one of its last five batches), or a new epoch that does
	// not start at sequence 0. Kafka error code:
	// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = producer.ErrOutOfOrderSequence

	// ErrInvalidProducerEpoch marks a batch whose producer epoch is older
	// than the producer's current epoch: a fenced ("zombie") producer.
	// Kafka error code: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = producer.ErrInvalidProducerEpoch

	// ErrInvalidTxnState marks a non-transactional batch from a producer
	// whose transaction is open (it sent a transactional batch and no
	// marker ended it). Kafka error code: INVALID_TXN_STATE (48).
	ErrInvalidTxnState = producer.ErrInvalidTxnState
)
