package batch

import "math"

// The fast paths. Validate and Iter.Next first decode records with these
// plain functions (local positions, no failure bookkeeping); only when they
// report a problem is the record decoded again with the cursor, which says
// what is wrong and where. Both accept exactly the same inputs: the tests
// and the fuzz targets compare them.

// readVarintSlow decodes a zig-zag varint (int32) of any length at b[p];
// the returned position is -1 when it is truncated, longer than 5 bytes or
// out of range. The hot loops decode one- and two-byte varints themselves
// and call this for the rest; it stays out of line so that they keep their
// registers on the common path.
//
//go:noinline
func readVarintSlow(b []byte, p int) (int32, int) {
	var x uint64
	for i := 0; i < maxVarintLen; i++ {
		if p < 0 || p >= len(b) {
			return 0, -1
		}
		c := b[p]
		p++
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if x > math.MaxUint32 {
				return 0, -1
			}
			u := uint32(x)
			return int32(u>>1) ^ -int32(u&1), p
		}
	}
	return 0, -1
}

// readVarlongSlow is readVarintSlow for a zig-zag varlong (int64, at most
// 10 bytes, the last one 0 or 1).
//
//go:noinline
func readVarlongSlow(b []byte, p int) (int64, int) {
	var x uint64
	for i := 0; i < maxVarlongLen; i++ {
		if p < 0 || p >= len(b) {
			return 0, -1
		}
		c := b[p]
		p++
		if i == maxVarlongLen-1 && c > 1 {
			return 0, -1
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(x>>1) ^ -int64(x&1), p
		}
	}
	return 0, -1
}

// takeBytes decodes a length-prefixed string at b[p] whose length fits in
// b; a negative length is null (returned as nil) when nullable. The
// position is -1 when it does not fit or is negative and not nullable.
func takeBytes(b []byte, p int, nullable bool) ([]byte, int) {
	n, p := readVarintSlow(b, p)
	if p < 0 || n < 0 && !nullable || int(n) > len(b)-p {
		return nil, -1
	}
	if n < 0 {
		return nil, p
	}
	e := p + int(n)
	return b[p:e:e], e
}

// fastVarint decodes the zig-zag varint at b[p] when it takes one or two
// bytes (values in [-8192, 8191]: every length under 8 KiB) and returns it
// with the position after it and ok. For anything else, a longer varint
// or none at all, ok is false, next is p, and the caller decodes it with
// readVarintSlow. fastVarint makes no call so that the compiler inlines it
// (a call alone costs 57 of the inliner's budget of 80), and it reports
// with a constant ok from exactly two return paths so that, once inlined,
// the compiler's short-circuit pass branches from the byte tests straight
// to the caller's code: testing a returned position instead would cost an
// instruction pair per field.
func fastVarint(b []byte, p int) (v int32, next int, ok bool) {
	if uint(p) < uint(len(b)) {
		u := uint32(b[p])
		if u >= 0x80 {
			if uint(p+1) >= uint(len(b)) || b[p+1] >= 0x80 {
				goto long
			}
			p++
			u += uint32(b[p])<<7 - 0x80
		}
		return int32(u>>1) ^ -int32(u&1), p + 1, true
	}
long: // longer, or truncated: the one !ok return (see above)
	return 0, p, false
}

// fastVarlong is fastVarint for a zig-zag varlong; the caller decodes the
// rest with readVarlongSlow.
func fastVarlong(b []byte, p int) (v int64, next int, ok bool) {
	if uint(p) < uint(len(b)) {
		u := uint64(b[p])
		if u >= 0x80 {
			if uint(p+1) >= uint(len(b)) || b[p+1] >= 0x80 {
				goto long
			}
			p++
			u += uint64(b[p])<<7 - 0x80
		}
		return int64(u>>1) ^ -int64(u&1), p + 1, true
	}
long: // longer, or truncated: the one !ok return (see above)
	return 0, p, false
}

// fastBytes slices the l bytes at b[p] (l the length varint before them;
// a negative l is null, returned as nil, when nullable, as Kafka reads
// it) and returns them with the position after them; ok is false when l
// is negative and not nullable, or longer than what remains. The result's
// capacity is clipped.
func fastBytes(b []byte, p int, l int32, nullable bool) (s []byte, next int, ok bool) {
	if !nullable && l < 0 || int(l) > len(b)-p {
		return nil, p, false
	}
	if l >= 0 {
		e := p + int(l)
		s, p = b[p:e:e], e
	}
	return s, p, true
}

// fastSkip is fastBytes without the bytes.
func fastSkip(b []byte, p int, l int32, nullable bool) (next int, ok bool) {
	if !nullable && l < 0 || int(l) > len(b)-p {
		return p, false
	}
	return p + int(l&^(l>>31)), true // a negative l (null) skips nothing
}

// walkShort is fastWalk for the common batch: not a control batch, and
// every varint of every record one or two bytes long (lengths under 8 KiB,
// timestamp deltas within about 8 seconds of the base timestamp). Its loop
// makes no call, so the compiler keeps its state in registers instead of
// reloading it around the slow paths' calls; fastWalk, which it is
// otherwise written like, spends a good part of its time on those
// reloads. It returns ok only for what fastWalk accepts, with the same
// range; !ok means only "not shown valid here": a longer varint or a
// problem, which fastWalk then sorts out.
func walkShort(data []byte, count, last int32, baseTs int64) (TimeRange, bool) {
	tr := TimeRange{Min: NoTimestamp, Max: NoTimestamp}
	if count < 0 || int64(count) > int64(len(data)/minRecordSize) {
		return tr, false
	}
	// Each varint is decoded in line, one byte or two: a helper returning
	// an ok flag leaves the flag in a register to test, which costs an
	// instruction pair a field here.
	p := 0
	prev := int32(-1)
	lo, hi := int64(math.MaxInt64), int64(NoTimestamp)
	for i := int32(0); i < count; i++ {
		// length
		if uint(p) >= uint(len(data)) {
			return tr, false
		}
		u := uint32(data[p])
		if u >= 0x80 {
			if uint(p+1) >= uint(len(data)) || data[p+1] >= 0x80 {
				return tr, false
			}
			p++
			u += uint32(data[p])<<7 - 0x80
		}
		p++
		// The record's length and offset delta are never negative (a key
		// or value length is, for null): an odd zig-zag value is refused,
		// an even one is twice the value.
		n := int(u >> 1)
		if u&1 != 0 || n < minRecordSize-1 || n > len(data)-p {
			return tr, false
		}
		end := p + n
		rec := data[:end:end] // positions stay absolute; the record ends at end
		q := p + 1            // after attributes
		// timestampDelta
		if uint(q) >= uint(len(rec)) {
			return tr, false
		}
		v := uint64(rec[q])
		if v >= 0x80 {
			if uint(q+1) >= uint(len(rec)) || rec[q+1] >= 0x80 {
				return tr, false
			}
			q++
			v += uint64(rec[q])<<7 - 0x80
		}
		q++
		ts := baseTs + (int64(v>>1) ^ -int64(v&1))
		hi = max(hi, ts)
		if ts < lo && ts != NoTimestamp {
			lo = ts
		}
		// offsetDelta
		if uint(q) >= uint(len(rec)) {
			return tr, false
		}
		u = uint32(rec[q])
		if u >= 0x80 {
			if uint(q+1) >= uint(len(rec)) || rec[q+1] >= 0x80 {
				return tr, false
			}
			q++
			u += uint32(rec[q])<<7 - 0x80
		}
		q++
		d := int32(u >> 1)
		if u&1 != 0 || d <= prev || d > last {
			return tr, false
		}
		prev = d
		// key, then value: negative (null, an odd zig-zag value) or a
		// length that fits, written out twice.
		if uint(q) >= uint(len(rec)) {
			return tr, false
		}
		u = uint32(rec[q])
		if u >= 0x80 {
			if uint(q+1) >= uint(len(rec)) || rec[q+1] >= 0x80 {
				return tr, false
			}
			q++
			u += uint32(rec[q])<<7 - 0x80
		}
		q++
		if u&1 == 0 { // an odd value is negative: null
			if l := int(u >> 1); l <= end-q {
				q += l
			} else {
				return tr, false
			}
		}
		if uint(q) >= uint(len(rec)) {
			return tr, false
		}
		u = uint32(rec[q])
		if u >= 0x80 {
			if uint(q+1) >= uint(len(rec)) || rec[q+1] >= 0x80 {
				return tr, false
			}
			q++
			u += uint32(rec[q])<<7 - 0x80
		}
		q++
		if u&1 == 0 { // an odd value is negative: null
			if l := int(u >> 1); l <= end-q {
				q += l
			} else {
				return tr, false
			}
		}
		// header count
		if uint(q) >= uint(len(rec)) {
			return tr, false
		}
		u = uint32(rec[q])
		q++
		if u != 0 {
			// Headers: the general walk's loop.
			q--
			var nh, l int32
			var ok bool
			if nh, q, ok = fastVarint(rec, q); !ok || uint(nh) > uint(end-q)/minHeaderSize {
				return tr, false
			}
			for ; nh > 0; nh-- {
				if l, q, ok = fastVarint(rec, q); !ok { // header key, never null
					return tr, false
				}
				if q, ok = fastSkip(rec, q, l, false); !ok {
					return tr, false
				}
				if l, q, ok = fastVarint(rec, q); !ok { // header value
					return tr, false
				}
				if q, ok = fastSkip(rec, q, l, true); !ok {
					return tr, false
				}
			}
		}
		if q != end {
			return tr, false
		}
		p = end
	}
	if p != len(data) {
		return tr, false
	}
	tr.Max = hi
	if lo != math.MaxInt64 {
		tr.Min = lo
	}
	return tr, true
}

// fastWalk reports whether count records fill data exactly, with the
// framing Validate requires. It neither allocates nor says why not. It is
// Validate's hot loop: one- and two-byte varints (all lengths under 8 KiB)
// are decoded in line by fastVarint, longer ones out of line.
//
// On success it also returns the records' timestamp range as create times
// (baseTs + timestampDelta, wrapping as Kafka's long arithmetic does), the
// way TimeRange documents it.
func fastWalk(data []byte, count, last int32, control bool, baseTs int64) (TimeRange, bool) {
	tr := TimeRange{Min: NoTimestamp, Max: NoTimestamp}
	if int64(count) > int64(len(data)/minRecordSize) {
		return tr, false
	}
	p := 0
	prev := int32(-1)
	var ok bool
	lo, hi := int64(math.MaxInt64), int64(NoTimestamp)
	for i := int32(0); i < count; i++ {
		var n int32
		if n, p, ok = fastVarint(data, p); !ok {
			if n, p = readVarintSlow(data, p); p < 0 {
				return tr, false
			}
		}
		if n < minRecordSize-1 || int(n) > len(data)-p {
			return tr, false
		}
		end := p + int(n)
		rec := data[p:end:end] // positions below are relative to the record
		q := 1                 // after attributes
		var td int64
		if td, q, ok = fastVarlong(rec, q); !ok {
			if td, q = readVarlongSlow(rec, q); q < 0 {
				return tr, false
			}
		}
		ts := baseTs + td
		if ts > hi {
			hi = ts
		}
		if ts < lo && ts != NoTimestamp {
			lo = ts
		}
		var d int32
		if d, q, ok = fastVarint(rec, q); !ok {
			if d, q = readVarintSlow(rec, q); q < 0 {
				return tr, false
			}
		}
		if d < 0 || d > last || d <= prev {
			return tr, false
		}
		prev = d
		var l int32
		// key: a control record's is checked, any other one skipped
		if control {
			k, q2 := takeBytes(rec, q, true)
			if q2 < 0 || !validControlKey(k) {
				return tr, false
			}
			q = q2
		} else {
			if l, q, ok = fastVarint(rec, q); !ok {
				if l, q = readVarintSlow(rec, q); q < 0 {
					return tr, false
				}
			}
			if q, ok = fastSkip(rec, q, l, true); !ok {
				return tr, false
			}
		}
		// value
		if l, q, ok = fastVarint(rec, q); !ok {
			if l, q = readVarintSlow(rec, q); q < 0 {
				return tr, false
			}
		}
		if q, ok = fastSkip(rec, q, l, true); !ok {
			return tr, false
		}
		var nh int32
		if nh, q, ok = fastVarint(rec, q); !ok {
			if nh, q = readVarintSlow(rec, q); q < 0 {
				return tr, false
			}
		}
		if uint(nh) > uint(len(rec)-q)/minHeaderSize {
			return tr, false
		}
		for ; nh > 0; nh-- {
			// header key, never null
			if l, q, ok = fastVarint(rec, q); !ok {
				if l, q = readVarintSlow(rec, q); q < 0 {
					return tr, false
				}
			}
			if q, ok = fastSkip(rec, q, l, false); !ok {
				return tr, false
			}
			// header value
			if l, q, ok = fastVarint(rec, q); !ok {
				if l, q = readVarintSlow(rec, q); q < 0 {
					return tr, false
				}
			}
			if q, ok = fastSkip(rec, q, l, true); !ok {
				return tr, false
			}
		}
		if q != len(rec) {
			return tr, false
		}
		p = end
	}
	if p != len(data) {
		return tr, false
	}
	tr.Max = hi
	if lo != math.MaxInt64 {
		tr.Min = lo
	}
	return tr, true
}

// fastRecord decodes the record at data[p] into f, appending its headers
// to *hdrs, and returns the position after it, or -1 when anything is
// wrong (the caller then asks the cursor why). Written like fastWalk.
func fastRecord(data []byte, p int, f *recordFields, hdrs *[]RecordHeader) int {
	var ok bool
	var n int32
	if n, p, ok = fastVarint(data, p); !ok {
		if n, p = readVarintSlow(data, p); p < 0 {
			return -1
		}
	}
	if n < minRecordSize-1 || int(n) > len(data)-p {
		return -1
	}
	end := p + int(n)
	rec := data[:end:end]
	q := p
	f.attributes = int8(rec[q])
	q++
	// Fields go into locals, then into f: a store between a helper's
	// return and the test of its ok would keep the compiler from branching
	// past that test.
	var ts int64
	if ts, q, ok = fastVarlong(rec, q); !ok {
		if ts, q = readVarlongSlow(rec, q); q < 0 {
			return -1
		}
	}
	var d int32
	if d, q, ok = fastVarint(rec, q); !ok {
		if d, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
	}
	f.timestampDelta, f.offsetDelta = ts, d
	var l int32
	if l, q, ok = fastVarint(rec, q); !ok {
		if l, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
	}
	var key, value []byte
	if key, q, ok = fastBytes(rec, q, l, true); !ok {
		return -1
	}
	f.key = key
	if l, q, ok = fastVarint(rec, q); !ok {
		if l, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
	}
	if value, q, ok = fastBytes(rec, q, l, true); !ok {
		return -1
	}
	f.value = value
	var nh int32
	if nh, q, ok = fastVarint(rec, q); !ok {
		if nh, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
	}
	if uint(nh) > uint(end-q)/minHeaderSize {
		return -1
	}
	for ; nh > 0; nh-- {
		var k, v []byte
		if l, q, ok = fastVarint(rec, q); !ok {
			if l, q = readVarintSlow(rec, q); q < 0 {
				return -1
			}
		}
		if k, q, ok = fastBytes(rec, q, l, false); !ok {
			return -1
		}
		if l, q, ok = fastVarint(rec, q); !ok {
			if l, q = readVarintSlow(rec, q); q < 0 {
				return -1
			}
		}
		if v, q, ok = fastBytes(rec, q, l, true); !ok {
			return -1
		}
		*hdrs = append(*hdrs, RecordHeader{Key: k, Value: v})
	}
	if q != end {
		return -1
	}
	return end
}
