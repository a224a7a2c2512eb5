package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// Records is the result of a read: whole batches, contiguous in one segment
// file, the first holding the offset that was asked for. It holds a
// reference on its segment (and a read lease that keeps TruncateTo from
// cutting the bytes under it) until Close.
//
// A Records is a small value (a handle): copies of it name the same
// result. Close it once; a second Close (of the handle or of any copy)
// returns ErrClosed and changes nothing. After Close every method sees a
// closed result: Bytes returns nil, FirstOffset and
// NextOffset -1, WriteTo returns ErrClosed. A closed handle never reaches
// another reader's result: the state behind it is pooled (a read
// allocates nothing) and each use of it carries a new generation number,
// which the handle checks on every call. The zero Records is a closed one.
//
// A Records is not safe for concurrent use (Close one from another
// goroutine only when nothing uses it). While a goroutine holds Records of
// a partition it may read the partition and call SetHighWatermark; a
// TruncateTo of the segment it reads waits for it (up to
// Config.TruncateWait), and so does every writer behind that TruncateTo,
// and a new read of that segment. See the package documentation,
// "Concurrency".
type Records struct {
	// r is the pooled state, nil for the zero Records.
	r *records
	// gen is r.gen when the handle was made; once r.gen moved on (Close),
	// the handle is closed.
	gen uint64
}

// records is the pooled state behind a Records handle.
type records struct {
	// gen counts the uses of this object: Close advances it (a CAS from the
	// handle's generation, so exactly one Close wins), which closes every
	// handle of the use. Handles of older uses never read the other
	// fields.
	gen atomic.Uint64
	// seg is the segment the batches are in, nil for an empty result; the
	// Records holds a reference and a read lease on it.
	seg *segment.Segment
	// start and end are the byte positions of the batches in seg's .log.
	start, end int64
	// first is the base offset of the first batch, -1 when empty; next
	// is the offset after the last one, -1 when empty (from the segment's
	// header scan, so that NextOffset reads no mapped byte).
	first, next int64
	// b is what Bytes returns: an alias of the mapped segment, or scratch
	// filled with ReadAt when the segment is not mapped.
	b []byte
	// scratch is the buffer for unmapped segments, kept across uses of
	// the pooled object.
	scratch []byte
	// readers is the partition's open-reader gauge (Stats.OpenReaders),
	// set while the records holds a segment.
	readers *atomic.Int64
	// from is the offset that was read: All skips the records below it.
	from int64
	// dec is the Decoder All uses when given none, and legacyRecs the
	// scratch for a legacy entry's records; kept across uses of the
	// pooled object (dec is reset once it decompressed a batch, and
	// legacyRecs dropped past maxPooledLegacyRecs, so that no large
	// buffer stays pooled). The Used flags say the use touched them.
	dec        batch.Decoder
	decUsed    bool
	legacyRecs []batch.Record
	legacyUsed bool
	// run is the run of records All decoded and is yielding, and st
	// where the decoding is: here rather than on All's stack, which the
	// indirect call of batch's run decoder would move to the heap.
	run     [runLen]batch.Record
	runUsed bool
	st      batch.RunState
}

var recordsPool = sync.Pool{New: func() any { return new(records) }}

// maxPooledScratch bounds the read buffer a pooled records keeps (reads of
// unmapped segments).
const maxPooledScratch = 4 << 20

// maxPooledLegacyRecs bounds the legacy record scratch a pooled records
// keeps, in records (96 bytes each): enough for the inner messages of a
// compressed legacy wrapper of Kafka's default producer batch (16 KiB) of
// small messages; a larger wrapper's scratch is dropped at Close.
const maxPooledLegacyRecs = 1024

// newRecords returns pooled state for a new result, empty.
func newRecords() *records {
	r := recordsPool.Get().(*records)
	r.first, r.next = -1, -1
	return r
}

// emptyRecords returns the empty result of a read at offset: its
// NextOffset is offset, where the next read continues.
func emptyRecords(offset int64) Records {
	r := newRecords()
	r.next, r.from = offset, offset
	return r.handle()
}

// handle returns the Records handle of r's current use.
func (r *records) handle() Records { return Records{r: r, gen: r.gen.Load()} }

// state returns the state behind h, or nil when h is closed.
func (h Records) state() *records {
	if h.r == nil || h.r.gen.Load() != h.gen {
		return nil
	}
	return h.r
}

// Bytes returns the batches, whole, in Kafka's on-disk (and fetch response)
// encoding. When the segment is memory-mapped (the default on Linux and
// macOS) the slice aliases the mapping: nothing is copied, and it is valid
// only until Close. It must not be modified. Empty at the end of the
// visible log; nil after Close.
func (h Records) Bytes() []byte {
	if r := h.state(); r != nil {
		return r.b
	}
	return nil
}

// FirstOffset returns the base offset of the first batch (at or below the
// offset that was read, since a read starts at the batch holding it), or -1
// when empty or closed.
func (h Records) FirstOffset() int64 {
	if r := h.state(); r != nil {
		return r.first
	}
	return -1
}

// NextOffset returns where the next read continues: the offset after the
// last batch or, for an empty result, the offset that was read (nothing is
// visible there yet: Wait for it, or for ReadCommitted for the last stable
// offset to pass it, then read it again). For a closed Records it returns
// -1. The read found it while scanning the batch
// headers; it reads no byte of Bytes.
func (h Records) NextOffset() int64 {
	if r := h.state(); r != nil {
		return r.next
	}
	return -1
}

// WriteTo writes the batches to w and returns the number of bytes written.
// When w is an *os.File or a TCP or Unix socket and the segment file has an
// operating-system descriptor, the bytes go by sendfile(2) without passing
// through user space. Each call writes the whole record set. After Close it
// returns ErrClosed.
func (h Records) WriteTo(w io.Writer) (int64, error) {
	r := h.state()
	if r == nil {
		return 0, fmt.Errorf("%w: Records.WriteTo after Close", ErrClosed)
	}
	if r.seg == nil {
		// Empty, or read from a remote copy (tierread.go) into r.b.
		n, err := w.Write(r.b)
		return int64(n), err
	}
	if r.end == r.start {
		return 0, nil
	}
	return r.seg.WriteTo(w, r.start, r.end)
}

// Close releases the read lease and the segment reference (the last
// reference on a segment deleted meanwhile removes its files; an error doing
// so is returned). A second Close returns ErrClosed and does nothing else.
func (h Records) Close() error {
	if h.r == nil || !h.r.gen.CompareAndSwap(h.gen, h.gen+1) {
		return fmt.Errorf("%w: Records closed twice", ErrClosed)
	}
	return h.r.release()
}

// release drops what r holds and returns it to the pool. REQUIRES: r's
// generation was advanced (no handle names this use any more).
func (r *records) release() error {
	var err error
	if r.seg != nil {
		r.seg.ReleaseRead()
		err = r.seg.Unref()
		r.readers.Add(-1)
		r.readers = nil
	}
	r.seg, r.b, r.start, r.end, r.first, r.next = nil, nil, 0, 0, -1, -1
	if cap(r.scratch) > maxPooledScratch {
		r.scratch = nil
	}
	if r.decUsed {
		r.dec, r.decUsed = batch.Decoder{}, false
	}
	if r.legacyUsed {
		if cap(r.legacyRecs) > maxPooledLegacyRecs {
			r.legacyRecs = nil
		} else {
			clear(r.legacyRecs[:cap(r.legacyRecs)]) // they alias the mapping or a decompression buffer
			r.legacyRecs = r.legacyRecs[:0]
		}
		r.legacyUsed = false
	}
	if r.runUsed {
		clear(r.run[:])
		r.runUsed = false
	}
	recordsPool.Put(r)
	return err
}

// discard releases r without a handle ever having been made of it.
func (r *records) discard() error {
	r.gen.Add(1)
	return r.release()
}

// ReadFrom returns whole batches starting with the one that holds offset,
// from one segment, for a consumer: never a byte at or past the high
// watermark. It returns at most maxBytes bytes unless the first batch alone
// is larger, in which case it returns that one batch (so a consumer always
// progresses); maxBytes <= 0 asks for just that batch.
//
// offset must lie in [LogStartOffset, LogEndOffset], else the error wraps
// ErrOffsetOutOfRange. At or past the high watermark the result is empty
// (Bytes has length 0, NextOffset is offset), not an error. A read whose offset lies inside a
// batch returns that whole batch; consumers skip the records below the
// offset, as Kafka clients do.
//
// ReadFrom takes no lock of the partition and never blocks appends (under
// Config.WriteBehind, when batches are buffered, it first writes them
// under the partition's mutex); it waits only while a TruncateTo wants or cuts the segment it reads (at
// most Config.TruncateWait, then the truncation gives up). The Records
// must be closed. On error the Records is the zero (closed) one.
func (p *Partition) ReadFrom(offset int64, maxBytes int) (Records, error) {
	return p.read(offset, maxBytes, false)
}

// ReadFromFollower is ReadFrom for a replica: its visibility bound is the
// log end offset instead of the high watermark.
func (p *Partition) ReadFromFollower(offset int64, maxBytes int) (Records, error) {
	return p.read(offset, maxBytes, true)
}

// Poll returns an iterator over at most maxRecords records from offset
// from on,
// in offset order: the records visible now (below the high watermark) or,
// when there is none yet, the first to become visible and those visible
// with it. It is a Kafka consumer's poll of one partition, maxRecords
// bounding the records it returns and ctx's deadline playing the poll's
// timeout, and the long poll of a service that answers "up to M records
// from offset N":
//
//	next := from
//	for rec, err := range p.Poll(ctx, from, 500) {
//		if err != nil {
//			return next, err // ctx.Err() when nothing came in time
//		}
//		send(rec.Offset, rec.Key, rec.Value)
//		next = rec.Offset + 1
//	}
//	return next, nil
//
// It reads on across segments until it has yielded maxRecords records or
// reached the high watermark, and waits (Wait) only while it has yielded
// nothing; once it has yielded a record it never waits. An offset from at
// or past LogEndOffset waits, as Wait does, until appends reach it. What it
// yields, and what it skips, are Records's: records below from in the
// first batch read, and control batches (transaction markers). A
// maxRecords below 1 yields nothing and returns at once.
//
// The iteration ends by yielding one error, after which it stops:
// ctx.Err() when ctx ended before a record came, an error wrapping
// ErrOffsetOutOfRange when from is below LogStartOffset (or a truncation
// or retention moved the log under the poll), ErrClosed, the partition's
// failure, and the corruption and fault errors Records yields. A record's
// Key, Value and Headers are valid only until the loop body returns, and
// the loop body must not call the partition's mutating methods, as with
// Records.
func (p *Partition) Poll(ctx context.Context, from int64, maxRecords int) iter.Seq2[batch.Record, error] {
	return func(yield func(batch.Record, error) bool) {
		if maxRecords < 1 {
			return
		}
		n := 0
		counted := func(rec batch.Record, err error) bool {
			if err != nil {
				return yield(rec, err)
			}
			n++
			return yield(rec, nil) && n < maxRecords
		}
		var dec batch.Decoder
		// cur is the read being yielded, zero when none is open; the
		// deferred Close releases it when the loop body panics (Records
		// explains why).
		var cur Records
		defer func() {
			if cur != (Records{}) {
				_ = cur.Close()
			}
		}()
		next := from
		for {
			// The high watermark before the read: when the read finds
			// nothing although hw > next, the batch holding next ends
			// past hw, and shows only once the high watermark passes hw.
			hw := p.HighWatermark()
			if next >= hw {
				if n > 0 {
					return
				}
				// Not read: past the log end ReadFrom would refuse.
				if err := p.Wait(ctx, next); err != nil {
					yield(batch.Record{}, err)
					return
				}
				continue
			}
			r, err := p.ReadFrom(next, iterReadBytes)
			if err != nil {
				yield(batch.Record{}, err)
				return
			}
			if len(r.Bytes()) == 0 {
				_ = r.Close() // an empty result holds nothing
				if n > 0 {
					return
				}
				if err := p.Wait(ctx, hw); err != nil && !p.cutAtOrPast(err, next) {
					yield(batch.Record{}, err)
					return
				}
				continue
			}
			cur = r
			more := r.all(&dec, counted, p)
			next = r.NextOffset()
			cur = Records{}
			_ = r.Close()
			if !more {
				return
			}
		}
	}
}

// read implements ReadFrom and ReadFromFollower. The argument that makes it
// safe without a lock is in the package documentation, "Lock-free reads".
func (p *Partition) read(offset int64, maxBytes int, follower bool) (Records, error) {
	maxBytes = max(maxBytes, 0) // 0: just the first batch (minOneBatch)
	p.showBuffered()            // writebehind.go
	for {
		if p.closed.Load() {
			return Records{}, ErrClosed
		}
		if err := p.offlineErr(); err != nil {
			return Records{}, err
		}
		gen := p.truncations.Load()
		hw, end := p.bounds.load()
		start := p.logStart.Load()
		at := offset // where the local segments are read from
		if offset < start && offset >= 0 {
			if t := p.tierPart.Load(); t != nil {
				r, how, err := t.remoteRead(offset, start, maxBytes)
				switch how {
				case copyServed:
					return r, err
				case copyGone:
					continue
				case copyLocal:
					// No batch lies between offset and the local log
					// start: the first one at or after it answers.
					at = start
				}
			}
		}
		if at < start || at > end.Offset {
			return Records{}, fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, offset, start, end.Offset)
		}
		bound := hw
		if follower {
			bound = end
		}
		if at >= bound.Offset {
			return emptyRecords(offset), nil
		}
		snap, err := p.acquireSnapshot()
		if err != nil {
			return Records{}, err
		}
		r, retry, err := p.readSnapshot(snap, gen, at, maxBytes, bound)
		// The last reference goes when the partition replaced the snapshot
		// meanwhile; its release is not this read's failure.
		p.releaseSnapshot(snap)
		if retry {
			continue
		}
		if err != nil {
			return Records{}, p.noteFault(err)
		}
		if r == nil {
			return emptyRecords(offset), nil
		}
		return r.handle(), nil
	}
}

// readSnapshot reads from the segments of snap. It returns retry when a
// truncation started after the caller loaded its bounds, or when retention
// removed the segment of offset after the caller's range check, and a nil
// r when nothing at or after offset lies below the bound.
func (p *Partition) readSnapshot(snap *segments, gen uint64, offset int64, maxBytes int, bound position) (r *records, retry bool, err error) {
	i := snap.find(offset)
	if i < 0 {
		// Retention removed the segment after the range check. Every
		// removal from the front raises the log start before it publishes
		// the shorter list (deleteSegments, DeleteRecordsBefore), so the
		// start loaded now is past offset: read again, to find offset in
		// its copy under tiered storage, or out of range.
		if p.logStart.Load() > offset || p.truncations.Load() != gen {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("%w: offset %d is below the first segment (%d)", ErrOffsetOutOfRange, offset, snap.list[0].BaseOffset())
	}
	for ; i < len(snap.list); i++ {
		seg := snap.list[i]
		segBase := seg.BaseOffset()
		if segBase > bound.SegBase {
			break
		}
		seg.Ref()
		seg.AcquireRead()
		if p.truncations.Load() != gen {
			seg.ReleaseRead()
			err := seg.Unref()
			return nil, err == nil, err
		}
		maxPos := seg.Size()
		if segBase == bound.SegBase {
			maxPos = bound.Pos
		}
		r := newRecords()
		sl, err := seg.Read(offset, maxBytes, maxPos, true)
		if err == nil && sl.End > sl.Start {
			r.b, err = segmentBytes(seg, sl.Start, sl.End, &r.scratch)
			if err == nil {
				r.seg, r.start, r.end, r.first, r.next = seg, sl.Start, sl.End, sl.FirstOffset, sl.NextOffset
				r.from = offset
				r.readers = &p.stats.readers
				r.readers.Add(1)
				return r, false, nil
			}
		}
		seg.ReleaseRead()
		uerr := seg.Unref()
		_ = r.discard() // holds no segment: nothing to fail
		if errors.Is(err, segment.ErrDeleted) {
			// Deleted (retention, compaction) after the snapshot was
			// taken, and its files are gone: read the current list.
			return nil, true, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("partlog/log: read offset %d from segment %d of %s: %w", offset, segBase, p.dir, err)
		}
		if uerr != nil {
			return nil, false, uerr
		}
		// Nothing at or after offset in this segment below the bound: the
		// offset is past its last batch. Try the next segment.
	}
	// Nothing below the bound: an empty result, unless a truncation
	// replaced the segments after the caller loaded its bounds (a restart
	// below the log end publishes a segment past the old bound's, which
	// stops the walk above before any truncation check): read again.
	if p.truncations.Load() != gen {
		return nil, true, nil
	}
	return nil, false, nil
}
