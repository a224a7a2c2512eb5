package log

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// groupSyncer runs the rounds of a group commit: the partition
// (Partition.syncRound).
type groupSyncer interface {
	// syncRound makes every write up to now durable, unless a sync that
	// started after write seq was made already covered it, and publishes
	// what it covered in groupCommit.synced. covered is by how much the
	// round raised synced. It takes the locks it needs; the group commit
	// holds none while it runs.
	syncRound(seq uint64) (covered uint64, err error)
}

// groupCommit coordinates the appenders that wait for an fdatasync of
// their write (FlushMessages == 1): at most one of them runs a sync round
// at a time (syncing), the others wait on cond and are woken when it is
// done; each round covers every write made before it started. Writes are
// numbered by the core (Partition.mu.writeSeq, counting from 1).
//
// It needs nothing of the partition but its syncer, set by init. Lock
// order: mu is never held while a round runs, nor while taking the
// partition's flushMu or mu.
type groupCommit struct {
	// syncer runs the rounds. Set by init, never changed.
	syncer groupSyncer
	// synced is the number of the last write a successful fdatasync
	// covered. Written by the syncer under the partition's flushMu (a
	// round, a full flush), read by anyone.
	synced atomic.Uint64
	// written mirrors the core's write count for the gathering syncer
	// (gather), which holds no lock. Written under the partition's mu.
	written atomic.Uint64

	// mu guards syncing and last; cond's Locker is mu.
	mu   sync.Mutex
	cond sync.Cond
	// syncing is set while a waiter runs a round.
	syncing bool
	// last is how many writes the last round covered: how many appends
	// the next syncer waits to gather.
	last uint64
}

// init sets the syncer up.
func (g *groupCommit) init(s groupSyncer) {
	g.syncer = s
	g.cond.L = &g.mu
}

// syncedSeq returns the number of the last write an fdatasync covered.
func (g *groupCommit) syncedSeq() uint64 { return g.synced.Load() }

// wait returns once an fdatasync that started after write seq succeeded:
// when no round is running it becomes the syncer (gathering the appenders
// on their way first); otherwise it waits for the running one, which
// covers seq if it started after the write, and else tries again. A
// round's error is returned to its syncer; the waiters it woke try again
// (and find the partition failed).
func (g *groupCommit) wait(seq uint64) error {
	if g.synced.Load() >= seq {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.synced.Load() < seq {
		if g.syncing {
			g.cond.Wait()
			continue
		}
		g.syncing = true
		want := g.last
		g.mu.Unlock()
		g.gather(want)
		covered, err := g.syncer.syncRound(seq)
		g.mu.Lock()
		if err == nil {
			g.last = covered
		}
		g.syncing = false
		g.cond.Broadcast()
		if err != nil {
			return err
		}
	}
	return nil
}

// gatherRounds is how many times a new group syncer yields before it takes
// the write sequence number its fdatasync covers.
const gatherRounds = 2

// gatherIdleRounds and gatherMaxRounds bound the yields a syncer adds
// while the appenders it expects have not all queued: it stops after
// gatherIdleRounds yields in a row that saw no new append, and after
// gatherMaxRounds in all.
const (
	gatherIdleRounds = 16
	gatherMaxRounds  = 256
)

// gather lets the appenders that are ready to run queue their batches
// before a new group syncer takes its snapshot: the waiters the previous
// sync released (now appending their next batch) and appenders queued on
// the partition's mu. Without it the syncer, woken first, snapshots before
// they write, and each sync covers about half of the waiting appenders. It
// yields gatherRounds times, and then on, while fewer than want appends
// (as many as the previous round covered) came since the last sync and the
// last gatherIdleRounds yields saw a new one: on one P a yield runs every
// ready appender, while on several the syncer may run beside them and must
// wait for the ones still on their way (a released appender validates its
// next batch before it queues it). A yield costs well under a microsecond
// when nothing else is runnable, against an fdatasync of a hundred
// microseconds or more; when the appenders do not come back (the previous
// group was a burst) the syncer gives up after gatherIdleRounds idle
// yields.
func (g *groupCommit) gather(want uint64) {
	for range gatherRounds {
		runtime.Gosched()
	}
	from := g.synced.Load()
	last := g.written.Load()
	for i, idle := 0, 0; i < gatherMaxRounds && idle < gatherIdleRounds && last-from < want; i++ {
		runtime.Gosched()
		if w := g.written.Load(); w != last {
			last, idle = w, 0
		} else {
			idle++
		}
	}
}
