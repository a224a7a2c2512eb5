package log

import (
	"context"
	"fmt"
	"iter"

	"github.com/partlog/partlog/batch"
)

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
// modified. Only the framing is checked (batch.Parse); the bytes were
// validated when they were appended or recovered. Should the framing be
// broken, the iterator yields one nil batch with the error (wrapping
// batch.ErrCorrupt, a *batch.CorruptionError giving the position within
// Bytes) and stops. Iterating allocates nothing. Iterating a closed
// Records yields one nil batch with an error wrapping ErrClosed.
func (h Records) Batches() iter.Seq2[batch.Batch, error] {
	return func(yield func(batch.Batch, error) bool) {
		r := h.state()
		if r == nil {
			yield(nil, fmt.Errorf("%w: Records.Batches after Close", ErrClosed))
			return
		}
		for rest := r.b; len(rest) > 0; {
			at := len(r.b) - len(rest)
			b, next, err := batch.Parse(rest)
			if err != nil {
				yield(nil, fmt.Errorf("partlog/log: batch at byte %d of a read result (offset %d): %w", at, r.first, err))
				return
			}
			if !yield(b, nil) {
				return
			}
			rest = next
		}
	}
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
// markers), as a Kafka consumer skips them. The iteration ends by yielding
// one error, after which it stops: ctx.Err() when ctx ended, an error
// wrapping ErrOffsetOutOfRange when from (or, after retention or a
// truncation, the next offset) is outside the log, ErrClosed, the
// partition's failure, or a corruption error from the record decoder
// (batch.ErrCorrupt).
//
// A record's Key, Value and Headers alias the segment's mapping (or a
// decompression buffer) and are valid only until the loop body returns:
// copy what must outlive it. While the loop body runs the iterator holds a
// Records, so the body must not call the partition's mutating methods (see
// Records). Decoding an uncompressed batch allocates nothing; a compressed
// one is decompressed into a buffer the iteration reuses.
func (p *Partition) Records(ctx context.Context, from int64) iter.Seq2[batch.Record, error] {
	return func(yield func(batch.Record, error) bool) {
		var dec batch.Decoder
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
			next, more = yieldRecords(r, &dec, next, yield)
			// Close releases the lease and the reference; its only error
			// is removing the files of a segment deleted meanwhile, which
			// is not this reader's concern.
			_ = r.Close()
			if !more {
				return
			}
		}
	}
}

// yieldRecords yields the records of r at offsets >= from and returns the
// offset to read next, and false when the iteration must stop (yield said
// so, or an error was yielded).
func yieldRecords(r Records, dec *batch.Decoder, from int64, yield func(batch.Record, error) bool) (next int64, more bool) {
	next = from
	for b, err := range r.Batches() {
		if err != nil {
			yield(batch.Record{}, err)
			return next, false
		}
		if b.Attributes().IsControl() {
			next = max(next, b.NextOffset())
			continue
		}
		it := b.Records(dec)
		for {
			rec, ok, err := it.Next()
			if err != nil {
				yield(batch.Record{}, fmt.Errorf("partlog/log: decode batch at offset %d: %w", b.BaseOffset(), err))
				return next, false
			}
			if !ok {
				break
			}
			if rec.Offset < from {
				continue
			}
			if !yield(rec, nil) {
				return next, false
			}
		}
		next = max(next, b.NextOffset())
	}
	return next, true
}
