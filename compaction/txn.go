package compaction

import (
	"sort"

	"github.com/partlog/partlog/batch"
)

// txnSpan is one transaction of one producer in a partition: its first
// data batch's offset, the offset of the marker that ended it, whether that
// marker is ABORT, and how many of its data batches the log still holds.
type txnSpan struct {
	first, marker int64
	abort         bool
	batches       int
}

// txnTable is what a round learns of the transactions below the high
// watermark from the batch headers (Compactor.scanProducers): the ended
// transactions of each producer, in offset order, and the open ones. It
// stands in for Kafka's transaction index: a transactional batch belongs to
// the transaction its producer's next marker ends.
type txnTable struct {
	ended map[int64][]txnSpan
	open  map[int64]*txnSpan
}

// reset empties the table, keeping its maps.
func (t *txnTable) reset() {
	if t.ended == nil {
		t.ended = make(map[int64][]txnSpan)
		t.open = make(map[int64]*txnSpan)
	}
	clear(t.ended)
	clear(t.open)
}

// data records a transactional data batch of pid at offset off.
func (t *txnTable) data(pid, off int64) {
	o := t.open[pid]
	if o == nil {
		o = &txnSpan{first: off}
		t.open[pid] = o
	}
	o.batches++
}

// marker records pid's marker at offset off: it ends pid's open
// transaction, or one whose data is all gone.
func (t *txnTable) marker(pid, off int64, abort bool) {
	span := txnSpan{first: off}
	if o := t.open[pid]; o != nil {
		span = *o
		delete(t.open, pid)
	}
	span.marker, span.abort = off, abort
	t.ended[pid] = append(t.ended[pid], span)
}

// lastStable returns the first offset of the oldest open transaction, or
// hw when none is open.
func (t *txnTable) lastStable(hw int64) int64 {
	lso := hw
	for _, o := range t.open {
		lso = min(lso, o.first)
	}
	return lso
}

// find returns pid's ended transaction holding offset off (its data or its
// marker).
func (t *txnTable) find(pid, off int64) (txnSpan, bool) {
	spans := t.ended[pid]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].marker >= off })
	if i == len(spans) || spans[i].first > off {
		return txnSpan{}, false
	}
	return spans[i], true
}

// aborted reports whether b is transactional data of an aborted
// transaction.
func (t *txnTable) aborted(b batch.Batch) bool {
	a := b.Attributes()
	if !a.IsTransactional() || a.IsControl() {
		return false
	}
	s, ok := t.find(b.ProducerID(), b.BaseOffset())
	return ok && s.abort
}

// markerAt returns the transaction the marker of pid at offset off ended.
func (t *txnTable) markerAt(pid, off int64) (txnSpan, bool) {
	s, ok := t.find(pid, off)
	return s, ok && s.marker == off
}
