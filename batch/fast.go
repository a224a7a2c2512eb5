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

// takeBytes decodes a length-prefixed string at b[p] whose length is at
// least minLen (-1: nullable, returned as nil; 0: not nullable) and fits
// in b. The position is -1 when it does not.
func takeBytes(b []byte, p int, minLen int32) ([]byte, int) {
	n, p := readVarintSlow(b, p)
	if p < 0 || n < minLen || int(n) > len(b)-p {
		return nil, -1
	}
	if n < 0 {
		return nil, p
	}
	e := p + int(n)
	return b[p:e:e], e
}

// fastWalk reports whether count records fill data exactly, with the
// framing Validate requires. It neither allocates nor says why not. It is
// Validate's hot loop, written out by hand: one- and two-byte varints (all
// lengths under 8 KiB) are decoded in line, since the Go inliner will not
// inline a decoder that also calls its out-of-line case, and every call
// costs the loop its registers. Longer varints go out of line.
func fastWalk(data []byte, count, last int32, control bool) bool {
	if int64(count) > int64(len(data)/minRecordSize) {
		return false
	}
	p := 0
	prev := int32(-1)
	for i := int32(0); i < count; i++ {
		var n int32
		if p >= len(data) {
			return false
		}
		if c := data[p]; c < 0x80 {
			n = int32(c>>1) ^ -int32(c&1)
			p++
		} else if p+1 < len(data) && data[p+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(data[p+1])<<7
			n = int32(u>>1) ^ -int32(u&1)
			p += 2
		} else if n, p = readVarintSlow(data, p); p < 0 {
			return false
		}
		if n < minRecordSize-1 || int(n) > len(data)-p {
			return false
		}
		end := p + int(n)
		rec := data[p:end:end] // positions below are relative to the record
		q := 1                 // after attributes
		// timestampDelta: only its encoding matters here.
		if q >= len(rec) {
			return false
		}
		if c := rec[q]; c < 0x80 {
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			q += 2
		} else if _, q = readVarlongSlow(rec, q); q < 0 {
			return false
		}
		var d int32
		if q >= len(rec) {
			return false
		}
		if c := rec[q]; c < 0x80 {
			d = int32(c>>1) ^ -int32(c&1)
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(rec[q+1])<<7
			d = int32(u>>1) ^ -int32(u&1)
			q += 2
		} else if d, q = readVarintSlow(rec, q); q < 0 {
			return false
		}
		if d < 0 || d > last || d <= prev {
			return false
		}
		prev = d
		// key: a control record's is checked, any other one skipped
		if control {
			k, q2 := takeBytes(rec, q, -1)
			if q2 < 0 || !validControlKey(k) {
				return false
			}
			q = q2
		} else {
			var l int32
			// key
			if q >= len(rec) {
				return false
			}
			if c := rec[q]; c < 0x80 {
				l = int32(c>>1) ^ -int32(c&1)
				q++
			} else if q+1 < len(rec) && rec[q+1] < 0x80 {
				u := uint32(c&0x7f) | uint32(rec[q+1])<<7
				l = int32(u>>1) ^ -int32(u&1)
				q += 2
			} else if l, q = readVarintSlow(rec, q); q < 0 {
				return false
			}
			if l < -1 || int(l) > len(rec)-q {
				return false
			}
			q += int(l &^ (l >> 31)) // l == -1 (null) skips nothing
		}
		var l int32
		// value
		if q >= len(rec) {
			return false
		}
		if c := rec[q]; c < 0x80 {
			l = int32(c>>1) ^ -int32(c&1)
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(rec[q+1])<<7
			l = int32(u>>1) ^ -int32(u&1)
			q += 2
		} else if l, q = readVarintSlow(rec, q); q < 0 {
			return false
		}
		if l < -1 || int(l) > len(rec)-q {
			return false
		}
		q += int(l &^ (l >> 31)) // l == -1 (null) skips nothing
		var nh int32
		if q >= len(rec) {
			return false
		}
		if c := rec[q]; c < 0x80 {
			nh = int32(c>>1) ^ -int32(c&1)
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(rec[q+1])<<7
			nh = int32(u>>1) ^ -int32(u&1)
			q += 2
		} else if nh, q = readVarintSlow(rec, q); q < 0 {
			return false
		}
		if uint(nh) > uint(len(rec)-q)/minHeaderSize {
			return false
		}
		for ; nh > 0; nh-- {
			// header key, never null
			if q >= len(rec) {
				return false
			}
			if c := rec[q]; c < 0x80 {
				l = int32(c>>1) ^ -int32(c&1)
				q++
			} else if q+1 < len(rec) && rec[q+1] < 0x80 {
				u := uint32(c&0x7f) | uint32(rec[q+1])<<7
				l = int32(u>>1) ^ -int32(u&1)
				q += 2
			} else if l, q = readVarintSlow(rec, q); q < 0 {
				return false
			}
			if l < 0 || int(l) > len(rec)-q {
				return false
			}
			q += int(l &^ (l >> 31)) // l == -1 (null) skips nothing
			// header value
			if q >= len(rec) {
				return false
			}
			if c := rec[q]; c < 0x80 {
				l = int32(c>>1) ^ -int32(c&1)
				q++
			} else if q+1 < len(rec) && rec[q+1] < 0x80 {
				u := uint32(c&0x7f) | uint32(rec[q+1])<<7
				l = int32(u>>1) ^ -int32(u&1)
				q += 2
			} else if l, q = readVarintSlow(rec, q); q < 0 {
				return false
			}
			if l < -1 || int(l) > len(rec)-q {
				return false
			}
			q += int(l &^ (l >> 31)) // l == -1 (null) skips nothing
		}
		if q != len(rec) {
			return false
		}
		p = end
	}
	return p == len(data)
}

// fastRecord decodes the record at data[p] into f, appending its headers
// to *hdrs, and returns the position after it, or -1 when anything is
// wrong (the caller then asks the cursor why). Written out by hand like
// fastWalk.
func fastRecord(data []byte, p int, f *recordFields, hdrs *[]RecordHeader) int {
	var n int32
	if p >= len(data) {
		return -1
	}
	if c := data[p]; c < 0x80 {
		n = int32(c>>1) ^ -int32(c&1)
		p++
	} else if p+1 < len(data) && data[p+1] < 0x80 {
		u := uint32(c&0x7f) | uint32(data[p+1])<<7
		n = int32(u>>1) ^ -int32(u&1)
		p += 2
	} else if n, p = readVarintSlow(data, p); p < 0 {
		return -1
	}
	if n < minRecordSize-1 || int(n) > len(data)-p {
		return -1
	}
	end := p + int(n)
	rec := data[:end:end]
	q := p
	f.attributes = int8(rec[q])
	q++
	if q >= len(rec) {
		return -1
	}
	if c := rec[q]; c < 0x80 {
		f.timestampDelta = int64(c>>1) ^ -int64(c&1)
		q++
	} else if q+1 < len(rec) && rec[q+1] < 0x80 {
		u := uint64(c&0x7f) | uint64(rec[q+1])<<7
		f.timestampDelta = int64(u>>1) ^ -int64(u&1)
		q += 2
	} else if f.timestampDelta, q = readVarlongSlow(rec, q); q < 0 {
		return -1
	}
	if q >= len(rec) {
		return -1
	}
	if c := rec[q]; c < 0x80 {
		f.offsetDelta = int32(c>>1) ^ -int32(c&1)
		q++
	} else if q+1 < len(rec) && rec[q+1] < 0x80 {
		u := uint32(c&0x7f) | uint32(rec[q+1])<<7
		f.offsetDelta = int32(u>>1) ^ -int32(u&1)
		q += 2
	} else if f.offsetDelta, q = readVarintSlow(rec, q); q < 0 {
		return -1
	}
	var l int32
	if q >= len(rec) {
		return -1
	}
	if c := rec[q]; c < 0x80 {
		l = int32(c>>1) ^ -int32(c&1)
		q++
	} else if q+1 < len(rec) && rec[q+1] < 0x80 {
		u := uint32(c&0x7f) | uint32(rec[q+1])<<7
		l = int32(u>>1) ^ -int32(u&1)
		q += 2
	} else if l, q = readVarintSlow(rec, q); q < 0 {
		return -1
	}
	if l < -1 || int(l) > len(rec)-q {
		return -1
	}
	if l >= 0 {
		f.key = rec[q : q+int(l) : q+int(l)]
		q += int(l)
	} else {
		f.key = nil
	}
	if q >= len(rec) {
		return -1
	}
	if c := rec[q]; c < 0x80 {
		l = int32(c>>1) ^ -int32(c&1)
		q++
	} else if q+1 < len(rec) && rec[q+1] < 0x80 {
		u := uint32(c&0x7f) | uint32(rec[q+1])<<7
		l = int32(u>>1) ^ -int32(u&1)
		q += 2
	} else if l, q = readVarintSlow(rec, q); q < 0 {
		return -1
	}
	if l < -1 || int(l) > len(rec)-q {
		return -1
	}
	if l >= 0 {
		f.value = rec[q : q+int(l) : q+int(l)]
		q += int(l)
	} else {
		f.value = nil
	}
	var nh int32
	if q >= len(rec) {
		return -1
	}
	if c := rec[q]; c < 0x80 {
		nh = int32(c>>1) ^ -int32(c&1)
		q++
	} else if q+1 < len(rec) && rec[q+1] < 0x80 {
		u := uint32(c&0x7f) | uint32(rec[q+1])<<7
		nh = int32(u>>1) ^ -int32(u&1)
		q += 2
	} else if nh, q = readVarintSlow(rec, q); q < 0 {
		return -1
	}
	if uint(nh) > uint(end-q)/minHeaderSize {
		return -1
	}
	for ; nh > 0; nh-- {
		var h RecordHeader
		if q >= len(rec) {
			return -1
		}
		if c := rec[q]; c < 0x80 {
			l = int32(c>>1) ^ -int32(c&1)
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(rec[q+1])<<7
			l = int32(u>>1) ^ -int32(u&1)
			q += 2
		} else if l, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
		if l < 0 || int(l) > len(rec)-q {
			return -1
		}
		if l >= 0 {
			h.Key = rec[q : q+int(l) : q+int(l)]
			q += int(l)
		} else {
			h.Key = nil
		}
		if q >= len(rec) {
			return -1
		}
		if c := rec[q]; c < 0x80 {
			l = int32(c>>1) ^ -int32(c&1)
			q++
		} else if q+1 < len(rec) && rec[q+1] < 0x80 {
			u := uint32(c&0x7f) | uint32(rec[q+1])<<7
			l = int32(u>>1) ^ -int32(u&1)
			q += 2
		} else if l, q = readVarintSlow(rec, q); q < 0 {
			return -1
		}
		if l < -1 || int(l) > len(rec)-q {
			return -1
		}
		if l >= 0 {
			h.Value = rec[q : q+int(l) : q+int(l)]
			q += int(l)
		} else {
			h.Value = nil
		}
		*hdrs = append(*hdrs, h)
	}
	if q != end {
		return -1
	}
	return end
}
