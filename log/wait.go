package log

import (
	"context"
	"errors"
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
// offset it will read next (Records.NextOffset, which for an empty read is
// the offset that was read) or, when a read found nothing although the
// high watermark was past its offset, with the high watermark it saw
// before that read, and reads again when Wait returns, instead of
// polling. Partition.Records and Partition.Poll do this.
//
// Any offset may be waited for: one at or past LogEndOffset waits until
// appends reach it and the high watermark passes it, as a long poll for
// "the records from offset 15 on" in a log of 5 does. An offset below the
// high watermark returns nil at once, even one below LogStartOffset
// (ReadFrom then says it is out of range).
//
// Wait returns ctx.Err() when ctx ends first; ErrClosed when the partition
// is closed (before or during the wait); the partition's sticky failure
// (wrapping ErrFailed) when it fails; and an error wrapping
// ErrOffsetOutOfRange when a truncation during the wait (TruncateTo,
// TruncateFullyAndStartAt) leaves the log end below offset: records below
// offset, which the waiter may have read, were cut or replaced, and the
// records that will take their offsets are not the ones it counted. Wait
// sees the bounds when it wakes, so a truncation that appends carried
// back past offset before it looked goes unseen, and one made before the
// call cannot be told from a log that is simply short: a consumer that
// must detect those compares the leader epoch of the last record it read
// with EndOffsetForEpoch, as Kafka's consumers do (KIP-320).
//
// Wait is woken by the changes of the published bounds that concern it (a
// move of the high watermark: an append, a SetHighWatermark, a group sync;
// a truncation that lowers the log end), not by a timer, and not by an
// append that moves only the log end (WaitFollower's bound); under
// Config.WriteBehind, by the write of the buffered batch, not by its
// append. It takes no lock while the partition is healthy (but to write
// the buffer when batches are buffered) and costs an append nothing when
// no goroutine waits. A goroutine holding Records may call it.
func (p *Partition) Wait(ctx context.Context, offset int64) error {
	p.showBuffered() // writebehind.go
	return p.bounds.wait(ctx, p, &p.truncations, offset, false)
}

// WaitFollower is Wait for a replica reading with ReadFromFollower: it
// waits until LogEndOffset() > offset, with Wait's errors.
func (p *Partition) WaitFollower(ctx context.Context, offset int64) error {
	p.showBuffered() // writebehind.go
	return p.bounds.wait(ctx, p, &p.truncations, offset, true)
}

// waitCore is what bounds.wait needs of the partition besides the bounds
// and the truncation count: the error that ends every wait (implemented
// by *Partition; a test's fake builds the wait without one).
type waitCore interface {
	// waitErr returns the error a wait ends with whatever the bounds say
	// (closed, offline, failed), nil while the partition is healthy.
	// Every change of it is followed by bounds.wakeAll.
	waitErr() error
}

// wait implements Wait (follower false: until the high watermark passes
// offset) and WaitFollower (follower true: the log end). truncations is
// the partition's truncation count, which a truncation raises after it
// published the lowered bounds.
func (b *bounds) wait(ctx context.Context, core waitCore, truncations *atomic.Uint64, offset int64, follower bool) error {
	// A truncation publishes the lowered bounds and then counts itself:
	// a waiter that wakes between the two sees the log end go down, one
	// that looks later sees the count move (the log end may have grown
	// back meanwhile).
	cuts := truncations.Load()
	lastEnd := int64(-1) // the log end at the previous look; -1 before the first
	for {
		// Take the channel before looking at the bounds: a publication
		// after the look closes it.
		woken := b.waitChan(follower)
		if err := core.waitErr(); err != nil {
			return err
		}
		hw, end := b.load()
		bound := hw.Offset
		if follower {
			bound = end.Offset
		}
		if bound > offset {
			return nil
		}
		if end.Offset < offset && (truncations.Load() != cuts || lastEnd >= 0 && end.Offset < lastEnd) {
			return fmt.Errorf("%w: a truncation during the wait for offset %d left the log end at %d", ErrOffsetOutOfRange, offset, end.Offset)
		}
		lastEnd = end.Offset
		select {
		case <-woken:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitErr returns ErrClosed, the offline error or the sticky failure
// (waitCore).
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
	p.bounds.wakeAll()
}

// wakeAll wakes every goroutine in wait so that it rechecks its waitCore
// (the partition closed, failed or went offline). Any goroutine.
func (b *bounds) wakeAll() { b.signal(wakeHW | wakeEnd) }

// waitChan returns the channel closed by the next publication that
// concerns a waiter for the high watermark (follower false) or the log
// end (follower true), and by every wakeAll.
func (b *bounds) waitChan(follower bool) <-chan struct{} {
	if follower {
		return b.endChanged.wait()
	}
	return b.hwChanged.wait()
}

// cutAtOrPast reports whether err, from a Wait for a high watermark above
// next (the batch holding next ends past it), is the out-of-range error of
// a truncation that left next in the log: it cut only offsets at or past
// next, which the waiter never read. Partition.Records and Partition.Poll
// then read next again, and that read says whether next is still in the
// log; a truncation below next is their error.
func (p *Partition) cutAtOrPast(err error, next int64) bool {
	return errors.Is(err, ErrOffsetOutOfRange) && next <= p.LogEndOffset()
}
