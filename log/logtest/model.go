package logtest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	plog "github.com/partlog/partlog/log"
)

// Record is one record as the model knows it, decoded from the stored
// batch, so that a test compares records without decoding batches itself
// ([Model.Records], [DecodeRecords], [CompareRecords]).
type Record struct {
	// Offset is the record's offset.
	Offset int64
	// Timestamp is the timestamp a reader sees: the record's own under
	// CreateTime, the batch's maxTimestamp under LogAppendTime.
	Timestamp int64
	// Key and Value are the record's key and value; nil is null (a
	// tombstone's value), distinct from empty.
	Key, Value []byte
	// Headers are the record's headers in their order, nil when none.
	Headers []batch.RecordHeader
}

// Batch is one batch as the partition stored it.
type Batch struct {
	// BaseOffset and LastOffset are the first and last offsets the batch
	// covers.
	BaseOffset, LastOffset int64
	// MaxTimestamp is the header's maxTimestamp.
	MaxTimestamp int64
	// Records are the batch's records, in offset order, with the timestamps
	// a reader sees (the batch's maxTimestamp under LogAppendTime).
	Records []Record
	// Bytes is a copy of the stored batch, byte for byte.
	Bytes []byte
}

// NextOffset returns LastOffset + 1.
func (b *Batch) NextOffset() int64 { return b.LastOffset + 1 }

// Model is an in-memory reference model of one partition: the batches it
// holds with their assigned offsets, the log start offset, the high
// watermark and the log end offset. It implements the same rules as
// plog.Partition, written as plainly as possible, so that a test can apply
// every operation to both and compare them with Check.
//
// The zero Model is an empty partition at offset 0 whose high watermark
// follows the log end (plog.Config's default). A Model is not safe for
// concurrent use.
type Model struct {
	// ManualHighWatermark mirrors Config.DisableAutoHighWatermark: the high
	// watermark moves only with SetHighWatermark (and down with
	// TruncateTo).
	ManualHighWatermark bool

	// SyncEveryAppend mirrors Config.FlushMessages == 1: every append is
	// durable when it returns, so the synced prefix follows the log end.
	SyncEveryAppend bool

	batches            []Batch
	logStart, hw, next int64
	// keptBelow is where the partition's files end below the log start
	// offset: the larger of the first segment's base offset and the next
	// offset of the last batch DeleteRecordsBefore hid. TruncateTo
	// restarts the log when no batch reaching the log start stays and the
	// files would end below it.
	keptBelow int64
	// epochs is the leader epoch cache (epochs.go).
	epochs []plog.EpochStart
	// epochBelowStartMaybe is set by Crash when the log holds no batch at
	// or past its start and the model's cache is empty: recovery reads the
	// segment holding the recovery point from its base, batches below the
	// log start included, and moves the epoch of the last of them up to
	// the log start (Kafka's truncateFromStart), an entry the cache had
	// before a TruncateTo to the log start cut it (Kafka's truncateFromEnd
	// drops an entry starting at the new end). Whether recovery read that
	// segment depends on the crash, so the partition may or may not have
	// that one entry at the log end.
	epochBelowStartMaybe bool
	// synced is the end of the prefix the partition guarantees to keep
	// through a crash (a lower bound: it may flush more on its own).
	synced int64

	// prodHist is every producer batch the log holds or held below the
	// log start, in log order; prodHorizon is the offset of the producer
	// snapshot the partition last loaded (producer.go); prodUnknown is
	// set by Crash.
	prodHist    []producerBatch
	prodHorizon int64
	prodUnknown bool
	// txnReleased is the highest high watermark the partition has had
	// since it last (re)loaded its producer state: a transaction whose
	// marker lies below it no longer holds the last stable offset back
	// (txn.go).
	txnReleased int64
}

// NewModel returns the model of an empty partition whose first offset is
// start (the base offset of its first segment).
func NewModel(start int64, manualHighWatermark bool) *Model {
	return &Model{ManualHighWatermark: manualHighWatermark, logStart: start, hw: start, next: start, synced: start, keptBelow: start}
}

// syncedEnd returns the end of the synced prefix: every batch below it
// survives a crash. It moves to the log end on Sync, on every append under
// SyncEveryAppend, and after TruncateTo and DeleteRecordsBefore (which
// flush); the partition may have flushed more (on roll, by FlushMessages
// or FlushInterval), so after a crash the log ends anywhere in
// [syncedEnd, LogEndOffset].
func (m *Model) syncedEnd() int64 { return m.synced }

// Sync mirrors Partition.Sync: everything appended is durable.
func (m *Model) Sync() { m.synced = m.next }

// Crash mirrors a crash and reopen that found the log ending at end: the
// batches at or past end are gone. end must lie between the synced end
// (what Sync, appends under SyncEveryAppend, TruncateTo and the other
// flushing calls made durable) and LogEndOffset, on a batch boundary (or
// be the log start offset of an empty log), else an error says which guarantee was broken. In a log with
// offset gaps (Append) a boundary is any offset from a kept batch's next
// offset up to the first lost batch's base: a follower's log may end in
// the gap before the batch a crash lost (its segment was rolled there). The high
// watermark becomes end, or under ManualHighWatermark hw (what the
// partition restored from its checkpoint, which must lie in [log start,
// end]).
func (m *Model) Crash(end, hw int64) error {
	if end < m.synced || end > m.next {
		return fmt.Errorf("partlog/logtest: after a crash the log ends at %d, outside [synced %d, appended %d]", end, m.synced, m.next)
	}
	i := 0
	for i < len(m.batches) && m.batches[i].NextOffset() <= end {
		i++
	}
	lo := m.logStart
	if i > 0 {
		lo = max(lo, m.batches[i-1].NextOffset())
	}
	hi := m.next
	if i < len(m.batches) {
		hi = m.batches[i].BaseOffset
	}
	if end < lo || end > hi {
		return fmt.Errorf("partlog/logtest: after a crash the log ends at %d, not at a batch boundary (between %d and %d)", end, lo, hi)
	}
	m.batches = m.batches[:i]
	m.next = end
	m.cutEpochsFrom(end) // Open removes an epoch recorded at the log end, as Kafka's loader does
	m.epochBelowStartMaybe = len(m.epochs) == 0 && end == m.logStart
	m.cutProducers(end)
	m.prodUnknown = true
	if !m.ManualHighWatermark {
		m.hw = end
		m.txnReleased = m.hw
		return nil
	}
	if hw < m.logStart || hw > end {
		return fmt.Errorf("partlog/logtest: after a crash the high watermark is %d, outside [%d, %d]", hw, m.logStart, end)
	}
	m.hw = hw
	m.txnReleased = m.hw
	return nil
}

// Clone returns an independent copy of m (the batches' bytes are shared:
// the model never modifies them).
func (m *Model) Clone() *Model {
	c := *m
	c.batches = slices.Clone(m.batches)
	c.prodHist = slices.Clone(m.prodHist)
	c.epochs = slices.Clone(m.epochs)
	return &c
}

// LogStartOffset returns the model's log start offset.
func (m *Model) LogStartOffset() int64 { return m.logStart }

// HighWatermark returns the model's high watermark.
func (m *Model) HighWatermark() int64 { return m.hw }

// LogEndOffset returns the model's log end offset.
func (m *Model) LogEndOffset() int64 { return m.next }

// Batches returns the batches the model holds (every batch whose last
// offset is at or above the log start offset), in offset order. The slice
// is the model's; do not modify it. The batch a read at an offset starts
// with is the first whose LastOffset is at or above it (Kafka's rule, also
// for an offset in a gap): search this slice for it.
func (m *Model) Batches() []Batch { return m.batches }

// AppendBatch records a producer batch that Partition.AppendBatch stored
// at base, the offset it returned, on a partition with CreateTime
// timestamps and without Config.StampLeaderEpoch (the defaults).
// AppendBatch leaves the producer's bytes as they were, so the model
// stores a copy patched as the partition stores it, by the rules written
// out plainly: baseOffset = base, partitionLeaderEpoch = -1, and
// maxTimestamp = the largest record timestamp (-1 when none is larger),
// with the CRC recomputed when that changed it. base must be the model's
// log end offset: a test that passes what AppendBatch returned thereby
// checks the offset the partition assigned.
//
// A batch with a producer id is first checked by the producer rules
// (ExpectAppend): AppendBatch fails when the partition should have refused
// it, and for a retry of one of its producer's last five batches base must
// be the original's base offset and nothing changes.
func (m *Model) AppendBatch(producer []byte, base int64) error {
	want, err := m.ExpectAppend(producer)
	switch {
	case errors.Is(err, ErrProducerStateUnknown):
	case err != nil:
		return fmt.Errorf("partlog/logtest: model append: the partition stored a batch the model refuses: %w", err)
	case want.Duplicate:
		if base != want.Base {
			return fmt.Errorf("partlog/logtest: model append: a retry of the batch at %d, AppendBatch returned base %d", want.Base, base)
		}
		return nil
	}
	if base != m.next {
		return fmt.Errorf("partlog/logtest: model append: AppendBatch returned base %d, log end is %d", base, m.next)
	}
	b, rest, err := batch.Parse(producer)
	if err != nil {
		return fmt.Errorf("partlog/logtest: model append: %w", err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("partlog/logtest: model append: %d bytes after the batch", len(rest))
	}
	stored := batch.Batch(slices.Clone([]byte(b)))
	stored.SetBaseOffset(base)
	stored.SetPartitionLeaderEpoch(batch.NoPartitionLeaderEpoch)
	maxTs := batch.NoTimestamp
	var dec batch.Decoder
	for rec, err := range stored.All(&dec) {
		if err != nil {
			return fmt.Errorf("partlog/logtest: model append: %w", err)
		}
		maxTs = max(maxTs, rec.Timestamp)
	}
	if stored.MaxTimestamp() != maxTs {
		batchaccess.SetMaxTimestamp(stored, maxTs)
		stored.SetCRC()
	}
	return m.Append(stored)
}

// Append records a record set the partition stored with the offsets it
// carries: what AppendAssigned was given, or a stored batch read back. The
// first batch must start at or above the log end offset and each next one
// after the previous one's last offset: offsets strictly increase, with
// gaps allowed (a follower copying a compacted log). For what AppendBatch
// stored, use AppendBatch.
// Producer batches update the producer state without a check, as
// AppendAssigned does.
func (m *Model) Append(stored []byte) error {
	var add []Batch
	var prod []batch.Batch
	next := m.next
	for rest := stored; len(rest) > 0; {
		b, r, err := batch.Parse(rest)
		if err != nil {
			return fmt.Errorf("partlog/logtest: model append: %w", err)
		}
		if b.BaseOffset() < next {
			return fmt.Errorf("partlog/logtest: model append: batch at offset %d, below the log end or the previous batch's end %d", b.BaseOffset(), next)
		}
		mb, err := modelBatch(b)
		if err != nil {
			return err
		}
		add = append(add, mb)
		prod = append(prod, b)
		next = b.NextOffset()
		rest = r
	}
	m.batches = append(m.batches, add...)
	m.epochBelowStartMaybe = false
	for _, b := range prod {
		m.observeEpoch(b)
		m.recordProducer(b)
	}
	m.next = next
	if !m.ManualHighWatermark {
		m.hw = next
		m.txnReleased = max(m.txnReleased, m.hw)
	}
	if m.SyncEveryAppend {
		m.synced = next
	}
	return nil
}

// modelBatch decodes what the model keeps of b.
func modelBatch(b batch.Batch) (Batch, error) {
	mb := Batch{BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), MaxTimestamp: b.MaxTimestamp(),
		Bytes: slices.Clone([]byte(b))}
	var dec batch.Decoder
	it := b.Records(&dec)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return Batch{}, fmt.Errorf("partlog/logtest: model append: %w", err)
		}
		if !ok {
			break
		}
		mb.Records = append(mb.Records, ownRecord(rec))
	}
	return mb, nil
}

// ErrModelRange is returned by the Model's methods for an offset the
// partition would reject with plog.ErrOffsetOutOfRange (it wraps that).
var ErrModelRange = fmt.Errorf("partlog/logtest: model: %w", plog.ErrOffsetOutOfRange)

// SetHighWatermark mirrors Partition.SetHighWatermark.
func (m *Model) SetHighWatermark(offset int64) error {
	if offset < m.logStart || offset > m.next {
		return ErrModelRange
	}
	m.hw = offset
	m.txnReleased = max(m.txnReleased, m.hw)
	return nil
}

// TruncateTo mirrors Partition.TruncateTo: the batch holding offset (or,
// in a log with offset gaps, the first batch after it) and every later one
// go; the log ends at the next offset of the last batch kept (that batch's
// base offset in a log without gaps), not below the log start offset. When
// no batch reaching the log start offset stays and the partition's files
// would end below it (the first batch cut holds the log start offset, or
// the log start lies in the gap before it), the log restarts empty at the
// log start offset and the producer state is forgotten. Below the log
// start offset TruncateTo lowers it: TruncateFullyAndStartAt(offset). The
// partition then rebuilds its producer state from its newest snapshot
// left: call ReloadProducers to mirror that.
func (m *Model) TruncateTo(offset int64) error {
	m.epochBelowStartMaybe = false
	if offset >= m.next {
		m.cutEpochsFrom(m.next) // an epoch recorded at the log end goes, as in Kafka
		return nil
	}
	if offset < 0 {
		return ErrModelRange
	}
	if offset < m.logStart {
		return m.TruncateFullyAndStartAt(offset)
	}
	i, _ := slices.BinarySearchFunc(m.batches, offset, func(b Batch, off int64) int {
		if b.LastOffset < off {
			return -1
		}
		return 1
	})
	kept := m.keptBelow
	if i > 0 {
		kept = m.batches[i-1].NextOffset()
	}
	m.next = max(kept, m.logStart)
	m.batches = m.batches[:i]
	if kept < m.logStart {
		// The batch holding offset also holds the log start offset: the
		// log empties and restarts at the log start offset, and the
		// partition forgets every producer with its snapshots.
		m.next = m.logStart
		m.prodHist = nil
		m.prodHorizon = m.next
		m.keptBelow = m.next
		m.epochs = nil
	}
	m.cutEpochsFrom(m.next)
	m.cutProducers(m.next)
	if m.hw > m.next || !m.ManualHighWatermark {
		m.hw = m.next
	}
	m.synced = m.next // TruncateTo flushes
	// The producer state is reloaded: a marker above the high watermark
	// holds the last stable offset again.
	m.txnReleased = m.hw
	return nil
}

// TruncateFullyAndStartAt mirrors Partition.TruncateFullyAndStartAt (and
// TruncateTo below the log start offset): the log empties and restarts at
// offset, which becomes the log start offset, the log end offset and the
// high watermark; the producer state is forgotten. A negative offset is
// refused.
func (m *Model) TruncateFullyAndStartAt(offset int64) error {
	m.epochBelowStartMaybe = false
	if offset < 0 {
		return ErrModelRange
	}
	m.batches = nil
	m.logStart, m.next, m.hw, m.synced = offset, offset, offset, offset
	m.txnReleased = offset
	m.keptBelow = offset
	m.prodHist = nil
	m.prodHorizon = offset
	m.epochs = nil
	return nil
}

// DeleteRecordsBefore mirrors Partition.DeleteRecordsBefore. The
// producer state is kept (the partition keeps it too).
func (m *Model) DeleteRecordsBefore(offset int64) error {
	m.epochBelowStartMaybe = false
	if offset > m.hw {
		return ErrModelRange
	}
	if offset <= m.logStart {
		return nil
	}
	m.logStart = offset
	m.synced = m.next // DeleteRecordsBefore flushes first
	i := 0
	for i < len(m.batches) && m.batches[i].LastOffset < offset {
		m.keptBelow = max(m.keptBelow, m.batches[i].NextOffset())
		i++
	}
	m.batches = slices.Delete(m.batches, 0, i)
	m.cutEpochsBelow(offset)
	return nil
}

// DeleteSegmentsBefore mirrors Partition.DeleteExpired removing the
// segments below a segment based at offset: as DeleteRecordsBefore, except
// that the partition does not flush (the removed segments were sealed, and
// so flushed, before a segment at offset existed).
func (m *Model) DeleteSegmentsBefore(offset int64) error {
	synced := m.synced
	if err := m.DeleteRecordsBefore(offset); err != nil {
		return err
	}
	m.synced = max(synced, offset)
	m.keptBelow = max(m.keptBelow, offset)
	return nil
}

// Reopen mirrors closing and reopening the partition: Close flushes
// everything; the high watermark restarts at the log end offset, or when
// it is manual where it was (Close persisted it). Close writes a producer
// snapshot at the log end and Open loads it: of each producer's batches
// only the last one is known afterwards. Open removes a leader epoch that
// starts at the log end (no batch of it was appended), as Kafka's loader
// does.
func (m *Model) Reopen() {
	m.synced = m.next
	m.cutEpochsFrom(m.next) // Open removes an epoch recorded at the log end
	m.prodHorizon, m.prodUnknown = m.next, false
	if !m.ManualHighWatermark {
		m.hw = m.next
	}
	m.txnReleased = m.hw
}

// holding returns the index of the batch holding offset, or -1.
func (m *Model) holding(offset int64) int {
	i, _ := slices.BinarySearchFunc(m.batches, offset, func(b Batch, off int64) int {
		switch {
		case b.LastOffset < off:
			return -1
		case b.BaseOffset > off:
			return 1
		}
		return 0
	})
	if i < len(m.batches) && m.batches[i].BaseOffset <= offset && offset <= m.batches[i].LastOffset {
		return i
	}
	return -1
}

// batchHolding returns the batch that holds offset.
func (m *Model) batchHolding(offset int64) (Batch, bool) {
	if i := m.holding(offset); i >= 0 {
		return m.batches[i], true
	}
	return Batch{}, false
}

// OffsetForTimestamp mirrors Partition.OffsetForTimestamp for ts >= 0 and
// the Latest and Earliest sentinels: the first record at or above the log
// start offset whose timestamp is >= ts, unless it lies at or past the high
// watermark. MaxTimestamp is not modelled (it depends on segment
// boundaries, as in Kafka); Check tests its properties instead.
func (m *Model) OffsetForTimestamp(ts int64) (plog.TimestampOffset, bool) {
	switch ts {
	case plog.LatestTimestamp:
		latest, _ := m.listOffsetsEpochs()
		return plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: m.hw, LeaderEpoch: latest}, true
	case plog.EarliestTimestamp:
		_, earliest := m.listOffsetsEpochs()
		return plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: m.logStart, LeaderEpoch: earliest}, true
	}
	for _, b := range m.batches {
		for _, r := range b.Records {
			if r.Offset < m.logStart || r.Timestamp < ts {
				continue
			}
			if r.Offset >= m.hw {
				return plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: plog.UndefinedEpoch}, false
			}
			return plog.TimestampOffset{Timestamp: r.Timestamp, Offset: r.Offset, LeaderEpoch: batch.Batch(b.Bytes).PartitionLeaderEpoch()}, true
		}
	}
	return plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: -1, LeaderEpoch: plog.UndefinedEpoch}, false
}
