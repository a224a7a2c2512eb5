package log

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
)

// AppendBuilder appends the batch bld holds, as AppendBatchInfo appends
// the bytes bld.Build() would return, and with the same result: the same
// stored bytes, offsets, AppendInfo and errors. It leaves bld unchanged
// (call bld.Reset for the next batch) and does not retain it. bld must not
// be used by another goroutine during the call (a Builder is not safe for
// concurrent use).
//
// It is the fast way to append records a program builds itself. The
// bytes AppendBatch receives are the caller's, who could have changed
// them after encoding them (keeping the CRC-32C), so AppendBatch checks
// the CRC and walks every record. Here the partition reads the records
// from bld's own buffer, which no caller can reach during the append, and
// the header from bld's fields, so for an uncompressed batch it skips that
// walk and the CRC check, builds no byte slice and copies nothing: the
// Builder computes the CRC once (once more under Config.LogAppendTime,
// whose stamp changes the header after that), and the partition writes
// header and records with one vectored write.
//
// Every rule on what the caller chose still applies, as under AppendBatch:
// a batch without records, with recordsCount other than lastOffsetDelta+1
// (SetLastOffsetDelta, AddAt with a gap), a control batch, or a
// producer-set LogAppendTime gets the same error AppendBatch gives, and
// so do max.message.bytes, segment.bytes, the timestamp bounds
// (Config.MessageTimestampBeforeMax and AfterMax, against the records'
// smallest and largest timestamps), and the producer id, epoch, sequence
// and transaction checks. maxTimestamp is the records' largest timestamp
// (or Now under Config.LogAppendTime), the leader epoch is stamped, and
// nothing is written on error. A compressed batch (and any batch refused
// for its form) is encoded into a buffer of the partition's and appended
// through AppendBatchInfo: compression is the costly part there. An error
// from the Builder (batch.ErrBadCompression, batch.ErrBatchTooLarge) is
// returned wrapped in ErrInvalidBatch or ErrBatchTooLarge. A nil bld is
// ErrInvalidBatch. On error info.Base and info.LastOffset are -1.
func (p *Partition) AppendBuilder(bld *batch.Builder) (info AppendInfo, err error) {
	failed := AppendInfo{Base: -1, LastOffset: -1}
	if bld == nil {
		return failed, invalidBatchf(nil, "AppendBuilder of a nil Builder")
	}
	h, recs, times, ok := bld.Parts()
	if !ok {
		// Encoded into a buffer of ours and appended as AppendBatchInfo
		// appends bytes, which gives a batch refused for its form its
		// usual error.
		buf, b, err := encodeBuilt(bld)
		if err != nil {
			return failed, err
		}
		info, err = p.AppendBatchInfo(b)
		releaseBuilt(buf) // no defer on the fast path's frame
		return info, err
	}
	// What appendRules.checkBytes checks that depends on the caller's
	// choices, in its order; the framing, the CRC and the records are the
	// Builder's own (batch.Builder.Parts), and the batches Parts takes
	// are those the rest of its checks accept.
	if err := p.batchRules.checkSize(batch.HeaderSize + len(recs)); err != nil {
		return failed, err
	}
	var seen clockReading
	seen.unixMilli, seen.taken = bld.ClockRead()
	patched, err := p.batchRules.stampTimes(times, &h, seen)
	if err != nil {
		return failed, err
	}
	if patched {
		batchaccess.PutCRC(h[:], batchaccess.CRCWithRecords(h[:], recs))
	}
	if _, err := p.appendChecked(context.Background(), &h, recs, &info); err != nil {
		return failed, err
	}
	return info, nil
}

// encodeBuilt encodes the batch bld holds into a pooled buffer, for
// AppendBuilder when it does not take bld's Parts. It returns the buffer,
// which the caller hands back to releaseBuilt once it no longer uses b,
// and the batch b in it. An error from the Builder comes wrapped in
// ErrBatchTooLarge or ErrInvalidBatch; the buffer is then released
// already (nil).
func encodeBuilt(bld *batch.Builder) (buf *[]byte, b []byte, err error) {
	buf = builtPool.Get().(*[]byte)
	b, err = bld.AppendTo((*buf)[:0])
	*buf = b[:0]
	if err != nil {
		releaseBuilt(buf)
		if errors.Is(err, batch.ErrBatchTooLarge) {
			return nil, nil, fmt.Errorf("%w: building the batch: %w", ErrBatchTooLarge, err)
		}
		return nil, nil, invalidBatchf(err, "building the batch")
	}
	return buf, b, nil
}

// releaseBuilt returns an encodeBuilt buffer to the pool, unless it grew
// past maxPooledBuilt.
func releaseBuilt(buf *[]byte) {
	if cap(*buf) <= maxPooledBuilt {
		builtPool.Put(buf)
	}
}

// builtPool holds encodeBuilt's buffers; maxPooledBuilt bounds the ones
// kept.
var builtPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuilt = 4 << 20
