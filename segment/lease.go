package segment

import (
	"sync"

	"github.com/partlog/partlog/internal/base"
)

// readLease is the segment's read lease: shared leases for readers, an
// exclusive one for TruncateTo and Recover. It prefers readers: a new
// shared lease is granted while the exclusive one is only waiting (for the
// current readers to leave), so a reader that already holds a lease can
// take another (pipelined fetches of one consumer) without deadlocking
// behind a pending truncation. Only an exclusive lease that has been
// granted blocks new readers. The price is that a steady stream of
// overlapping readers can delay a truncation; readers hold leases for the
// length of one fetch.
//
// Unlike a mutex it is not tied to goroutines: any goroutine may release
// a shared lease another acquired.
type readLease struct {
	mu sync.Mutex
	// cond is signalled when readers drops to 0 and when the exclusive
	// lease is released.
	cond sync.Cond
	// readers is the number of shared leases held.
	readers int
	// exclusive is set while the exclusive lease is held (granted, not
	// merely wanted).
	exclusive bool
	// waiting counts goroutines that want the exclusive lease; they are
	// served one at a time.
	waiting int
}

// acquireShared blocks only while the exclusive lease is held.
func (l *readLease) acquireShared() {
	l.mu.Lock()
	for l.exclusive {
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

// acquireExclusive waits until no shared lease and no other exclusive
// lease is held, then holds the exclusive one.
func (l *readLease) acquireExclusive() {
	l.mu.Lock()
	l.waiting++
	for l.exclusive || l.readers > 0 {
		l.wait()
	}
	l.waiting--
	l.exclusive = true
	l.mu.Unlock()
}

// releaseExclusive releases the exclusive lease.
func (l *readLease) releaseExclusive() {
	l.mu.Lock()
	l.exclusive = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

// wait waits for a change. REQUIRES: l.mu held.
func (l *readLease) wait() {
	if l.cond.L == nil {
		l.cond.L = &l.mu
	}
	l.cond.Wait()
}
