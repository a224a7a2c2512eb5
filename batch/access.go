package batch

import "github.com/partlog/partlog/internal/batchaccess"

// The operations only the partition uses are reached through
// internal/batchaccess, not batch's API (see that package).
func init() {
	batchaccess.ValidateTimes = func(b []byte) (batchaccess.TimeRange, error) { return Batch(b).validateTimes() }
	batchaccess.ValidateBody = func(b []byte) error { _, err := Batch(b).validateBody(); return err }
	batchaccess.SetLogAppendTime = func(b []byte, ts int64) { Batch(b).setLogAppendTime(ts) }
	batchaccess.AppendEmptyBatch = func(dst, b []byte) []byte { return appendEmptyBatch(dst, Batch(b)) }
	batchaccess.FrameEntry = frameEntry
	batchaccess.DecodeRun = decodeRun
}

// timeRange is the range of a batch's record timestamps
// (batchaccess.TimeRange): what validateTimes finds.
type timeRange = batchaccess.TimeRange
