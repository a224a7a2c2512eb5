package compaction

import (
	"context"
	"fmt"

	plog "github.com/partlog/partlog/log"
)

// Policy is one cleanup policy applied to a partition. Retention and
// Compactor are the two Kafka has; a user's own policy implements
// log.Cleaner or log.RetentionPolicy and wraps it the same way. Apply
// leaves the partition readable and consistent whether it succeeds, fails
// or is cancelled (ctx): the partition does the file work.
type Policy interface {
	// Name identifies the policy in logs and progress reports.
	Name() string
	// Apply runs one round of the policy on l.
	Apply(ctx context.Context, p Partition) (Result, error)
}

// Result reports what one round of a policy did.
type Result struct {
	// SegmentsDeleted and BytesDeleted count the segments retention
	// deleted (or compaction replaced) and their .log sizes.
	SegmentsDeleted int
	BytesDeleted    int64
	// Compacted is set when a compaction round rewrote segments.
	Compacted bool
	// SegmentsWritten and BytesWritten count the segments compaction
	// wrote and their sizes; BytesRead the bytes it read (map building
	// and cleaning).
	SegmentsWritten int
	BytesWritten    int64
	BytesRead       int64
	// RecordsRemoved counts the records compaction dropped;
	// TombstonesRemoved those of them that were tombstones.
	RecordsRemoved    int64
	TombstonesRemoved int64
	// CleanedTo is the first dirty offset after the round (the cleaner
	// checkpoint), -1 when compaction did not run or when a truncation
	// during the round left the checkpoint TruncateTo clamped.
	CleanedTo int64
}

// add merges o into r.
func (r *Result) add(o Result) {
	r.SegmentsDeleted += o.SegmentsDeleted
	r.BytesDeleted += o.BytesDeleted
	r.Compacted = r.Compacted || o.Compacted
	r.SegmentsWritten += o.SegmentsWritten
	r.BytesWritten += o.BytesWritten
	r.BytesRead += o.BytesRead
	r.RecordsRemoved += o.RecordsRemoved
	r.TombstonesRemoved += o.TombstonesRemoved
	if o.CleanedTo >= 0 {
		r.CleanedTo = o.CleanedTo
	}
}

// Policies returns the policies cfg.CleanupPolicy names, in the order they
// run: retention first (less to compact), then compaction, as Kafka's
// cleanup.policy=compact,delete does both. Under compact alone a
// Retention with its time and size rules off still comes first: Kafka
// deletes the segments wholly below the log start offset of a compacted
// log too (UnifiedLog.deleteOldSegments applies that rule whatever the
// policy), which DeleteRecordsBefore leaves when it moves the log start
// to the end of the active segment.
func Policies(cfg Config) ([]Policy, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	del, comp, _ := parsePolicy(cfg.CleanupPolicy)
	rcfg := cfg
	if !del {
		rcfg.Retention, rcfg.RetentionBytes = -1, -1 // the log start rule alone
	}
	r, err := NewRetention(rcfg)
	if err != nil {
		return nil, err
	}
	ps := []Policy{r}
	if comp {
		c, err := NewCompactor(cfg)
		if err != nil {
			return nil, err
		}
		ps = append(ps, c)
	}
	return ps, nil
}

// fromClean converts what the partition reports of a round.
func fromClean(r plog.CleanResult) Result {
	return Result{SegmentsDeleted: r.SegmentsDeleted, BytesDeleted: r.BytesDeleted,
		SegmentsWritten: r.SegmentsWritten, BytesWritten: r.BytesWritten, BytesRead: r.BytesRead,
		RecordsRemoved: r.RecordsRemoved, CleanedTo: r.CleanedTo}
}

// wrapDir prefixes err with the operation and the partition directory.
func wrapDir(op string, p Partition, err error) error {
	return fmt.Errorf("partlog/compaction: %s %s: %w", op, p.Dir(), err)
}
