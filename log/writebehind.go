package log

import (
	"sync/atomic"
	"time"
)

// Write-behind (Config.WriteBehind). An append that needs no roll does
// what a group write does under FlushMessages == 1 (groupwrite.go): it
// takes its offsets, checks and records its producer state, and copies
// the stored batch into the durability part's queue. Unlike a group
// write it returns at once. The queue is written with one write:
//
//   - by the append that takes it to writeBehindBytes (a batch of that
//     size or more does not join it: its append writes the queue, then
//     itself, as an append that cannot join it does);
//   - by every path that writes the queue anyway (lockWriter: rolls,
//     appends that cannot be queued, Sync, flushes, truncation, Close...);
//   - by every call that observes the log (showBuffered: reads, waits,
//     LogEndOffset, HighWatermark, time lookups, Stats...), so that the
//     partition answers as if each batch had been written by its append;
//   - by a timer, Config.WriteBehind after the first batch it holds,
//     which also releases the queue's buffer (writeBehindIdle).
//
// So the only difference a caller sees is the one the option buys: a
// crash of the process loses what the queue holds, and a failed write of
// the queue fails the partition (writeQueuedLocked) with batches already
// acknowledged in it. The log stays a prefix of what was appended, and
// every sync covers every acknowledged batch (each writes the queue
// first). Goroutines parked in Wait before an append see its batch when
// it is written, at the latest when the timer fires.

// writeBehindBytes is the queue size at which the append that reaches it
// writes the queue itself: 16 KiB, Kafka's producer batch.size default,
// about 96 one-record batches of 100-byte values.
const writeBehindBytes = 16 << 10

// writeBehind is a partition's write-behind state.
type writeBehind struct {
	// delay is Config.WriteBehind; 0 when off (also under FlushMessages
	// == 1, whose appends wait for their sync). Set at Open.
	delay time.Duration
	// buffered is set while the queue holds write-behind batches: by the
	// first one, cleared once the queue is written (queueWrittenLocked).
	// Stored under mu, loaded lock-free by showBuffered.
	buffered atomic.Bool
	// timer writes the queue delay after its first batch; created at the
	// first queued batch. Guarded by mu.
	timer *time.Timer
}

// bufferedLocked follows an append queued under write-behind: it writes
// the queue when it reached writeBehindBytes (the error is then the
// partition's failure, and the append's batch was not written), else, for
// the queue's first batch, sets the flag showBuffered reads and starts
// the timer. REQUIRES: mu held.
func (p *Partition) bufferedLocked() error {
	q := &p.dur.queue
	if len(q.buf) >= writeBehindBytes {
		p.writeQueuedLocked()
		return p.checkWritableLocked()
	}
	if q.n == 1 {
		p.wb.buffered.Store(true)
		if p.wb.timer == nil {
			p.wb.timer = time.AfterFunc(p.wb.delay, p.writeBehindIdle)
		} else {
			p.wb.timer.Reset(p.wb.delay)
		}
	}
	return nil
}

// writeBehindNow writes the queue (showBuffered).
//
// It takes mu without waiting for a TruncateTo that waits for read leases
// (as SetHighWatermark), so that a goroutine holding Records may call
// what calls it: such a truncation wrote the queue when it started
// (lockWriter), and appends wait for it, so the queue is empty meanwhile.
func (p *Partition) writeBehindNow() {
	p.mu.Lock()
	p.writeBehindLocked()
	p.mu.Unlock()
}

// writeBehindLocked writes the queue when it holds write-behind batches
// (and only then: under FlushMessages == 1 the queue is the group
// syncer's). REQUIRES: mu held.
func (p *Partition) writeBehindLocked() {
	if p.wb.buffered.Load() {
		p.writeQueuedLocked()
	}
}

// writeBehindIdle is the timer's function: it writes the queue and, as
// the partition appended nothing for WriteBehind, releases the queue's
// buffer (up to 32 KiB, kept meanwhile for the next appends), so that an
// idle partition holds no buffer.
func (p *Partition) writeBehindIdle() {
	p.mu.Lock()
	p.writeBehindLocked()
	if q := &p.dur.queue; q.n == 0 {
		q.buf = nil
	}
	p.mu.Unlock()
}

// showBuffered writes the queue when it holds write-behind batches, for
// the calls that observe the log: they then answer as if every
// acknowledged append had been written. Without write-behind, or with
// nothing queued, it costs one atomic load.
func (p *Partition) showBuffered() {
	if p.wb.buffered.Load() {
		p.writeBehindNow()
	}
}

// queueWrittenLocked empties the queue once writeQueuedLocked wrote it
// (and published it) or dropped it. Only then does it clear the flag: a
// showBuffered that finds it clear may read the published bounds, so a
// write of the queue by another goroutine (a roll's background flush, a
// Sync) must be over by then; one that finds it set takes mu, and so
// waits for that write. REQUIRES: mu held.
func (p *Partition) queueWrittenLocked() {
	p.dur.queue.reset()
	p.wb.buffered.Store(false)
}

// stopWriteBehindLocked stops the timer (Close). REQUIRES: mu held, the
// queue written.
func (p *Partition) stopWriteBehindLocked() {
	if p.wb.timer != nil {
		p.wb.timer.Stop()
	}
}
