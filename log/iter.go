package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
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
	// Magic is the entry's message format version: 0 (Kafka 0.8-0.9) or
	// 1 (Kafka 0.10).
	Magic int8
	// NextOffset is the offset after the entry: its offset + 1 (a
	// compressed wrapper's offset is its last inner message's).
	NextOffset int64
	// Entry is the whole entry: batch.Decoder.AppendLegacyRecords decodes
	// its records, LegacyBaseOffset gives its first offset and
	// ValidateLegacy checks its CRC-32 and inner messages. It aliases
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
// broken (a batch damaged on disk since: ReadFrom reads the headers of
// only some of the batches of a long range), the iterator yields one nil
// batch with the error and stops: it wraps batch.ErrCorrupt, its
// *batch.CorruptionError names the segment file and the damaged field's
// position in it, and the message gives the offset the batch should have
// started at. Should the mapped bytes be unreadable (a media error,
// or the file cut behind the partition's back), the error wraps ErrFault
// and the iteration stops too. Iterating allocates nothing. Iterating a
// closed Records yields one nil batch with an error wrapping ErrClosed, and
// so does the iteration of a Records the loop body closes, in place of the
// batches after the one it was given.
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
		// (frameSizes): one guard per entry cost as much as the framing
		// of a one-record batch. The loop yields no byte of the
		// batches but their slices.
		var run [framedRun]int
		prev := -1   // position of the last entry yielded
		touched := 0 // r.b is touched (touchAhead) below this
		for rest := r.b; len(rest) > 0; {
			touched = touchAhead(r.b, touched, len(r.b)-len(rest)+touchBytes)
			n, err := frameSizes(rest, &run)
			for _, size := range run[:n] {
				if size < 0 { // a legacy entry, framed again for its fields
					at := len(r.b) - len(rest)
					e, ferr := frameEntry(rest)
					if ferr != nil {
						yield(nil, r.framingError(at, prev, ferr))
						return
					}
					size = e.size
					if !yield(nil, &LegacyEntryError{Magic: e.magic, NextOffset: e.next, Entry: rest[:size:size], Pos: at}) {
						return
					}
				} else if !yield(batch.Batch(rest[:size:size]), nil) {
					return
				}
				if h.state() == nil { // closed by the loop body: rest is released
					yield(nil, fmt.Errorf("%w: Records closed during the iteration", ErrClosed))
					return
				}
				prev = len(r.b) - len(rest)
				rest = rest[size:]
			}
			if err != nil {
				yield(nil, r.framingError(len(r.b)-len(rest), prev, err))
				return
			}
		}
	}
}

// framingError is the error Batches and Partition.Records yield for the
// entry at byte at of r.b that does not frame (err). prev is the position
// of the entry before it, -1 when it is the first. A corruption error gets
// the segment file and the position in it (the result's own positions
// mean nothing to whoever must look at the file), and the message the
// offset the entry should have started at: the one after the entry
// before it, reframed here (under the fault guard).
func (r *records) framingError(at, prev int, err error) error {
	expect := r.first
	if prev >= 0 {
		if e, perr := frameEntry(r.b[prev:]); perr == nil {
			expect = e.next
		}
	}
	if errors.Is(err, batch.ErrCorrupt) && r.seg != nil {
		err = base.WithFile(err, r.seg.LogPath(), r.start+int64(at))
	}
	return fmt.Errorf("partlog/log: batch at byte %d of a read result from offset %d, where offset %d should start: %w", at, r.first, expect, err)
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
	e.size, e.magic, e.next, err = batch.FrameEntry(b)
	if err != nil {
		return entry{}, err
	}
	if !legacy.IsMagic(e.magic) {
		bt := batch.Batch(b[:e.size])
		e.base, e.control = bt.BaseOffset(), bt.Attributes().IsControl()
	}
	return e, nil
}

// framedRun is how many entries Batches frames under one fault guard.
const framedRun = 32

// frameSizes frames the first entries of b, at most len(run), under one
// fault guard, and stores their sizes in run, negated for a legacy entry;
// it returns how many it framed. err (wrapping ErrFault for a fault) is
// the problem with the entry after them, when framing stopped at one. The
// guard covers only this call.
//
// A RecordBatch v2 is framed in line with exactly Parse's checks (its
// first 12 bytes, a batchLength that is not negative and covers the
// header, magic 2, the whole batch present); anything else goes through
// batch.FrameEntry, which frames a legacy entry or says what is wrong.
func frameSizes(b []byte, run *[framedRun]int) (n int, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	for n < len(run) && len(b) > 0 {
		if len(b) >= batch.HeaderSize && b[magicAt] == batch.Magic {
			size := int64(int32(binary.BigEndian.Uint32(b[lengthAt:]))) + batch.LogOverhead
			if size >= batch.HeaderSize && size <= int64(len(b)) {
				run[n] = int(size)
				b = b[size:]
				n++
				continue
			}
		}
		var size int
		var magic int8
		if size, magic, _, err = batch.FrameEntry(b); err != nil {
			return n, err
		}
		if legacy.IsMagic(magic) {
			run[n] = -size
		} else {
			run[n] = size
		}
		b = b[size:]
		n++
	}
	return n, nil
}

// Byte positions of the RecordBatch v2 fields frameSizes reads (Kafka's
// format, frozen; see package batch).
const (
	lengthAt = 8  // batchLength, int32
	magicAt  = 16 // magic, int8
)

// nextRecord is it.Next under the fault guard.
func nextRecord(it *batch.Iter) (rec batch.Record, ok bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return it.Next()
}

// legacyRecords decodes the records of the legacy entry e into dst (see
// batch.Decoder.AppendLegacyRecords) under the fault guard.
func legacyRecords(dec *batch.Decoder, dst []batch.Record, e legacy.Entry) (recs []batch.Record, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	return dec.AppendLegacyRecords(dst, e, false)
}

// runRecords is batch.Decoder.DecodeRun under the fault guard; with a record's error it
// also returns the base offset of the batch at st.Pos, which holds the
// record. A fault leaves n 0: the run's records are lost, and All decodes
// the run again a record at a time to yield those before the fault.
func runRecords(dst []batch.Record, dec *batch.Decoder, set []byte, st *batch.RunState) (n int, other bool, base int64, err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	if n, other, err = dec.DecodeRun(dst, set, st); err != nil {
		base = batch.Batch(set[st.Pos:]).BaseOffset()
	}
	return n, other, base, err
}

// runLen is how many records All decodes under one fault guard before it
// yields them.
const runLen = 32

// decodeRecords is runRecords; a test replaces it to inject faults.
var decodeRecords = runRecords

// All returns an iterator over the records of the read result at or after
// the offset that was read, in offset order, for range loops:
//
//	r, err := p.ReadFrom(offset, 1<<20)
//	...
//	for rec, err := range r.All(&dec) {
//		if err != nil {
//			return err
//		}
//		use(rec.Offset, rec.Key, rec.Value)
//	}
//	next := r.NextOffset()
//
// It is Batches and batch.Batch.All in one loop, with what a consumer
// does besides: the records below the offset that was read (a read starts
// at the batch holding it) and control batches (transaction markers) are
// skipped, and legacy messages (magic 0 and 1, in a log Kafka wrote before
// 0.11) are decoded, with their absolute offsets and timestamps (-1 under
// magic 0) and nil Headers. Every record is checked as batch.Iter.Next
// checks it. Decoding an uncompressed batch allocates nothing; a
// compressed one is decompressed into dec's buffer. With a nil dec the
// Records uses a Decoder of its own.
//
// A record's Key, Value and Headers alias Bytes (or dec's buffer for a
// compressed batch): valid until Close, and for a compressed batch only
// until the iteration moves past it. Headers is reused by the next
// record with headers. The framing and the decoding run under the fault
// guard; the loop body does not. A Records runs one All at a time: a
// second iteration of the same result started in the loop body (or in
// another goroutine) is not supported.
//
// The iteration ends by yielding one error, after which it stops: a
// framing error as Batches yields it (wrapping batch.ErrCorrupt and
// naming the segment file), a record's error from the batch decoder
// (batch.ErrCorrupt), an error wrapping ErrFault when the mapped bytes
// cannot be read, or, when the Records is closed (also from the loop
// body), one wrapping ErrClosed.
func (h Records) All(dec *batch.Decoder) iter.Seq2[batch.Record, error] {
	return func(yield func(batch.Record, error) bool) { h.all(dec, yield, nil) }
}

// all is All's loop over h's state. Runs of records are decoded under
// one fault guard (runRecords) into r.run and yielded outside it, each
// straight from there to yield; the entries DecodeRun leaves to its caller
// are handled one at a time (other). A second All of the same result
// would share r.run and r.st: it is not supported (All's doc). With p
// set (Partition.Records, which calls it directly: the iterator's closures
// would cost allocations per read) every error yielded is noted by p. It
// returns false when the iteration stopped (yield said so, or an error
// was yielded).
func (h Records) all(dec *batch.Decoder, yield func(batch.Record, error) bool, p *Partition) (more bool) {
	r := h.state()
	if r == nil {
		yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records.All after Close", ErrClosed)))
		return
	}
	if dec == nil {
		dec = &r.dec
	}
	buf, st := &r.run, &r.st
	r.runUsed = true
	b, from := r.b, r.from
	*st = batch.RunState{Last: -1}
	touched := 0 // b is touched (touchAhead) below this
	// single counts the records of a run that faulted left to decode one
	// at a time; the run length follows from it (one more value carried
	// across the loop cost two instructions a record: the loop's state is
	// reloaded after every yield).
	single := 0
	for st.Pos < len(b) {
		touched = touchAhead(b, touched, st.Pos+touchBytes)
		start := *st
		step := runLen
		if single > 0 {
			step = 1
		}
		n, other, base, err := decodeRecords(buf[:step], dec, b, st)
		if err != nil && errors.Is(err, errFault) && step > 1 {
			// Decode the run again a record at a time: every record
			// before the fault is yielded, then the fault. The run that
			// faulted held at most runLen records from start (it stops
			// at the first entry DecodeRun leaves to other): past them,
			// or past such an entry, runs are long again (a fault gone
			// on the retry, a media error that cleared, must not leave
			// the rest of the result decoded a record at a time).
			*st, single = start, runLen
			continue
		}
		if single > 0 {
			if single -= n; other {
				single = 0
			}
		}
		for i := range n {
			if buf[i].Offset < from {
				continue
			}
			if !yield(buf[i], nil) {
				return
			}
			if h.state() == nil { // closed by the loop body: buf is released
				yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records closed during the iteration", ErrClosed)))
				return
			}
		}
		if err != nil {
			if errors.Is(err, errFault) {
				err = r.framingError(st.Pos, st.Last, err)
			} else {
				err = fmt.Errorf("partlog/log: decode batch at offset %d: %w", base, err)
			}
			yield(batch.Record{}, noted(p, err))
			return
		}
		if h.state() == nil {
			yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records closed during the iteration", ErrClosed)))
			return
		}
		if other && !h.other(r, dec, st, yield, p) {
			return
		}
	}
	return true
}

// noted is err, noted by p when the iteration is p's (Partition.Records:
// a fault takes the partition offline), else err as it is.
func noted(p *Partition, err error) error {
	if p != nil {
		return p.noteFault(err)
	}
	return err
}

// other handles the entry at st.Pos of r.b that DecodeRun left to its
// caller: a legacy entry is decoded, a control batch skipped, a compressed
// batch decoded record by record, and bytes that do not frame end the
// iteration with the framing error. It advances st past the entry and
// returns false when the iteration must stop.
func (h Records) other(r *records, dec *batch.Decoder, st *batch.RunState, yield func(batch.Record, error) bool, p *Partition) bool {
	at := st.Pos
	e, err := frameEntry(r.b[at:])
	if err != nil {
		yield(batch.Record{}, noted(p, r.framingError(at, st.Last, err)))
		return false
	}
	body := r.b[at : at+e.size : at+e.size]
	st.Last, st.Pos, st.Rec = at, at+e.size, 0
	switch {
	case legacy.IsMagic(e.magic):
		if dec == &r.dec { // a compressed wrapper decompresses into it
			r.decUsed = true
		}
		recs, err := legacyRecords(dec, r.legacyRecs[:0], legacy.Entry(body))
		r.legacyRecs, r.legacyUsed = recs, true
		if err != nil {
			yield(batch.Record{}, noted(p, fmt.Errorf("partlog/log: decode magic %d message at offset %d: %w", e.magic, e.next-1, err)))
			return false
		}
		for _, rec := range recs {
			if rec.Offset < r.from {
				continue
			}
			if !yield(rec, nil) {
				return false
			}
			if h.state() == nil { // closed by the loop body: recs is released
				yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records closed during the iteration", ErrClosed)))
				return false
			}
		}
	case e.control:
	default: // compressed
		if dec == &r.dec {
			r.decUsed = true
		}
		it := batch.Batch(body).Records(dec)
		for {
			rec, ok, err := nextRecord(&it)
			if err != nil {
				yield(batch.Record{}, noted(p, fmt.Errorf("partlog/log: decode batch at offset %d: %w", e.base, err)))
				return false
			}
			if !ok {
				break
			}
			if rec.Offset < r.from {
				continue
			}
			if !yield(rec, nil) {
				return false
			}
			if h.state() == nil { // closed by the loop body: body and dec are released
				yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records closed during the iteration", ErrClosed)))
				return false
			}
		}
	}
	if h.state() == nil {
		yield(batch.Record{}, noted(p, fmt.Errorf("%w: Records closed during the iteration", ErrClosed)))
		return false
	}
	return true
}

// iterReadBytes is how many bytes Partition.Records asks ReadFrom for at a
// time. On a mapped segment nothing is copied, so a large value costs
// nothing; on an unmapped one it bounds the read buffer.
const iterReadBytes = 1 << 20

// Records returns an iterator over the partition's records from offset
// from on, in offset order, that tails the log: once it has yielded every
// record below the high watermark it waits (Wait) for more, until ctx
// ends. It is the consumer's loop of ReadFrom, Records.All and Wait in
// one range statement (Poll is the bounded read that stops once caught
// up):
//
//	for rec, err := range p.Records(ctx, from) {
//		if err != nil {
//			return err // ctx.Err() when ctx ended
//		}
//		use(rec.Offset, rec.Key, rec.Value)
//	}
//
// A from at or past LogEndOffset waits, as Wait does, until appends reach
// it. It yields what Records.All yields of each read: records below from in
// the first batch read are skipped (a read starts at the batch holding
// from), and so are control batches (transaction markers), as a Kafka
// consumer skips them. Legacy messages (magic 0 and 1, in a log Kafka
// wrote before 0.11) are decoded too, with their absolute offsets (a
// compressed wrapper's inner messages one by one) and timestamps (-1
// under magic 0, which has none); their Headers are nil. The iteration
// ends by yielding one error, after which it stops: ctx.Err() when ctx
// ended, an error wrapping ErrOffsetOutOfRange when from is below the
// log start (or, after retention or a truncation, the next offset is
// outside the log), ErrClosed, the partition's failure, a corruption error from the framing
// (naming the segment file and the position in it, as Records.Batches
// does) or from the record decoder (batch.ErrCorrupt), or, when the
// mapped segment cannot be read (a media error, or its file cut behind
// the partition's back), an error wrapping ErrFault, which takes the
// partition offline as ReadFrom's does.
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
		if from > p.LogEndOffset() {
			// Past the log end ReadFrom would refuse: wait for appends to
			// reach it.
			if err := p.Wait(ctx, from); err != nil {
				yield(batch.Record{}, err)
				return
			}
		}
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
			if len(r.Bytes()) == 0 {
				_ = r.Close() // an empty result holds nothing
				if err := p.Wait(ctx, max(next, hw)); err != nil && (hw <= next || !p.cutAtOrPast(err, next)) {
					yield(batch.Record{}, err)
					return
				}
				continue
			}
			cur = r
			more := r.all(&dec, yield, p)
			next = max(next, r.NextOffset())
			cur = Records{}
			_ = r.Close()
			if !more {
				return
			}
		}
	}
}

// touchAhead reads one byte of each cache line of b[from:to] (to capped
// at len(b)) and returns the end of what it read. The loads do not depend
// on each other, so the CPU fetches those lines all at once: framing reads
// one header after another, each position known only once the length
// before it is, and on lines not in the cache each of those reads waited
// for memory in turn (the hardware prefetcher does not cross pages, and a
// read result of small batches spans many). Batches touches the bytes the
// next run of framing starts on. A fault is ignored here: the touch is a
// hint, and framing meets the fault again at the batch it lies in.
func touchAhead(b []byte, from, to int) (end int) {
	end = min(to, len(b))
	if from >= end {
		return from
	}
	var ignored error
	defer mmap.Recover(mmap.Protect(), &ignored) // end stays set
	var x byte
	i := from
	for ; i < end-192; i += 256 { // four lines a step, one bounds check (one-record batches: 20 -> 14 instructions a batch)
		l := b[i : i+193 : i+193]
		x |= l[0] | l[64] | l[128] | l[192]
	}
	for ; i < end; i += 64 {
		x |= b[i]
	}
	if x == touchMark {
		// Rarely taken, and never a data race: readers of many goroutines
		// touch at once, and a plain shared store is one (the race
		// detector reports it in every embedder's -race run).
		touchSink.Store(true)
	}
	return end
}

// touchBytes is how far ahead of the framing Batches (and of the decoding
// All) touches: most of a run of one-record batches of 100 bytes.
// Measured with logbench's one_record_read (per-thread CPU time, four
// interleaved runs each): 4 KiB did best; 2, 8 and 16 KiB, and no
// touching, did worse; for All, 0 to 16 KiB measured again (2026-12-01,
// under load): 4 KiB again.
const touchBytes = 4 << 10

// touchSink keeps the compiler from dropping touchAhead's loads: their
// value decides whether it is written. The write is atomic and rare (only
// when the OR of the touched bytes is touchMark), so concurrent readers
// neither race nor share a written cache line.
var touchSink atomic.Bool

// touchMark is the OR of touched bytes that writes touchSink; any value
// would do.
const touchMark = 0xA5
