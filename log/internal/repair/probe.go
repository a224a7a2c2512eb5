package repair

import (
	"encoding/binary"
	"errors"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
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
	// Cause is why the walk stopped before Size, nil when it reached
	// Size: a *base.CorruptionError naming Path and the damaged field,
	// classified as segment.Check classifies it (base.IsTornTail when
	// nothing valid follows the damage; segment.ErrLegacyKept for legacy
	// data recovery cannot prove torn).
	Cause error
}

// errHintMismatch stops a walk from an index hint whose batch ends past
// the entry's offset.
var errHintMismatch = errors.New("index entry does not match its batch")

// ProbeLog walks the .log at path, whose base offset is segBase, without
// changing anything, with segment.Check: the walk that defines damage for
// recovery too, so the probe and recovery agree on where the batches end
// and on what the damage is (Cause: a torn tail, corruption, or legacy
// data recovery cannot prove torn; see segment.Check). Without validate
// it reads only the entry headers (segment.CheckOptions.HeadersOnly): each
// entry must frame (at least its magic's smallest size, inside the file)
// and start above the previous one's last offset and at or above segBase;
// a legacy message (magic 0 and 1) counts from its own offset. With
// validate, each entry is also read whole and checked: a batch's header
// and CRC-32C, a legacy message's CRC-32. indexPath, when not empty and
// validate is off, names the segment's offset index: the walk starts at
// the batch its last entry points at when that batch frames and lies at
// or below the entry's offset (so a clean segment costs a few header
// reads); otherwise at 0.
func ProbeLog(fsys vfs.FS, path, indexPath string, segBase int64, validate bool) (Probe, error) {
	if indexPath != "" && !validate {
		if hint, off, ok := lastIndexEntry(fsys, indexPath, segBase); ok && hint > 0 {
			// A hint past the file, or whose batch does not frame or
			// ends past the entry's offset, is ignored: the walk from 0
			// (which also reports any I/O error) decides.
			if pr, err := probeFrom(fsys, path, segBase, hint, off, false); err == nil && pr.Batches > 0 {
				return pr, nil
			}
		}
	}
	return probeFrom(fsys, path, segBase, 0, -1, validate)
}

// probeFrom is ProbeLog's walk from position from (0, or an index hint
// whose entry names offset hintOff; -1 without a hint).
func probeFrom(fsys vfs.FS, path string, segBase, from, hintOff int64, validate bool) (Probe, error) {
	pr := Probe{Path: path, Next: segBase, Start: from}
	prevLast := segBase - 1
	res, err := segment.Check(fsys, path, segBase, segment.CheckOptions{HeadersOnly: !validate, From: from},
		func(h segment.BatchInfo, _ batch.Batch, _ error) error {
			if pr.Batches == 0 && from > 0 {
				if h.LastOffset > hintOff {
					return errHintMismatch
				}
				prevLast = h.BaseOffset - 1 // the walk starts here
			}
			if h.BaseOffset != prevLast+1 {
				pr.Gaps = true
			}
			prevLast = h.LastOffset
			pr.Batches++
			return nil
		})
	if err != nil {
		return pr, err
	}
	pr.Size = res.ValidBytes + res.TruncatedBytes
	if res.Kept {
		st, err := fsys.Stat(path)
		if err != nil {
			return pr, err
		}
		pr.Size = st.Size()
	}
	pr.Framed, pr.Next, pr.Cause = res.ValidBytes, res.NextOffset, res.Cause
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
