package repair

import (
	"encoding/binary"
	"errors"
	"io"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

// Probe is what a read-only walk over the batch headers of a .log found.
type Probe struct {
	// Path is the file walked.
	Path string
	// Size is the file's length.
	Size int64
	// Framed is the end of the last batch that frames (Size when every
	// byte belongs to a batch).
	Framed int64
	// Next is the offset after the last framed batch (the base offset
	// when there is none).
	Next int64
	// Batches counts the framed batches the walk saw (from Start).
	Batches int
	// Start is the byte position the walk started at: 0, or the batch an
	// offset index entry pointed at.
	Start int64
	// Gaps is set when the walk saw an offset gap: a first batch above
	// the base offset (walks from 0 only) or a batch that does not start
	// where the previous one ended. Compaction leaves such gaps.
	Gaps bool
	// Cause is why the walk stopped before Size (a *base.CorruptionError
	// naming Path and Framed), nil when it reached Size.
	Cause error
}

// headerPrefix is how much of a batch header a walk reads: baseOffset,
// batchLength, partitionLeaderEpoch, magic, crc, attributes and
// lastOffsetDelta (bytes 0-26 of a v2 header).
const headerPrefix = 27

// legacyPrefix is the shortest prefix a walk needs: up to the magic byte
// (offset, length, crc or partitionLeaderEpoch, magic).
const legacyPrefix = 17

// legacyMinSize is the smallest message length of magic 0 and 1 (crc,
// magic, attributes, [timestamp,] key and value lengths).
var legacyMinSize = [2]int{14, 22}

// ProbeLog walks the batch headers of the .log at path, whose base offset
// is segBase, without changing anything: each batch must frame (a length
// of at least a v2 header, inside the file), carry magic 2, and start above
// the previous one's last offset and at or above segBase. Legacy messages
// (magic 0 and 1) are framed by their length and offset alone. With validate,
// each entry is also read whole and checked: a batch's header and CRC-32C
// (batch.Batch.ValidateHeader), a legacy message's framing and CRC-32
// (batch.Legacy.ValidateHeader). indexPath, when not empty and validate is off,
// names the segment's offset index: the walk starts at the batch its last
// entry points at when that batch frames and lies at or below the entry's
// offset (so a clean segment costs a few header reads); otherwise at 0.
func ProbeLog(fsys vfs.FS, path, indexPath string, segBase int64, validate bool) (Probe, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return Probe{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Probe{}, err
	}
	pr := Probe{Path: path, Size: st.Size(), Next: segBase}
	var h [headerPrefix]byte
	// header reads up to headerPrefix bytes of the batch at pos and
	// returns how many it read.
	header := func(pos int64) (int, error) {
		n := int(min(int64(headerPrefix), pr.Size-pos))
		if n <= 0 {
			return 0, nil
		}
		if _, err := f.ReadAt(h[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		return n, nil
	}
	pos, prevLast := int64(0), segBase-1
	if indexPath != "" && !validate {
		if hint, off, ok := lastIndexEntry(fsys, indexPath, segBase); ok && hint > 0 && hint < pr.Size {
			if got, err := header(hint); err != nil {
				return pr, err
			} else if got == headerPrefix {
				b := binary.BigEndian.Uint64(h[0:])
				length := int64(int32(binary.BigEndian.Uint32(h[8:])))
				last := int64(b) + int64(int32(binary.BigEndian.Uint32(h[23:])))
				if h[16] == 2 && length >= batch.HeaderSize-batch.LogOverhead && hint+length+batch.LogOverhead <= pr.Size &&
					int64(b) >= segBase && last <= off && int64(b) <= last {
					pos, prevLast = hint, int64(b)-1
					pr.Start = hint
				}
			}
		}
	}
	var buf []byte
	for pos < pr.Size {
		got, err := header(pos)
		if err != nil {
			return pr, err
		}
		if got < legacyPrefix {
			pr.Cause = base.CorruptionErrorf(path, pos, "batchLength", "%d bytes at the end of the file, short of a batch header", pr.Size-pos)
			break
		}
		bo := int64(binary.BigEndian.Uint64(h[0:]))
		length := int64(int32(binary.BigEndian.Uint32(h[8:])))
		size := length + batch.LogOverhead
		magic := h[16]
		var last int64
		switch {
		case magic > 2:
			pr.Cause = base.CorruptionErrorf(path, pos, "magic", "magic %d", magic)
		case magic < 2:
			// A legacy message (set): its offset field is its last
			// offset (a compressed wrapper's is its last inner one).
			last = bo
			if least := int64(legacyMinSize[magic]); length < least || size > pr.Size-pos {
				pr.Cause = base.CorruptionErrorf(path, pos, "batchLength", "message length %d with %d bytes left in the file", length, pr.Size-pos)
			} else if bo <= prevLast || bo < segBase || bo-segBase > math.MaxInt32 {
				pr.Cause = base.CorruptionErrorf(path, pos, "offset", "message at offset %d after offset %d in a segment based at %d", bo, prevLast, segBase)
			}
		case got < headerPrefix:
			pr.Cause = base.CorruptionErrorf(path, pos, "batchLength", "%d bytes at the end of the file, short of a batch header", pr.Size-pos)
		default:
			delta := int64(int32(binary.BigEndian.Uint32(h[23:])))
			last = bo + delta
			switch {
			case length < batch.HeaderSize-batch.LogOverhead || size > pr.Size-pos:
				pr.Cause = base.CorruptionErrorf(path, pos, "batchLength", "batch length %d with %d bytes left in the file", length, pr.Size-pos)
			case bo <= prevLast || bo < segBase || delta < 0 || last-segBase > math.MaxInt32:
				pr.Cause = base.CorruptionErrorf(path, pos, "baseOffset", "batch [%d, %d] after offset %d in a segment based at %d", bo, last, prevLast, segBase)
			}
		}
		if pr.Cause == nil && validate {
			if int64(cap(buf)) < size {
				buf = make([]byte, size)
			}
			buf = buf[:size]
			if _, err := f.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
				return pr, err
			}
			var err error
			if magic == 2 {
				err = batch.Batch(buf).ValidateHeader()
			} else {
				err = batch.Legacy(buf).ValidateHeader()
			}
			if err != nil {
				pr.Cause = base.WithFile(err, path, pos)
			}
		}
		if pr.Cause != nil {
			break
		}
		if bo != prevLast+1 {
			pr.Gaps = true
		}
		prevLast = last
		pr.Next = last + 1
		pr.Batches++
		pos += size
	}
	pr.Framed = pos
	return pr, nil
}

// lastIndexEntry returns the position and absolute offset of the last
// entry of the offset index at path (entries are 4-byte relative offset,
// 4-byte position; a preallocated index ends in zero entries, found by
// binary search). ok is false when there is none or the file cannot be
// read: the caller then walks from 0.
func lastIndexEntry(fsys vfs.FS, path string, segBase int64) (pos, offset int64, ok bool) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false
	}
	var e [8]byte
	entry := func(i int64) (rel, p int64, ok bool) {
		if _, err := f.ReadAt(e[:], i*8); err != nil {
			return 0, 0, false
		}
		return int64(binary.BigEndian.Uint32(e[0:])), int64(binary.BigEndian.Uint32(e[4:])), true
	}
	// The last entry whose position is not zero.
	lo, hi := int64(0), st.Size()/8 // entries [0, lo) are set; [hi, n) are zero
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, p, ok := entry(mid)
		if !ok {
			return 0, 0, false
		}
		if p != 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, 0, false
	}
	rel, p, ok := entry(lo - 1)
	if !ok {
		return 0, 0, false
	}
	return p, segBase + rel, true
}
