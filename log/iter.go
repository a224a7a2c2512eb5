package log

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/mmap"
)

// ErrLegacyEntry is wrapped by the error Records.Batches yields for a legacy
// message set entry (magic 0 or 1, which Kafka wrote before 0.11): the
// bytes are valid, but they are not a batch.Batch. The error is a
// *LegacyEntryError carrying the entry. It does not wrap ErrCorrupt.
var ErrLegacyEntry = errors.New("partlog/log: legacy message, not a RecordBatch v2")

// LegacyEntryError is the error Records.Batches yields for a legacy entry.
// It wraps ErrLegacyEntry.
type LegacyEntryError struct {
	// Magic is the entry's message format version (batch.MagicV0 or
	// batch.MagicV1).
	Magic int8
	// NextOffset is the offset after the entry: its offset + 1 (a
	// compressed wrapper's offset is its last inner message's).
	NextOffset int64
	// Entry is the whole entry (batch.Legacy(Entry) reads it, and
	// batch.Decoder.AppendLegacyRecords decodes its records). It aliases
	// Records.Bytes: valid until Close.
	Entry []byte
	// Pos is the entry's byte position within Records.Bytes.
	Pos int
}

// Error describes the entry.
func (e *LegacyEntryError) Error() string {
	return fmt.Sprintf("%v: magic %d entry of %d bytes at byte %d of a read result, next offset %d",
		ErrLegacyEntry, e.Magic, len(e.Entry), e.Pos, e.NextOffset)
}

// Unwrap returns ErrLegacyEntry.
func (e *LegacyEntryError) Unwrap() error { return ErrLegacyEntry }

// Batches returns an iterator over the whole batches of the read result,
// in offset order, for range loops:
//
//	for b, err := range r.Batches() {
//		if err != nil {
//			return err
//		}
//		use(b.BaseOffset(), b.LastOffset())
//	}
//
// Each batch aliases Bytes: it is valid until Close and must not be
// modified. Only the framing is checked (batch.FrameEntry); the bytes were
// validated when they were appended or recovered. Should the framing be
// broken, the iterator yields one nil batch with the error (wrapping
// batch.ErrCorrupt, a *batch.CorruptionError giving the position within
// Bytes) and stops; should the mapped bytes be unreadable (a media error,
// or the file cut behind the partition's back), the error wraps ErrFault
// and the iteration stops too. Iterating allocates nothing. Iterating a
// closed Records yields one nil batch with an error wrapping ErrClosed.
//
// Batches yields RecordBatch v2 only. A log Kafka wrote before 0.11 may
// hold legacy messages (magic 0 and 1), which ReadFrom serves as stored:
// for each of those the iterator yields a nil batch with a
// *LegacyEntryError (wrapping ErrLegacyEntry, not ErrCorrupt) carrying the
// entry, and goes on with the next entry if the loop continues. A consumer
// that wants records rather than batches uses Partition.Records, which
// decodes both formats.
func (h Records) Batches() iter.Seq2[batch.Batch, error] {
	return func(yield func(batch.Batch, error) bool) {
		r := h.state()
		if r == nil {
			yield(nil, fmt.Errorf("%w: Records.Batches after Close", ErrClosed))
			return
		}
		// Entries are framed a run at a time under one fault guard
		// (frameEntries): one guard per entry cost as much as the
		// framing of a one-record batch.
		var run [framedRun]entry
		for rest := r.b; len(rest) > 0; {
			n, err := frameEntries(rest, run[:])
			for _, e := range run[:n] {
				at := len(r.b) - len(rest)
				var more bool
				if batch.IsLegacyMagic(e.magic) {
					more = yield(nil, &LegacyEntryError{Magic: e.magic, NextOffset: e.next, Entry: rest[:e.size:e.size], Pos: at})
				} else {
					more = yield(batch.Batch(rest[:e.size:e.size]), nil)
				}
				if !more {
					return
				}
				rest = rest[e.size:]
			}
			if err != nil {
				yield(nil, fmt.Errorf("partlog/log: batch at byte %d of a read result (offset %d): %w", len(r.b)-len(rest), r.first, err))
				return
			}
		}
	}
}

// entry is the framing of one entry of a read result (frameEntry).
type entry struct {
	size    int   // bytes
	magic   int8  // 2 for a RecordBatch v2, 0 or 1 for a legacy message
	next    int64 // the offset after the entry
	base    int64 // a v2 batch's base offset
	control bool  // a v2 control batch (transaction marker)
}

// frameEntry frames the first entry of b, which may alias a mapped
// segment, under the fault guard: a fault is an error wrapping ErrFault.
// The guard covers only this call, never a caller's loop body.
func frameEntry(b []byte) (e entry, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	e.size, e.magic, e.next, err = batchaccess.FrameEntry(b)
	if err != nil {
		return entry{}, err
	}
	if !batch.IsLegacyMagic(e.magic) {
		bt := batch.Batch(b[:e.size])
		e.base, e.control = bt.BaseOffset(), bt.Attributes().IsControl()
	}
	return e, nil
}

// framedRun is how many entries Batches frames under one fault guard.
const framedRun = 32

// frameEntries frames the first entries of b, at most len(run), into run
// under one fault guard and returns how many it framed; err (wrapping
// ErrFault for a fault) is the problem with the entry after them, when
// framing stopped at one. The guard covers only this call.
func frameEntries(b []byte, run []entry) (n int, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	for n < len(run) && len(b) > 0 {
		e := &run[n]
		e.size, e.magic, e.next, err = batchaccess.FrameEntry(b)
		if err != nil {
			return n, err
		}
		if !batch.IsLegacyMagic(e.magic) {
			bt := batch.Batch(b[:e.size])
			e.base, e.control = bt.BaseOffset(), bt.Attributes().IsControl()
		}
		b = b[e.size:]
		n++
	}
	return n, nil
}

// nextRecord is it.Next under the fault guard.
func nextRecord(it *batch.Iter) (rec batch.Record, ok bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return it.Next()
}

// legacyRecords decodes the records of the legacy entry e into dst (see
// batch.Decoder.AppendLegacyRecords) under the fault guard.
func legacyRecords(dec *batch.Decoder, dst []batch.Record, e batch.Legacy) (recs []batch.Record, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return dec.AppendLegacyRecords(dst, e, false)
}

// iterReadBytes is how many bytes Partition.Records asks ReadFrom for at a
// time. On a mapped segment nothing is copied, so a large value costs
// nothing; on an unmapped one it bounds the read buffer.
const iterReadBytes = 1 << 20

// Records returns an iterator over the partition's records from offset
// from on, in offset order, that tails the log: once it has yielded every
// record below the high watermark it waits (Wait) for more, until ctx
// ends. It is the consumer's loop of ReadFrom, Records.Batches,
// batch.Batch.Records and Wait in one range statement:
//
//	for rec, err := range p.Records(ctx, from) {
//		if err != nil {
//			return err // ctx.Err() when ctx ended
//		}
//		use(rec.Offset, rec.Key, rec.Value)
//	}
//
// Records below from in the first batch read are skipped (a read starts at
// the batch holding from), and so are control batches (transaction
// markers), as a Kafka consumer skips them. Legacy messages (magic 0 and
// 1, in a log Kafka wrote before 0.11) are decoded too, with their
// absolute offsets (a compressed wrapper's inner messages one by one) and
// timestamps (-1 under magic 0, which has none); their Headers are nil.
// The iteration ends by yielding one error, after which it stops:
// ctx.Err() when ctx ended, an error wrapping ErrOffsetOutOfRange when
// from (or, after retention or a truncation, the next offset) is outside
// the log, ErrClosed, the partition's failure, a corruption error from the
// record decoder (batch.ErrCorrupt), or, when the mapped segment cannot be
// read (a media error, or its file cut behind the partition's back), an
// error wrapping ErrFault, which takes the partition offline as ReadFrom's
// does.
//
// A record's Key, Value and Headers alias the segment's mapping (or a
// decompression buffer) and are valid only until the loop body returns:
// copy what must outlive it. The decoding runs under the fault guard; the
// loop body does not, so a body that reads a record's bytes after a media
// error still faults. While the loop body runs the iterator holds a
// Records, so the body must not call the partition's mutating methods (see
// Records); the Records is released when the loop ends, also by a break or
// a panic of the body. Decoding an uncompressed batch allocates nothing; a
// compressed one is decompressed into a buffer the iteration reuses.
func (p *Partition) Records(ctx context.Context, from int64) iter.Seq2[batch.Record, error] {
	return func(yield func(batch.Record, error) bool) {
		var dec batch.Decoder
		var legacy []batch.Record // decoded legacy records, reused
		// cur is the read being yielded, zero when none is open. The
		// deferred Close releases it when the loop body panics (or calls
		// runtime.Goexit): a leaked read lease would block every
		// TruncateTo, and with it the writers. Close's only error is
		// removing the files of a segment deleted meanwhile, which is not
		// this reader's concern.
		var cur Records
		defer func() {
			if cur != (Records{}) {
				_ = cur.Close()
			}
		}()
		next := from
		for {
			if err := ctx.Err(); err != nil {
				yield(batch.Record{}, err)
				return
			}
			// The high watermark before the read: when the read finds
			// nothing although hw > next, the batch holding next ends
			// past hw (SetHighWatermark put hw inside it), and it shows
			// only once the high watermark passes hw.
			hw := p.HighWatermark()
			r, err := p.ReadFrom(next, iterReadBytes)
			if err != nil {
				yield(batch.Record{}, err)
				return
			}
			if r.Empty() {
				_ = r.Close() // an empty result holds nothing
				if err := p.Wait(ctx, max(next, hw)); err != nil {
					yield(batch.Record{}, err)
					return
				}
				continue
			}
			var more bool
			cur = r
			next, legacy, more = p.yieldRecords(r, &dec, legacy, next, yield)
			cur = Records{}
			_ = r.Close()
			if !more {
				return
			}
		}
	}
}

// yieldRecords yields the records of r at offsets >= from and returns the
// offset to read next, and false when the iteration must stop (yield said
// so, or an error was yielded). Framing and decoding run under the fault
// guard (frameEntry, nextRecord, legacyRecords); yield never does. legacy
// is the reusable buffer for a legacy entry's records, returned (emptied)
// for the next call; it is returned rather than updated through a pointer
// so that dec, whose buffer its records alias, stays on the stack.
func (p *Partition) yieldRecords(r Records, dec *batch.Decoder, legacy []batch.Record, from int64, yield func(batch.Record, error) bool) (next int64, _ []batch.Record, more bool) {
	next = from
	st := r.state()
	if st == nil {
		yield(batch.Record{}, fmt.Errorf("%w: Records closed during the iteration", ErrClosed))
		return next, legacy, false
	}
	for rest := st.b; len(rest) > 0; {
		at := len(st.b) - len(rest)
		e, err := frameEntry(rest)
		if err != nil {
			yield(batch.Record{}, p.noteFault(fmt.Errorf("partlog/log: batch at byte %d of a read result (offset %d): %w", at, st.first, err)))
			return next, legacy, false
		}
		body := rest[:e.size:e.size]
		rest = rest[e.size:]
		switch {
		case batch.IsLegacyMagic(e.magic):
			recs, err := legacyRecords(dec, legacy[:0], batch.Legacy(body))
			legacy = recs[:0]
			if err != nil {
				yield(batch.Record{}, p.noteFault(fmt.Errorf("partlog/log: decode magic %d message at offset %d: %w", e.magic, e.next-1, err)))
				return next, legacy, false
			}
			for _, rec := range recs {
				if rec.Offset < from {
					continue
				}
				if !yield(rec, nil) {
					return next, legacy, false
				}
			}
		case e.control:
		default:
			it := batch.Batch(body).Records(dec)
			for {
				rec, ok, err := nextRecord(&it)
				if err != nil {
					yield(batch.Record{}, p.noteFault(fmt.Errorf("partlog/log: decode batch at offset %d: %w", e.base, err)))
					return next, legacy, false
				}
				if !ok {
					break
				}
				if rec.Offset < from {
					continue
				}
				if !yield(rec, nil) {
					return next, legacy, false
				}
			}
		}
		next = max(next, e.next)
	}
	return next, legacy, true
}
