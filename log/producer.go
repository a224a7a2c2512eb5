package log

import (
	"context"
	"fmt"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
)

// Producer state: the partition's part that recognises an idempotent
// producer's retries and refuses gaps and fenced epochs, and keeps the open
// transactions, is package internal/producer's State (Kafka's
// ProducerStateManager and ProducerAppendInfo), held in mu.producers. The
// methods here lock, call it and publish; snapshot.go keeps its files.

// defaultProducerIDExpiration is producer.id.expiration.ms: 1 day.
const defaultProducerIDExpiration = 24 * time.Hour

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

// producerState returns the exported copy of what the state knows about
// one producer.
func producerState(pr producer.Producer) ProducerState {
	st := ProducerState{ProducerID: pr.ID, Epoch: pr.Epoch, CoordinatorEpoch: pr.CoordinatorEpoch,
		CurrentTxnFirstOffset: pr.TxnFirstOffset, LastTimestamp: pr.LastTimestamp}
	if len(pr.Batches) > 0 {
		st.Batches = make([]ProducerBatch, len(pr.Batches))
		for i, b := range pr.Batches {
			st.Batches[i] = ProducerBatch(b)
		}
	}
	return st
}

// checkProducer runs the producer checks of AppendBatch and AppendBuilder
// on the header bt against state, the partition's producer state. done is
// true when the append must return now: with err, or with the original
// batch's offsets (info.Duplicate). It changes nothing in state but
// forgetting an expired producer (producer.State.Check). REQUIRES: the
// lock that guards state (the partition's mu).
func checkProducer(state *producer.State, bt batch.Batch) (info AppendInfo, done bool, err error) {
	if bt.ProducerID() < 0 {
		return AppendInfo{}, false, nil
	}
	if first := bt.BaseSequence(); first < 0 {
		// Kafka's LogValidator: INVALID_RECORD.
		return AppendInfo{Base: -1, LastOffset: -1}, true, invalidBatchf(nil, "producer %d epoch %d: base sequence %d; a batch with a producer id needs a sequence >= 0",
			bt.ProducerID(), bt.ProducerEpoch(), first)
	}
	d, isDup, err := state.Check(bt)
	if err != nil {
		return AppendInfo{Base: -1, LastOffset: -1}, true, err
	}
	if isDup {
		return AppendInfo{Base: d.FirstOffset, LastOffset: d.LastOffset, Duplicate: true}, true, nil
	}
	return AppendInfo{}, false, nil
}

// observeProducerLocked records a written batch in the producer state; for
// a transactional one it also keeps the transaction index (an ABORT
// marker's entry, written to the active segment before the last stable
// offset moves past it) and publishes the last stable offset. A failure
// to write the index fails the partition (the marker is in the log; the
// recovery at the next Open rebuilds the entry). REQUIRES: mu held.
func (p *Partition) observeProducerLocked(bt batch.Batch) {
	if bt.ProducerID() < 0 {
		return
	}
	ended, ok := p.mu.producers.Apply(bt)
	// A control batch is a marker whatever its transactional bit (Kafka's
	// ProducerAppendInfo.append, and the replay, look at the control bit).
	if a := bt.Attributes(); !a.IsTransactional() && !a.IsControl() {
		return
	}
	if ok && ended.Abort {
		seg := p.segs.Load().active()
		if err := seg.AppendAbortedTxn(abortedTxn(ended)); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: transaction index of segment %d of %s: %w", seg.BaseOffset(), p.dir, err))
		}
		p.mu.dirDirty = true // the .txnindex may be new
		p.txn.aborted.Store(true)
	}
	p.publishUnstableLocked()
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
	pr, ok := p.mu.producers.Producer(pid)
	if !ok {
		return ProducerState{}, false, nil
	}
	return producerState(pr), true, nil
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
	prs := p.mu.producers.Producers()
	out := make([]ProducerState, len(prs))
	for i, pr := range prs {
		out[i] = producerState(pr)
	}
	return out, nil
}

// ExpireProducers removes the producers idle for at least
// Config.ProducerIDExpiration by Config.Now, and returns how many it
// removed. The partition needs no call to honour the expiration: it
// forgets an expired producer whenever it looks it up (an append, a
// marker, ProducerState, Producers), and also removes the expired ones at
// each roll and, at most every 10 minutes, when a new producer appears.
func (p *Partition) ExpireProducers() (int, error) {
	// lockAppender: the queued batches' producer state was recorded when
	// they were queued, so the queue need not be written first (which
	// would put a write beside the group syncer's fdatasync, groupwrite.go).
	p.lockAppender()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return 0, err
	}
	return p.mu.producers.Expire(), nil
}
