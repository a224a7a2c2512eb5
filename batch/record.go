package batch

import (
	"encoding/binary"
	"iter"

	"github.com/partlog/partlog/internal/invariants"
)

// Record field names, as they appear in errors ("record[3].keyLength").
const (
	fieldLength         = "length"
	fieldAttributes     = "attributes"
	fieldTimestampDelta = "timestampDelta"
	fieldOffsetDelta    = "offsetDelta"
	fieldKeyLength      = "keyLength"
	fieldValueLength    = "valueLength"
	fieldHeaderCount    = "headerCount"
	fieldRecords        = "records"
)

// minRecordSize is the smallest encoded record: a 1-byte length varint and
// six 1-byte fields (attributes, timestampDelta, offsetDelta, keyLength,
// valueLength, headerCount).
const minRecordSize = 7

// minHeaderSize is the smallest encoded record header: two 1-byte length
// varints.
const minHeaderSize = 2

// Record is one decoded record.
//
// A record, byte for byte (varint = zig-zag, at most 5 bytes, int32;
// varlong = zig-zag, at most 10 bytes, int64):
//
//	length          varint   bytes after this field
//	attributes      int8     unused by Kafka, zero
//	timestampDelta  varlong  timestamp - baseTimestamp
//	offsetDelta     varint   offset - baseOffset
//	keyLength       varint   -1 = null key
//	key             []byte
//	valueLength     varint   -1 = null value (a tombstone)
//	value           []byte
//	headerCount     varint
//	headers         headerCount × (keyLength varint >= 0, key,
//	                               valueLength varint, -1 = null, value)
//
// Kafka writes -1 for null and reads every negative keyLength and
// valueLength (a header's too) as null; so do the decoders here.
//
// Key, Value and the header fields returned by an iterator alias the batch
// (or the Decoder's buffer for a compressed batch): they are valid as long
// as those bytes are, and must not be modified. Headers is valid only until
// the iterator's next call to Next.
type Record struct {
	// Offset is the record's absolute offset: baseOffset + offsetDelta.
	Offset int64
	// Timestamp is milliseconds since the Unix epoch: baseTimestamp +
	// timestampDelta under CreateTime, the batch's maxTimestamp under
	// LogAppendTime.
	Timestamp int64
	// Key is the record's key; nil is a null key, distinct from an empty
	// non-nil one.
	Key []byte
	// Value is the record's value; nil is a null value (a tombstone on a
	// compacted topic), distinct from an empty non-nil one.
	Value []byte
	// Headers are the record's headers in their order, nil when none.
	Headers []RecordHeader
	// Attributes is the record's attribute byte. Kafka defines no bit of it
	// and writes zero; it is carried as is.
	Attributes int8
}

// RecordHeader is one record header. Kafka's header keys are strings and
// never null; values may be null.
type RecordHeader struct {
	// Key is the header's name (UTF-8 by convention, not checked); never
	// nil in a decoded header, but may be empty.
	Key []byte
	// Value is the header's value; nil is a null value.
	Value []byte
}

// recordFields is what readRecord returns besides key, value and headers.
type recordFields struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	deltaPos       int // index of offsetDelta in the cursor's bytes
	key, value     []byte
}

// readRecord decodes one record at c.pos and leaves c.pos after it.
// With hdrs nil it checks the headers and skips them (and skips key and
// value); otherwise it appends them to *hdrs and fills f's key and value.
// Failures are left in c.
func (c *cursor) readRecord(f *recordFields, hdrs *[]RecordHeader) {
	start := c.pos
	n := c.length(fieldLength, false)
	if c.failed {
		return
	}
	if n < minRecordSize-1 {
		c.fail(failLengthMismatch, fieldLength, start, int64(n))
		return
	}
	end := c.pos + n
	all := c.b
	c.b = all[:end] // a field running past the record's end is truncated
	f.attributes = c.int8(fieldAttributes)
	f.timestampDelta = c.varlong(fieldTimestampDelta)
	f.deltaPos = c.pos
	f.offsetDelta = c.varint(fieldOffsetDelta)
	if hdrs == nil {
		c.skip(fieldKeyLength, true)
		c.skip(fieldValueLength, true)
	} else {
		f.key = c.bytes(fieldKeyLength, true)
		f.value = c.bytes(fieldValueLength, true)
	}
	hstart := c.pos
	nh := c.varint(fieldHeaderCount)
	switch {
	case c.failed:
	case nh < 0:
		c.fail(failNegativeLength, fieldHeaderCount, hstart, int64(nh))
	case int(nh) > (end-c.pos)/minHeaderSize:
		c.fail(failLengthTooLong, fieldHeaderCount, hstart, int64(nh))
	default:
		for j := 0; j < int(nh) && !c.failed; j++ {
			c.curHdr = j
			if hdrs == nil {
				c.skip(fieldKeyLength, false)
				c.skip(fieldValueLength, true)
				continue
			}
			k := c.bytes(fieldKeyLength, false)
			if k == nil {
				k = c.b[c.pos:c.pos:c.pos] // empty, not null
			}
			v := c.bytes(fieldValueLength, true)
			*hdrs = append(*hdrs, RecordHeader{Key: k, Value: v})
		}
		c.curHdr = -1
	}
	c.b = all
	if !c.failed && c.pos != end {
		c.fail(failLengthMismatch, fieldLength, start, int64(n))
	}
}

// checkDelta checks a record's offsetDelta against the batch's
// lastOffsetDelta and the previous record's delta (prev, -1 before the
// first record). pos is where the delta lies, for the error.
func (c *cursor) checkDelta(d, prev, last int32, pos int) {
	if c.failed {
		return
	}
	if d < 0 || d > last {
		c.fail(failDeltaOutOfRange, fieldOffsetDelta, pos, int64(d))
	} else if d <= prev {
		c.fail(failDeltaNotIncreasing, fieldOffsetDelta, pos, int64(d))
	}
}

// walkRecords checks the framing of count records filling data exactly,
// without allocating. control requires every record key to be a control
// key (int16 version >= 0, int16 type).
func walkRecords(data []byte, count, lastOffsetDelta int32, control bool) cursor {
	c := cursor{b: data, curHdr: -1, rec: -1, hdr: -1}
	if int64(count) > int64(len(data)/minRecordSize) {
		c.curRec = -1
		c.fail(failTooManyRecords, fieldRecords, 0, int64(count))
		return c
	}
	var f recordFields
	var scratch []RecordHeader
	hdrs := (*[]RecordHeader)(nil)
	if control {
		hdrs = &scratch
	}
	prev := int32(-1)
	for i := int32(0); i < count; i++ {
		c.curRec = int(i)
		start := c.pos
		c.readRecord(&f, hdrs)
		c.checkDelta(f.offsetDelta, prev, lastOffsetDelta, f.deltaPos)
		if control && !c.failed && !validControlKey(f.key) {
			c.fail(failControlKey, "key", start, 0)
		}
		if c.failed {
			return c
		}
		scratch = scratch[:0]
		prev = f.offsetDelta
	}
	c.curRec = -1
	if c.pos != len(data) {
		c.fail(failTrailingBytes, fieldRecords, c.pos, int64(len(data)-c.pos))
	}
	return c
}

// Iter iterates over the records of one batch. Obtain one with
// Batch.Records; the zero Iter yields nothing.
//
// Iteration checks the record framing as it goes, record by record, as
// Validate does, but not the header (CRC, lastOffsetDelta, attributes):
// call Validate first on bytes that have not been validated. An uncompressed batch is iterated in place
// without allocating; a compressed one is decompressed once, at the first
// call to Next, into the Decoder's buffer.
//
// An Iter is not safe for concurrent use.
type Iter struct {
	b    Batch
	dec  *Decoder
	c    cursor
	hdrs []RecordHeader

	count, i        int32
	prev            int32 // offsetDelta of the previous record, -1 before the first
	lastOffsetDelta int32
	baseOffset      int64
	baseTimestamp   int64
	maxTimestamp    int64
	logAppendTime   bool
	control         bool
	decompressed    bool
	started, done   bool
	err             error
}

// Records returns an iterator over b's records. dec supplies the
// decompression buffer and the header scratch space; with a nil dec a
// compressed batch is decompressed into a fresh buffer that the records
// then alias for as long as they are kept.
//
// Example:
//
//	var dec batch.Decoder
//	it := b.Records(&dec)
//	for {
//		rec, ok, err := it.Next()
//		if err != nil {
//			return err
//		}
//		if !ok {
//			break
//		}
//		use(rec.Offset, rec.Key, rec.Value)
//	}
func (b Batch) Records(dec *Decoder) Iter {
	return Iter{b: b, dec: dec}
}

// Next returns the next record. ok is false when the batch holds no more
// records or an error occurred; err is non-nil (and wraps ErrCorrupt) when
// the bytes are malformed, and stays returned by every later call.
//
// The record's Key and Value alias the batch (or the Decoder's buffer);
// its Headers slice is reused by the next call to Next.
func (it *Iter) Next() (Record, bool, error) {
	if it.done {
		return Record{}, false, it.err
	}
	if !it.started {
		if err := it.start(); err != nil {
			return it.finish(err)
		}
	}
	if it.i >= it.count {
		it.c.curRec = -1
		if it.c.pos != len(it.c.b) {
			it.c.fail(failTrailingBytes, fieldRecords, it.c.pos, int64(len(it.c.b)-it.c.pos))
		}
		return it.finish(it.c.error(HeaderSize, it.decompressed))
	}
	c := &it.c
	var f recordFields
	it.hdrs = it.hdrs[:0]
	end := fastRecord(c.b, c.pos, &f, &it.hdrs)
	if end < 0 || f.offsetDelta < 0 || f.offsetDelta > it.lastOffsetDelta || f.offsetDelta <= it.prev ||
		(it.control && !validControlKey(f.key)) {
		return it.finish(it.recordError())
	}
	c.pos = end
	it.i++
	it.prev = f.offsetDelta
	r := Record{
		Offset:     it.baseOffset + int64(f.offsetDelta),
		Timestamp:  it.baseTimestamp + f.timestampDelta,
		Key:        f.key,
		Value:      f.value,
		Attributes: f.attributes,
	}
	if it.logAppendTime {
		r.Timestamp = it.maxTimestamp
	}
	if len(it.hdrs) > 0 {
		r.Headers = it.hdrs
	}
	return r, true, nil
}

// recordError decodes the record at the cursor again, with the cursor, to
// say what is wrong with it.
func (it *Iter) recordError() error {
	c := &it.c
	c.curRec = int(it.i)
	start := c.pos
	var f recordFields
	it.hdrs = it.hdrs[:0]
	c.readRecord(&f, &it.hdrs)
	c.checkDelta(f.offsetDelta, it.prev, it.lastOffsetDelta, f.deltaPos)
	if it.control && !c.failed && !validControlKey(f.key) {
		c.fail(failControlKey, "key", start, 0)
	}
	if !c.failed {
		return invariants.AssertionFailedf("partlog/batch: fast record decoder rejected what the cursor accepts")
	}
	return c.error(HeaderSize, it.decompressed)
}

// start reads the header and locates (decompressing if needed) the
// records.
func (it *Iter) start() error {
	it.started = true
	b := it.b
	if len(b) < HeaderSize {
		if len(b) == 0 {
			return nil // the zero Iter: nothing to yield
		}
		return corruptTruncated(0, "header", "have %d bytes, need %d", len(b), HeaderSize)
	}
	if err := b.checkMagic(); err != nil {
		return err
	}
	a := b.Attributes()
	it.count = b.RecordsCount()
	it.lastOffsetDelta = b.LastOffsetDelta()
	it.baseOffset = b.BaseOffset()
	it.baseTimestamp = b.BaseTimestamp()
	it.maxTimestamp = b.MaxTimestamp()
	it.logAppendTime = a.LogAppendTime()
	it.control = a.IsControl()
	it.prev = -1
	it.c = cursor{curHdr: -1, rec: -1, hdr: -1}
	if it.dec != nil {
		it.hdrs, it.dec.hdrs = it.dec.hdrs[:0], nil
	}
	data := b[HeaderSize:]
	if c := a.Compression(); c != CompressionNone {
		var err error
		if it.dec != nil {
			data, err = it.dec.decompress(b)
		} else {
			if c >= numCompressions {
				return b.checkCodec()
			}
			data, err = decompress(nil, c, data, (*Decoder)(nil).limit(len(data)))
		}
		if err != nil {
			return err
		}
		it.decompressed = true
	}
	it.c.b = data
	if it.count < 0 || int64(it.count) > int64(len(data)/minRecordSize) {
		it.c.curRec = -1
		it.c.fail(failTooManyRecords, fieldRecords, 0, int64(it.count))
		return it.c.error(HeaderSize, it.decompressed)
	}
	return nil
}

// finish ends the iteration with err and hands the header scratch back to
// the Decoder.
func (it *Iter) finish(err error) (Record, bool, error) {
	it.done = true
	it.err = err
	if it.dec != nil && it.dec.hdrs == nil {
		it.dec.hdrs = it.hdrs[:0]
	}
	return Record{}, false, err
}

// All returns a Go iterator over b's records, for range loops:
//
//	for rec, err := range b.All(&dec) {
//		if err != nil {
//			return err
//		}
//		use(rec)
//	}
//
// It yields every record with a nil error, then, if the batch is
// malformed, one zero Record with the error. Records alias as with
// Records; rec.Headers is reused by the next iteration.
//
// The loop allocates nothing when the compiler inlines All into the
// function that ranges over it, as it does for a loop in a function of
// ordinary size. In a function too large to inline into, the iterator's
// closures escape to the heap: three allocations a batch, seen in a
// benchmark whose read loop was a closure the compiler had inlined into
// the benchmark (docs/performance.md). A loop over Records with Next does
// not depend on inlining.
func (b Batch) All(dec *Decoder) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if len(b) >= HeaderSize && b.Attributes().Compression() == CompressionNone && int8(b[magicOffset]) == Magic {
			b.allPlain(dec, yield)
			return
		}
		it := b.Records(dec)
		for {
			r, ok, err := it.Next()
			if err != nil {
				yield(Record{}, err)
				return
			}
			if !ok || !yield(r, nil) {
				return
			}
		}
	}
}

// allPlain is All for an uncompressed batch with magic 2: the loop of
// Iter.Next without the Iter, whose set-up and per-record returns cost
// more than decoding a small record (one-record batches are common). It
// checks exactly what Next checks (fastRecord's framing and Next's delta
// and control-key checks); at the first problem it hands the position to
// an Iter, which says what is wrong in Next's words.
//
// A record whose varints all take one or two bytes (every length under 8
// KiB, timestamp deltas under 8 seconds) and that has no headers is
// decoded in line, with no call on the way, so that its fields stay in
// registers: the fallbacks of fastVarint to readVarintSlow, taken field by
// field, made the compiler keep every field in memory and reload the
// loop's state after each of them. Any other record goes through
// fastRecord (the slow label), which decodes every valid record. The
// Decoder's header scratch is taken only when a record has headers. The
// function has no defer: a panic of the loop body leaves the scratch with
// the iteration, and the Decoder grows a new one.
//
// REQUIRES: len(b) >= HeaderSize.
func (b Batch) allPlain(dec *Decoder, yield func(Record, error) bool) {
	h := b[:HeaderSize]
	count := int32(binary.BigEndian.Uint32(h[recordsCountOffset:]))
	data := b[HeaderSize:]
	if count < 0 || int64(count) > int64(len(data)/minRecordSize) {
		yield(Record{}, b.resumeError(dec, 0, 0, -1))
		return
	}
	last := int32(binary.BigEndian.Uint32(h[lastOffsetDeltaOffset:]))
	a := Attributes(binary.BigEndian.Uint16(h[attributesOffset:]))
	baseOffset := int64(binary.BigEndian.Uint64(h[baseOffsetOffset:]))
	baseTimestamp := int64(binary.BigEndian.Uint64(h[baseTimestampOffset:]))
	appendTime, control := a.LogAppendTime(), a.IsControl()
	if appendTime {
		baseTimestamp = int64(binary.BigEndian.Uint64(h[maxTimestampOffset:]))
	}
	var hdrs []RecordHeader // taken from dec at the first record with headers
	taken := false
	pos, prev := 0, int32(-1)
	i := int32(0)
	// The Record lives across the loop and its fields are stored as they
	// are decoded (Headers only by the slow path, which resets it): built
	// at the call, it was copied to the arguments with 16-byte loads of
	// 8-byte stores just made, which the CPU cannot forward (a stall per
	// record).
	var r Record
	var f recordFields
	for ; i < count; i++ {
		var (
			n, d, l, nh int32
			ts          int64
			p, q, end   int
			ok          bool
			key, value  []byte
			rec         []byte
		)
		if n, p = shortVarint(data, pos); p < 0 {
			goto slow
		}
		if n < minRecordSize-1 || int(n) > len(data)-p {
			break
		}
		end = p + int(n)
		rec = data[:end:end]
		r.Attributes = int8(rec[p])
		if l, q = shortVarint(rec, p+1); q < 0 {
			goto slow
		}
		ts = int64(l)
		if !appendTime {
			ts += baseTimestamp
		} else {
			ts = baseTimestamp
		}
		r.Timestamp = ts
		if d, q = shortVarint(rec, q); q < 0 {
			goto slow
		}
		if d < 0 || d > last || d <= prev {
			break
		}
		r.Offset = baseOffset + int64(d)
		if l, q = shortVarint(rec, q); q < 0 {
			goto slow
		}
		if key, q, ok = fastBytes(rec, q, l, true); !ok {
			break
		}
		if control && !validControlKey(key) {
			break
		}
		r.Key = key
		if l, q = shortVarint(rec, q); q < 0 {
			goto slow
		}
		if value, q, ok = fastBytes(rec, q, l, true); !ok {
			break
		}
		r.Value = value
		if nh, q = shortVarint(rec, q); q < 0 || nh != 0 {
			goto slow
		}
		if q != end {
			break
		}
		if !yield(r, nil) { // r.Headers is nil (see below)
			goto stop
		}
		pos, prev = end, d
		continue

	slow: // any record: fastRecord, then Next's checks
		if !taken && dec != nil {
			hdrs, dec.hdrs = dec.hdrs[:0], nil
		}
		taken = true
		hdrs = hdrs[:0]
		end = fastRecord(data, pos, &f, &hdrs)
		if end < 0 || f.offsetDelta < 0 || f.offsetDelta > last || f.offsetDelta <= prev ||
			(control && !validControlKey(f.key)) {
			break
		}
		r = Record{
			Offset:     baseOffset + int64(f.offsetDelta),
			Timestamp:  baseTimestamp,
			Key:        f.key,
			Value:      f.value,
			Attributes: f.attributes,
		}
		if !appendTime {
			r.Timestamp += f.timestampDelta
		}
		if len(hdrs) > 0 {
			r.Headers = hdrs
		}
		if !yield(r, nil) {
			goto stop
		}
		r.Headers = nil // for the quick path, which does not store it
		pos, prev = end, f.offsetDelta
	}
	if taken {
		dec.putHeaders(hdrs)
	}
	if i < count || pos != len(data) {
		yield(Record{}, b.resumeError(dec, i, pos, prev))
	}
	return
stop: // the loop body said stop
	if taken {
		dec.putHeaders(hdrs)
	}
}

// shortVarint decodes the zig-zag varint (or varlong: the value is the
// same) at b[p] when it takes one or two bytes, and returns it with the
// position after it; for anything else, longer or truncated, the position
// is -1 and the caller decodes the record with fastRecord. It is
// allPlain's decoder: small enough to inline, and its one test of the
// position costs less there than fastVarint's ok (which the compiler
// kept in memory in that loop).
func shortVarint(b []byte, p int) (int32, int) {
	if uint(p) >= uint(len(b)) {
		return 0, -1
	}
	u := uint32(b[p])
	if u >= 0x80 {
		if uint(p+1) >= uint(len(b)) || b[p+1] >= 0x80 {
			return 0, -1
		}
		p++
		u += uint32(b[p])<<7 - 0x80
	}
	return int32(u>>1) ^ -int32(u&1), p + 1
}

// putHeaders hands header scratch space back to d (nil-safe).
func (d *Decoder) putHeaders(hdrs []RecordHeader) {
	if d != nil && d.hdrs == nil {
		d.hdrs = hdrs[:0]
	}
}

// resumeError returns the error Iter.Next reports for the uncompressed
// batch b when it reaches record i at pos of the records, after a record
// with offsetDelta prev.
func (b Batch) resumeError(dec *Decoder, i int32, pos int, prev int32) error {
	it := b.Records(dec)
	if err := it.start(); err != nil {
		it.finish(err)
		return err
	}
	it.i, it.c.pos, it.prev = i, pos, prev
	_, ok, err := it.Next()
	if err == nil {
		// allPlain and Next disagree: a bug, not the input's fault.
		err = invariants.AssertionFailedf("partlog/batch: Iter accepts record %d of a batch All rejects (ok %v)", i, ok)
	}
	return err
}
