package logtest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/producer"
	plog "github.com/partlog/partlog/log"
)

// Producer rules: the Model mirrors the idempotent producer checks of
// Partition.AppendBatch (see "Idempotent producers" in the log package's
// documentation) from a plain history of every producer batch the log
// accepted, with no ring buffers and no snapshot files.

// producerBatchesKept is how many of a producer's last batches the
// partition recognises as retries (Kafka's NUM_BATCHES_TO_RETAIN). The
// model keeps its own copy of the rule.
const producerBatchesKept = 5

// producerBatch is one producer batch the model holds, in log order.
type producerBatch struct {
	pid                    int64
	epoch                  int16
	first, last            int32
	baseOffset, lastOffset int64
	// txn marks a transactional batch; marker a transaction marker (a
	// control batch: abort says which, coord is its coordinator epoch).
	txn, marker, abort bool
	coord              int32
}

// ErrProducerStateUnknown is returned by ExpectAppend and AppendBatch for
// a producer batch after Crash: the model cannot tell which producer
// snapshot the recovered partition loaded (Open writes a fresh one at the
// log end after recovery, so the files no longer tell). Reopen (a clean
// close and open), or ReloadProducers after a later TruncateTo, makes the
// state known again.
var ErrProducerStateUnknown = errors.New("partlog/logtest: model: producer state unknown after a crash")

// producer returns what the partition knows of pid: whether it knows it,
// its epoch, and its recognised batches (the last five in its epoch,
// oldest first). A producer's batches at or past the horizon (the offset
// of the snapshot the partition last loaded) are all known; of those below
// it only the last one (a snapshot keeps one batch per producer).
//
// A transaction marker sets the producer's epoch (a new one forgets the
// batches of the old) but is no batch of its sequence.
func (m *Model) producer(pid int64) (known bool, epoch int16, recent []producerBatch) {
	lastBelow := -1
	var mine []producerBatch
	for i, b := range m.prodHist {
		if b.pid != pid {
			continue
		}
		known, epoch = true, b.epoch
		if b.marker {
			continue
		}
		if b.baseOffset < m.prodHorizon {
			lastBelow = i
			continue
		}
		mine = append(mine, b)
	}
	if lastBelow >= 0 {
		mine = append([]producerBatch{m.prodHist[lastBelow]}, mine...)
	}
	if !known {
		return false, 0, nil
	}
	for i := len(mine) - 1; i >= 0 && mine[i].epoch == epoch && len(recent) < producerBatchesKept; i-- {
		recent = append([]producerBatch{mine[i]}, recent...)
	}
	return true, epoch, recent
}

// ExpectAppend tells what Partition.AppendBatchInfo must do with the
// producer batch b on the partition the model describes, without changing
// the model: the offsets a new batch gets (Base is the log end offset);
// for a retry of one of its producer's last five batches (same producer
// id and epoch, same first and last sequence) the original's offsets with
// Duplicate set; or the error the partition must return, wrapping
// plog.ErrInvalidProducerEpoch (an older epoch; for a producer the
// partition does not know, below batch.NoProducerEpoch), plog.ErrOutOfOrderSequence
// (a gap, a stale sequence, a new epoch not starting at 0) or
// plog.ErrInvalidBatch (a base sequence below 0, or bytes that are not one
// batch). A producer the partition does not know may start at any
// sequence; after math.MaxInt32 comes 0. A batch without a producer id is
// always appended.
//
// Not modelled: producer expiry (Config.ProducerIDExpiration measures a
// producer's idleness from its last batch's max timestamp, so give batches
// recent timestamps, or a long expiration). A producer whose transaction
// is open may send only transactional batches: a plain one is refused with
// plog.ErrInvalidTxnState (markers are ExpectMarker's). After Crash the
// producer state is unknown: ExpectAppend returns ErrProducerStateUnknown
// for a producer batch until Reopen (or ReloadProducers after a later
// TruncateTo).
func (m *Model) ExpectAppend(b []byte) (plog.AppendInfo, error) {
	info, err := m.expectAppend(b)
	if err != nil || info.Duplicate {
		return info, err
	}
	bt := batch.Batch(b)
	if pid := bt.ProducerID(); pid >= 0 && !bt.Attributes().IsTransactional() {
		if open, ok := m.openTxnOf(pid); ok {
			return plog.AppendInfo{Base: -1, LastOffset: -1}, fmt.Errorf("partlog/logtest: model: %w: producer %d sent a plain batch while its transaction from offset %d is open",
				plog.ErrInvalidTxnState, pid, open)
		}
	}
	return info, nil
}

// expectAppend is ExpectAppend without the transaction state check.
func (m *Model) expectAppend(b []byte) (plog.AppendInfo, error) {
	bt, rest, err := batch.Parse(b)
	if err != nil || len(rest) != 0 {
		return plog.AppendInfo{Base: -1, LastOffset: -1}, fmt.Errorf("partlog/logtest: model: %w: not one batch (%v)", plog.ErrInvalidBatch, err)
	}
	accept := plog.AppendInfo{Base: m.next, LastOffset: m.next + int64(bt.LastOffsetDelta())}
	pid, epoch, first, last := bt.ProducerID(), bt.ProducerEpoch(), bt.BaseSequence(), bt.LastSequence()
	if pid < 0 {
		return accept, nil
	}
	refuse := func(err error, format string, args ...any) (plog.AppendInfo, error) {
		return plog.AppendInfo{Base: -1, LastOffset: -1}, fmt.Errorf("partlog/logtest: model: %w: producer %d epoch %d sequences %d..%d: %s",
			err, pid, epoch, first, last, fmt.Sprintf(format, args...))
	}
	if first < 0 {
		return refuse(plog.ErrInvalidBatch, "base sequence below 0")
	}
	if m.prodUnknown {
		return refuse(ErrProducerStateUnknown, "call Reopen after Crash")
	}
	known, cur, recent := m.producer(pid)
	if !known {
		if epoch < batch.NoProducerEpoch {
			return refuse(plog.ErrInvalidProducerEpoch, "an unknown producer has no epoch (%d)", batch.NoProducerEpoch)
		}
		return accept, nil
	}
	if epoch == cur {
		for _, r := range recent {
			if r.first == first && r.last == last {
				return plog.AppendInfo{Base: r.baseOffset, LastOffset: r.lastOffset, Duplicate: true}, nil
			}
		}
	}
	switch {
	case epoch < cur:
		return refuse(plog.ErrInvalidProducerEpoch, "current epoch %d", cur)
	case cur == batch.NoProducerEpoch:
		return accept, nil
	case epoch > cur:
		if first != 0 {
			return refuse(plog.ErrOutOfOrderSequence, "a new epoch (current %d) must start at 0", cur)
		}
		return accept, nil
	}
	prev := int32(batch.NoSequence) // a marker alone set the epoch
	if len(recent) > 0 {
		prev = recent[len(recent)-1].last
	}
	if int64(first) != int64(prev)+1 && !(first == 0 && prev == 1<<31-1) {
		return refuse(plog.ErrOutOfOrderSequence, "last sequence %d", prev)
	}
	return accept, nil
}

// NextSequence returns the epoch and first sequence of producer pid's next
// batch in its current epoch: (0, 0) for a producer the partition does not
// know.
func (m *Model) NextSequence(pid int64) (epoch int16, sequence int32) {
	known, epoch, recent := m.producer(pid)
	if !known {
		return 0, 0
	}
	if len(recent) == 0 {
		return epoch, 0
	}
	last := recent[len(recent)-1].last
	if last == 1<<31-1 {
		return epoch, 0
	}
	return epoch, last + 1
}

// recordProducer adds the stored batch b to the producer history.
func (m *Model) recordProducer(b batch.Batch) {
	if b.ProducerID() < 0 {
		return
	}
	pb := producerBatch{pid: b.ProducerID(), epoch: b.ProducerEpoch(),
		first: b.BaseSequence(), last: b.LastSequence(), baseOffset: b.BaseOffset(), lastOffset: b.LastOffset(),
		txn: b.Attributes().IsTransactional()}
	if b.Attributes().IsControl() {
		cr, ok := markerOf(b)
		if !ok {
			return // not a transaction marker: no producer state
		}
		pb.marker, pb.abort, pb.coord = true, cr.Type == batch.ControlAbort, cr.CoordinatorEpoch
	}
	m.prodHist = append(m.prodHist, pb)
}

// cutProducers forgets the producer batches at or past end.
func (m *Model) cutProducers(end int64) {
	for len(m.prodHist) > 0 && m.prodHist[len(m.prodHist)-1].lastOffset >= end {
		m.prodHist = m.prodHist[:len(m.prodHist)-1]
	}
	m.prodHorizon = min(m.prodHorizon, end)
}

// ReloadProducers mirrors the partition rebuilding its producer state
// after TruncateTo: it loads the newest producer snapshot in p's
// directory at or below the log end that decodes and replays the log
// after it, or, with no such snapshot, replays the log from p's first
// segment (producers whose batches all lie below it are forgotten). The
// model reads only the names and validity of the snapshot files, which
// depend on where the partition rolled segments; the state itself comes
// from the model's own history. fsys is the filesystem p was opened on
// (its Config.FS; nil for the operating system's). Call it after every
// TruncateTo that cut something; after a crash use Reopen instead (see
// ErrProducerStateUnknown).
func (m *Model) ReloadProducers(fsys vfs.FS, p *plog.Partition) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	dir := p.Dir()
	offs, err := producer.ListSnapshots(fsys, dir)
	if err != nil {
		return fmt.Errorf("partlog/logtest: model: reload producers: %w", err)
	}
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > m.next {
			continue
		}
		data, err := producer.ReadSnapshotFile(fsys, dir, offs[i])
		if err != nil {
			return fmt.Errorf("partlog/logtest: model: reload producers: %w", err)
		}
		if _, err := producer.DecodeSnapshot(data); err != nil {
			continue // the partition skips a corrupt snapshot too
		}
		m.prodHorizon, m.prodUnknown = offs[i], false
		return nil
	}
	first := m.logStart
	if segs := p.SegmentInfos(); len(segs) > 0 {
		first = segs[0].BaseOffset
	}
	m.prodHist = slices.DeleteFunc(m.prodHist, func(b producerBatch) bool { return b.baseOffset < first })
	m.prodHorizon, m.prodUnknown = first, false
	return nil
}
