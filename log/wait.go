package log

import (
	"context"
	"fmt"
	"sync/atomic"
)

// notifier wakes goroutines parked in Wait when the partition publishes new
// bounds, closes or fails. A waiter takes the current generation's channel
// (creating it when there is none) and then checks the bounds; a publisher
// stores the bounds and then closes and drops the channel, if any. Both
// sides use sequentially consistent atomics, so either the waiter sees the
// new bounds or the publisher sees the waiter's channel: no wake-up is lost.
//
// When nobody waits, a publication costs one atomic load and allocates
// nothing.
type notifier struct {
	cur atomic.Pointer[generation]
}

// generation is one channel, closed by the publication that ends it.
type generation struct{ ch chan struct{} }

// wait returns the channel the next signal closes.
func (n *notifier) wait() <-chan struct{} {
	for {
		if g := n.cur.Load(); g != nil {
			return g.ch
		}
		g := &generation{ch: make(chan struct{})}
		if n.cur.CompareAndSwap(nil, g) {
			return g.ch
		}
	}
}

// signal wakes every waiter of the current generation. Any goroutine.
func (n *notifier) signal() {
	if n.cur.Load() == nil {
		return
	}
	if g := n.cur.Swap(nil); g != nil {
		close(g.ch)
	}
}

// Wait blocks until the high watermark passes offset (HighWatermark() >
// offset) and returns nil: the record at offset is then visible to
// ReadFrom, unless SetHighWatermark put the high watermark inside the
// batch holding it (ReadFrom hides such a batch whole). A consumer tailing
// the partition reads up to the high watermark, then calls Wait with the
// offset it will read next (Records.NextOffset) or, when a read found
// nothing, with the high watermark it saw before that read, and reads
// again when Wait returns, instead of polling. Partition.Records does
// this.
//
// Wait returns ctx.Err() when ctx ends first; ErrClosed when the partition
// is closed (before or during the wait); the partition's sticky failure
// (wrapping ErrFailed) when it fails; and an error wrapping
// ErrOffsetOutOfRange when offset is past LogEndOffset, now or after a
// TruncateTo lowered the log end below it (the record will then never
// come at that offset). An offset below the high watermark returns nil at
// once, even one below LogStartOffset (ReadFrom then says it is out of
// range).
//
// Wait is woken by the changes of the published bounds that concern it (a
// move of the high watermark: an append, a SetHighWatermark, a group sync;
// a truncation that lowers the log end), not by a timer, and not by an
// append that moves only the log end (WaitFollower's bound). It takes no lock while the partition is
// healthy and costs an append nothing when no goroutine waits. A goroutine
// holding Records may call it.
func (p *Partition) Wait(ctx context.Context, offset int64) error {
	return p.wait(ctx, offset, false)
}

// WaitFollower is Wait for a replica reading with ReadFromFollower: it
// waits until LogEndOffset() > offset.
func (p *Partition) WaitFollower(ctx context.Context, offset int64) error {
	return p.wait(ctx, offset, true)
}

// wait implements Wait and WaitFollower.
func (p *Partition) wait(ctx context.Context, offset int64, follower bool) error {
	for {
		// Take the channel before looking at the bounds: a publication
		// after the look closes it.
		woken := p.waitChan(follower)
		if err := p.waitErr(); err != nil {
			return err
		}
		hw, end := p.bounds.load()
		bound := hw.Offset
		if follower {
			bound = end.Offset
		}
		if bound > offset {
			return nil
		}
		if offset > end.Offset {
			return fmt.Errorf("%w: wait for offset %d past the log end offset %d", ErrOffsetOutOfRange, offset, end.Offset)
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitErr returns ErrClosed, the offline error or the sticky failure.
func (p *Partition) waitErr() error {
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.offlineErr(); err != nil {
		return err
	}
	if !p.hasFailed.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.failed
}

// setFailedLocked makes err (which wraps ErrFailed) the partition's sticky
// failure and wakes the goroutines in Wait. REQUIRES: mu held.
func (p *Partition) setFailedLocked(err error) {
	p.mu.failed = err
	p.hasFailed.Store(true)
	p.wakeWaiters()
}

// wakeWaiters wakes every goroutine in Wait so that it rechecks the
// partition's state (closed, failed, offline). Any goroutine.
func (p *Partition) wakeWaiters() { p.bounds.signal(wakeHW | wakeEnd) }

// waitChan returns the channel closed by the next publication that
// concerns a waiter for the high watermark (follower false) or the log
// end (follower true), and by every change of the partition's state.
func (p *Partition) waitChan(follower bool) <-chan struct{} {
	if follower {
		return p.bounds.endChanged.wait()
	}
	return p.bounds.hwChanged.wait()
}
