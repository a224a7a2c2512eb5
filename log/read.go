package log

import (
	"fmt"
	"io"
	"sync"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/invariants"
	"github.com/partlog/partlog/segment"
)

// Records is the result of a read: whole batches, contiguous in one segment
// file, the first holding the offset that was asked for. It holds a
// reference on its segment (and a read lease that keeps TruncateTo from
// cutting the bytes under it) until Close.
//
// While a goroutine holds Records of a partition it may read the partition
// and call SetHighWatermark, but it must not call any other method that
// changes the partition (AppendBatch, AppendAssigned, Roll, TruncateTo,
// DeleteRecordsBefore, Sync, Verify, Close, DeleteSegments,
// ReplaceSegments): TruncateTo waits for the Records, and every such
// writer waits for TruncateTo. Closing the Records, from any goroutine,
// lets them all go on.
//
// A Records is not safe for concurrent use. Close it exactly once: after
// Close the Records returns to a pool and may be handed to another reader.
// A second Close returns ErrClosed as long as the object has not been
// reused; calling anything on a Records after its Close is a bug (builds
// with the invariants tag do not pool Records, so a double Close is always
// caught there).
type Records struct {
	// seg is the segment the batches are in, nil for an empty result; the
	// Records holds a reference and a read lease on it.
	seg *segment.Segment
	// start and end are the byte positions of the batches in seg's .log.
	start, end int64
	// first is the base offset of the first batch, -1 when empty.
	first int64
	// b is what Bytes returns: an alias of the mapped segment, or scratch
	// filled with ReadAt when the segment is not mapped.
	b []byte
	// scratch is the buffer for unmapped segments, kept across uses of
	// the pooled object.
	scratch []byte
	// closed is set by Close and cleared when the pool hands the object
	// out again.
	closed bool
}

var recordsPool = sync.Pool{New: func() any { return new(Records) }}

// maxPooledScratch bounds the read buffer a pooled Records keeps (reads of
// unmapped segments).
const maxPooledScratch = 4 << 20

func newRecords() *Records {
	var r *Records
	if invariants.Enabled {
		r = new(Records)
	} else {
		r = recordsPool.Get().(*Records)
	}
	r.closed = false
	r.first = -1
	return r
}

// Bytes returns the batches, whole, in Kafka's on-disk (and fetch response)
// encoding. When the segment is memory-mapped (the default on Linux and
// macOS) the slice aliases the mapping: nothing is copied, and it is valid
// only until Close. It must not be modified. Empty at the end of the
// visible log.
func (r *Records) Bytes() []byte { return r.b }

// Len returns the number of bytes, len(Bytes()).
func (r *Records) Len() int { return int(r.end - r.start) }

// Empty reports whether the read found nothing (the offset was at the
// visibility bound).
func (r *Records) Empty() bool { return r.end == r.start }

// FirstOffset returns the base offset of the first batch (at or below the
// offset that was read, since a read starts at the batch holding it), or -1
// when empty.
func (r *Records) FirstOffset() int64 { return r.first }

// NextOffset returns the offset after the last batch: where the next read
// continues. For an empty Records it returns -1. It walks the batch
// headers (no copy, no allocation).
func (r *Records) NextOffset() int64 {
	next := int64(-1)
	for rest := r.b; len(rest) > 0; {
		n, _, entryNext, err := batch.FrameEntry(rest) // v2 batches and legacy messages
		if err != nil {
			break
		}
		next, rest = entryNext, rest[n:]
	}
	return next
}

// WriteTo writes the batches to w and returns the number of bytes written.
// When w is an *os.File or a TCP or Unix socket and the segment file has an
// operating-system descriptor, the bytes go by sendfile(2) without passing
// through user space. Each call writes the whole record set.
func (r *Records) WriteTo(w io.Writer) (int64, error) {
	if r.seg == nil || r.end == r.start {
		return 0, nil
	}
	return r.seg.WriteTo(w, r.start, r.end)
}

// Close releases the read lease and the segment reference (the last
// reference on a segment deleted meanwhile removes its files; an error doing
// so is returned). See Records for what a second Close does.
func (r *Records) Close() error {
	if r.closed {
		if invariants.Enabled {
			return base.AssertionFailedf("partlog/log: Records closed twice")
		}
		return ErrClosed
	}
	r.closed = true
	var err error
	if r.seg != nil {
		r.seg.ReleaseRead()
		err = r.seg.Unref()
	}
	r.seg, r.b, r.start, r.end, r.first = nil, nil, 0, 0, -1
	if cap(r.scratch) > maxPooledScratch {
		r.scratch = nil
	}
	if !invariants.Enabled {
		recordsPool.Put(r)
	}
	return err
}

// ReadFrom returns whole batches starting with the one that holds offset,
// from one segment, for a consumer: never a byte at or past the high
// watermark. It returns at most maxBytes bytes unless the first batch alone
// is larger, in which case it returns that one batch (so a consumer always
// progresses); maxBytes <= 0 asks for just that batch.
//
// offset must lie in [LogStartOffset, LogEndOffset], else the error wraps
// ErrOffsetOutOfRange. At or past the high watermark the result is empty
// (Empty reports true), not an error. A read whose offset lies inside a
// batch returns that whole batch; consumers skip the records below the
// offset, as Kafka clients do.
//
// ReadFrom takes no lock and never blocks appends; it waits only while
// TruncateTo is cutting the segment it reads. The Records must be closed.
func (p *Partition) ReadFrom(offset int64, maxBytes int) (*Records, error) {
	return p.read(offset, maxBytes, false)
}

// ReadFromFollower is ReadFrom for a replica: its visibility bound is the
// log end offset instead of the high watermark.
func (p *Partition) ReadFromFollower(offset int64, maxBytes int) (*Records, error) {
	return p.read(offset, maxBytes, true)
}

// read implements ReadFrom and ReadFromFollower. The argument that makes it
// safe without a lock is in the package documentation, "Lock-free reads".
func (p *Partition) read(offset int64, maxBytes int, follower bool) (*Records, error) {
	maxBytes = max(maxBytes, 0) // 0: just the first batch (minOneBatch)
	for {
		if p.closed.Load() {
			return nil, ErrClosed
		}
		gen := p.truncations.Load()
		hw, end := p.bounds.load()
		start := p.logStart.Load()
		if offset < start || offset > end.Offset {
			return nil, fmt.Errorf("%w: offset %d outside [%d, %d]", ErrOffsetOutOfRange, offset, start, end.Offset)
		}
		bound := hw
		if follower {
			bound = end
		}
		if offset >= bound.Offset {
			return newRecords(), nil
		}
		snap := p.segs.Load()
		if !snap.tryRef() {
			continue // replaced and released since the Load: take the new one
		}
		r, retry, err := p.readSnapshot(snap, gen, offset, maxBytes, bound)
		// The last reference goes when the partition replaced the snapshot
		// meanwhile; its release is not this read's failure.
		if uerr := snap.unref(); uerr != nil {
			p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", uerr)
		}
		if retry {
			continue
		}
		return r, err
	}
}

// readSnapshot reads from the segments of snap. It returns retry when a
// truncation started after the caller loaded its bounds.
func (p *Partition) readSnapshot(snap *segments, gen uint64, offset int64, maxBytes int, bound position) (r *Records, retry bool, err error) {
	i := snap.find(offset)
	if i < 0 {
		// Retention removed the segment after the range check.
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
				r.seg, r.start, r.end, r.first = seg, sl.Start, sl.End, sl.FirstOffset
				return r, false, nil
			}
		}
		seg.ReleaseRead()
		uerr := seg.Unref()
		if err != nil {
			_ = r.Close()
			return nil, false, fmt.Errorf("partlog/log: read offset %d from segment %d of %s: %w", offset, segBase, p.dir, err)
		}
		if uerr != nil {
			_ = r.Close()
			return nil, false, uerr
		}
		// Nothing at or after offset in this segment below the bound: the
		// offset is past its last batch. Try the next segment.
		_ = r.Close()
	}
	return newRecords(), false, nil
}
