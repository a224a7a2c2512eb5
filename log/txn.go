package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// Transactions: what Kafka's log layer keeps for transactional producers
// (ProducerStateManager's ongoing transactions, UnifiedLog's last stable
// offset, LogSegment's transaction index). The rules are in the package
// documentation, "Transactions".

// ErrTransactionCoordinatorFenced marks a transaction marker whose
// coordinator epoch is older than the one of the last marker the partition
// stored for that producer: it comes from a coordinator that has since been
// replaced. Nothing is written. Kafka error code:
// TRANSACTION_COORDINATOR_FENCED (52).
var ErrTransactionCoordinatorFenced = producer.ErrTransactionCoordinatorFenced

// AbortedTxn is an aborted transaction as a read_committed read reports it
// and as the transaction index (.txnindex) stores it: the producer id, the
// transaction's first offset, the offset of its ABORT marker (LastOffset)
// and the last stable offset once that marker was written.
type AbortedTxn = segment.AbortedTxn

// OpenTxn is a transaction that is open in this partition: its producer has
// written transactional batches and no marker has ended them yet.
type OpenTxn struct {
	// ProducerID is the transactional producer's id.
	ProducerID int64
	// FirstOffset is the offset of the transaction's first batch; the last
	// stable offset stays at or below it while the transaction is open.
	FirstOffset int64
	// StartTimestamp is the maxTimestamp (ms) of the transaction's first
	// batch as stored; for a transaction Open found only in a producer
	// snapshot, the producer's last timestamp recorded there.
	StartTimestamp int64
}

// abortedTxn is the transaction index entry of a transaction an ABORT
// marker ended.
func abortedTxn(e producer.EndedTxn) AbortedTxn {
	return AbortedTxn{ProducerID: e.ProducerID, FirstOffset: e.FirstOffset, LastOffset: e.MarkerOffset,
		LastStableOffset: e.LastStableOffset}
}

// txnState is what the partition keeps of its transactions beside the
// producer state: whether the last stable offset is held back during a
// truncation, and whether any segment ever held an aborted transaction
// (read_committed reads look at the transaction indexes only then). The
// core publishes the first unstable offset with the bounds
// (publishQuietLocked, publishUnstableLocked), computed by unstable.
type txnState struct {
	// held is set by hold until the core's next publishUnstableLocked
	// (which clears it). Guarded by the core's mu.
	held bool
	// aborted is set once any segment of the partition has held an
	// aborted transaction: until then read_committed reads skip the
	// transaction indexes. Set under the core's mu (or by Open), read
	// lock-free.
	aborted atomic.Bool
}

// unstable returns the value the bounds publish for the last stable
// offset, given the producer state: the first offset of the oldest
// transaction that is open or whose marker the high watermark has not
// passed, plus one; 0 when none; 1 while held (the log start offset).
// REQUIRES: the core's mu held (it guards held and producers).
func (t *txnState) unstable(producers *producer.State) int64 {
	if t.held {
		return 1
	}
	if first, ok := producers.FirstUnstable(); ok {
		return first + 1
	}
	return 0
}

// publishQuietLocked publishes mu.hw and mu.end, and with them the first
// unstable offset that high watermark gives: the transactions whose
// markers lie below it stop holding the last stable offset back in the
// same publication (Kafka's onHighWatermarkUpdated), so no reader sees
// the last stable offset pass a marker the high watermark it read has not
// passed. It returns the waiters to wake (bounds.storeQuiet). REQUIRES:
// mu held.
func (p *Partition) publishQuietLocked() wake {
	p.mu.producers.SetHighWatermark(p.mu.hw.Offset)
	return p.bounds.storeQuiet(p.mu.hw, p.mu.end, p.txn.unstable(p.mu.producers))
}

// publishUnstableLocked publishes the first unstable offset after the
// producer state changed (a transaction began or ended, the state was
// reloaded), with the high watermark already published (which may lag
// mu.hw: an append publishes its high watermark after this), and ends a
// hold. REQUIRES: mu held (or Open).
func (p *Partition) publishUnstableLocked() {
	p.txn.held = false
	p.mu.producers.SetHighWatermark(p.bounds.hwOff.Load()) // the single writer's own value
	p.bounds.storeUnstable(p.txn.unstable(p.mu.producers))
}

// hold holds the last stable offset at the log start offset, publishing
// it in b, until the core's next publishUnstableLocked: TruncateTo calls
// it before it lowers the bounds, because a cut marker reopens its
// transaction and the producer state that knows it is reloaded only after
// the cut. REQUIRES: the core's mu held (b's single writer).
func (t *txnState) hold(b *bounds) {
	t.held = true
	b.storeUnstable(1)
}

// LastStableOffset returns the last stable offset: the first offset of the
// oldest transaction that is open, or that a marker at or above the high
// watermark ended (the marker may yet be lost with a leader change, as
// Kafka's ProducerStateManager.firstUnstableOffset counts it), not below
// the log start offset; else the high watermark; never above the high
// watermark. A read_committed consumer reads below it (ReadCommitted).
// Lock-free, but under Config.WriteBehind, when batches are buffered: it
// then writes them first.
func (p *Partition) LastStableOffset() int64 {
	p.showBuffered() // writebehind.go
	hw, u := p.bounds.loadStable()
	if u == 0 {
		return hw
	}
	return min(max(u-1, p.LogStartOffset()), hw)
}

// OpenTransactions returns the transactions open in the partition, oldest
// first, for a transaction coordinator's timeouts. Like ProducerState it
// covers every batch and marker the partition has accepted, including
// those waiting for the group syncer's write (a transaction may then start
// at or past LogEndOffset), and writes nothing and does not wait for the
// group syncer or a TruncateTo.
func (p *Partition) OpenTransactions() ([]OpenTxn, error) {
	p.lockReader() // groupwrite.go
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	open := p.mu.producers.OpenTxns()
	if open == nil {
		return nil, nil
	}
	out := make([]OpenTxn, len(open))
	for i, t := range open {
		out[i] = OpenTxn(t)
	}
	return out, nil
}

// AppendMarker writes a transaction marker, as a partition leader does
// when a transaction coordinator ends a transaction (Kafka's
// WriteTxnMarkers), and returns its offset. m gives the type (ABORT or
// COMMIT), the producer id and epoch and the coordinator epoch; the
// partition assigns the offset under its lock as AppendBatch does, stamps
// the partition leader epoch as AppendBatch does, and sets the timestamp
// to Config.Now (LogAppendTime under Config.LogAppendTime); m.BaseOffset,
// m.PartitionLeaderEpoch and m.Timestamp are ignored.
//
// The checks are Kafka's (ProducerAppendInfo.appendEndTxnMarker), made
// under the lock before anything is written: an epoch older than the
// producer's current one gives ErrInvalidProducerEpoch, a coordinator
// epoch older than the one of the producer's last marker (-1 before its
// first, and for a producer the partition does not know)
// ErrTransactionCoordinatorFenced; a type other than ABORT or COMMIT, or a
// negative producer id or epoch, ErrInvalidBatch. A marker for a producer
// with no open transaction (or one the partition has never seen) is
// written, as in Kafka: it ends nothing, so it moves no last stable offset
// and adds nothing to the transaction index, but it sets the producer's
// epoch and coordinator epoch.
//
// A marker that ends an open transaction ends it in this partition: the
// last stable offset moves past it once the high watermark passes the
// marker (at once with the automatic high watermark), and an ABORT adds the transaction to
// the .txnindex of the segment holding the marker (reported by
// ReadCommitted from then on). The flush policy applies as to AppendBatch,
// and so does ErrLogFull near the end of the offsets.
func (p *Partition) AppendMarker(m batch.TxnMarker) (offset int64, err error) {
	if err := checkMarker(m); err != nil { // appendrules.go
		return -1, err
	}
	p.lockWriter()
	if err := p.checkWritableLocked(); err != nil {
		p.mu.Unlock()
		return -1, err
	}
	leader := p.leaderEpoch.Load()
	if err := p.checkStampedEpochLocked(leader); err != nil { // epochend.go
		p.mu.Unlock()
		return -1, err
	}
	if err := p.mu.producers.CheckMarker(m); err != nil {
		p.mu.Unlock()
		return -1, err
	}
	offset = p.mu.end.Offset
	bt, err := p.batchRules.markerLocked(m, offset, leader)
	if err != nil {
		p.mu.Unlock()
		return -1, err
	}
	if err := p.appendLocked(bt, nil); err != nil {
		p.mu.Unlock()
		return -1, err
	}
	if err := p.mu.failed; err != nil {
		// The marker is written; its transaction index entry is not
		// (observeProducerLocked failed the partition). Nothing is
		// published.
		p.mu.Unlock()
		return -1, err
	}
	w := p.publishQuietLocked()
	if p.cfg.FlushMessages == 0 {
		p.mu.Unlock()
		p.bounds.signal(w)
		return offset, nil
	}
	seq, due := p.mu.writeSeq, p.flushDueLocked()
	p.mu.Unlock()
	p.bounds.signal(w)
	if abandoned, err := p.afterAppendContext(context.Background(), seq, due); err != nil && !abandoned {
		return -1, err
	}
	return offset, nil
}

// ReadCommitted is ReadFrom for a read_committed consumer (Kafka's Fetch
// with isolation READ_COMMITTED): it never returns a byte of a batch at or
// past the last stable offset, and it returns, with the batches, the
// aborted transactions that overlap them (LastOffset at or past the first
// batch's offset and FirstOffset below Records.NextOffset), oldest marker
// first: what a Fetch response carries for the consumer to discard the
// aborted batches. Transaction markers themselves are returned like any
// batch. An offset at or past the last stable offset gives an empty
// result; the bounds, errors and lifetime of Records are ReadFrom's.
//
// When no transaction was ever aborted in the local segments the aborted
// list of a local read is nil without looking at any transaction index;
// when none is open the read is ReadFrom's. Below the local log start
// (tiered storage) the batches come from the copy that holds them and the
// aborted transactions from the copies' transaction indexes, then the
// local segments', as they would had the segments stayed local; a store
// that cannot be read gives an error wrapping ErrRemoteUnavailable.
func (p *Partition) ReadCommitted(offset int64, maxBytes int) (Records, []AbortedTxn, error) {
	for {
		gen := p.truncations.Load()
		recs, aborted, err := p.readCommitted(offset, maxBytes)
		// The last stable offset, the batches and the aborted transactions
		// must come from one log: a truncation meanwhile (which may reopen
		// a transaction by cutting its marker), or a removal from the front
		// of the segment or copy the batches came from (which may take the
		// one holding a marker they need), sends the read again.
		if err == nil && (p.truncations.Load() != gen || p.removedUnder(recs.r)) {
			_ = recs.Close()
			continue
		}
		return recs, aborted, err
	}
}

// removedUnder reports whether the batches of r lie wholly below the log's
// start now: a removal from the front took the segment or the copy they
// came from. Every such removal raises the start it moves to a base at or
// past their end before it publishes the shorter list (local retention and
// DeleteRecordsBefore the local log start; the total retention of the
// copies and DeleteRecordsBefore below the local start the whole log's).
func (p *Partition) removedUnder(r *records) bool {
	switch {
	case r.seg != nil:
		return r.next <= p.logStart.Load()
	case r.remote():
		if t := p.tierPart.Load(); t != nil {
			start, _, _ := t.wholeStart(p.logStart.Load())
			return r.next <= start
		}
	}
	return false
}

// readCommitted is one attempt of ReadCommitted.
func (p *Partition) readCommitted(offset int64, maxBytes int) (Records, []AbortedTxn, error) {
	lso := p.LastStableOffset()
	if offset >= lso {
		if p.closed.Load() {
			return Records{}, nil, ErrClosed
		}
		if err := p.offlineErr(); err != nil {
			return Records{}, nil, err
		}
		if start, end := p.LogStartOffset(), p.LogEndOffset(); offset < start || offset > end {
			return Records{}, nil, fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, offset, start, end)
		}
		return emptyRecords(offset), nil, nil
	}
	recs, err := p.read(offset, maxBytes, false)
	if err != nil {
		return recs, nil, err
	}
	r := recs.r
	remote := r.remote()
	if (r.seg != nil || remote) && r.next > lso {
		empty, err := r.trimAt(lso)
		if err != nil {
			_ = recs.Close()
			return Records{}, nil, p.noteFault(fmt.Errorf("partlog/log: read_committed offset %d of %s: %w", offset, p.dir, err))
		}
		if empty {
			_ = recs.Close()
			return emptyRecords(offset), nil, nil
		}
	}
	// txn.aborted knows the local segments only: a read from a copy
	// always looks at the transaction indexes.
	if !remote && (r.seg == nil || !p.txn.aborted.Load()) {
		return recs, nil, nil
	}
	aborted, err := collectAborted(p, p.tierPart.Load(), r.first, r.next)
	if err != nil {
		_ = recs.Close()
		return Records{}, nil, err
	}
	return recs, aborted, nil
}

// remote reports whether r was read from a copy (tierread.go).
func (r *records) remote() bool { return r.seg == nil && r.first >= 0 }

// trimAt cuts r after its last batch whose offsets all lie below lso,
// reading the batch headers (under the fault guard: r.b may alias a
// mapping). It reports empty when no batch is left; r is then unchanged.
// The headers are checked as they are walked (segment.Read does not read
// every header of a long range): an entry that does not frame, or whose
// offsets wrap or go back (a baseOffset, outside the CRC, damaged), gives a
// *base.CorruptionError naming the segment file and position.
func (r *records) trimAt(lso int64) (empty bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	b := r.b
	pos, next := 0, r.first
	for pos+batch.LogOverhead <= len(b) {
		size := int64(batch.LogOverhead) + int64(int32(binary.BigEndian.Uint32(b[pos+8:])))
		last := int64(binary.BigEndian.Uint64(b[pos:])) // a legacy entry's offset is its last
		minSize := int64(-1)                            // -1: not a batch or a legacy entry
		switch {
		case pos+batch.HeaderSize <= len(b) && b[pos+16] == batch.Magic:
			minSize = batch.HeaderSize
		case pos+17 <= len(b) && legacy.IsMagic(int8(b[pos+16])):
			minSize = legacy.MinSize
		}
		if minSize < 0 || size < minSize || size > int64(len(b)-pos) {
			return false, base.CorruptionErrorf(r.file(), r.start+int64(pos), "batchLength",
				"entry of %d bytes does not frame in the %d bytes left of a read result", size, len(b)-pos)
		}
		if minSize == batch.HeaderSize {
			// baseOffset lies outside the CRC: base + lastOffsetDelta
			// must not wrap (the next offset fits an int64).
			bt := batch.Batch(b[pos:])
			first, d := bt.BaseOffset(), int64(bt.LastOffsetDelta())
			if d < 0 || first < 0 || first > math.MaxInt64-1-d {
				return false, base.CorruptionErrorf(r.file(), r.start+int64(pos), "baseOffset",
					"batch at offset %d with lastOffsetDelta %d in a read result", first, d)
			}
			last = first + d
		}
		if last < next || last > math.MaxInt64-1 {
			return false, base.CorruptionErrorf(r.file(), r.start+int64(pos), "baseOffset",
				"entry ending at offset %d after offset %d in a read result", last, next)
		}
		if last >= lso {
			break
		}
		pos += int(size)
		next = last + 1
	}
	if pos == 0 {
		return true, nil
	}
	if pos < len(b) {
		r.b, r.end, r.next = b[:pos], r.start+int64(pos), next
	}
	return false, nil
}

// file names where r's bytes come from, for errors: its segment's .log,
// or a remote copy (r.start is then 0).
func (r *records) file() string {
	if r.seg != nil {
		return r.seg.LogPath()
	}
	return "a remote copy"
}

// collectAborted returns the aborted transactions overlapping [from, upper)
// from the transaction indexes of the segment of a snapshot of snaps that
// holds from and the ones after it, until one entry's last stable offset
// reaches upper (Kafka's collectAbortedTransactions). Below the first
// local segment the segments are the copies of t (tiered storage, nil
// without), whose transaction indexes are fetched.
func collectAborted(snaps segmentSnapshots, t *partTier, from, upper int64) ([]AbortedTxn, error) {
	snap, err := snaps.acquireSnapshot()
	if err != nil {
		return nil, err
	}
	defer snaps.releaseSnapshot(snap)
	var out []AbortedTxn
	complete := false
	if t != nil && len(snap.list) > 0 && from < snap.list[0].BaseOffset() {
		if out, complete, err = t.remoteAborted(out, from, upper, snap.list[0].BaseOffset()); err != nil {
			return nil, err
		}
	}
	for i := max(snap.find(from), 0); i < len(snap.list) && !complete; i++ {
		out, complete = snap.list[i].CollectAbortedTxns(out, from, upper)
	}
	return out, nil
}

// noteAbortedIn notes whether any segment of list holds aborted
// transactions (a load of the producer state). It never clears the mark.
// REQUIRES: the core's mu held (or Open).
func (t *txnState) noteAbortedIn(list []*segment.Segment) {
	for _, seg := range list {
		if len(seg.AbortedTxns()) > 0 {
			t.aborted.Store(true)
			return
		}
	}
}
