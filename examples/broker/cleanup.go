package main

import (
	"context"
	"fmt"
	"time"

	"github.com/partlog/partlog/compaction"
	plog "github.com/partlog/partlog/log"
)

const (
	// defaultCleanupInterval is how often the cleanup policies run
	// (Kafka: log.retention.check.interval.ms is 5 minutes, the cleaner
	// backs off 15 seconds).
	defaultCleanupInterval = time.Minute
	// defaultOffsetsSegmentBytes is offsets.topic.segment.bytes: 100 MiB,
	// smaller than other topics' so the compactor gets sealed segments.
	defaultOffsetsSegmentBytes = 100 << 20
	// cleanerMapBytes is the compactor's offset map budget (Kafka's
	// default is 128 MiB; committed offsets need far less).
	cleanerMapBytes = 16 << 20
)

// cleaner applies partlog's cleanup policies (package compaction) in the
// background: key compaction to __consumer_offsets and __transaction_state,
// as Kafka configures those topics (cleanup.policy=compact), and the configured policy
// (retention by default) to every other partition, with its topic's
// configuration overrides (CreateTopics) when it has some.
type cleaner struct {
	s        *server
	interval time.Duration
	offsets  *compaction.Runner
	user     *compaction.Runner
	done     func() // config.CleanupDone
	// base is the user topics' configuration (user's); a topic with
	// configuration overrides (CreateTopics) is cleaned by the runner of
	// its configuration, made on first use, one per distinct topicConfig
	// (only run uses it).
	base     compaction.Config
	opts     compaction.RunnerOptions
	byConfig map[string]*compaction.Runner
}

// newCleaner validates the cleanup configuration and builds the two runners.
func newCleaner(s *server, cfg config) (*cleaner, error) {
	progress := func(p compaction.Progress) {
		switch {
		case p.Err != nil:
			s.log.Error("cleanup failed", "dir", p.Dir, "policy", p.Policy, "err", p.Err)
		case p.Result.SegmentsDeleted > 0 || p.Result.Compacted:
			s.log.Info("cleanup", "dir", p.Dir, "policy", p.Policy,
				"segmentsDeleted", p.Result.SegmentsDeleted, "compacted", p.Result.Compacted,
				"recordsRemoved", p.Result.RecordsRemoved, "cleanedTo", p.Result.CleanedTo)
		}
	}
	opts := compaction.RunnerOptions{Workers: 1, Progress: progress}
	offsets, err := compaction.NewRunner(compaction.Config{
		CleanupPolicy:  compaction.PolicyCompact,
		OffsetMapBytes: cleanerMapBytes,
		Logger:         s.log,
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("cleanup of %s: %w", offsetsTopic, err)
	}
	base := s.userCleanupConfig()
	user, err := compaction.NewRunner(base, opts)
	if err != nil {
		return nil, fmt.Errorf("cleanup policy %q: %w", base.CleanupPolicy, err)
	}
	interval := cfg.CleanupInterval
	if interval == 0 {
		interval = defaultCleanupInterval
	}
	return &cleaner{s: s, interval: interval, offsets: offsets, user: user, done: cfg.CleanupDone,
		base: base, opts: opts, byConfig: make(map[string]*compaction.Runner)}, nil
}

// userCleanupConfig is the cleanup configuration of user topics, from the
// broker's flags: the base of every topic's overrides.
func (s *server) userCleanupConfig() compaction.Config {
	policy := s.cleanupPolicy
	if policy == "" {
		policy = compaction.PolicyDelete
	}
	return compaction.Config{
		CleanupPolicy:  policy,
		Retention:      s.retention,
		OffsetMapBytes: cleanerMapBytes,
		Logger:         s.log,
	}
}

// runnerFor returns the runner of a topic's configuration overrides (the
// user runner for none). The overrides were checked when the topic was
// created (checkTopicConfigs); a runner that cannot be made (a hand-edited
// topicConfigsFile) is logged and the topic is left alone.
func (c *cleaner) runnerFor(topic string, tc topicConfig) *compaction.Runner {
	if len(tc) == 0 {
		return c.user
	}
	k := tc.key()
	if r, ok := c.byConfig[k]; ok {
		return r
	}
	r, err := compaction.NewRunner(tc.apply(c.base), c.opts)
	if err != nil {
		c.s.log.Error("topic not cleaned: its configuration is invalid", "topic", topic, "configs", tc, "err", err)
	}
	c.byConfig[k] = r // nil: not cleaned
	return r
}

// run applies the policies every interval until ctx is done. A negative
// interval disables cleanup.
func (c *cleaner) run(ctx context.Context) {
	if c.interval < 0 {
		return
	}
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.once(ctx)
		if c.done != nil {
			c.done()
		}
	}
}

// once runs every policy once.
func (c *cleaner) once(ctx context.Context) {
	if c.s.cluster != nil {
		// Every partition is a raft log, the internal topics included:
		// its replica applies retention and compacts it, below its raft
		// snapshot point only (raftnode.go, raftcompact.go). The node's
		// cleaner would leave gaps raft cannot hold.
		return
	}
	var offsets []compaction.Partition
	for _, name := range []string{offsetsTopic, txnStateTopic} {
		if ps, err := c.s.store.topic(name, false); err == nil {
			for _, p := range ps {
				offsets = append(offsets, p)
			}
		}
	}
	_, _, _ = c.offsets.Run(ctx, offsets)
	byRunner := make(map[*compaction.Runner][]compaction.Partition)
	var order []*compaction.Runner
	for _, name := range c.s.store.topicNames() {
		if isInternalTopic(name) {
			continue
		}
		ps, err := c.s.store.topic(name, false)
		if err != nil {
			continue // deleted meanwhile
		}
		r := c.runnerFor(name, c.s.store.topicConfigOf(name))
		if r == nil {
			continue
		}
		if _, ok := byRunner[r]; !ok {
			order = append(order, r)
		}
		for _, p := range ps {
			byRunner[r] = append(byRunner[r], p)
		}
	}
	for _, r := range order {
		_, _, _ = r.Run(ctx, byRunner[r])
	}
}

// The policies run on any compaction.Partition; a partlog Partition is one.
var _ compaction.Partition = (*plog.Partition)(nil)
