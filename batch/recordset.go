package batch

import "encoding/binary"

// RunState is where Decoder.DecodeRun stopped in a record set, for the
// next call. A RunState{Last: -1} starts at the set's first entry. The
// caller moves it past an entry DecodeRun leaves to it (Pos to the next
// entry, Rec to 0, Last to the entry passed).
type RunState struct {
	// Pos is the byte position in the set of the entry being decoded, or
	// of the next one.
	Pos int
	// Rec is how many records of the batch at Pos were decoded; 0 when
	// none (At and Prev are then unused).
	Rec int32
	// At is the position of the batch's next record within its records
	// (after the header).
	At int
	// Prev is the offsetDelta of the batch's last record decoded.
	Prev int32
	// Last is the position of the last entry passed whole (by DecodeRun
	// or by its caller), -1 before the first: a caller reporting a
	// framing error at Pos can name the offset that entry ends at.
	Last int
}

// DecodeRun decodes records of the record set set (whole entries one
// after the other, as a fetch response or a partition's read result holds
// them) into dst, from where st says, and leaves st where it stopped: the
// records of a set a run at a time, for a reader that yields many small
// records (log.Records.All decodes this way). It decodes the uncompressed,
// non-control RecordBatch v2 entries, framed with Parse's checks, and
// checks each of their records exactly as Iter.Next does; a problem there
// is returned in Next's words (err, wrapping ErrCorrupt), after the
// batch's records before it, which dst[:n] holds. It stops and returns
// other at any other entry (a legacy message, a compressed or control
// batch, or bytes that do not frame as a v2 batch), leaving st.Pos at it
// and st.Rec at 0, for the caller to frame (FrameEntry) and handle
// (Batch.All, AppendLegacyRecords, or the framing error). Otherwise it
// returns when dst is full (st then resumes inside the batch), at the end
// of set (st.Pos == len(set)), or after a record with headers: its
// Headers alias d's header scratch, which the next call reuses (a nil d
// allocates them instead). Keys and values alias set.
//
// It does not allocate unless a record has headers and d's scratch must
// grow. As Iter.Next, it checks a batch's framing and records, not its
// CRC and other header fields: ValidateHeader checks those (call
// Validate first on bytes that have not been validated).
func (d *Decoder) DecodeRun(dst []Record, set []byte, st *RunState) (n int, other bool, err error) {
	// The caller yields dst[:n] after the call. A record copied to yield
	// right after its fields were stored stalls the CPU (16-byte loads of
	// the copy over 8-byte stores not yet written to the cache cannot be
	// forwarded); a run decoded ahead is long in the cache by then, and
	// the framing and header reads of the batches of a run happen in one
	// loop, no call per batch (a read result of one-record batches is
	// mostly framing).
	//
	// A run of one-record batches of the common shape goes through
	// runOnes first (a read result of one-record batches is all framing
	// and one record each); the loop below takes up where it stops. Its
	// quick path is allPlain's (see there why it is written without
	// calls); what it does not decode goes through fastRecord. The two
	// loops are kept apart because allPlain yields as it decodes and this
	// one does not.
	if st.Rec == 0 {
		n = runOnes(dst, set, st)
		if n == len(dst) || st.Pos == len(set) {
			return n, false, nil
		}
	}
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
			return n, false, b.resumeError(d, 0, 0, -1)
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
				if d != nil {
					hdrs = d.hdrs[:0]
				}
				end := fastRecord(data, p, &f, &hdrs)
				if d != nil && cap(hdrs) > cap(d.hdrs) {
					d.hdrs = hdrs[:0] // grown: keep it for the next record
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
		return n, false, b.resumeError(d, i, p, prev)
	}
	runAt(st, pos)
	return n, false, nil
}

// runAt leaves st at the start of the entry at pos and returns nil (for
// DecodeRun's returns).
func runAt(st *RunState, pos int) error {
	st.Pos, st.Rec = pos, 0
	return nil
}

// zigzagByte decodes the one-byte zig-zag varint in the low byte of u
// (its continuation bit clear).
func zigzagByte(u uint32) int32 {
	u &= 0x7f
	return int32(u>>1) ^ -int32(u&1)
}

// runOnes decodes the one-record batches of set from st.Pos on into dst,
// for as long as each is of the common shape, and leaves st.Pos at the
// first entry it did not decode (st.Last at the one before it, when it
// decoded any), for DecodeRun's loop to take up: it stops at a full dst,
// at the end of set, and at any entry that is not an uncompressed,
// non-control v2 batch of exactly one record whose record has no headers
// and takes its varints in one byte (attributes aside: timestampDelta,
// offsetDelta, keyLength) or two (the record's length, valueLength), and
// at any entry with a problem. REQUIRES: st.Rec == 0.
//
// It accepts exactly what DecodeRun's loop accepts of those batches, and
// yields the same records; it only checks them in a cheaper form, which
// knowing that the record is the whole rest of the batch allows:
//
//   - the framing is Parse's (magic 2, a batchLength covering the header
//     and lying within set), with room for the record's first 8 bytes;
//   - the record's length varint must encode exactly the bytes left in the
//     batch after it: that one comparison is Next's length check and its
//     check that the records end where the batch does;
//   - offsetDelta must lie in [0, lastOffsetDelta] (an odd zig-zag byte is
//     negative), as Next's order check asks of a batch's first record;
//   - the key must leave room for valueLength and the header count, and
//     the value must end on the batch's last byte, which must be 0 (no
//     headers): together they are the bounds checks of key and value and
//     the check that the record ends where its length says.
//
// Every read is bounds-checked by these tests or by the language, so
// damaged bytes make it stop, never read past the batch. It makes no
// call, so that the compiler keeps its state in registers: one-record
// batches went through DecodeRun's loop at about 350 instructions a
// record, mostly reloads of state spilled around the calls of its slow
// paths; here they take about 200 (callgrind).
func runOnes(dst []Record, set []byte, st *RunState) (n int) {
	const minBatch = HeaderSize + 8 // the record's first 8 bytes are read at once
	pos := st.Pos
	for ; n < len(dst); n++ {
		if pos > len(set)-minBatch {
			break
		}
		b := set[pos:]
		// magic, then attributes' low byte (bits 48-55): magic 2, no
		// compression, not a control batch.
		m := binary.LittleEndian.Uint64(b[magicOffset:])
		if m&(0xff|uint64(compressionMask|controlBit)<<48) != uint64(Magic) {
			break
		}
		size := int(int32(binary.BigEndian.Uint32(b[batchLengthOffset:]))) + LogOverhead
		if uint(size-minBatch) > uint(len(b)-minBatch) || binary.BigEndian.Uint32(b[recordsCountOffset:]) != 1 {
			break
		}
		data := b[HeaderSize:size:size]
		x := binary.LittleEndian.Uint64(data)
		// The record's length (zig-zag, so twice the bytes left when it
		// is right), then attributes, timestampDelta, offsetDelta and
		// keyLength in w.
		hl, u := 1, uint32(x)&0x7f
		if x&0x80 != 0 {
			if x&0x8000 != 0 {
				break
			}
			hl, u = 2, u|uint32(x>>8)&0x7f<<7
		}
		if int(u) != 2*(len(data)-hl) {
			break
		}
		w := uint32(x >> (8 * hl))
		if w&0x80808000 != 0 {
			break
		}
		d := w >> 16 & 0x7f
		if d&1 != 0 || int32(d>>1) > int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:])) {
			break
		}
		// The fields are stored as soon as they are known: held in
		// registers to the end, they were spilled.
		r := &dst[n]
		r.Offset = int64(binary.BigEndian.Uint64(b[baseOffsetOffset:])) + int64(d>>1)
		if m&(uint64(timestampTypeBit)<<48) == 0 {
			r.Timestamp = int64(binary.BigEndian.Uint64(b[baseTimestampOffset:])) + int64(zigzagByte(w>>8))
		} else {
			r.Timestamp = int64(binary.BigEndian.Uint64(b[maxTimestampOffset:]))
		}
		r.Attributes = int8(w)
		k := w >> 24 // keyLength: an odd value is negative, a null key
		kq, kl := hl+4, int(k>>1)
		if k&1 != 0 {
			kl = 0
		}
		q := kq + kl
		if q > len(data)-2 { // valueLength and the header count
			break
		}
		y := uint32(binary.LittleEndian.Uint16(data[q:]))
		v := y & 0x7f // valueLength, like k
		q++
		if y&0x80 != 0 {
			if y&0x8000 != 0 {
				break
			}
			v |= y >> 8 << 7
			q++
		}
		vl := int(v >> 1)
		if v&1 != 0 {
			vl = 0
		}
		end := q + vl
		if end != len(data)-1 || data[end] != 0 {
			break
		}
		var key, value []byte
		if k&1 == 0 {
			key = data[kq : kq+kl : kq+kl]
		}
		if v&1 == 0 {
			value = data[q:end:end]
		}
		r.Key, r.Value, r.Headers = key, value, nil
		st.Last = pos
		pos += size
	}
	st.Pos = pos
	return n
}
