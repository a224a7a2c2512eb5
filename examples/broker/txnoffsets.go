package main

import (
	"fmt"
	"math"
	"time"

	"github.com/partlog/partlog/batch"
)

// Transactional offset commits, as Kafka's group coordinator keeps them:
// TxnOffsetCommit appends the offsets to __consumer_offsets-0 as a
// transactional batch of the producer (its id and epoch, sequences the
// partition accepts), so they are durable but not yet visible; the
// transaction coordinator's marker in that partition then publishes them
// (COMMIT) or drops them (ABORT). Replay after a restart sees the same
// batches and markers and rebuilds the same pending and committed offsets.

// commitTxn durably writes commits as part of producer pid's open
// transaction (epoch epoch): one transactional batch, appended and synced.
// The offsets stay pending until endTxn.
func (o *offsetStore) commitTxn(pid int64, epoch int16, commits []offsetCommit) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	seq, err := o.nextSequenceLocked(pid, epoch)
	if err != nil {
		return err
	}
	opts := batch.BuilderOptions{
		Producer:      &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: seq},
		Transactional: true,
	}
	if err := o.appendCommitsLocked(opts, commits); err != nil {
		return err
	}
	for _, c := range commits {
		o.pendOneLocked(pid, c.key, c.committed)
	}
	return nil
}

// nextSequenceLocked returns the base sequence the partition expects next
// from producer pid at epoch: one past its last batch's, or 0 for a
// producer it does not know or a new epoch.
// REQUIRES: o.mu held.
func (o *offsetStore) nextSequenceLocked(pid int64, epoch int16) (int32, error) {
	st, ok, err := o.p.ProducerState(pid)
	if err != nil {
		return 0, err
	}
	if !ok || st.Epoch != epoch || len(st.Batches) == 0 {
		return 0, nil
	}
	last := st.Batches[len(st.Batches)-1].LastSequence
	if last == math.MaxInt32 {
		return 0, nil
	}
	return last + 1, nil
}

// endTxn writes producer pid's transaction marker (COMMIT when commit) to
// __consumer_offsets-0, syncs it, and then publishes or drops the
// producer's pending offsets.
func (o *offsetStore) endTxn(pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := batch.TxnMarker{Type: batch.ControlAbort, CoordinatorEpoch: coordinatorEpoch,
		ProducerID: pid, ProducerEpoch: epoch, Timestamp: time.Now().UnixMilli()}
	if commit {
		m.Type = batch.ControlCommit
	}
	if err := o.w.appendMarker(m); err != nil {
		return fmt.Errorf("%s marker in %s: %w", m.Type, o.p.Dir(), err)
	}
	o.resolveLocked(pid, commit)
	return nil
}

// replayMarkerLocked applies a control batch met during replay: a COMMIT
// or ABORT marker resolves its producer's pending offsets; other control
// records (and a batch compaction emptied) change nothing.
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) replayMarkerLocked(b batch.Batch, dec *batch.Decoder) error {
	for rec, err := range b.All(dec) {
		if err != nil {
			return err
		}
		cr, err := batch.ParseControlRecord(rec)
		if err != nil {
			return fmt.Errorf("control record at offset %d: %w", rec.Offset, err)
		}
		if cr.Type.IsTxnMarker() {
			o.resolveLocked(b.ProducerID(), cr.Type == batch.ControlCommit)
		}
		return nil
	}
	return nil
}

// pendingOffset is an offset of an open transaction and the seq of its
// record (offsetStore.mu.seq).
type pendingOffset struct {
	committed
	seq int64
}

// pendLocked records one offset-commit record of a transactional batch as
// pending for its producer (records that do not decode are skipped, as
// applyLocked skips them).
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) pendLocked(pid int64, key, value []byte) {
	k, ok := decodeOffsetKey(key)
	if !ok || value == nil {
		return
	}
	if c, ok := decodeOffsetValue(value); ok {
		o.pendOneLocked(pid, k, c)
	}
}

// pendOneLocked records one pending offset of producer pid.
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) pendOneLocked(pid int64, k offsetKey, c committed) {
	m := o.mu.pending[pid]
	if m == nil {
		m = make(map[offsetKey]pendingOffset)
		o.mu.pending[pid] = m
	}
	o.mu.seq++
	m[k] = pendingOffset{committed: c, seq: o.mu.seq}
}

// resolveLocked publishes (commit) or drops producer pid's pending offsets.
// A committed one replaces the current offset only when it was written
// after it: a plain OffsetCommit that came between the TxnOffsetCommit and
// the marker keeps its offset, as in Kafka's group coordinator.
// REQUIRES: o.mu held, or o not yet shared.
func (o *offsetStore) resolveLocked(pid int64, commit bool) {
	if commit {
		for k, p := range o.mu.pending[pid] {
			if at, ok := o.mu.at[k]; ok && at > p.seq {
				continue
			}
			o.mu.m[k] = p.committed
			o.mu.at[k] = p.seq
		}
	}
	delete(o.mu.pending, pid)
}

// hasPending reports whether an open transaction holds an offset for k
// (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT then).
func (o *offsetStore) hasPending(k offsetKey) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.mu.pending {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
