package segment

import (
	"context"
	"fmt"
	"sync"

	"github.com/partlog/partlog/internal/base"
)

// readLease is the segment's read lease: shared leases for readers, an
// exclusive one for TruncateTo and Recover. It prefers the exclusive side:
// once a truncation asks for the exclusive lease, new shared leases wait
// until it is granted and released (or given up), so a steady stream of
// overlapping readers cannot starve a truncation. The readers that already
// hold leases finish their reads and close them; the truncation then runs.
//
// The price is that a goroutine that holds a lease and asks for another
// while a truncation waits (two reads of one segment held at once) waits
// for that truncation, which waits for the goroutine's first lease: the
// wait ends when the truncation gives up (its context ends; package log
// bounds it with Config.TruncateWait). Readers should hold leases for the
// length of one fetch.
//
// Unlike a mutex it is not tied to goroutines: any goroutine may release
// a shared lease another acquired.
type readLease struct {
	mu sync.Mutex
	// cond is signalled when readers drops to 0, when the exclusive lease
	// is released and when a waiting exclusive request gives up.
	cond sync.Cond
	// readers is the number of shared leases held.
	readers int
	// exclusive is set while the exclusive lease is held (granted, not
	// merely wanted).
	exclusive bool
	// waiting counts goroutines that want the exclusive lease; they are
	// served one at a time. While it is positive no shared lease is
	// granted.
	waiting int
}

// acquireShared blocks while the exclusive lease is held or wanted.
func (l *readLease) acquireShared() {
	l.mu.Lock()
	for l.exclusive || l.waiting > 0 {
		l.wait()
	}
	l.readers++
	l.mu.Unlock()
}

// releaseShared releases one shared lease.
func (l *readLease) releaseShared() {
	l.mu.Lock()
	if l.readers == 0 {
		l.mu.Unlock()
		panic(base.AssertionFailedf("partlog/segment: ReleaseRead without AcquireRead"))
	}
	l.readers--
	if l.readers == 0 {
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

// acquireExclusive waits, without bound, until no shared lease and no
// other exclusive lease is held, then holds the exclusive one.
func (l *readLease) acquireExclusive() {
	_ = l.acquireExclusiveContext(context.Background()) // never gives up
}

// acquireExclusiveContext waits until no shared lease and no other exclusive
// lease is held, then holds the exclusive one. From the moment it starts
// waiting, new shared leases wait too. When ctx ends first it gives up
// and returns a *LeaseWaitError (wrapping ctx's error) naming the number
// of shared leases still held; new shared leases are then granted again.
func (l *readLease) acquireExclusiveContext(ctx context.Context) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			l.mu.Lock()
			l.cond.Broadcast()
			l.mu.Unlock()
		})
		defer stop()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting++
	for l.exclusive || l.readers > 0 {
		if err := ctx.Err(); err != nil {
			l.waiting--
			l.cond.Broadcast() // shared leases waiting behind this request
			return &LeaseWaitError{Readers: l.readers, Err: err}
		}
		l.wait()
	}
	l.waiting--
	l.exclusive = true
	return nil
}

// releaseExclusive releases the exclusive lease.
func (l *readLease) releaseExclusive() {
	l.mu.Lock()
	l.exclusive = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

// counts returns the number of shared leases held and of exclusive
// requests waiting.
func (l *readLease) counts() (readers, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readers, l.waiting
}

// wait waits for a change. REQUIRES: l.mu held.
func (l *readLease) wait() {
	if l.cond.L == nil {
		l.cond.L = &l.mu
	}
	l.cond.Wait()
}

// LeaseWaitError is returned by LockForTruncate when its context ended
// before every read lease was released. Nothing changed.
type LeaseWaitError struct {
	// Readers is the number of read leases still held when it gave up.
	Readers int
	// Err is the context's error (context.Canceled or
	// context.DeadlineExceeded).
	Err error
}

// Error implements error.
func (e *LeaseWaitError) Error() string {
	return fmt.Sprintf("partlog/segment: %d read leases still held: %v", e.Readers, e.Err)
}

// Unwrap returns the context's error.
func (e *LeaseWaitError) Unwrap() error { return e.Err }

// LockForTruncate takes the exclusive lease for a TruncateToLocked that
// follows: it waits until every read lease (AcquireRead) is released. From
// the moment it starts waiting, new AcquireRead calls wait too (a
// truncation is never starved by overlapping readers). When ctx ends first
// it gives up, returns a *LeaseWaitError wrapping ctx's error, and new
// read leases are granted again. Release it with UnlockForTruncate. Writer
// side.
func (s *Segment) LockForTruncate(ctx context.Context) error {
	return s.lease.acquireExclusiveContext(ctx)
}

// UnlockForTruncate releases the exclusive lease LockForTruncate took.
func (s *Segment) UnlockForTruncate() { s.lease.releaseExclusive() }

// ReadLeases returns the number of read leases held (AcquireRead without
// ReleaseRead yet) and the number of truncations waiting for them, for
// observability: what a truncation of the segment waits for.
func (s *Segment) ReadLeases() (held, truncationsWaiting int) {
	return s.lease.counts()
}
