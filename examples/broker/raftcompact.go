package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/partlog/partlog/compaction"
	plog "github.com/partlog/partlog/log"
)

// Key compaction of replicated partitions (-cleanup-policy compact, or
// compact,delete). The raft log is the partition's batches, one per
// entry, with no gap; compaction removes records and batches. So each
// replica compacts its own log only below its raft snapshot point, which
// it first moves up to where the round cleans (raftStorage.moveSnapshot):
// raft no longer needs those entries, since they are applied, hence
// committed. A follower that lags behind the point gets a snapshot that
// carries the compacted records (raftStorage.Snapshot), and raft's
// Entries answers ErrCompacted below the point. Every replica compacts the
// same committed bytes with the same rules, so the committed logs keep the
// same latest value, at the same offset, for every key.

// keyCompactor is the compaction policy the replicas of a node share, one
// round at a time (it holds the offset map).
type keyCompactor struct {
	mu sync.Mutex
	c  *compaction.Compactor
}

// newKeyCompactor returns the replicas' compactor for cfg's cleanup
// policy, or nil when the policy does not compact.
func newKeyCompactor(cfg config) (*keyCompactor, error) {
	policies, err := compaction.Policies(compaction.Config{CleanupPolicy: cfg.CleanupPolicy, Retention: cfg.Retention, OffsetMapBytes: cleanerMapBytes, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: cleanup policy %q: %v", errClusterFlag, cfg.CleanupPolicy, err)
	}
	for _, p := range policies {
		if c, ok := p.(*compaction.Compactor); ok {
			return &keyCompactor{c: c}, nil
		}
	}
	return nil, nil
}

// raftCleaner is the Compactor's round on one replica's partition, with
// the snapshot point moved to where the round cleans before anything is
// rewritten.
type raftCleaner struct {
	*compaction.Compactor
	st *raftStorage
}

// Plan implements log.Cleaner: the Compactor's plan, ending at a segment
// base (the partition rewrites every segment whose base is below the end,
// whole, so a segment reaching past the snapshot point must not be one),
// with the snapshot point moved there first. When the point cannot move
// there (the end is not an applied entry's base) the round ends at the
// last segment base at or below the current point. (The offset map built
// up to the Compactor's own end still finds the latest record of every
// key.)
func (rc raftCleaner) Plan(ctx context.Context, v *plog.View) (int64, error) {
	end, err := rc.Compactor.Plan(ctx, v)
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
func segmentFloor(v *plog.View, offset int64) int64 {
	floor := v.LogStartOffset()
	for _, s := range v.Segments() {
		if s.BaseOffset <= offset {
			floor = max(floor, s.BaseOffset)
		}
	}
	return floor
}

// compactKeys runs one key compaction round on the replica's partition
// (from its loop, so the commit index and the raft storage stay put).
func (r *replica) compactKeys() {
	kc := r.c.compactor
	if isInternalTopic(r.topic) {
		kc = r.c.internalCompactor // compacted whatever -cleanup-policy says, as Kafka's
	}
	if kc == nil {
		return
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	res, err := r.part.Compact(r.c.ctx, raftCleaner{Compactor: kc.c, st: r.st})
	if err != nil {
		r.log.Error("key compaction", "err", err)
		return
	}
	if res.SegmentsDeleted > 0 {
		r.log.Info("key compaction", "snapshotIndex", r.st.snapIndex, "snapshotOffset", r.st.snapOffset,
			"recordsRemoved", res.RecordsRemoved, "cleanedTo", res.CleanedTo)
	}
}
