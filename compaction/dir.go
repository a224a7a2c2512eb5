package compaction

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	plog "github.com/partlog/partlog/log"
)

// DirRunner runs the cleanup policies (retention and key compaction) over
// every partition of a log.Dir, each with its topic's configuration
// (Kafka's per-topic cleanup.policy, retention.ms, ...), with one bounded
// pool of workers for the whole directory: one cleaner for all partitions,
// as Kafka's log manager runs one retention check and one set of cleaner
// threads per broker. Each Run asks TopicConfig for every topic again, so
// a changed configuration (Kafka's incremental alter configs, a topic
// created again with other settings) applies from the next Run. It keeps
// one Runner per topic (created on first use) for the failure marks, so a
// partition a policy failed on stays skipped across runs (see Runner)
// while the Dir holds it: each Run first drops the marks of
// partitions the Dir no longer holds, or holds as another *log.Partition
// (created again after DeletePartition, opened again by OpenPartition), as
// Kafka's LogCleanerManager.maintainUncleanablePartitions drops those of
// deleted logs. Safe for concurrent use.
type DirRunner struct {
	dir  *plog.Dir
	opts DirRunnerOptions

	mu      sync.Mutex
	runners map[string]*Runner // by topic
}

// DirRunnerOptions configure a DirRunner.
type DirRunnerOptions struct {
	// Config is the cleanup configuration of every topic TopicConfig does
	// not override.
	Config Config
	// TopicConfig, when set, returns a topic's cleanup configuration, or
	// nil for Config. Run calls it for each topic on every run (from the
	// goroutine calling Run), so it should return a topic's current
	// settings.
	TopicConfig func(topic string) *Config
	// Workers bounds the partitions cleaned at once across the whole
	// directory (default 1, Kafka's log.cleaner.threads). Each worker has
	// its own offset map: peak memory is Workers times OffsetMapBytes.
	Workers int
	// Progress, when set, is called after each policy on each partition,
	// from the worker goroutines.
	Progress func(Progress)
}

// NewDirRunner returns a DirRunner for the partitions of d. It checks
// opts.Config (a topic's configuration is checked when its partitions are
// first cleaned; an invalid one fails Run for that topic).
func NewDirRunner(d *plog.Dir, opts DirRunnerOptions) (*DirRunner, error) {
	cfg := opts.Config
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts.Workers = max(opts.Workers, 1)
	return &DirRunner{dir: d, opts: opts, runners: make(map[string]*Runner)}, nil
}

// runner returns topic's Runner, creating it, and the topic's current
// configuration, its defaults set and checked.
func (r *DirRunner) runner(topic string) (*Runner, Config, error) {
	cfg := r.opts.Config
	if r.opts.TopicConfig != nil {
		if c := r.opts.TopicConfig(topic); c != nil {
			cfg = *c
		}
	}
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, Config{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if run := r.runners[topic]; run != nil {
		return run, cfg, nil
	}
	run, err := NewRunner(cfg, RunnerOptions{Workers: r.opts.Workers, Progress: r.opts.Progress})
	if err != nil {
		return nil, Config{}, err
	}
	r.runners[topic] = run
	return run, cfg, nil
}

// Run applies every partition's policies once, topic after topic, at most
// Workers partitions at a time, and returns the total result and the
// errors by partition directory (a topic whose configuration is invalid
// reports that error for each of its partitions). It stops when ctx is
// done and returns ctx's error then.
func (r *DirRunner) Run(ctx context.Context) (Result, map[string]error, error) {
	total := Result{CleanedTo: -1}
	errs := make(map[string]error)
	byTopic := make(map[string][]Partition)
	held := make(map[string]*plog.Partition)
	for _, tp := range r.dir.Partitions() {
		if p := r.dir.Partition(tp.Topic, tp.Partition); p != nil {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
			held[p.Dir()] = p
		}
	}
	r.dropGoneMarks(held)
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		if err := ctx.Err(); err != nil {
			return total, errs, err
		}
		run, cfg, err := r.runner(topic)
		if err != nil {
			for _, l := range byTopic[topic] {
				errs[l.Dir()] = err
			}
			continue
		}
		res, terrs, err := run.runWith(ctx, cfg, byTopic[topic])
		total.add(res)
		for dir, e := range terrs {
			errs[dir] = e
		}
		if err != nil {
			return total, errs, err
		}
	}
	return total, errs, nil
}

// dropGoneMarks drops the marks, in every topic's Runner, whose directory
// holds no partition of held (the Dir's partitions, by directory), or
// holds another one than the partition the mark was made on.
func (r *DirRunner) dropGoneMarks(held map[string]*plog.Partition) {
	r.mu.Lock()
	runners := slices.Collect(maps.Values(r.runners))
	r.mu.Unlock()
	for _, run := range runners {
		run.dropMarks(func(dir string, f failure) bool {
			p := held[dir]
			return p == nil || !f.madeOn(p)
		})
	}
}

// Loop runs Run every interval (Kafka's log.retention.check.interval.ms,
// 5 minutes by default) until ctx is done, and returns ctx's error. The
// errors of each run reach Progress (and the partitions they mark stay
// skipped, see Runner). An interval that is not positive is an error
// wrapping ErrInvalidConfig, and nothing runs.
func (r *DirRunner) Loop(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("%w: Loop interval %v is not positive", ErrInvalidConfig, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, _, err := r.Run(ctx); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
