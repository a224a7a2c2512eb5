package log

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/partlog/partlog/batch"
)

// Producer state: what Kafka's ProducerStateManager keeps per producer id so
// that an idempotent producer's retry is recognised and a gap or a fenced
// epoch is refused. The rules are Kafka's ProducerAppendInfo's; the snapshot
// format is in snapshot.go.

// defaultProducerIDExpiration is producer.id.expiration.ms: 1 day.
const defaultProducerIDExpiration = 24 * time.Hour

// producerBatchesKept is how many of a producer's last batches are kept to
// recognise retries: Kafka's NUM_BATCHES_TO_RETAIN, the most batches a
// client may have in flight (max.in.flight.requests.per.connection = 5).
const producerBatchesKept = 5

// producerSweepEvery bounds how often adding a new producer sweeps the
// expired ones (Kafka's producer.id.expiration.check.interval.ms: 10 min).
const producerSweepEvery = 10 * time.Minute

// ProducerBatch is one of a producer's last batches as the partition
// remembers it.
type ProducerBatch struct {
	// FirstSequence and LastSequence are the batch's sequence range
	// (LastSequence wraps from math.MaxInt32 to 0).
	FirstSequence, LastSequence int32
	// FirstOffset and LastOffset are the offsets the batch got.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the batch's maxTimestamp.
	MaxTimestamp int64
}

// ProducerState is what the partition knows about one producer id: a copy,
// returned by Partition.ProducerState and Partition.Producers.
type ProducerState struct {
	// ProducerID is the producer id.
	ProducerID int64
	// Epoch is the producer's current epoch (batch.NoProducerEpoch when
	// none is known).
	Epoch int16
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote this producer's last transaction marker (-1 when none).
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1 when none is open.
	CurrentTxnFirstOffset int64
	// LastTimestamp is the max timestamp of the producer's last batch (or
	// marker); expiry measures idleness from it.
	LastTimestamp int64
	// Batches are the producer's last batches in its current epoch, oldest
	// first, at most five. After Open a producer whose batches precede the
	// snapshot Open loaded has only its last batch here (the snapshot
	// format keeps one per producer, as Kafka's).
	Batches []ProducerBatch
}

// AppendInfo is what AppendBatchInfo reports about an append.
type AppendInfo struct {
	// Base and LastOffset are the first and last offsets of the batch: the
	// ones it got now or, for a duplicate, the ones its original got.
	Base, LastOffset int64
	// Duplicate is true when the batch repeated one of its producer's
	// last five batches (same producer id, epoch, first and last
	// sequence): nothing was written and Base and LastOffset are the
	// original batch's. Kafka answers such a produce request with NONE (0)
	// and the original base offset.
	Duplicate bool
}

// producerEntry is one producer's state. The batches form a ring of the
// last producerBatchesKept, oldest at (next-n) mod producerBatchesKept.
// A later Transactions change adds its fields here.
type producerEntry struct {
	epoch            int16
	n, next          uint8
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1: no open transaction
	lastTimestamp    int64
	batches          [producerBatchesKept]ProducerBatch
}

// newProducerEntry returns the state of a producer the partition has not
// seen: no epoch, no batch.
func newProducerEntry() *producerEntry {
	return &producerEntry{epoch: batch.NoProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1, lastTimestamp: -1}
}

// at returns the i-th batch, oldest first. REQUIRES: i < e.n.
func (e *producerEntry) at(i int) *ProducerBatch {
	return &e.batches[(int(e.next)+producerBatchesKept-int(e.n)+i)%producerBatchesKept]
}

// last returns the newest batch, or nil.
func (e *producerEntry) last() *ProducerBatch {
	if e.n == 0 {
		return nil
	}
	return e.at(int(e.n) - 1)
}

// find returns the batch with this sequence range, or nil.
func (e *producerEntry) find(first, last int32) *ProducerBatch {
	for i := range int(e.n) {
		if b := e.at(i); b.FirstSequence == first && b.LastSequence == last {
			return b
		}
	}
	return nil
}

// setEpoch moves to epoch; a new epoch forgets the old epoch's batches
// (Kafka's maybeUpdateProducerEpoch).
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n, e.next = 0, 0
	}
}

// add remembers b as the newest batch, dropping the oldest beyond five.
func (e *producerEntry) add(b ProducerBatch) {
	e.batches[e.next] = b
	e.next = (e.next + 1) % producerBatchesKept
	if e.n < producerBatchesKept {
		e.n++
	}
	e.lastTimestamp = b.MaxTimestamp
}

// state returns an exported copy.
func (e *producerEntry) state(pid int64) ProducerState {
	s := ProducerState{ProducerID: pid, Epoch: e.epoch, CoordinatorEpoch: e.coordinatorEpoch,
		CurrentTxnFirstOffset: e.txnFirstOffset, LastTimestamp: e.lastTimestamp}
	for i := range int(e.n) {
		s.Batches = append(s.Batches, *e.at(i))
	}
	return s
}

// producerState is a partition's producers. Guarded by Partition.mu.
type producerState struct {
	m map[int64]*producerEntry
	// lastSweep is when expired producers were last removed (ms).
	lastSweep int64
	// ongoing are the open transactions, by first offset (txn.go).
	ongoing []OpenTxn
}

// reset forgets every producer.
func (s *producerState) reset() {
	s.m = make(map[int64]*producerEntry)
	s.ongoing = s.ongoing[:0]
}

// inSequence reports whether next follows last (wrapping at MaxInt32), as
// Kafka's ProducerAppendInfo.inSequence.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// check applies Kafka's leader-side rules (ProducerAppendInfo with origin
// CLIENT, and the duplicate search before it) to a producer batch bt
// (producer id >= 0). It returns the original batch when bt is a retry of
// one of the producer's last five batches, or an error, or (nil, nil) when
// bt may be appended.
func (s *producerState) check(bt batch.Batch) (*ProducerBatch, error) {
	pid, epoch, first := bt.ProducerID(), bt.ProducerEpoch(), bt.BaseSequence()
	if first < 0 {
		// Kafka's LogValidator: INVALID_RECORD.
		return nil, invalidBatchf(nil, "producer %d epoch %d: base sequence %d; a batch with a producer id needs a sequence >= 0", pid, epoch, first)
	}
	e := s.m[pid]
	if e == nil {
		// Unknown producer (new, expired, or its batches were deleted):
		// any sequence is accepted, as Kafka does.
		return nil, nil
	}
	if epoch == e.epoch {
		if d := e.find(first, bt.LastSequence()); d != nil {
			return d, nil
		}
	}
	if epoch < e.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than its current epoch %d (sequences %d..%d)",
			ErrInvalidProducerEpoch, pid, epoch, e.epoch, first, bt.LastSequence())
	}
	if epoch != e.epoch {
		if first != 0 && e.epoch != batch.NoProducerEpoch {
			return nil, fmt.Errorf("%w: producer %d new epoch %d (current %d) starts at sequence %d, not 0",
				ErrOutOfOrderSequence, pid, epoch, e.epoch, first)
		}
	} else if e.epoch != batch.NoProducerEpoch {
		last := batch.NoSequence
		if l := e.last(); l != nil {
			last = l.LastSequence
		}
		if !inSequence(last, first) {
			return nil, fmt.Errorf("%w: producer %d epoch %d: sequences %d..%d after last sequence %d",
				ErrOutOfOrderSequence, pid, epoch, first, bt.LastSequence(), last)
		}
	}
	if e.txnFirstOffset >= 0 && !bt.Attributes().IsTransactional() {
		return nil, fmt.Errorf("%w: producer %d epoch %d sent a non-transactional batch while its transaction from offset %d is open",
			ErrInvalidTxnState, pid, epoch, e.txnFirstOffset)
	}
	return nil, nil
}

// update records the stored batch bt (producer id >= 0) without checking
// it: every append path calls it after the batch was written, and recovery
// replays the log through it (Kafka's replica path checks nothing either).
// now returns the wall clock in ms; it is called only when a producer is
// added, to sweep expired ones at most every producerSweepEvery. It
// returns the transaction a marker ended (txn.go), if any.
func (s *producerState) update(bt batch.Batch, expiration time.Duration, now func() int64) completedTxn {
	pid := bt.ProducerID()
	e := s.m[pid]
	if e == nil {
		if now != nil && expiration > 0 {
			if t := now(); t-s.lastSweep >= min(expiration, producerSweepEvery).Milliseconds() {
				s.expire(t, expiration)
			}
		}
		e = newProducerEntry()
		s.m[pid] = e
	}
	attrs := bt.Attributes()
	if attrs.IsControl() {
		return s.updateMarker(pid, e, bt)
	}
	e.setEpoch(bt.ProducerEpoch())
	e.add(ProducerBatch{FirstSequence: bt.BaseSequence(), LastSequence: bt.LastSequence(),
		FirstOffset: bt.BaseOffset(), LastOffset: bt.LastOffset(), MaxTimestamp: bt.MaxTimestamp()})
	if attrs.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = bt.BaseOffset()
		s.beginTxn(OpenTxn{ProducerID: pid, FirstOffset: bt.BaseOffset(), StartTimestamp: bt.MaxTimestamp()})
	}
	return completedTxn{}
}

// updateMarker records a control batch: a transaction marker ends the open
// transaction and carries the coordinator's epoch (Kafka's
// appendEndTxnMarker); it returns the transaction it ended (none when the
// producer had no open one: such a marker changes no last stable offset
// and no transaction index, as in Kafka). An empty control batch
// (compaction removed its record) changes nothing, as in Kafka.
func (s *producerState) updateMarker(pid int64, e *producerEntry, bt batch.Batch) completedTxn {
	if bt.RecordsCount() == 0 {
		return completedTxn{}
	}
	abort := false
	var dec batch.Decoder
	for r, err := range bt.All(&dec) {
		if err != nil {
			break
		}
		cr, err := batch.ParseControlRecord(r)
		if err != nil || !cr.Type.IsTxnMarker() {
			return completedTxn{}
		}
		e.coordinatorEpoch = cr.CoordinatorEpoch
		abort = cr.Type == batch.ControlAbort
		break
	}
	var c completedTxn
	if e.txnFirstOffset >= 0 {
		c = completedTxn{ok: true, abort: abort, pid: pid, first: e.txnFirstOffset, last: bt.BaseOffset()}
		s.endTxn(pid)
	}
	e.setEpoch(bt.ProducerEpoch())
	e.txnFirstOffset = -1
	e.lastTimestamp = bt.MaxTimestamp()
	return c
}

// expire removes the producers idle for at least expiration (by their last
// timestamp) that have no open transaction, as Kafka's
// removeExpiredProducers.
func (s *producerState) expire(nowMs int64, expiration time.Duration) {
	s.lastSweep = nowMs
	if expiration <= 0 {
		return
	}
	limit := expiration.Milliseconds()
	maps.DeleteFunc(s.m, func(_ int64, e *producerEntry) bool {
		return e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= limit
	})
}

// sortedIDs returns the producer ids in ascending order.
func (s *producerState) sortedIDs() []int64 {
	return slices.Sorted(maps.Keys(s.m))
}

// nowMs returns the configured clock in milliseconds.
func (p *Partition) nowMs() int64 { return p.cfg.Now().UnixMilli() }

// checkProducerLocked runs the producer checks for AppendBatch. done is
// true when AppendBatch must return now: with err, or with the original
// batch's offsets (info.Duplicate). REQUIRES: mu held.
func (p *Partition) checkProducerLocked(bt batch.Batch) (info AppendInfo, done bool, err error) {
	if bt.ProducerID() < 0 {
		return AppendInfo{}, false, nil
	}
	d, err := p.mu.producers.check(bt)
	if err != nil {
		return AppendInfo{Base: -1, LastOffset: -1}, true, err
	}
	if d != nil {
		return AppendInfo{Base: d.FirstOffset, LastOffset: d.LastOffset, Duplicate: true}, true, nil
	}
	return AppendInfo{}, false, nil
}

// observeProducerLocked records a written batch in the producer state;
// for a transactional one it also keeps the transaction index and the last
// stable offset (txn.go). REQUIRES: mu held.
func (p *Partition) observeProducerLocked(bt batch.Batch) {
	if bt.ProducerID() < 0 {
		return
	}
	c := p.mu.producers.update(bt, p.cfg.ProducerIDExpiration, p.nowMs)
	if bt.Attributes().IsTransactional() {
		p.observeTxnLocked(c)
	}
}

// AppendBatchInfo is AppendBatch reporting whether the batch was a retry:
// for a duplicate (same producer id and epoch, and the first and last
// sequence of one of that producer's last five batches) nothing is written
// and info holds the original batch's offsets with Duplicate set. On error
// info.Base and info.LastOffset are -1.
func (p *Partition) AppendBatchInfo(b []byte) (info AppendInfo, err error) {
	if _, err := p.appendBatch(context.Background(), b, &info); err != nil {
		return AppendInfo{Base: -1, LastOffset: -1}, err
	}
	return info, nil // appendBatch filled it in: b is not read again here
}

// ProducerState returns what the partition knows about producer pid, and
// false when it knows nothing (never seen, or expired).
//
// It covers every batch and marker the partition has accepted, written or
// not yet: under Config.FlushMessages == 1 an append may wait, its offsets
// and sequence numbers assigned, for the group syncer to write it (then a
// ProducerBatch's offsets may be at or past LogEndOffset), and none of
// them is acknowledged before its fdatasync. If that write or fdatasync
// fails, the partition fails (ErrFailed) with the state as it was
// accepted; a reopen recovers it from the files. ProducerState writes
// nothing and does not wait for the group syncer or a TruncateTo; it
// answers after a failure too (ErrClosed only once closed).
func (p *Partition) ProducerState(pid int64) (ProducerState, bool, error) {
	p.lockReader() // groupwrite.go
	defer p.mu.Unlock()
	if p.mu.closed {
		return ProducerState{}, false, ErrClosed
	}
	e := p.mu.producers.m[pid]
	if e == nil {
		return ProducerState{}, false, nil
	}
	return e.state(pid), true, nil
}

// Producers returns the state of every producer the partition knows, in
// ascending producer id order: ProducerState's answer for each, with the
// same coverage (accepted batches, written or still waiting for the group
// syncer's write), and like it without writing or waiting.
func (p *Partition) Producers() ([]ProducerState, error) {
	p.lockReader() // groupwrite.go
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	out := make([]ProducerState, 0, len(p.mu.producers.m))
	for _, pid := range p.mu.producers.sortedIDs() {
		out = append(out, p.mu.producers.m[pid].state(pid))
	}
	return out, nil
}

// ExpireProducers removes the producers idle for at least
// Config.ProducerIDExpiration by Config.Now (the partition also does it on
// its own at each roll and, at most every 10 minutes, when a new producer
// appears), and returns how many it removed.
func (p *Partition) ExpireProducers() (int, error) {
	// lockAppender: the queued batches' producer state was recorded when
	// they were queued, so the queue need not be written first (which
	// would put a write beside the group syncer's fdatasync, groupwrite.go).
	p.lockAppender()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return 0, err
	}
	n := len(p.mu.producers.m)
	p.mu.producers.expire(p.nowMs(), p.cfg.ProducerIDExpiration)
	return n - len(p.mu.producers.m), nil
}
