package log

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/mmap"
)

// appendRules is the part of a Partition that decides what an append may
// store and what the partition stamps into it (DESIGN.md, "Parts of a
// Partition: append rules"): Kafka's LogValidator for a producer's batch
// (framing and CRC, size, control bit, record count, timestamps), a
// follower's checks of an AppendAssigned record set, and the stored header
// of a producer batch or a transaction marker (offset, leader epoch,
// timestamps), made in the part's own memory, never in the caller's
// bytes. It reads no partition state: the core hands it the log end and
// the leader epoch as arguments.
//
// The checks (checkProducer, checkSize, stampTimes, checkAssigned) run
// without any lock and touch only the caller's bytes and header copies;
// the methods that fill the part's scratch end in Locked and need the
// core's mu, which guards the scratch.
type appendRules struct {
	// Set by init and never changed: the partition's directory (for
	// errors) and the configuration the rules read.
	dir             string
	maxMessageBytes int
	segmentBytes    int64
	// logAppendTime is Config.LogAppendTime; now is Config.Now and
	// wallClock says it is the wall clock (Config.wallClock).
	logAppendTime bool
	now           func() time.Time
	wallClock     bool
	// beforeMax and afterMax are Config.MessageTimestampBeforeMax and
	// AfterMax.
	beforeMax, afterMax time.Duration
	// stampEpoch is Config.StampLeaderEpoch.
	stampEpoch bool

	// header is the stored header of the producer batch being appended
	// (assignLocked), patched here and never in the caller's bytes.
	// Guarded by the core's mu.
	header [batch.HeaderSize]byte
	// marker is the stored transaction marker being appended
	// (markerLocked). Guarded by the core's mu.
	marker []byte
}

// init sets the rules of a partition in dir with configuration cfg
// (defaults applied).
func (r *appendRules) init(dir string, cfg *Config) {
	r.dir = dir
	r.maxMessageBytes, r.segmentBytes = cfg.MaxMessageBytes, cfg.SegmentBytes
	r.logAppendTime, r.now, r.wallClock = cfg.LogAppendTime, cfg.Now, cfg.wallClock
	r.beforeMax, r.afterMax = cfg.MessageTimestampBeforeMax, cfg.MessageTimestampAfterMax
	r.stampEpoch = cfg.StampLeaderEpoch
}

// checkProducer validates b for AppendBatch and returns it with the
// header to store, patched for timestamps (attributes, maxTimestamp and
// CRC; assignLocked sets the offset and epoch under the lock). It never
// writes into b. b may alias a mapped file (the Records.Bytes of a
// ReadFrom), so every read of it runs under the fault guard: a fault is an
// error wrapping ErrFault, which the core returns to the caller without
// taking the partition offline (the memory is the caller's, not this
// partition's files).
func (r *appendRules) checkProducer(b []byte) (bt batch.Batch, hdr [batch.HeaderSize]byte, err error) {
	bt, hdr, err = r.checkGuarded(b)
	if errors.Is(err, errFault) {
		return nil, hdr, fmt.Errorf("partlog/log: append to %s: reading the %d-byte batch given: %w", r.dir, len(b), err)
	}
	return bt, hdr, err
}

// checkGuarded is checkBytes under the fault guard.
func (r *appendRules) checkGuarded(b []byte) (bt batch.Batch, hdr [batch.HeaderSize]byte, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return r.checkBytes(b)
}

// checkBytes implements checkProducer's checks, in Kafka's order.
func (r *appendRules) checkBytes(b []byte) (bt batch.Batch, hdr [batch.HeaderSize]byte, err error) {
	bt, rest, err := batch.Parse(b)
	if err != nil {
		return nil, hdr, invalidBatchf(err, "%d bytes", len(b))
	}
	if len(rest) != 0 {
		return nil, hdr, invalidBatchf(nil, "%d bytes after the %d-byte batch; AppendBatch takes exactly one batch", len(rest), len(bt))
	}
	if err := r.checkSize(len(bt)); err != nil {
		return nil, hdr, err
	}
	if bt.Attributes().IsControl() {
		return nil, hdr, fmt.Errorf("%w: attributes %s", ErrControlBatch, bt.Attributes())
	}
	times, err := validate(bt)
	if err != nil {
		return nil, hdr, invalidBatchf(err, "%d bytes", len(bt))
	}
	if n, d := bt.RecordsCount(), bt.LastOffsetDelta(); n <= 0 || int64(n) != int64(d)+1 {
		return nil, hdr, invalidBatchf(nil, "recordsCount %d with lastOffsetDelta %d; a producer batch has lastOffsetDelta+1 records", n, d)
	}
	copy(hdr[:], bt)
	if err := r.checkTimestamps(bt, times, &hdr); err != nil {
		return nil, hdr, err
	}
	return bt, hdr, nil
}

// checkSize refuses a producer batch of n bytes that is larger than
// max.message.bytes or segment.bytes.
func (r *appendRules) checkSize(n int) error {
	if n > r.maxMessageBytes {
		return fmt.Errorf("%w: %d bytes, max.message.bytes is %d", ErrBatchTooLarge, n, r.maxMessageBytes)
	}
	if int64(n) > r.segmentBytes {
		return fmt.Errorf("%w: %d bytes, segment.bytes is %d", ErrBatchTooLarge, n, r.segmentBytes)
	}
	return nil
}

// checkTimestamps applies Kafka's timestamp rules (LogValidator) to the
// producer batch bt whose records' timestamps span times, patching the
// header copy hdr (see stampTimes). A patched header gets the CRC bt would
// have with it.
func (r *appendRules) checkTimestamps(bt batch.Batch, times batch.TimeRange, hdr *[batch.HeaderSize]byte) error {
	patched, err := r.stampTimes(times, hdr, clockReading{})
	if patched {
		h := batch.Batch(hdr[:])
		batchaccess.PutCRC(h, batchaccess.CRCWithHeader(bt, h))
	}
	return err
}

// stampTimes applies Kafka's timestamp rules (LogValidator) to the header
// hdr of a producer batch whose records' timestamps span times, and
// reports whether it changed hdr (whose CRC is then stale): under
// LogAppendTime the timestamp-type bit and maxTimestamp = now; under
// CreateTime the records' real maxTimestamp when hdr's differs. seen is a
// reading of the clock taken before the append, if any (a Builder's,
// AppendBuilder): when it shows that the bounds cannot refuse the records
// (withinBounds), the clock is not read again.
func (r *appendRules) stampTimes(times batch.TimeRange, hdr *[batch.HeaderSize]byte, seen clockReading) (patched bool, err error) {
	h := batch.Batch(hdr[:])
	a := h.Attributes()
	if a.LogAppendTime() {
		return false, fmt.Errorf("%w: the producer set the LogAppendTime attribute (%s); only the partition sets it", ErrInvalidBatchTimestamp, a)
	}
	if r.logAppendTime {
		h.SetAttributes(a | batchaccess.TimestampTypeBit)
		batchaccess.SetMaxTimestamp(h, r.now().UnixMilli())
		return true, nil
	}
	if (times.Min != batch.NoTimestamp || times.Max != batch.NoTimestamp) && !r.withinBounds(times, seen) {
		now := r.now().UnixMilli()
		if ts := times.Min; ts != batch.NoTimestamp && tooEarly(ts, now, r.beforeMax) {
			return false, fmt.Errorf("%w: record timestamp %d is more than %v before the broker's time %d (message.timestamp.before.max.ms)",
				ErrInvalidBatchTimestamp, ts, r.beforeMax, now)
		}
		if ts := times.Max; tooLate(ts, now, r.afterMax) {
			return false, fmt.Errorf("%w: record timestamp %d is more than %v after the broker's time %d (message.timestamp.after.max.ms)",
				ErrInvalidBatchTimestamp, ts, r.afterMax, now)
		}
	}
	if h.MaxTimestamp() != times.Max {
		batchaccess.SetMaxTimestamp(h, times.Max)
		return true, nil
	}
	return false, nil
}

// clockReading is a reading of Config.Now in milliseconds taken before an
// append (taken false: none).
type clockReading struct {
	unixMilli int64
	taken     bool
}

// withinBounds reports whether the timestamp bounds cannot refuse records
// whose timestamps span times, by seen alone: the clock is the wall clock
// (Config.Now left to its default, the clock batch.Builder.Add reads),
// there is no bound on how old a record may be
// (MessageTimestampBeforeMax), and no record is newer than seen. The
// append's own reading would come later, so no record lies after it, let
// alone more than MessageTimestampAfterMax after it. (Only a step of the
// wall clock back by more than that bound, between seen and the append,
// would have refused the batch.) Reading the clock is about a tenth of
// what a one-record append costs beyond its write call.
func (r *appendRules) withinBounds(times batch.TimeRange, seen clockReading) bool {
	before := r.beforeMax
	return seen.taken && r.wallClock && times.Max <= seen.unixMilli &&
		(before < 0 || before == NoTimestampLimit)
}

// tooEarly reports whether ts (ms) lies more than limit before now (ms).
// A negative limit or NoTimestampLimit never refuses. The difference is
// computed without overflow.
func tooEarly(ts, now int64, limit time.Duration) bool {
	if limit < 0 || limit == NoTimestampLimit || ts >= now {
		return false
	}
	return uint64(now)-uint64(ts) > uint64(limit.Milliseconds())
}

// tooLate reports whether ts (ms) lies more than limit after now (ms).
func tooLate(ts, now int64, limit time.Duration) bool {
	if limit < 0 || limit == NoTimestampLimit || ts <= now {
		return false
	}
	return uint64(ts)-uint64(now) > uint64(limit.Milliseconds())
}

// epochFor returns the partitionLeaderEpoch an appended producer batch or
// marker stores when leader is the partition's leader epoch: leader under
// Config.StampLeaderEpoch, else batch.NoPartitionLeaderEpoch. Always
// stamped (outside the CRC): a producer's value must never reach the file,
// or the leader epoch cache (Kafka's, and leader-epoch-checkpoint) would
// record an epoch no leader had.
func (r *appendRules) epochFor(leader int32) int32 {
	if r.stampEpoch {
		return leader
	}
	return batch.NoPartitionLeaderEpoch
}

// assignLocked copies the checked header hdr into the part's scratch,
// sets its base offset to base and its leader epoch (epochFor), and
// returns it: the header the partition stores. Neither field is under the
// CRC. REQUIRES: the core's mu held; the result is valid until the next
// assignLocked.
func (r *appendRules) assignLocked(hdr *[batch.HeaderSize]byte, base int64, leader int32) batch.Batch {
	h := batch.Batch(r.header[:])
	copy(h, hdr[:])
	h.SetBaseOffset(base)
	h.SetPartitionLeaderEpoch(r.epochFor(leader))
	return h
}

// checkMarker refuses a transaction marker that is not one: a type other
// than ABORT or COMMIT, or a negative producer id or epoch.
func checkMarker(m batch.TxnMarker) error {
	if !m.Type.IsTxnMarker() {
		return invalidBatchf(nil, "marker type %s: a transaction marker is ABORT or COMMIT", m.Type)
	}
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return invalidBatchf(nil, "marker for producer %d epoch %d: both must be >= 0", m.ProducerID, m.ProducerEpoch)
	}
	return nil
}

// markerLocked encodes the control batch of the checked marker m at
// offset, in the part's scratch: the leader epoch epochFor(leader), the
// timestamp Config.Now, and under Config.LogAppendTime the LogAppendTime
// bit; m's BaseOffset, PartitionLeaderEpoch and Timestamp are ignored.
// REQUIRES: the core's mu held; the result is valid until the next
// markerLocked.
func (r *appendRules) markerLocked(m batch.TxnMarker, offset int64, leader int32) (batch.Batch, error) {
	now := r.now().UnixMilli()
	buf, err := batch.AppendControlBatch(r.marker[:0], batch.TxnMarker{Type: m.Type, CoordinatorEpoch: m.CoordinatorEpoch,
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, BaseOffset: offset, PartitionLeaderEpoch: r.epochFor(leader), Timestamp: now})
	if err != nil {
		return nil, invalidBatchf(err, "%s marker for producer %d", m.Type, m.ProducerID)
	}
	r.marker = buf
	bt := batch.Batch(buf)
	if r.logAppendTime {
		bt.SetLogAppendTime(now)
	}
	return bt, nil
}

// checkAssigned validates an AppendAssigned record set without the lock:
// what a Kafka follower checks of each batch (batch.Batch.ValidateHeader),
// the size a segment can hold, offsets that increase strictly and fit an
// int64, and no gap before a batch spanning 2^31 offsets.
func (r *appendRules) checkAssigned(records []byte) error {
	if len(records) == 0 {
		return invalidBatchf(nil, "empty record set")
	}
	next, pos := int64(0), 0
	for i, rest := 0, records; len(rest) > 0; i++ {
		bt, rem, err := batch.Parse(rest)
		if err != nil {
			return invalidBatchf(err, "batch %d at byte %d of the record set", i, pos)
		}
		if int64(len(bt)) > r.segmentBytes {
			return fmt.Errorf("%w: batch %d is %d bytes, segment.bytes is %d", ErrBatchTooLarge, i, len(bt), r.segmentBytes)
		}
		// Header only, as a Kafka follower (no decompression): see
		// AppendAssigned.
		if err := bt.ValidateHeader(); err != nil {
			return invalidBatchf(err, "batch %d at byte %d of the record set", i, pos)
		}
		if n, d := bt.RecordsCount(), bt.LastOffsetDelta(); int64(n) > int64(d)+1 {
			return invalidBatchf(nil, "batch %d: recordsCount %d exceeds lastOffsetDelta+1 = %d", i, n, int64(d)+1)
		}
		if bt.BaseOffset() < 0 {
			return fmt.Errorf("%w: batch %d has negative base offset %d", ErrUnexpectedOffset, i, bt.BaseOffset())
		}
		if err := checkNextOffsetFits(bt); err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
		if i > 0 && bt.BaseOffset() < next {
			return fmt.Errorf("%w: batch %d starts at offset %d, not after the previous batch, which ends before %d", ErrUnexpectedOffset, i, bt.BaseOffset(), next)
		}
		if i > 0 && bt.BaseOffset() > next && bt.LastOffsetDelta() == math.MaxInt32 {
			return errGapBeforeHugeBatch(i, bt.BaseOffset(), next)
		}
		next = bt.NextOffset()
		pos += len(bt)
		rest = rem
	}
	return nil
}

// checkAssignedStart refuses a checked AppendAssigned record set that
// cannot follow a log ending at logEnd: its first batch starts below it,
// or spans 2^31 offsets after a gap from it.
func checkAssignedStart(records []byte, logEnd int64) error {
	first := batch.Batch(records)
	if base := first.BaseOffset(); base < logEnd {
		return fmt.Errorf("%w: record set starts at offset %d, below the log end offset %d", ErrUnexpectedOffset, base, logEnd)
	} else if base > logEnd && first.LastOffsetDelta() == math.MaxInt32 {
		return errGapBeforeHugeBatch(0, base, logEnd)
	}
	return nil
}

// checkNextOffsetFits refuses a batch whose next offset (base offset +
// lastOffsetDelta + 1, the log end offset after it) would not fit an
// int64: Kafka's largest next offset is Long.MaxValue, so the largest
// last offset is math.MaxInt64 - 1. lastOffsetDelta must not be negative
// (ValidateHeader refuses that).
func checkNextOffsetFits(bt batch.Batch) error {
	if base, d := bt.BaseOffset(), int64(bt.LastOffsetDelta()); base > math.MaxInt64-1-d {
		return invalidBatchf(nil, "base offset %d + lastOffsetDelta %d passes the largest offset %d", base, d, int64(math.MaxInt64-1))
	}
	return nil
}
