package batch

import (
	"encoding/binary"

	"github.com/partlog/partlog/internal/batchaccess"
)

// decodeRun decodes records of the record set set (whole entries one after
// the other, as a partition's read result holds them) into dst, from
// where st says, and leaves st where it stopped (batchaccess.DecodeRun,
// behind the partition's Records.All). It decodes the uncompressed,
// non-control RecordBatch v2 entries, framed with Parse's checks, and
// checks each of their records exactly as Iter.Next does; a problem
// there is returned in Next's words (err), after the batch's records
// before it, which dst[:n] holds. It stops and returns other at any
// other entry (a legacy message, a compressed or control batch, or
// bytes that do not frame as a v2 batch), leaving st.Pos at it and st.Rec
// at 0, for the caller to frame and handle. Otherwise it returns when dst
// is full (st then resumes inside the batch), at the end of set
// (st.Pos == len(set)), or after a record with headers: its Headers alias
// dec's header scratch, which the next call reuses.
//
// The caller yields dst[:n] after the call. A record copied to yield right
// after its fields were stored stalls the CPU (16-byte loads of the
// copy over 8-byte stores not yet written to the cache cannot be
// forwarded); a run decoded ahead is long in the cache by then, and the
// framing and header reads of the batches of a run happen in one loop, no
// call per batch (a read result of one-record batches is mostly framing).
//
// The quick path is allPlain's (see there why it is written without
// calls); what it does not decode goes through fastRecord. The two loops
// are kept apart because allPlain yields as it decodes and this one does
// not. It does not allocate unless a record has headers and dec's scratch
// must grow.
func decodeRun(dst []Record, dec *Decoder, set []byte, st *batchaccess.RunState) (n int, other bool, err error) {
	pos := st.Pos
	// The state inside a batch: its next record (i), that record's position
	// in the records (p), and the offsetDelta before it (prev).
	i, p, prev := int32(0), 0, int32(-1)
	if st.Rec > 0 {
		i, p, prev = st.Rec, st.At, st.Prev
	}
	for pos < len(set) {
		if n == len(dst) && i == 0 {
			break // (inside a batch the record loop saves where it is)
		}
		rest := set[pos:]
		if len(rest) < HeaderSize || int8(rest[magicOffset]) != Magic {
			return n, true, runAt(st, pos)
		}
		size := int(int32(binary.BigEndian.Uint32(rest[batchLengthOffset:]))) + LogOverhead
		if size < HeaderSize || size > len(rest) {
			return n, true, runAt(st, pos)
		}
		b := Batch(rest[:size:size])
		a := Attributes(binary.BigEndian.Uint16(b[attributesOffset:]))
		if a.Compression() != CompressionNone || a.IsControl() {
			return n, true, runAt(st, pos)
		}
		count := int32(binary.BigEndian.Uint32(b[recordsCountOffset:]))
		data := b[HeaderSize:]
		if count < 0 || int64(count) > int64(len(data)/minRecordSize) {
			runAt(st, pos)
			return n, false, b.resumeError(dec, 0, 0, -1)
		}
		last := int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:]))
		baseOffset := int64(binary.BigEndian.Uint64(b[baseOffsetOffset:]))
		baseTimestamp := int64(binary.BigEndian.Uint64(b[baseTimestampOffset:]))
		appendTime := a.LogAppendTime()
		if appendTime {
			baseTimestamp = int64(binary.BigEndian.Uint64(b[maxTimestampOffset:]))
		}
		for i < count {
			if n == len(dst) { // resume inside the batch
				st.Pos, st.Rec, st.At, st.Prev = pos, i, p, prev
				return n, false, nil
			}
			r := &dst[n]
			{ // the quick path: its variables end here, before slow
				l, q := shortVarint(data, p)
				if q < 0 {
					goto slow
				}
				if l < minRecordSize-1 || int(l) > len(data)-q {
					goto fail
				}
				end := q + int(l)
				rec := data[:end:end]
				// attributes, then timestampDelta, offsetDelta and
				// keyLength, which take one byte each in most records
				// (deltas within ±63, keys under 64 bytes or null): one
				// load for the four (the record has at least six bytes).
				w := binary.LittleEndian.Uint32(rec[q:])
				var ts, d, kl int32
				if w&0x80808000 == 0 {
					ts, d, kl = zigzagByte(w>>8), zigzagByte(w>>16), zigzagByte(w>>24)
					q += 4
				} else {
					if ts, q = shortVarint(rec, q+1); q < 0 {
						goto slow
					}
					if d, q = shortVarint(rec, q); q < 0 {
						goto slow
					}
					if kl, q = shortVarint(rec, q); q < 0 {
						goto slow
					}
				}
				if d < 0 || d > last || d <= prev {
					goto fail
				}
				key, q, ok := fastBytes(rec, q, kl, true)
				if !ok {
					goto fail
				}
				vl, q := shortVarint(rec, q)
				if q < 0 {
					goto slow
				}
				value, q, ok := fastBytes(rec, q, vl, true)
				if !ok {
					goto fail
				}
				if q >= end || rec[q] != 0 { // headers (or a broken count)
					goto slow
				}
				if q+1 != end {
					goto fail
				}
				r.Offset = baseOffset + int64(d)
				r.Timestamp = baseTimestamp
				if !appendTime {
					r.Timestamp += int64(ts)
				}
				r.Key, r.Value, r.Headers = key, value, nil
				r.Attributes = int8(w)
				n++
				i++
				p, prev = end, d
				continue
			}
		slow: // any record: fastRecord, then Next's checks
			{
				var f recordFields
				var hdrs []RecordHeader
				if dec != nil {
					hdrs = dec.hdrs[:0]
				}
				end := fastRecord(data, p, &f, &hdrs)
				if dec != nil && cap(hdrs) > cap(dec.hdrs) {
					dec.hdrs = hdrs[:0] // grown: keep it for the next record
				}
				if end < 0 || f.offsetDelta < 0 || f.offsetDelta > last || f.offsetDelta <= prev {
					goto fail
				}
				*r = Record{
					Offset:     baseOffset + int64(f.offsetDelta),
					Timestamp:  baseTimestamp,
					Key:        f.key,
					Value:      f.value,
					Attributes: f.attributes,
				}
				if !appendTime {
					r.Timestamp += f.timestampDelta
				}
				n++
				i++
				p, prev = end, f.offsetDelta
				if len(hdrs) > 0 {
					// The next record would reuse the scratch: the run
					// ends here.
					r.Headers = hdrs
					if i < count {
						st.Pos, st.Rec, st.At, st.Prev = pos, i, p, prev
						return n, false, nil
					}
					if p != len(data) {
						goto fail
					}
					st.Last = pos
					runAt(st, pos+size)
					return n, false, nil
				}
			}
		}
		if p != len(data) {
			goto fail
		}
		st.Last = pos
		pos += size
		i, p, prev = 0, 0, -1
		continue
	fail:
		runAt(st, pos)
		return n, false, b.resumeError(dec, i, p, prev)
	}
	runAt(st, pos)
	return n, false, nil
}

// runAt leaves st at the start of the entry at pos and returns nil (for
// decodeRun's returns).
func runAt(st *batchaccess.RunState, pos int) error {
	st.Pos, st.Rec = pos, 0
	return nil
}

// zigzagByte decodes the one-byte zig-zag varint in the low byte of u
// (its continuation bit clear).
func zigzagByte(u uint32) int32 {
	u &= 0x7f
	return int32(u>>1) ^ -int32(u&1)
}
