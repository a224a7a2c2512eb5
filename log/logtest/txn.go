package logtest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// Transactions: the Model derives the open transactions, the last stable
// offset and the aborted transactions from its history of producer batches
// and markers, by the rules of the log package's documentation
// ("Transactions"), recomputed from the start every time.

// markerOf decodes the transaction marker of control batch b.
func markerOf(b batch.Batch) (batch.ControlRecord, bool) {
	var dec batch.Decoder
	for r, err := range b.All(&dec) {
		if err != nil {
			return batch.ControlRecord{}, false
		}
		cr, err := batch.ParseControlRecord(r)
		return cr, err == nil && cr.Type.IsTxnMarker()
	}
	return batch.ControlRecord{}, false
}

// endedTxn is a transaction a marker ended: its first offset and the
// marker's.
type endedTxn struct {
	first, marker int64
}

// txnState replays the producer history: the open transactions by first
// offset (StartTimestamp 0), the aborted ones in marker order, and every
// ended one in marker order.
func (m *Model) txnState() (open []plog.OpenTxn, aborted []plog.AbortedTxn, ended []endedTxn) {
	for _, b := range m.prodHist {
		if !b.txn {
			continue
		}
		i := slices.IndexFunc(open, func(o plog.OpenTxn) bool { return o.ProducerID == b.pid })
		if !b.marker {
			if i < 0 {
				open = append(open, plog.OpenTxn{ProducerID: b.pid, FirstOffset: b.baseOffset})
			}
			continue
		}
		if i < 0 {
			continue // a marker without an open transaction ends nothing
		}
		first := open[i].FirstOffset
		open = slices.Delete(open, i, i+1)
		ended = append(ended, endedTxn{first: first, marker: b.baseOffset})
		if b.abort {
			lso := b.baseOffset + 1
			if len(open) > 0 {
				lso = open[0].FirstOffset
			}
			aborted = append(aborted, plog.AbortedTxn{ProducerID: b.pid, FirstOffset: first, LastOffset: b.baseOffset, LastStableOffset: lso})
		}
	}
	return open, aborted, ended
}

// openTxnOf returns the first offset of producer pid's open transaction.
func (m *Model) openTxnOf(pid int64) (int64, bool) {
	open, _, _ := m.txnState()
	for _, o := range open {
		if o.ProducerID == pid {
			return o.FirstOffset, true
		}
	}
	return 0, false
}

// openTransactions mirrors Partition.OpenTransactions, without the start
// timestamps (0).
func (m *Model) openTransactions() []plog.OpenTxn {
	open, _, _ := m.txnState()
	return open
}

// lastStableOffset mirrors Partition.LastStableOffset: the first offset of
// the oldest transaction that is open or unreplicated, not below the log
// start offset, else the high watermark; never above the high watermark.
//
// Unreplicated (Kafka's ProducerStateManager.unreplicatedTxns): a marker
// ended the transaction since the partition last loaded its producer
// state (the marker lies at or past the loaded snapshot's offset: the
// load forgets the ones before), and no high watermark since then has
// passed the marker. The log end only grows between two loads and the
// high watermark stays at or below it, so every high watermark after the
// load that passed the marker came after the marker: the highest one,
// txnReleased, tells.
func (m *Model) lastStableOffset() int64 {
	open, _, ended := m.txnState()
	first, unstable := int64(0), false
	if len(open) > 0 {
		first, unstable = open[0].FirstOffset, true
	}
	for _, e := range ended {
		if e.marker >= max(m.prodHorizon, m.txnReleased) && (!unstable || e.first < first) {
			first, unstable = e.first, true
		}
	}
	if !unstable {
		return m.hw
	}
	return min(max(first, m.logStart), m.hw)
}

// abortedTxns returns every aborted transaction of the history, in marker
// order, with the last stable offset after its marker: what the
// partition's .txnindex files hold together.
func (m *Model) abortedTxns() []plog.AbortedTxn {
	_, aborted, _ := m.txnState()
	return aborted
}

// ExpectMarker tells what Partition.AppendMarker must do with mk on the
// partition the model describes, without changing the model: the offset
// it gets (the log end offset), or the error: plog.ErrInvalidBatch for a
// type other than ABORT or COMMIT or a negative producer id or epoch,
// plog.ErrInvalidProducerEpoch for an epoch older than the producer's,
// plog.ErrTransactionCoordinatorFenced for a coordinator epoch older than
// the one of the producer's last marker (-1 before its first, and for a
// producer the partition does not know); ErrProducerStateUnknown after
// Crash.
func (m *Model) ExpectMarker(mk batch.TxnMarker) (int64, error) {
	refuse := func(err error, format string, args ...any) (int64, error) {
		return -1, fmt.Errorf("partlog/logtest: model: %w: %s marker for producer %d epoch %d coordinator epoch %d: %s",
			err, mk.Type, mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch, fmt.Sprintf(format, args...))
	}
	if !mk.Type.IsTxnMarker() || mk.ProducerID < 0 || mk.ProducerEpoch < 0 {
		return refuse(plog.ErrInvalidBatch, "not a marker a partition accepts")
	}
	if m.prodUnknown {
		return refuse(ErrProducerStateUnknown, "call Reopen after Crash")
	}
	known, epoch, _ := m.producer(mk.ProducerID)
	if !known && mk.CoordinatorEpoch >= -1 {
		return m.next, nil
	}
	if known && mk.ProducerEpoch < epoch {
		return refuse(plog.ErrInvalidProducerEpoch, "current epoch %d", epoch)
	}
	coord := int32(-1)
	for _, b := range m.prodHist {
		if b.pid == mk.ProducerID && b.marker {
			coord = b.coord
		}
	}
	if mk.CoordinatorEpoch < coord {
		return refuse(plog.ErrTransactionCoordinatorFenced, "current coordinator epoch %d", coord)
	}
	return m.next, nil
}

// AppendMarker records the marker the partition stored for mk: stored is
// the control batch read back at the offset AppendMarker returned (its
// timestamp is the partition's clock). It fails when ExpectMarker refuses
// mk or stored is not mk's marker at the log end offset.
func (m *Model) AppendMarker(mk batch.TxnMarker, stored []byte) error {
	want, err := m.ExpectMarker(mk)
	if err != nil && !errors.Is(err, ErrProducerStateUnknown) {
		return fmt.Errorf("partlog/logtest: model: the partition stored a marker the model refuses: %w", err)
	}
	b, rest, perr := batch.Parse(stored)
	if perr != nil || len(rest) != 0 {
		return fmt.Errorf("partlog/logtest: model: stored marker: not one batch (%v)", perr)
	}
	cr, ok := markerOf(b)
	switch {
	case !ok || !b.Attributes().IsControl() || !b.Attributes().IsTransactional():
		return fmt.Errorf("partlog/logtest: model: stored marker at %d is not a transaction marker", b.BaseOffset())
	case err == nil && b.BaseOffset() != want:
		return fmt.Errorf("partlog/logtest: model: marker stored at %d, log end is %d", b.BaseOffset(), want)
	case cr.Type != mk.Type || cr.CoordinatorEpoch != mk.CoordinatorEpoch || b.ProducerID() != mk.ProducerID || b.ProducerEpoch() != mk.ProducerEpoch:
		return fmt.Errorf("partlog/logtest: model: stored marker %s coordinator epoch %d producer %d epoch %d, want %+v",
			cr.Type, cr.CoordinatorEpoch, b.ProducerID(), b.ProducerEpoch(), mk)
	}
	return m.Append(b)
}

// checkTxn compares the partition's transaction state and read_committed
// reads with the model (skipped while the producer state is unknown).
func checkTxn(p *plog.Partition, m *Model) error {
	if m.prodUnknown {
		return nil
	}
	lso := m.lastStableOffset()
	if got := p.LastStableOffset(); got != lso {
		return fmt.Errorf("partlog/logtest: last stable offset %d, model %d", got, lso)
	}
	open, err := p.OpenTransactions()
	if err != nil {
		return fmt.Errorf("partlog/logtest: open transactions: %w", err)
	}
	for i := range open {
		open[i].StartTimestamp = 0
	}
	if want := m.openTransactions(); !slices.Equal(open, want) {
		return fmt.Errorf("partlog/logtest: open transactions %v, model %v", open, want)
	}
	if got, _, err := p.OffsetForTimestampCommitted(plog.LatestTimestamp); err != nil || got.Offset != lso {
		return fmt.Errorf("partlog/logtest: read_committed latest offset %d (%v), model %d", got.Offset, err, lso)
	}
	// read_committed from the log start in small reads: the model's
	// batches below the LSO, in order, and every aborted transaction
	// overlapping what was read, each once.
	var want []Batch
	for _, b := range m.batches {
		if b.NextOffset() > m.logStart && b.LastOffset < lso {
			want = append(want, b)
		}
	}
	var got []plog.AbortedTxn
	off, from, n := m.logStart, int64(-1), 0
	for {
		recs, ab, err := p.ReadCommitted(off, 1000)
		if err != nil {
			return fmt.Errorf("partlog/logtest: read_committed at %d: %w", off, err)
		}
		if len(recs.Bytes()) == 0 {
			_ = recs.Close()
			break
		}
		if from < 0 {
			from = recs.FirstOffset()
		}
		for rest := recs.Bytes(); len(rest) > 0; n++ {
			bt, r, err := batch.Parse(rest)
			if err != nil || n >= len(want) || string(bt) != string(want[n].Bytes) {
				_ = recs.Close()
				return fmt.Errorf("partlog/logtest: read_committed at %d: batch %d differs from the model's below the LSO %d (%v)", off, n, lso, err)
			}
			rest = r
		}
		for _, a := range ab {
			if !slices.Contains(got, a) {
				got = append(got, a)
			}
		}
		off = recs.NextOffset()
		_ = recs.Close()
	}
	if n != len(want) {
		return fmt.Errorf("partlog/logtest: read_committed returned %d batches, the model has %d below the LSO %d", n, len(want), lso)
	}
	var wantAb []plog.AbortedTxn
	for _, a := range m.abortedTxns() {
		if from >= 0 && a.LastOffset >= from && a.FirstOffset < off {
			wantAb = append(wantAb, a)
		}
	}
	slices.SortFunc(got, func(a, b plog.AbortedTxn) int { return int(a.LastOffset - b.LastOffset) })
	if !slices.Equal(got, wantAb) && (len(got) > 0 || len(wantAb) > 0) {
		return fmt.Errorf("partlog/logtest: read_committed reported aborted %v, model %v", got, wantAb)
	}
	return nil
}
