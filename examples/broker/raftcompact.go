package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/partlog/partlog/compaction"
)

// Key compaction of replicated partitions (-cleanup-policy compact, or
// compact,delete): raftlog's Replica.Compact runs a compaction round on a
// replica's own committed log, below a raft snapshot point it moves up to
// where the round cleans (see log/raftlog/compact.go). Every replica
// compacts the same committed bytes with the same rules, so the committed
// logs keep the same latest value, at the same offset, for every key.

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

// compactKeys runs one key compaction round on the replica's partition
// (on its raft loop, so the commit index and the raft storage stay put).
func (r *replica) compactKeys(ctx context.Context) {
	kc := r.c.compactor
	if isInternalTopic(r.topic) {
		kc = r.c.internalCompactor // compacted whatever -cleanup-policy says, as Kafka's
	}
	if kc == nil {
		return
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	res, err := r.rr.Compact(ctx, kc.c)
	if err != nil {
		r.log.Error("key compaction", "err", err)
		return
	}
	if res.SegmentsDeleted > 0 {
		r.log.Info("key compaction", "recordsRemoved", res.RecordsRemoved, "cleanedTo", res.CleanedTo)
	}
}
