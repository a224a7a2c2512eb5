package log

import (
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/segment"
)

// Group writes (FlushMessages == 1). An AppendBatch that must wait for an
// fdatasync anyway does not write its batch itself: under mu it takes its
// offsets, checks and records its producer state as any append does, and
// copies the stored batch (the patched header, then the records) into
// the durability part's queue (dur.queue, guarded by mu); the group syncer
// writes everything queued with one write (segment.AppendBatches) under mu
// right before it takes the write sequence number its fdatasync covers
// (syncRound). So a cycle
// of the group commit costs one write syscall instead of one per
// appender, the appenders' critical sections are memory copies, and no
// append writes to the .log while an fdatasync of it runs (appenders that
// come meanwhile only queue).
//
// What readers and every other writer see is unchanged: mu.end and the
// published bounds cover written bytes only, and every other path that
// takes mu for writing (lockWriter: AppendAssigned, rolls, truncation,
// Sync, Close, compaction, the background flushes...) writes the queue
// first, so it finds the segment as if each batch had been written by its
// own append. The calls that only read the state under mu (lockReader:
// ProducerState, Producers, OpenTransactions) do not write the queue: a
// queued batch's producer state and transaction were recorded when it was
// queued, so they answer the same before and after the queue is written,
// without a write beside the group syncer's fdatasync. Two writers that
// change nothing the queue depends on take lockAppender and leave the
// queue too: ExpireProducers (a queued batch's producer state is already
// recorded) and the goroutine installing the next segment's spare (which
// gets its base only when a roll, a lockWriter path, adopts it). Offsets stay
// assigned in order under mu: a queued batch's
// base is the end of the queue (writeQueue.appendEnd). An append that cannot
// be queued (a roll is due, a new leader epoch starts, the active segment
// is empty, the index may be near full, its next offset lies past the
// largest segment base, where the last segment decides: lastsegment.go)
// writes the queue and then itself, as before.
//
// A failed write of the queue fails the partition (ErrFailed, sticky, as
// a failed fdatasync does): the queued batches' offsets and producer
// sequence numbers were already handed out, so the log could not go on
// without them. Exactly the queued appenders (and every later call) get
// the error; none of them was acknowledged, and a reopen recovers the log
// from its files (a torn tail is cut by recovery).

// writeQueue is the batches appenders queued for the group syncer's
// write. Guarded by the partition's mu.
type writeQueue struct {
	// buf holds the queued batches back to back, offsets assigned.
	buf []byte
	// n counts the batches in buf.
	n int
	// end is the log end once buf is written.
	end position
}

// maxQueuedBytes bounds the queue: an append that would take it past this
// writes the queue first (a huge batch is written by its own append).
const maxQueuedBytes = 1 << 20

// fits reports whether a batch of size bytes may join the queue.
func (q *writeQueue) fits(size int64) bool {
	return int64(len(q.buf))+size <= maxQueuedBytes
}

// add queues the batch made of the stored header h and body, to be written
// at byte segSize of the active segment at segBase (the queue's bytes
// follow). body may alias a mapped file: a fault reading it is returned
// and leaves the queue as it was.
func (q *writeQueue) add(h batch.Batch, body []byte, segBase, segSize int64) error {
	n := len(q.buf)
	q.buf = append(q.buf, h...)
	if err := copyGuarded(&q.buf, body); err != nil {
		q.buf = q.buf[:n]
		return err
	}
	q.n++
	q.end = position{Offset: h.NextOffset(), SegBase: segBase, Pos: segSize + int64(len(q.buf))}
	return nil
}

// appendEnd returns the offset the next appended batch gets when the log
// (what is written) ends at logEnd: the end of the queued batches, or
// logEnd when none is queued.
func (q *writeQueue) appendEnd(logEnd int64) int64 {
	if q.n > 0 {
		return q.end.Offset
	}
	return logEnd
}

// reset empties the queue once it was written or dropped, keeping its
// buffer unless it grew past maxQueuedBytes.
func (q *writeQueue) reset() {
	q.n = 0
	if cap(q.buf) > maxQueuedBytes {
		q.buf = nil // a huge queue is not kept
	}
	q.buf = q.buf[:0]
}

// lockAppender takes mu for AppendBatch, waiting while a TruncateTo waits
// for read leases, without writing the queue (the append may join it).
func (p *Partition) lockAppender() {
	p.mu.Lock()
	for p.mu.truncating != nil {
		p.truncated.Wait()
	}
}

// lockReader takes mu for a call that only reads what is kept under it
// (ProducerState, Producers, OpenTransactions). Unlike lockWriter it does
// not write the queue, which would put a write of the .log beside the
// group syncer's fdatasync, and unlike lockAppender it does not wait for a
// TruncateTo waiting for read leases (which changes nothing before it has
// them), as LeaderEpochs and SetHighWatermark. What such a call reads
// already covers the queued batches: queueAppendLocked records a queued
// batch's producer state and transaction under mu, as appendLocked does
// for a written one, and writeQueuedLocked changes neither.
func (p *Partition) lockReader() { p.mu.Lock() }

// queueAppendLocked queues the producer batch made of the stored header h
// (offset and epoch set: its base is writeQueue.appendEnd) and body for the
// group syncer's write, and does an append's bookkeeping for it
// (appendLocked's, but for mu.end and the published bounds, which move
// when the queue is written). It reports false, having changed nothing,
// when the batch must be written by appendLocked (see the conditions
// below); an error (a fault reading body, which is the caller's memory)
// changes nothing either. REQUIRES: mu held, the partition writable.
func (p *Partition) queueAppendLocked(h batch.Batch, body []byte) (bool, error) {
	q := &p.dur.queue
	size := int64(batch.HeaderSize + len(body))
	if !(p.dur.syncEveryAppend() || p.wb.delay > 0) || h.BaseOffset() != q.appendEnd(p.mu.end.Offset) ||
		(p.wb.delay > 0 && size >= writeBehindBytes) || // written at once: buffering it saves no write
		!q.fits(size) || p.mu.epochs.Changes(h.PartitionLeaderEpoch(), h.BaseOffset()) ||
		h.NextOffset() > index.MaxBaseOffset { // the last segment decides (lastsegment.go)
		return false, nil
	}
	active := p.segs.Load().active()
	// A roll is decided on the written segment (the time and index
	// checks), so the queue must keep within what that decision covers:
	// a segment that has a batch (its first timestamp is set), room for
	// the queue and this batch, and an index entry free for each.
	if active.Size() == 0 || active.Size()+int64(len(q.buf))+size > p.cfg.SegmentBytes ||
		q.n+2 > active.IndexRoom() ||
		active.ShouldRoll(h, p.cfg.SegmentBytes, p.mu.rollAfter, p.cfg.Now()) != segment.RollNone {
		return false, nil
	}
	if err := q.add(h, body, active.BaseOffset(), active.Size()); err != nil {
		return false, fmt.Errorf("partlog/log: append to %s: reading the %d-byte batch given: %w", p.dir, size, err)
	}
	p.noteWriteLocked(active, h.NextOffset()-h.BaseOffset())
	p.stats.noteAppend(h)
	p.dur.spare.maybePrepareLocked(active)
	p.observeProducerLocked(h) // producer.go; the header is enough
	return true, nil
}

// copyGuarded appends src to *dst under the fault guard: src may alias a
// mapped file (the Records.Bytes of a ReadFrom). On a fault *dst may hold
// part of src; the caller cuts it.
func copyGuarded(dst *[]byte, src []byte) (err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	*dst = append(*dst, src...)
	return nil
}

// writeQueuedLocked writes the queued batches into the active segment
// with one write and publishes them (mu.end, the bounds). On a failed
// write it fails the partition; when the partition is closed or failed
// already, the queue is dropped (its appenders get that error from their
// sync). REQUIRES: mu held.
func (p *Partition) writeQueuedLocked() {
	if active := p.writeQueueLocked(); active != nil {
		p.awake.noteWrittenLocked(active) // a rested active segment woke (awake.go)
	}
}

// writeQueueLocked is writeQueuedLocked but for the awake set, which the
// caller notes: it returns the active segment it wrote to, nil when it
// wrote nothing. A Dir's sweep (tryRest), which holds the awake set's
// mutex, calls it directly.
//
// Write-behind batches (writebehind.go) were acknowledged, so they are
// written also when the partition went offline (a fault in a mapped
// file, which the .log's writes do not go through), and dropped only
// when it failed. Group-write batches were not: their appenders get the
// offline error from their sync. REQUIRES: mu held.
func (p *Partition) writeQueueLocked() *segment.Segment {
	q := &p.dur.queue
	if q.n == 0 {
		return nil
	}
	n, end := q.n, q.end
	q.n = 0
	defer p.queueWrittenLocked() // after the publication (writebehind.go)
	if p.mu.closed || p.mu.failed != nil || (!p.wb.buffered.Load() && p.offlineErr() != nil) {
		return nil
	}
	active := p.segs.Load().active()
	if err := active.AppendBatches(q.buf); err != nil {
		err = p.noteFault(fmt.Errorf("partlog/log: append of %d queued batches at offset %d to segment %d of %s: %w",
			n, p.mu.end.Offset, active.BaseOffset(), p.dir, err))
		p.failLocked(err)
		return nil
	}
	p.mu.end = end
	if p.dur.hwFollowsWrite() {
		p.mu.hw = end // write-behind batches are committed as appendLocked's (writebehind.go)
	}
	p.publishLocked()
	return active
}
