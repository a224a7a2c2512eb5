package producer

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/partlog/partlog/batch"
)

// BatchesKept is how many of a producer's last batches a State keeps to
// recognise retries: Kafka's NUM_BATCHES_TO_RETAIN, the most batches a
// client may have in flight (max.in.flight.requests.per.connection = 5).
const BatchesKept = 5

// SweepEvery bounds how often Apply, adding a new producer, removes the
// expired ones (Kafka's producer.id.expiration.check.interval.ms: 10
// minutes; sooner when Config.Expiration is shorter).
const SweepEvery = 10 * time.Minute

// Config is what a State needs of its partition's configuration. The zero
// Config never expires a producer and reads time.Now.
type Config struct {
	// Expiration is producer.id.expiration.ms: a producer without an open
	// transaction whose last timestamp is at least this much older than
	// Now is forgotten. 0 never forgets one.
	Expiration time.Duration
	// Now is the clock expiry is measured with; nil means time.Now.
	Now func() time.Time
}

// Batch is one of a producer's last batches as a State keeps it.
type Batch struct {
	// FirstSequence and LastSequence are the batch's sequence range
	// (LastSequence wraps from math.MaxInt32 to 0).
	FirstSequence, LastSequence int32
	// FirstOffset and LastOffset are the offsets the batch got.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the batch's maxTimestamp (ms).
	MaxTimestamp int64
}

// Producer is a copy of what a State knows about one producer id.
type Producer struct {
	// ID is the producer id.
	ID int64
	// Epoch is the producer's current epoch (batch.NoProducerEpoch when
	// none is known).
	Epoch int16
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker (-1 when none).
	CoordinatorEpoch int32
	// TxnFirstOffset is the first offset of the producer's open
	// transaction, -1 when none is open.
	TxnFirstOffset int64
	// LastTimestamp is the max timestamp (ms) of the producer's last batch
	// or marker; expiry measures idleness from it.
	LastTimestamp int64
	// Batches are the producer's last batches in its current epoch, oldest
	// first, at most BatchesKept.
	Batches []Batch
}

// entry is one producer's state. The batches form a ring of the last
// BatchesKept, the oldest at (next-n) mod BatchesKept.
type entry struct {
	epoch            int16
	n, next          uint8
	coordinatorEpoch int32
	txnFirstOffset   int64 // -1: no open transaction
	lastTimestamp    int64
	batches          [BatchesKept]Batch
}

// newEntry returns the state of a producer not seen before: no epoch, no
// batch, no transaction.
func newEntry() *entry {
	return &entry{epoch: batch.NoProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1, lastTimestamp: -1}
}

// at returns the i-th batch, oldest first. REQUIRES: i < e.n.
func (e *entry) at(i int) *Batch {
	return &e.batches[(int(e.next)+BatchesKept-int(e.n)+i)%BatchesKept]
}

// last returns the newest batch, or nil.
func (e *entry) last() *Batch {
	if e.n == 0 {
		return nil
	}
	return e.at(int(e.n) - 1)
}

// find returns the batch with this sequence range, or nil.
func (e *entry) find(first, last int32) *Batch {
	for i := range int(e.n) {
		if b := e.at(i); b.FirstSequence == first && b.LastSequence == last {
			return b
		}
	}
	return nil
}

// setEpoch moves to epoch; a new epoch forgets the old one's batches
// (Kafka's maybeUpdateProducerEpoch).
func (e *entry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch = epoch
		e.n, e.next = 0, 0
	}
}

// add remembers b as the newest batch, dropping the oldest beyond
// BatchesKept.
func (e *entry) add(b Batch) {
	e.batches[e.next] = b
	e.next = (e.next + 1) % BatchesKept
	if e.n < BatchesKept {
		e.n++
	}
	e.lastTimestamp = b.MaxTimestamp
}

// producer returns an exported copy.
func (e *entry) producer(pid int64) Producer {
	p := Producer{ID: pid, Epoch: e.epoch, CoordinatorEpoch: e.coordinatorEpoch,
		TxnFirstOffset: e.txnFirstOffset, LastTimestamp: e.lastTimestamp}
	if e.n > 0 {
		p.Batches = make([]Batch, 0, e.n)
		for i := range int(e.n) {
			p.Batches = append(p.Batches, *e.at(i))
		}
	}
	return p
}

// State is a partition's producers and the transactions open in it. The
// zero State is not usable: NewState makes one. Not safe for concurrent
// use (see the package documentation).
type State struct {
	cfg Config
	// m holds every producer the state knows, by id.
	m map[int64]*entry
	// lastSweep is when expired producers were last removed (ms).
	lastSweep int64
	// ongoing are the open transactions, ordered by first offset.
	ongoing []OpenTxn
	// unreplicated are the transactions a marker ended at or above the
	// high watermark last given to SetHighWatermark, in marker order
	// (Kafka's unreplicatedTxns).
	unreplicated []doneTxn
}

// NewState returns an empty State.
func NewState(cfg Config) *State {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &State{cfg: cfg, m: make(map[int64]*entry)}
}

// nowMs reads the clock in milliseconds.
func (s *State) nowMs() int64 { return s.cfg.Now().UnixMilli() }

// Reset forgets every producer, every open transaction and every ended
// transaction whose marker the high watermark has not passed (Kafka's
// truncateAndReload clears them too: the replay that follows ends them
// again).
func (s *State) Reset() {
	s.m = make(map[int64]*entry)
	s.ongoing = s.ongoing[:0]
	s.unreplicated = s.unreplicated[:0]
}

// expired reports whether e has expired at nowMs: no open transaction and
// idle for at least Config.Expiration (Kafka's isProducerExpired).
func (s *State) expired(e *entry, nowMs int64) bool {
	return s.cfg.Expiration > 0 && e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= s.cfg.Expiration.Milliseconds()
}

// lookup returns producer pid's state, or nil when the state does not
// know it. A producer expired by now (Config.Now) is forgotten here, by
// whichever call asks about it first: Kafka removes it on a timer
// (producer.id.expiration.check.interval.ms), so its next batch is a new
// producer's there, whatever the order of events here.
func (s *State) lookup(pid int64) *entry {
	e := s.m[pid]
	if e != nil && s.cfg.Expiration > 0 && s.expired(e, s.nowMs()) {
		delete(s.m, pid)
		return nil
	}
	return e
}

// Producer returns what the state knows about producer pid, and false
// when it knows nothing (never seen, or expired by now).
func (s *State) Producer(pid int64) (Producer, bool) {
	e := s.lookup(pid)
	if e == nil {
		return Producer{}, false
	}
	return e.producer(pid), true
}

// Producers returns every producer the state knows, in ascending id
// order; the ones expired by now are forgotten first.
func (s *State) Producers() []Producer {
	if s.cfg.Expiration > 0 {
		s.expire(s.nowMs())
	}
	out := make([]Producer, 0, len(s.m))
	for _, pid := range slices.Sorted(maps.Keys(s.m)) {
		out = append(out, s.m[pid].producer(pid))
	}
	return out
}

// inSequence reports whether next follows last (wrapping at MaxInt32), as
// Kafka's ProducerAppendInfo.inSequence.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// Check applies Kafka's leader-side rules (ProducerAppendInfo with origin
// CLIENT, and the duplicate search before it) to bt, a batch of a producer
// (producer id >= 0) whose base sequence is >= 0 (the caller's batch
// validation refuses the rest, as Kafka's LogValidator does). It changes
// nothing, except that a producer expired by now is forgotten first (so
// its batch is a new producer's). It returns:
//
//   - isDup and the original batch when bt repeats one of its producer's
//     last five batches: same epoch, same first and last sequence;
//   - ErrInvalidProducerEpoch for an epoch older than the producer's
//     (for a producer the state does not know, below NoProducerEpoch);
//   - ErrOutOfOrderSequence for a new epoch not starting at sequence 0, or
//     a sequence that does not follow the producer's last one (after
//     math.MaxInt32 comes 0);
//   - ErrInvalidTxnState for a non-transactional batch while the
//     producer's transaction is open;
//   - otherwise nothing: bt may be written. A producer the state does not
//     know may start at any sequence, as in Kafka.
func (s *State) Check(bt batch.Batch) (dup Batch, isDup bool, err error) {
	pid, epoch, first := bt.ProducerID(), bt.ProducerEpoch(), bt.BaseSequence()
	e := s.lookup(pid)
	if e == nil {
		// A producer the state does not know has no epoch yet
		// (Kafka's empty entry): an epoch below that is older.
		if epoch < batch.NoProducerEpoch {
			return Batch{}, false, fmt.Errorf("%w: producer %d epoch %d is older than no epoch (%d), the epoch of a producer not known",
				ErrInvalidProducerEpoch, pid, epoch, batch.NoProducerEpoch)
		}
		return Batch{}, false, nil
	}
	if epoch == e.epoch {
		if d := e.find(first, bt.LastSequence()); d != nil {
			return *d, true, nil
		}
	}
	if epoch < e.epoch {
		return Batch{}, false, fmt.Errorf("%w: producer %d epoch %d is older than its current epoch %d (sequences %d..%d)",
			ErrInvalidProducerEpoch, pid, epoch, e.epoch, first, bt.LastSequence())
	}
	if epoch != e.epoch {
		if first != 0 && e.epoch != batch.NoProducerEpoch {
			return Batch{}, false, fmt.Errorf("%w: producer %d new epoch %d (current %d) starts at sequence %d, not 0",
				ErrOutOfOrderSequence, pid, epoch, e.epoch, first)
		}
	} else if e.epoch != batch.NoProducerEpoch {
		last := batch.NoSequence
		if l := e.last(); l != nil {
			last = l.LastSequence
		}
		if !inSequence(last, first) {
			return Batch{}, false, fmt.Errorf("%w: producer %d epoch %d: sequences %d..%d after last sequence %d",
				ErrOutOfOrderSequence, pid, epoch, first, bt.LastSequence(), last)
		}
	}
	if e.txnFirstOffset >= 0 && !bt.Attributes().IsTransactional() {
		return Batch{}, false, fmt.Errorf("%w: producer %d epoch %d sent a non-transactional batch while its transaction from offset %d is open",
			ErrInvalidTxnState, pid, epoch, e.txnFirstOffset)
	}
	return Batch{}, false, nil
}

// CheckMarker applies Kafka's appendEndTxnMarker fencing to a transaction
// marker m (its Type, ProducerID, ProducerEpoch and CoordinatorEpoch; the
// caller checked that it is an ABORT or COMMIT of a producer id and epoch
// >= 0): an epoch older than the producer's current one gives
// ErrInvalidProducerEpoch, a coordinator epoch older than the one of the
// producer's last marker ErrTransactionCoordinatorFenced. A producer the
// state does not know (or expired by now, which it forgets) is checked as
// one that has sent no batch and no marker: epoch NoProducerEpoch and
// coordinator epoch -1, so only a coordinator epoch below -1 is fenced.
// It changes nothing else.
func (s *State) CheckMarker(m batch.TxnMarker) error {
	e := s.lookup(m.ProducerID)
	if e == nil {
		e = &entry{epoch: batch.NoProducerEpoch, coordinatorEpoch: -1} // Kafka's empty entry; not kept
	}
	if m.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: %s marker for producer %d epoch %d, older than its current epoch %d",
			ErrInvalidProducerEpoch, m.Type, m.ProducerID, m.ProducerEpoch, e.epoch)
	}
	if m.CoordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: %s marker for producer %d with coordinator epoch %d, older than %d",
			ErrTransactionCoordinatorFenced, m.Type, m.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// Apply records bt, a batch of a producer (producer id >= 0) as it was
// stored (its offsets assigned), without checking it: the leader calls it
// after Check passed and the batch was written, a follower for every
// batch its leader sent. A data batch becomes the producer's newest (a new
// epoch forgets the old one's batches); its first transactional batch
// opens a transaction; a transaction marker ends the producer's open one
// and records the coordinator epoch (ok is then true and ended describes
// the transaction). An empty control batch (compaction removed its record)
// or a control batch that is not a transaction marker changes no
// transaction, as in Kafka; nor does one whose first record does not
// decode (a Kafka follower refuses it; a follower here checks headers
// only).
//
// A producer expired by now is forgotten first, so bt starts it anew
// (what Kafka's timer would have done). When bt's producer is new to the
// state, the expired producers are removed first, at most every
// SweepEvery (or Config.Expiration, when shorter), which bounds the
// memory the forgotten ones hold. For a known producer's data batch Apply
// does not allocate.
func (s *State) Apply(bt batch.Batch) (ended EndedTxn, ok bool) {
	return s.apply(bt, true)
}

// Replay is Apply for the batches a partition reads back from its log
// after loading a snapshot (Kafka's recovery): the same state changes,
// but no producer expires while the replay runs (Expire once it is
// done).
func (s *State) Replay(bt batch.Batch) (ended EndedTxn, ok bool) {
	return s.apply(bt, false)
}

// apply implements Apply and Replay.
func (s *State) apply(bt batch.Batch, sweep bool) (EndedTxn, bool) {
	pid := bt.ProducerID()
	var e *entry
	if sweep {
		e = s.lookup(pid)
	} else {
		e = s.m[pid]
	}
	if e == nil {
		if sweep && s.cfg.Expiration > 0 {
			if t := s.nowMs(); t-s.lastSweep >= min(s.cfg.Expiration, SweepEvery).Milliseconds() {
				s.expire(t)
			}
		}
		e = newEntry()
		s.m[pid] = e
	}
	attrs := bt.Attributes()
	if attrs.IsControl() {
		return s.applyMarker(pid, e, bt)
	}
	e.setEpoch(bt.ProducerEpoch())
	e.add(Batch{FirstSequence: bt.BaseSequence(), LastSequence: bt.LastSequence(),
		FirstOffset: bt.BaseOffset(), LastOffset: bt.LastOffset(), MaxTimestamp: bt.MaxTimestamp()})
	if attrs.IsTransactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = bt.BaseOffset()
		s.beginTxn(OpenTxn{ProducerID: pid, FirstOffset: bt.BaseOffset(), StartTimestamp: bt.MaxTimestamp()})
	}
	return EndedTxn{}, false
}

// applyMarker records a control batch of producer pid (state e): Kafka's
// appendEndTxnMarker.
func (s *State) applyMarker(pid int64, e *entry, bt batch.Batch) (EndedTxn, bool) {
	if bt.RecordsCount() == 0 {
		return EndedTxn{}, false
	}
	marker, abort := false, false
	var dec batch.Decoder
	for r, err := range bt.All(&dec) {
		if err != nil {
			break
		}
		cr, err := batch.ParseControlRecord(r)
		if err != nil || !cr.Type.IsTxnMarker() {
			break
		}
		e.coordinatorEpoch = cr.CoordinatorEpoch
		marker, abort = true, cr.Type == batch.ControlAbort
		break
	}
	if !marker {
		// Not known to be a marker (a record that does not decode
		// included): it ends nothing.
		return EndedTxn{}, false
	}
	var ended EndedTxn
	ok := false
	if e.txnFirstOffset >= 0 {
		s.completeTxn(pid, e.txnFirstOffset, bt.BaseOffset())
		ended = EndedTxn{ProducerID: pid, FirstOffset: e.txnFirstOffset, MarkerOffset: bt.BaseOffset(), Abort: abort,
			LastStableOffset: s.lastStableAfter(bt.BaseOffset())}
		ok = true
	}
	e.setEpoch(bt.ProducerEpoch())
	e.txnFirstOffset = -1
	e.lastTimestamp = bt.MaxTimestamp()
	return ended, ok
}

// Expire removes the producers idle for at least Config.Expiration (by
// their last timestamp, against Config.Now) that have no open transaction,
// as Kafka's removeExpiredProducers, and returns how many it removed. With
// no Expiration it removes none.
func (s *State) Expire() int {
	n := len(s.m)
	s.expire(s.nowMs())
	return n - len(s.m)
}

// expire is Expire at nowMs.
func (s *State) expire(nowMs int64) {
	s.lastSweep = nowMs
	if s.cfg.Expiration <= 0 {
		return
	}
	maps.DeleteFunc(s.m, func(_ int64, e *entry) bool { return s.expired(e, nowMs) })
}
