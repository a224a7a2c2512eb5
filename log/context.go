package log

import "context"

// The Context variants (see the package documentation, "Context"): the
// context bounds the caller's wait for a sync, never the sync. A waiter
// whose context ends leaves the sync running in its own goroutine
// (runContext); the plain methods pass context.Background(), whose nil
// Done channel keeps them on the caller's goroutine without allocating.

// AppendBatchContext is AppendBatch with a context bounding its wait for
// durability (see "Context" in the package documentation). When ctx ends
// while the append waits for its sync, it returns the base offset the
// batch got together with ctx.Err(): the batch is in the log (under
// FlushMessages == 1 possibly still queued for the sync that goes on,
// which writes it first), visible unless the high watermark follows
// syncs (FlushMessages == 1), and becomes durable when the sync
// completes. Any other error comes with
// base -1, as from AppendBatch.
func (p *Partition) AppendBatchContext(ctx context.Context, b []byte) (base int64, err error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	return p.appendBatch(ctx, b, nil)
}

// AppendAssignedContext is AppendAssigned with a context bounding its wait
// for durability (see "Context" in the package documentation). When ctx
// ends while the append waits for its sync, it returns the log end offset
// after the append with ctx.Err(): the batches are in the log.
func (p *Partition) AppendAssignedContext(ctx context.Context, records []byte) (logEnd int64, err error) {
	if err := ctx.Err(); err != nil {
		return p.LogEndOffset(), err
	}
	return p.appendAssigned(ctx, records)
}

// SyncContext is Sync with a context bounding the caller's wait (see
// "Context" in the package documentation): when ctx ends first it returns
// ctx.Err() and the flush goes on; its failure, if any, fails the
// partition.
func (p *Partition) SyncContext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := runContext(ctx, p.Sync)
	return err
}

// afterAppendContext is afterAppend bounded by ctx; abandoned reports that
// ctx ended first (err is then ctx.Err()).
func (p *Partition) afterAppendContext(ctx context.Context, seq uint64, flushDue bool) (abandoned bool, err error) {
	if !p.dur.syncEveryAppend() && !flushDue {
		return false, nil // nothing to wait for
	}
	if ctx.Done() == nil { // no closure: plain appends allocate nothing
		return false, p.afterAppend(seq, flushDue)
	}
	return runContext(ctx, func() error { return p.afterAppend(seq, flushDue) })
}

// runContext runs f and returns its error, or returns ctx.Err() as soon as
// ctx ends and lets f finish in its own goroutine (abandoned). With a ctx
// that cannot end, f runs on the caller's goroutine and nothing is
// allocated.
func runContext(ctx context.Context, f func() error) (abandoned bool, err error) {
	if ctx.Done() == nil {
		return false, f()
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
