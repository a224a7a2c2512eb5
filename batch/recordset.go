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
	for n < len(dst) && pos < len(set) {
		rest := set[pos:]
		if len(rest) < HeaderSize || int8(rest[magicOffset]) != Magic {
			st.Pos, st.Rec = pos, 0
			return n, true, nil
		}
		size := int64(int32(binary.BigEndian.Uint32(rest[batchLengthOffset:]))) + LogOverhead
		if size < HeaderSize || size > int64(len(rest)) {
			st.Pos, st.Rec = pos, 0
			return n, true, nil
		}
		b := Batch(rest[:size:size])
		h := b[:HeaderSize]
		a := Attributes(binary.BigEndian.Uint16(h[attributesOffset:]))
		if a.Compression() != CompressionNone || a.IsControl() {
			st.Pos, st.Rec = pos, 0
			return n, true, nil
		}
		count := int32(binary.BigEndian.Uint32(h[recordsCountOffset:]))
		data := b[HeaderSize:]
		if count < 0 || int64(count) > int64(len(data)/minRecordSize) {
			st.Pos, st.Rec = pos, 0
			return n, false, b.resumeError(dec, 0, 0, -1)
		}
		last := int32(binary.BigEndian.Uint32(h[lastOffsetDeltaOffset:]))
		baseOffset := int64(binary.BigEndian.Uint64(h[baseOffsetOffset:]))
		baseTimestamp := int64(binary.BigEndian.Uint64(h[baseTimestampOffset:]))
		appendTime := a.LogAppendTime()
		if appendTime {
			baseTimestamp = int64(binary.BigEndian.Uint64(h[maxTimestampOffset:]))
		}
		i, p, prev := int32(0), 0, int32(-1)
		if st.Rec > 0 {
			i, p, prev = st.Rec, st.At, st.Prev
		}
		headers := false
		for ; i < count && n < len(dst) && !headers; i++ {
			var (
				l, d, nh   int32
				q, end     int
				ok         bool
				key, value []byte
				rec        []byte
				f          recordFields
			)
			r := &dst[n]
			if l, q = shortVarint(data, p); q < 0 {
				goto slow
			}
			if l < minRecordSize-1 || int(l) > len(data)-q {
				break
			}
			end = q + int(l)
			rec = data[:end:end]
			r.Attributes = int8(rec[q])
			if l, q = shortVarint(rec, q+1); q < 0 {
				goto slow
			}
			r.Timestamp = baseTimestamp
			if !appendTime {
				r.Timestamp += int64(l)
			}
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
			r.Headers = nil
			n++
			p, prev = end, d
			continue

		slow: // any record: fastRecord, then Next's checks
			{
				var hdrs []RecordHeader
				if dec != nil {
					hdrs = dec.hdrs[:0]
				}
				end = fastRecord(data, p, &f, &hdrs)
				if dec != nil && cap(hdrs) > cap(dec.hdrs) {
					dec.hdrs = hdrs[:0] // grown: keep it for the next record
				}
				if end < 0 || f.offsetDelta < 0 || f.offsetDelta > last || f.offsetDelta <= prev {
					break
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
				if len(hdrs) > 0 {
					r.Headers = hdrs
					headers = true // the next record would reuse the scratch
				}
				n++
				p, prev = end, f.offsetDelta
			}
		}
		if i < count || p != len(data) {
			if n == len(dst) || headers {
				if i < count { // resumes inside the batch
					st.Pos, st.Rec, st.At, st.Prev = pos, i, p, prev
					return n, false, nil
				}
			}
			st.Pos, st.Rec = pos, 0
			return n, false, b.resumeError(dec, i, p, prev)
		}
		st.Last = pos
		pos += int(size)
		st.Rec = 0
		if headers {
			break
		}
	}
	st.Pos = pos
	return n, false, nil
}
