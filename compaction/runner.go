package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	plog "github.com/partlog/partlog/log"
)

// Progress is one report of the Runner: a policy finished on a partition.
type Progress struct {
	// Dir is the partition's directory.
	Dir string
	// Policy is the policy's Name.
	Policy string
	// Result is what the policy did.
	Result Result
	// Err is its error, nil on success.
	Err error
}

// Runner applies the cleanup policies to many partitions with a bounded
// number of goroutines. A partition whose policy fails is marked failed
// and skipped by later runs (one bad partition once stopped Kafka's whole
// cleaner thread); the other partitions go on. An error that only says the
// segment list changed under the round (log.ErrSegmentsChanged) or that
// another round is compacting the partition (log.ErrCleaningInProgress)
// marks nothing: the next run retries. Nor does a partition closed before
// or during its round (log.ErrClosed: deleted, or closed to be opened
// again), as Kafka lets a cleaning aborted that way go: the error is
// reported and the next run tries whatever partition it is given.
//
// A mark belongs to the partition it was made on. Marks are kept by
// directory, and a *log.Partition at a marked directory that is not the
// one the mark was made on (created again after a delete, or opened again
// after a Close: it starts from its files) is not skipped: its run drops
// the mark. Other Partition implementations are told apart by directory
// only. A DirRunner also drops the marks of partitions its Dir no longer
// holds.
//
// Run may be called repeatedly (a scheduler calls it periodically); it is
// safe for concurrent use, also by several Runners given the same
// partition: the partition's cleaning claim (log.Partition.Compact) lets
// one compaction round at a time run on it, and concurrent retention
// rounds only delete what the other left (a lost race is
// ErrSegmentsChanged).
type Runner struct {
	cfg      Config
	workers  int
	progress func(Progress)
	logger   *slog.Logger

	mu     sync.Mutex
	failed map[string]failure // by partition directory
}

// failure is a failed mark: the error that made it and the partition it
// was made on.
type failure struct {
	p   Partition
	err error
}

// madeOn reports whether the mark f, kept under p's directory, was made on
// p: false only for two different *log.Partition values (see Runner).
func (f failure) madeOn(p Partition) bool {
	fp, ok := f.p.(*plog.Partition)
	if !ok {
		return true
	}
	lp, ok := p.(*plog.Partition)
	return !ok || fp == lp
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Workers bounds the partitions cleaned at once (default 1). Each
	// worker has its own offset map, so peak memory is Workers times
	// Config.OffsetMapBytes.
	Workers int
	// Progress, when set, is called after each policy on each partition
	// (from the worker goroutines; it must be safe for concurrent use).
	Progress func(Progress)
}

// NewRunner returns a Runner applying the policies cfg names.
func NewRunner(cfg Config, opts RunnerOptions) (*Runner, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	return &Runner{cfg: cfg, workers: opts.Workers, progress: opts.Progress, logger: cfg.Logger,
		failed: make(map[string]failure)}, nil
}

// Failed returns the error that marked dir failed, nil if it is not.
func (r *Runner) Failed(dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[dir].err
}

// failedFor returns the error of the mark l is skipped for, nil when there
// is none. A mark made on another partition at l's directory is dropped.
func (r *Runner) failedFor(l Partition) error {
	dir := l.Dir()
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[dir]
	switch {
	case !ok:
		return nil
	case !f.madeOn(l):
		r.logger.Info("partlog/compaction: failed mark dropped: another partition is at its directory", "dir", dir)
		delete(r.failed, dir)
		return nil
	}
	return f.err
}

// dropMarks drops every mark for which gone reports true, given its
// directory and the mark.
func (r *Runner) dropMarks(gone func(dir string, f failure) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for dir, f := range r.failed {
		if gone(dir, f) {
			r.logger.Info("partlog/compaction: failed mark dropped: the partition is gone", "dir", dir)
			delete(r.failed, dir)
		}
	}
}

// Reset clears dir's failed mark, so the next Run cleans it again.
func (r *Runner) Reset(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, dir)
}

// Run applies every policy to every partition once, at most Workers at a
// time, and returns the total result and the errors by directory (a
// partition marked failed earlier reports ErrPartitionFailed without being
// touched). It stops handing out partitions when ctx is done and returns
// ctx's error then; a policy in progress sees ctx too.
func (r *Runner) Run(ctx context.Context, logs []Partition) (Result, map[string]error, error) {
	return r.runWith(ctx, r.cfg, logs)
}

// runWith is Run with the policies of cfg, a configuration with its defaults
// set and checked: a DirRunner passes its topic's current one, the marks
// staying the Runner's.
func (r *Runner) runWith(ctx context.Context, cfg Config, logs []Partition) (Result, map[string]error, error) {
	total := Result{CleanedTo: -1}
	errs := make(map[string]error)
	var mu sync.Mutex
	work := make(chan Partition)
	var wg sync.WaitGroup
	for range min(r.workers, max(len(logs), 1)) {
		policies, err := Policies(cfg)
		if err != nil {
			return total, nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range work {
				res, err := r.runOne(ctx, l, policies)
				mu.Lock()
				total.add(res)
				if err != nil {
					errs[l.Dir()] = err
				}
				mu.Unlock()
			}
		}()
	}
	var ctxErr error
feed:
	for _, l := range logs {
		if err := ctx.Err(); err != nil {
			ctxErr = err
			break
		}
		select {
		case work <- l:
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	return total, errs, ctxErr
}

// runOne applies the policies to one partition, isolating its failure.
func (r *Runner) runOne(ctx context.Context, l Partition, policies []Policy) (total Result, err error) {
	total.CleanedTo = -1
	dir := l.Dir()
	if ferr := r.failedFor(l); ferr != nil {
		return total, fmt.Errorf("%w: %s: %w", ErrPartitionFailed, dir, ferr)
	}
	defer func() {
		// A panic in a policy (a bug) marks the partition, not the process.
		if p := recover(); p != nil {
			err = fmt.Errorf("partlog/compaction: %s: panic: %v", dir, p)
			r.mark(l, err)
		}
	}()
	for _, p := range policies {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		res, err := p.Apply(ctx, l)
		total.add(res)
		if r.progress != nil {
			r.progress(Progress{Dir: dir, Policy: p.Name(), Result: res, Err: err})
		}
		if err != nil {
			if ctx.Err() == nil && marks(err) {
				r.mark(l, err)
			}
			return total, err
		}
		if res.SegmentsDeleted > 0 || res.Compacted {
			r.logger.Info("partlog/compaction: policy applied", "dir", dir, "policy", p.Name(),
				"segmentsDeleted", res.SegmentsDeleted, "segmentsWritten", res.SegmentsWritten,
				"recordsRemoved", res.RecordsRemoved)
		}
	}
	return total, nil
}

// marks reports whether err, a policy's error, marks the partition
// failed: not when it is transient, nor when the partition was closed
// before or during the round (deleted, or closed to be opened again): the
// round failed because the partition went away, not for anything its
// files hold, and Kafka swallows the LogCleaningAbortedException of a
// cleaning aborted that way and marks nothing. Nor does a tiered
// partition's refusal of compaction (log.ErrTieredCompaction), a setting
// that does not fit the partition, not a fault of its files: it is
// reported on every run, and retention, which runs before compaction,
// goes on.
func marks(err error) bool {
	return !transient(err) && !errors.Is(err, plog.ErrClosed) && !errors.Is(err, plog.ErrTieredCompaction)
}

// transient reports whether err only means the segment list changed under
// a round (a truncation or retention won a race) or another round holds the
// partition's cleaning claim: nothing was changed, and the next run
// retries.
func transient(err error) bool {
	return errors.Is(err, plog.ErrSegmentsChanged) || errors.Is(err, plog.ErrCleaningInProgress)
}

// mark records that l failed with err.
func (r *Runner) mark(l Partition, err error) {
	dir := l.Dir()
	r.logger.Warn("partlog/compaction: partition failed; skipped until Reset", "dir", dir, "err", err)
	r.mu.Lock()
	r.failed[dir] = failure{p: l, err: err}
	r.mu.Unlock()
}
