package compaction

import (
	"errors"
)

// Errors returned by the policies and the Runner. Each is errors.Is-able
// through the wrapping that adds the partition's directory. None of them
// marks corruption: damaged segment files give errors that wrap
// batch.ErrCorrupt from the layers below; the partition carrying out a
// plan returns log's errors (log.ErrSegmentsChanged,
// log.ErrCleaningInProgress, log.ErrSwapIncomplete). A broker would
// answer KAFKA_STORAGE_ERROR (56) for any of them; they are never
// returned to producers or consumers.
var (
	// ErrInvalidConfig is returned by the constructors (NewRetention,
	// NewCompactor, Policies, NewRunner, NewDirRunner) for a setting out of range
	// or an unknown cleanup.policy.
	ErrInvalidConfig = errors.New("partlog/compaction: invalid config")
	// ErrMapTooSmall is returned by a compaction round when the offset map
	// cannot hold the keys of even one batch of the dirty section: raise
	// Config.OffsetMapBytes (Kafka fails the same way).
	ErrMapTooSmall = errors.New("partlog/compaction: offset map too small for one batch")
	// ErrPartitionFailed is returned by the Runner for a partition that
	// failed before and is skipped until Runner.Reset clears it.
	ErrPartitionFailed = errors.New("partlog/compaction: partition marked failed")
)
