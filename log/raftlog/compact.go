package raftlog

import (
	"context"

	"github.com/partlog/partlog/log"
)

// Key compaction of replicated partitions. The raft log is the
// partition's batches, one per entry, with no gap; compaction removes
// records and batches. So each replica compacts its own log only below its
// raft snapshot point, which it first moves up to where the round cleans
// (Storage.moveSnapshot): raft no longer needs those entries, since they
// are applied, hence committed. A follower that lags behind the point gets
// a snapshot that carries the compacted records (Storage.Snapshot), and
// Entries answers ErrCompacted below the point. Every replica compacts the
// same committed bytes with the same rules, so the committed logs keep the
// same latest value, at the same offset, for every key.

// Cleaner is a key compaction round's log.Cleaner on a replica's
// partition, with the snapshot point moved to where the round cleans
// before anything is rewritten. Replica.Compact wraps the caller's
// cleaner (a compaction.Compactor) in one.
type Cleaner struct {
	log.Cleaner
	st *Storage
}

// Plan implements log.Cleaner: the wrapped cleaner's plan, ending at a
// segment base (the partition rewrites every segment whose base is below
// the end, whole, so a segment reaching past the snapshot point must not
// be one), with the snapshot point moved there first. When the point
// cannot move there (the end is not an applied entry's base) the round
// ends at the last segment base at or below the current point.
func (rc Cleaner) Plan(ctx context.Context, v *log.View) (int64, error) {
	end, err := rc.Cleaner.Plan(ctx, v)
	if err != nil || end <= v.LogStartOffset() {
		return end, err
	}
	limit := segmentFloor(v, end)
	if limit > rc.st.snapOffset {
		ok, err := rc.st.moveSnapshot(limit)
		if err != nil {
			return 0, err
		}
		if !ok {
			limit = segmentFloor(v, rc.st.snapOffset)
		}
	}
	return limit, nil
}

// segmentFloor returns the base of the last segment of v starting at or
// below offset (the log start when none does).
func segmentFloor(v *log.View, offset int64) int64 {
	floor := v.LogStartOffset()
	for _, s := range v.Segments() {
		if s.BaseOffset <= offset {
			floor = max(floor, s.BaseOffset)
		}
	}
	return floor
}
