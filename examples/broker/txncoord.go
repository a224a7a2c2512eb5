package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// The transaction coordinator: Kafka's TransactionCoordinator for a single
// node. Every transactional id's state is a TransactionLogValue record in
// __transaction_state-0 (txnlog.go), appended and synced before the
// request that changed it is answered; the latest record of an id is its
// state, and the partition is compacted like __consumer_offsets.
//
// The state machine is Kafka's:
//
//	Empty/CompleteCommit/CompleteAbort --AddPartitionsToTxn/AddOffsetsToTxn--> Ongoing
//	Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
//	Ongoing --EndTxn(abort), InitProducerID, timeout--> PrepareAbort --markers--> CompleteAbort
//	any completed state --InitProducerID--> Empty with the epoch bumped
//
// Ending a transaction writes PrepareCommit (or PrepareAbort), then a
// marker to every partition of the transaction (partition syncs), then
// CompleteCommit (or CompleteAbort). Kafka answers EndTxn once the Prepare
// record is durable and writes the markers asynchronously; here EndTxn
// answers once the markers are durable, so the next transaction of the
// producer never finds the previous one still completing. A crash between
// Prepare and Complete is finished when the broker starts again (the
// markers are written again where they may already be: a marker for a
// producer without an open transaction changes nothing but the log).
//
// InitProducerID of an id whose transaction is open aborts that
// transaction with the epoch bumped (the markers carry the new epoch, so
// the old instance is fenced in every partition it wrote to) and hands the
// new instance that epoch. A transaction open longer than its timeout is
// aborted the same way by a background check.
//
// Concurrency: one mutex (mu) serializes every operation, including its
// durable writes, so the records in __transaction_state are in the order
// the states changed. Lock order: txnCoordinator.mu, then offsetStore.mu
// (markers and transactional offsets in __consumer_offsets-0), then the
// partitions' own locks; nothing takes mu while holding one of those (the
// produce path never takes it).

const (
	// defaultTxnMaxTimeout is transaction.max.timeout.ms: 15 minutes.
	defaultTxnMaxTimeout = 15 * time.Minute
	// defaultTxnCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: 10 s.
	defaultTxnCheckInterval = 10 * time.Second
)

// txnMeta is one transactional id's state in memory: its latest record and
// the markers already written while completing it.
type txnMeta struct {
	id string
	txnRecord
	// marked holds the partitions whose marker was written while the
	// transaction is in PrepareCommit/PrepareAbort (so a retry writes the
	// rest only). Not durable: recovery writes every marker again.
	marked map[topicPartition]bool
	// lastEpoch is the epoch before the coordinator bumped it on its own
	// (a timeout abort), or -1: InitProducerID v3+ from the producer it
	// fenced may still name it (Kafka's lastProducerEpoch, kept in
	// memory only, as Kafka keeps it).
	lastEpoch int16
	// retryPID and retryEpoch are the producer id and epoch an
	// InitProducerID v3+ named when it bumped the epoch (or gave a new
	// producer id), or -1: the same request again is a retry whose answer
	// was lost, answered with the current id and epoch without another
	// bump (Kafka's lastProducerEpoch and previous producer id after such
	// a bump; in memory only, as there).
	retryPID   int64
	retryEpoch int16
}

// txnCoordinator owns every transactional id. Safe for concurrent use.
type txnCoordinator struct {
	log     *slog.Logger
	store   *store
	offsets *offsetStore
	// ids hands out producer ids; set once, before the coordinator is
	// shared.
	ids *producerIDs
	p   *plog.Partition // __transaction_state-0
	// w writes p's batches durably (AppendBatch and Sync on one node,
	// through raft in cluster mode).
	w          stateWriter
	maxTimeout time.Duration
	// Cluster mode (coordstate.go); nil on one node. markers writes a
	// transaction marker to a partition through its raft leader (the
	// offsets topic's too); active reports whether this node is the
	// coordinator now, with its state loaded; spread maps the
	// allocator's ids to this node's share of them.
	markers func(tp topicPartition, m batch.TxnMarker) error
	active  func() bool
	spread  func(int64) int64
	// now is the clock of transaction start times and timeouts; tests
	// replace it before the coordinator is shared.
	now func() time.Time

	mu struct {
		sync.Mutex
		txns map[string]*txnMeta
		bld  *batch.Builder
	}

	stop chan struct{}
	done chan struct{}
}

// errTxnBusy is completeLocked's failure to write a marker or the Complete
// record; the transaction stays in its Prepare state and is retried.
var errTxnBusy = errors.New("broker: transaction markers not yet written")

// openTxnCoordinator opens (creating) __transaction_state-0, replays it,
// and finishes every transaction a stop left in PrepareCommit or
// PrepareAbort. A record that does not decode stops the broker from
// starting (an error naming the offset), rather than losing a transaction
// it cannot read.
//
// The caller sets ids before sharing the coordinator (the allocator's
// floor includes the producer ids the replayed state holds).
//
// clustered (cluster mode) skips the replay: the state is loaded when this
// node becomes the leader of __transaction_state-0 (coordstate.go).
func openTxnCoordinator(st *store, offsets *offsetStore, logger *slog.Logger, maxTimeout time.Duration, clustered bool) (*txnCoordinator, error) {
	ps, err := st.topic(txnStateTopic, true)
	if err != nil {
		return nil, err
	}
	if maxTimeout <= 0 {
		maxTimeout = defaultTxnMaxTimeout
	}
	c := &txnCoordinator{log: logger, store: st, offsets: offsets, p: ps[0], w: localWriter{ps[0]},
		maxTimeout: maxTimeout, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	c.mu.txns = make(map[string]*txnMeta)
	c.mu.bld = batch.NewBuilder(batch.BuilderOptions{})
	if clustered {
		return c, nil // loaded when this node becomes the coordinator
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(ps); err != nil {
		return nil, err
	}
	return c, nil
}

// loadLocked replays every partition of __transaction_state into an empty
// state and completes the transactions left in PrepareCommit or
// PrepareAbort (a failure to complete one is logged; the timeout check
// retries it).
// REQUIRES: c.mu held, or c not yet shared.
func (c *txnCoordinator) loadLocked(ps []*plog.Partition) error {
	clear(c.mu.txns)
	// A data directory taken over from Kafka has more partitions (50 by
	// default, an id's records in the one its name hashes to): they are
	// replayed first, and partition 0, where this broker writes, last.
	for i := range ps {
		p := ps[(i+1)%len(ps)]
		if err := c.replay(p); err != nil {
			return fmt.Errorf("replaying %s: %w", p.Dir(), err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.mu.txns)) {
		m := c.mu.txns[id]
		if m.status == txnPrepareCommit || m.status == txnPrepareAbort {
			c.log.Info("completing a transaction the broker stopped in", "transactional_id", id, "state", m.status, "partitions", len(m.partitions))
			if err := c.completeLocked(m); err != nil {
				c.log.Error("completing transaction (retried in the background)", "transactional_id", id, "err", err)
			}
		}
	}
	return nil
}

// replay reads a partition of __transaction_state to its high watermark;
// the last record of a transactional id is its state, a tombstone removes
// it.
func (c *txnCoordinator) replay(p *plog.Partition) error {
	var dec batch.Decoder
	return readToHighWatermark(p, func(rest []byte, off int64) error { // offsets.go
		return c.replayBatches(rest, off, &dec)
	})
}

// replayBatches applies the records at or after from in the batches rest.
func (c *txnCoordinator) replayBatches(rest []byte, from int64, dec *batch.Decoder) error {
	for len(rest) > 0 {
		var b batch.Batch
		var err error
		b, rest, err = batch.Parse(rest)
		if err == nil {
			err = dec.Validate(b)
		}
		if err != nil {
			return err
		}
		if b.Attributes().IsControl() {
			continue
		}
		for rec, err := range b.All(dec) {
			if err != nil {
				return err
			}
			if rec.Offset < from {
				continue
			}
			id, err := decodeTxnKey(rec.Key)
			if err != nil {
				return fmt.Errorf("offset %d: %w", rec.Offset, err)
			}
			if rec.Value == nil {
				delete(c.mu.txns, id)
				continue
			}
			v, err := decodeTxnValue(rec.Value)
			if err != nil {
				return fmt.Errorf("offset %d (transactional id %q): %w", rec.Offset, id, err)
			}
			if v.status == txnPrepareEpochFence {
				// Kafka never writes it; read it as the abort it leads to.
				v.status = txnPrepareAbort
			}
			c.mu.txns[id] = &txnMeta{id: id, txnRecord: v, lastEpoch: -1, retryPID: -1, retryEpoch: -1}
		}
	}
	return nil
}

// start runs the timeout check every interval (negative: never) until
// close.
func (c *txnCoordinator) start(interval time.Duration) {
	if interval == 0 {
		interval = defaultTxnCheckInterval
	}
	if interval < 0 {
		close(c.done)
		return
	}
	go func() {
		defer close(c.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			if c.active != nil && !c.active() {
				continue // another node coordinates
			}
			c.abortTimedOut()
		}
	}()
}

// close stops the timeout check.
func (c *txnCoordinator) close() {
	close(c.stop)
	<-c.done
}

// coordinatorEpoch is the epoch markers carry: the leader epoch of
// __transaction_state-0 (a single node keeps it; never below 0).
func (c *txnCoordinator) coordinatorEpoch() int32 {
	return max(c.p.LeaderEpoch(), 0)
}

// writeLocked makes rec the durable state of m: one record appended to
// __transaction_state-0 and synced, then m updated.
// REQUIRES: c.mu held.
func (c *txnCoordinator) writeLocked(m *txnMeta, rec txnRecord) error {
	rec.updateMs = c.now().UnixMilli()
	sortPartitions(rec.partitions)
	c.mu.bld.Reset(batch.BuilderOptions{})
	err := c.mu.bld.Add(batch.Record{
		Key:       encodeTxnKey(nil, m.id),
		Value:     encodeTxnValue(nil, rec),
		Timestamp: rec.updateMs,
	})
	if err != nil {
		return err
	}
	b, err := c.mu.bld.Build()
	if err != nil {
		return err
	}
	if err := c.w.appendBatch(b); err != nil {
		return fmt.Errorf("writing transaction state of %q: %w", m.id, err)
	}
	if rec.status != m.status || rec.producerEpoch != m.producerEpoch {
		m.marked = nil
	}
	m.txnRecord = rec
	c.mu.txns[m.id] = m
	return nil
}

// completeLocked writes the marker of m's Prepare state to every partition
// of the transaction not yet marked, syncs them, and records the Complete
// state. On failure m stays in its Prepare state (errTxnBusy).
// REQUIRES: c.mu held; m is in PrepareCommit or PrepareAbort.
func (c *txnCoordinator) completeLocked(m *txnMeta) error {
	commit := m.status == txnPrepareCommit
	typ := batch.ControlAbort
	if commit {
		typ = batch.ControlCommit
	}
	if m.marked == nil {
		m.marked = make(map[topicPartition]bool)
	}
	epoch := c.coordinatorEpoch()
	for _, tp := range m.partitions {
		if m.marked[tp] {
			continue
		}
		if c.markers != nil {
			err := c.markers(tp, batch.TxnMarker{Type: typ, CoordinatorEpoch: epoch, ProducerID: m.producerID,
				ProducerEpoch: m.producerEpoch, Timestamp: c.now().UnixMilli()})
			if err != nil && !c.markerSuperseded(m, tp, err) {
				return fmt.Errorf("%w: %s marker in %s-%d: %v", errTxnBusy, typ, tp.topic, tp.partition, err)
			}
			m.marked[tp] = true
			continue
		}
		if tp.topic == offsetsTopic {
			if err := c.offsets.endTxn(m.producerID, m.producerEpoch, epoch, commit); err != nil && !c.markerSuperseded(m, tp, err) {
				return fmt.Errorf("%w: %s-%d: %v", errTxnBusy, tp.topic, tp.partition, err)
			}
			m.marked[tp] = true
			continue
		}
		ps, err := c.store.topic(tp.topic, false)
		if errors.Is(err, errUnknownTopic) || (err == nil && int(tp.partition) >= len(ps)) || errors.Is(err, errInvalidTopic) {
			// The partition is gone: nothing to mark (Kafka skips
			// partitions it no longer has).
			c.log.Warn("transaction partition no longer exists; no marker written", "transactional_id", m.id, "topic", tp.topic, "partition", tp.partition)
			m.marked[tp] = true
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s-%d: %v", errTxnBusy, tp.topic, tp.partition, err)
		}
		part := ps[tp.partition]
		_, err = part.AppendMarker(batch.TxnMarker{
			Type:             typ,
			CoordinatorEpoch: epoch,
			ProducerID:       m.producerID,
			ProducerEpoch:    m.producerEpoch,
			Timestamp:        c.now().UnixMilli(),
		})
		if err == nil {
			err = part.Sync()
		}
		if err != nil && !c.markerSuperseded(m, tp, err) {
			return fmt.Errorf("%w: %s marker in %s-%d: %v", errTxnBusy, typ, tp.topic, tp.partition, err)
		}
		m.marked[tp] = true
	}
	done := m.txnRecord
	done.status = txnCompleteAbort
	if commit {
		done.status = txnCompleteCommit
	}
	done.partitions = nil
	if err := c.writeLocked(m, done); err != nil {
		return fmt.Errorf("%w: %v", errTxnBusy, err)
	}
	return nil
}

// markerSuperseded reports whether a marker's failure means the partition
// knows a newer producer epoch or coordinator epoch than the marker's
// (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED): retrying
// cannot succeed, so the partition is given up, as Kafka's marker channel
// gives up on such an answer, and logged. Other failures are retried.
func (c *txnCoordinator) markerSuperseded(m *txnMeta, tp topicPartition, err error) bool {
	if !errors.Is(err, plog.ErrInvalidProducerEpoch) && !errors.Is(err, plog.ErrTransactionCoordinatorFenced) {
		return false
	}
	c.log.Warn("transaction marker refused: the partition knows a newer epoch; not retried",
		"transactional_id", m.id, "topic", tp.topic, "partition", tp.partition, "err", err)
	return true
}

// endLocked moves an Ongoing m to PrepareCommit or PrepareAbort (at epoch)
// and completes it.
// REQUIRES: c.mu held; m is Ongoing.
func (c *txnCoordinator) endLocked(m *txnMeta, commit bool, epoch int16) error {
	prep := m.txnRecord
	prep.partitions = slices.Clone(m.partitions)
	prep.producerEpoch = epoch
	prep.status = txnPrepareAbort
	if commit {
		prep.status = txnPrepareCommit
	}
	if err := c.writeLocked(m, prep); err != nil {
		return err
	}
	return c.completeLocked(m)
}

// errCode maps a failed durable write or marker to the code the client
// retries on.
func (c *txnCoordinator) errCode(op string, m *txnMeta, err error) int16 {
	c.log.Error("transaction coordinator", "op", op, "transactional_id", m.id, "err", err)
	if errors.Is(err, errTxnBusy) {
		return kerr.ConcurrentTransactions.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// initProducerID answers InitProducerID for transactional id txnID: a new
// id gets a fresh producer id at epoch 0; a known one gets its epoch
// bumped (a new producer id when the epoch is exhausted), after its open
// transaction, if any, was aborted. reqPID and reqEpoch are the v3+
// fields (-1: not given); given, they must be the id's current ones, or
// name the id and epoch an earlier such request bumped (a retry: answered
// with the current id and epoch, not bumped again, as Kafka answers it).
func (c *txnCoordinator) initProducerID(txnID string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, int16) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.maxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mu.txns[txnID]
	if m == nil || m.status == txnDead {
		pid, err := c.allocate()
		if err != nil {
			c.log.Error("no producer id", "err", err)
			return -1, -1, kerr.CoordinatorLoadInProgress.Code
		}
		m = &txnMeta{id: txnID, lastEpoch: -1, retryPID: -1, retryEpoch: -1}
		rec := txnRecord{producerID: pid, producerEpoch: 0, timeoutMs: timeoutMs, status: txnEmpty, startMs: -1}
		if err := c.writeLocked(m, rec); err != nil {
			return -1, -1, c.errCode("InitProducerID", m, err)
		}
		return pid, 0, 0
	}
	current := reqPID == m.producerID && reqEpoch == m.producerEpoch
	retry := reqPID >= 0 && !current && reqPID == m.retryPID && reqEpoch == m.retryEpoch
	if reqPID >= 0 && !retry && (reqPID != m.producerID || (reqEpoch != m.producerEpoch && reqEpoch != m.lastEpoch)) {
		return -1, -1, kerr.ProducerFenced.Code
	}
	m.lastEpoch, m.retryPID, m.retryEpoch = -1, -1, -1
	switch m.status {
	case txnPrepareCommit, txnPrepareAbort:
		if err := c.completeLocked(m); err != nil {
			return -1, -1, c.errCode("InitProducerID", m, err)
		}
	case txnOngoing:
		// Fence the old instance: abort with the epoch bumped.
		retry = false
		if err := c.endLocked(m, false, m.producerEpoch+1); err != nil {
			return -1, -1, c.errCode("InitProducerID", m, err)
		}
		if m.producerEpoch < math.MaxInt16-1 {
			rec := m.txnRecord
			rec.status, rec.timeoutMs, rec.startMs = txnEmpty, timeoutMs, -1
			if err := c.writeLocked(m, rec); err != nil {
				return -1, -1, c.errCode("InitProducerID", m, err)
			}
			return m.producerID, m.producerEpoch, 0
		}
	}
	rec := m.txnRecord
	rec.status, rec.timeoutMs, rec.startMs, rec.partitions = txnEmpty, timeoutMs, -1, nil
	switch {
	case retry:
		// Kafka keeps the epoch: the producer already holds it.
	case m.producerEpoch >= math.MaxInt16-1:
		pid, err := c.allocate()
		if err != nil {
			c.log.Error("no producer id", "err", err)
			return -1, -1, kerr.CoordinatorLoadInProgress.Code
		}
		rec.producerID, rec.producerEpoch = pid, 0
	default:
		rec.producerEpoch++
	}
	if err := c.writeLocked(m, rec); err != nil {
		return -1, -1, c.errCode("InitProducerID", m, err)
	}
	if reqPID >= 0 && (rec.producerID != reqPID || rec.producerEpoch != reqEpoch) {
		m.retryPID, m.retryEpoch = reqPID, reqEpoch
	}
	return m.producerID, m.producerEpoch, 0
}

// allocate returns a fresh producer id (this node's share of them in
// cluster mode).
func (c *txnCoordinator) allocate() (int64, error) {
	id, err := c.ids.allocate()
	if err == nil && c.spread != nil {
		id = c.spread(id)
	}
	return id, err
}

// checkProducerLocked validates the producer id and epoch a request carries
// for txnID, and returns the id's state.
// REQUIRES: c.mu held.
func (c *txnCoordinator) checkProducerLocked(txnID string, pid int64, epoch int16) (*txnMeta, int16) {
	m := c.mu.txns[txnID]
	switch {
	case m == nil || m.status == txnDead || m.producerID != pid:
		return nil, kerr.InvalidProducerIDMapping.Code
	case epoch != m.producerEpoch:
		return nil, kerr.ProducerFenced.Code
	}
	return m, 0
}

// addPartitions adds partitions to txnID's transaction, starting one when
// none is open. A transaction still completing answers
// CONCURRENT_TRANSACTIONS (the client retries).
func (c *txnCoordinator) addPartitions(txnID string, pid int64, epoch int16, parts []topicPartition) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, code := c.checkProducerLocked(txnID, pid, epoch)
	if code != 0 {
		return code
	}
	switch m.status {
	case txnPrepareCommit, txnPrepareAbort:
		if err := c.completeLocked(m); err != nil {
			return c.errCode("AddPartitionsToTxn", m, err)
		}
	case txnPrepareEpochFence, txnDead:
		return kerr.ConcurrentTransactions.Code
	}
	rec := m.txnRecord
	if m.status != txnOngoing {
		rec.partitions = nil
		rec.startMs = c.now().UnixMilli()
	}
	have := make(map[topicPartition]bool, len(rec.partitions))
	for _, tp := range rec.partitions {
		have[tp] = true
	}
	grown := false
	rec.partitions = slices.Clone(rec.partitions)
	for _, tp := range parts {
		if !have[tp] {
			have[tp] = true
			rec.partitions = append(rec.partitions, tp)
			grown = true
		}
	}
	if m.status == txnOngoing && !grown {
		return 0
	}
	rec.status = txnOngoing
	if err := c.writeLocked(m, rec); err != nil {
		return c.errCode("AddPartitionsToTxn", m, err)
	}
	return 0
}

// endTxn commits or aborts txnID's transaction. A retry of an end that
// already completed is answered NONE; ending it the other way, or ending
// none, INVALID_TXN_STATE.
func (c *txnCoordinator) endTxn(txnID string, pid int64, epoch int16, commit bool) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, code := c.checkProducerLocked(txnID, pid, epoch)
	if code != 0 {
		return code
	}
	switch m.status {
	case txnOngoing:
		if err := c.endLocked(m, commit, m.producerEpoch); err != nil {
			return c.errCode("EndTxn", m, err)
		}
		return 0
	case txnPrepareCommit, txnPrepareAbort:
		if (m.status == txnPrepareCommit) != commit {
			return kerr.InvalidTxnState.Code
		}
		if err := c.completeLocked(m); err != nil {
			return c.errCode("EndTxn", m, err)
		}
		return 0
	case txnCompleteCommit:
		if commit {
			return 0
		}
	case txnCompleteAbort:
		if !commit {
			return 0
		}
	}
	return kerr.InvalidTxnState.Code
}

// commitOffsets runs write, TxnOffsetCommit's durable write of the
// offsets, if txnID's transaction is open with the group's partition added
// (AddOffsetsToTxn) and the producer id and epoch are current. The check
// and the write happen under mu, so an EndTxn cannot end the transaction
// between them (offsets written after its marker would wait for the
// producer's next transaction). The code is the check's; err is write's.
func (c *txnCoordinator) commitOffsets(txnID string, pid int64, epoch int16, write func() error) (int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, code := c.checkProducerLocked(txnID, pid, epoch)
	if code != 0 {
		return code, nil
	}
	if m.status != txnOngoing || !slices.Contains(m.partitions, topicPartition{topic: offsetsTopic}) {
		return kerr.InvalidTxnState.Code, nil
	}
	return 0, write()
}

// abortTimedOut aborts every transaction open longer than its timeout,
// with the producer epoch bumped (the producer is fenced, as Kafka fences
// it), retries completing transactions left in a Prepare state, and aborts
// hanging transactions (abortHangingLocked).
func (c *txnCoordinator) abortTimedOut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now().UnixMilli()
	defer c.abortHangingLocked(now)
	for _, id := range slices.Sorted(maps.Keys(c.mu.txns)) {
		m := c.mu.txns[id]
		switch m.status {
		case txnOngoing:
			if now-m.startMs <= int64(m.timeoutMs) {
				continue
			}
			if m.producerEpoch >= math.MaxInt16-1 {
				// No epoch left to fence with: abort at this one.
				c.log.Info("aborting timed-out transaction", "transactional_id", id, "producer_id", m.producerID, "epoch", m.producerEpoch)
				if err := c.endLocked(m, false, m.producerEpoch); err != nil {
					c.log.Error("aborting timed-out transaction", "transactional_id", id, "err", err)
				}
				continue
			}
			c.log.Info("aborting timed-out transaction", "transactional_id", id, "producer_id", m.producerID, "epoch", m.producerEpoch+1, "timeout_ms", m.timeoutMs)
			last := m.producerEpoch
			err := c.endLocked(m, false, m.producerEpoch+1)
			if m.producerEpoch != last {
				m.lastEpoch, m.retryPID, m.retryEpoch = last, -1, -1
			}
			if err != nil {
				c.log.Error("aborting timed-out transaction", "transactional_id", id, "err", err)
			}
		case txnPrepareCommit, txnPrepareAbort:
			if err := c.completeLocked(m); err != nil {
				c.log.Error("completing transaction", "transactional_id", id, "err", err)
			}
		}
	}
}

// maxProducerID returns the largest producer id a transactional id holds,
// or -1.
func (c *txnCoordinator) maxProducerID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	largest := int64(-1)
	for _, m := range c.mu.txns {
		largest = max(largest, m.producerID)
	}
	return largest
}

// state returns a copy of txnID's state (tests).
func (c *txnCoordinator) state(txnID string) (txnRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mu.txns[txnID]
	if m == nil {
		return txnRecord{}, false
	}
	r := m.txnRecord
	r.partitions = slices.Clone(r.partitions)
	return r, true
}

// abortHangingLocked aborts hanging transactions: a transaction open in a
// partition (Partition.OpenTransactions) whose first batch is older than
// the longest timeout a transaction may have, and which no transaction of
// the coordinator covers (its producer's transaction is not open, or did
// not add that partition). Such a transaction would hold the partition's
// last stable offset, and every read_committed consumer, forever: a
// producer's batch that arrived after its EndTxn, a transactional batch
// sent without AddPartitionsToTxn, or one a directory taken over from
// elsewhere holds. The ABORT marker carries the producer's epoch in that
// partition (what Kafka's kafka-transactions.sh abort writes).
// REQUIRES: c.mu held.
func (c *txnCoordinator) abortHangingLocked(nowMs int64) {
	covered := make(map[int64]*txnMeta)
	for _, m := range c.mu.txns {
		switch m.status {
		case txnOngoing, txnPrepareCommit, txnPrepareAbort:
			covered[m.producerID] = m
		}
	}
	limit := c.maxTimeout.Milliseconds()
	for _, name := range c.store.topicNames() {
		if name == txnStateTopic {
			continue
		}
		ps, err := c.store.topic(name, false)
		if err != nil {
			continue
		}
		for i, part := range ps {
			open, err := part.OpenTransactions()
			if err != nil {
				continue
			}
			tp := topicPartition{topic: name, partition: int32(i)}
			for _, o := range open {
				if nowMs-o.StartTimestamp <= limit {
					continue
				}
				if m := covered[o.ProducerID]; m != nil && slices.Contains(m.partitions, tp) {
					continue
				}
				c.abortHanging(part, tp, o)
			}
		}
	}
}

// abortHanging writes the ABORT marker of one hanging transaction, at the
// producer's epoch in the partition, and logs it.
func (c *txnCoordinator) abortHanging(part *plog.Partition, tp topicPartition, o plog.OpenTxn) {
	st, ok, err := part.ProducerState(o.ProducerID)
	if err != nil || !ok {
		return
	}
	c.log.Warn("aborting a hanging transaction no transactional id covers",
		"topic", tp.topic, "partition", tp.partition, "producer_id", o.ProducerID, "epoch", st.Epoch, "first_offset", o.FirstOffset)
	switch {
	case c.markers != nil:
		err = c.markers(tp, batch.TxnMarker{Type: batch.ControlAbort, CoordinatorEpoch: max(c.coordinatorEpoch(), st.CoordinatorEpoch),
			ProducerID: o.ProducerID, ProducerEpoch: st.Epoch, Timestamp: c.now().UnixMilli()})
	case tp == (topicPartition{topic: offsetsTopic}):
		err = c.offsets.endTxn(o.ProducerID, st.Epoch, max(c.coordinatorEpoch(), st.CoordinatorEpoch), false)
	default:
		_, err = part.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, CoordinatorEpoch: max(c.coordinatorEpoch(), st.CoordinatorEpoch),
			ProducerID: o.ProducerID, ProducerEpoch: st.Epoch, Timestamp: c.now().UnixMilli()})
		if err == nil {
			err = part.Sync()
		}
	}
	if err != nil {
		c.log.Error("aborting a hanging transaction", "topic", tp.topic, "partition", tp.partition, "producer_id", o.ProducerID, "err", err)
	}
}
