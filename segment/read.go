package segment

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
)

// Byte offsets of the header fields a scan reads. Frozen: Kafka's format
// (see package batch).
const (
	hdrBaseOffsetAt      = 0
	hdrLengthAt          = hdrBaseOffsetAt + 8          // 8
	hdrMagicAt           = hdrLengthAt + 8              // 16: after length and partitionLeaderEpoch
	hdrLastOffsetDeltaAt = hdrMagicAt + 1 + 4 + 2       // 23: after magic, crc, attributes
	hdrMaxTimestampAt    = hdrLastOffsetDeltaAt + 4 + 8 // 35: after lastOffsetDelta, baseTimestamp
)

// BatchInfo describes one batch of the .log, read from its header.
type BatchInfo struct {
	// Pos is the position of the batch's first byte in the .log.
	Pos int64
	// Size is the batch's total size in bytes (batchLength + 12).
	Size int64
	// BaseOffset and LastOffset are the first and last offsets the batch
	// covers (compaction may have removed records inside the range).
	BaseOffset, LastOffset int64
	// MaxTimestamp is the batch's maxTimestamp (-1 when absent; always
	// for a magic 0 message).
	MaxTimestamp int64
	// Magic is the format: 2 for a RecordBatch v2, 0 or 1 for a legacy
	// message Kafka wrote before 0.11, which partlog reads (a compressed
	// wrapper covering its inner messages' offsets, the last being its
	// own) but never writes.
	Magic int8

	legacyWrapper bool // decodeHeader only: BaseOffset still to be read
}

// End returns the position after the batch.
func (b BatchInfo) End() int64 { return b.Pos + b.Size }

// NextOffset returns LastOffset + 1.
func (b BatchInfo) NextOffset() int64 { return b.LastOffset + 1 }

// Slice is a byte range of whole batches of the .log, returned by Read.
// The zero Slice (Start == End) means there was nothing to return.
type Slice struct {
	// Start and End are positions in the .log: [Start, End).
	Start, End int64
	// FirstOffset is the base offset of the first batch in the range.
	FirstOffset int64
	// NextOffset is the offset after the last batch in the range.
	NextOffset int64
}

// Len returns End - Start.
func (s Slice) Len() int64 { return s.End - s.Start }

// Empty reports whether the slice holds no batch.
func (s Slice) Empty() bool { return s.End <= s.Start }

// decoderPool holds the decoders FindOffsetByTimestamp iterates records
// with (their buffers hold decompressed records).
var decoderPool = sync.Pool{New: func() any { return new(batch.Decoder) }}

// headerPool holds header buffers for reads without a mapping.
var headerPool = sync.Pool{New: func() any { return new([batch.HeaderSize]byte) }}

// readHeader returns the header fields of the batch at pos, which must be
// whole below limit. err wraps batch.ErrCorrupt (base.ErrTornTail when the
// batch runs past limit) if the bytes there do not frame as a batch. A
// legacy message (magic 0 or 1, which partlog reads but never writes) is
// described as a batch covering its offsets: a compressed wrapper's first
// offset is read from its decompressed inner messages.
func (s *Segment) readHeader(pos, limit int64) (BatchInfo, error) {
	var h []byte
	avail := limit - pos
	if avail < legacyPeekSize {
		if avail <= 0 {
			return BatchInfo{}, io.EOF
		}
		return BatchInfo{}, base.TornTailErrorf(s.LogPath(), pos, "header",
			"%d bytes left, a batch header is %d", avail, batch.HeaderSize)
	}
	n := min(avail, batch.HeaderSize)
	if m := s.mapping(); m != nil && pos+n <= int64(len(m)) {
		h = m[pos : pos+n]
	} else {
		buf := headerPool.Get().(*[batch.HeaderSize]byte)
		defer headerPool.Put(buf)
		if _, err := s.logFile.ReadAt(buf[:n], pos); err != nil {
			return BatchInfo{}, fmt.Errorf("partlog/segment: read header at %s:%d: %w", s.LogPath(), pos, err)
		}
		h = buf[:n]
	}
	info, err := s.decodeHeader(h, pos, limit)
	if err != nil || !info.legacyWrapper {
		return info, err
	}
	return s.legacyBase(info)
}

// decodeHeader checks and decodes the header h (at least legacyPeekSize
// bytes, HeaderSize when that many lie below limit) of the batch at pos.
// For a compressed legacy wrapper BaseOffset is the wrapper's offset and
// legacyWrapper is set: readHeader then finds the first offset.
func (s *Segment) decodeHeader(h []byte, pos, limit int64) (BatchInfo, error) {
	return decodeHeader(s.LogPath(), h, pos, limit)
}

// decodeHeader is Segment.decodeHeader for the .log at path.
func decodeHeader(path string, h []byte, pos, limit int64) (BatchInfo, error) {
	m := int8(h[hdrMagicAt])
	if m != batch.Magic {
		if legacy.IsMagic(m) {
			return decodeLegacy(path, h, pos, limit)
		}
		return BatchInfo{}, base.CorruptionErrorf(path, pos+hdrMagicAt, "magic", "magic %d", m)
	}
	if len(h) < batch.HeaderSize {
		return BatchInfo{}, base.TornTailErrorf(path, pos, "header",
			"%d bytes left, a batch header is %d", len(h), batch.HeaderSize)
	}
	n := int64(int32(binary.BigEndian.Uint32(h[hdrLengthAt:])))
	size := n + batch.LogOverhead
	if size < batch.HeaderSize {
		return BatchInfo{}, base.CorruptionErrorf(path, pos+hdrLengthAt, "batchLength", "length %d", n)
	}
	if pos+size > limit {
		return BatchInfo{}, base.TornTailErrorf(path, pos+hdrLengthAt, "batchLength",
			"batch of %d bytes runs past %d", size, limit)
	}
	delta := int64(int32(binary.BigEndian.Uint32(h[hdrLastOffsetDeltaAt:])))
	if delta < 0 {
		return BatchInfo{}, base.CorruptionErrorf(path, pos+hdrLastOffsetDeltaAt, "lastOffsetDelta", "negative delta %d", delta)
	}
	bo := int64(binary.BigEndian.Uint64(h[hdrBaseOffsetAt:]))
	if bo < 0 || bo > maxOffset-delta {
		return BatchInfo{}, base.CorruptionErrorf(path, pos, "baseOffset", "offset %d", bo)
	}
	return BatchInfo{
		Pos: pos, Size: size, BaseOffset: bo, LastOffset: bo + delta,
		MaxTimestamp: int64(binary.BigEndian.Uint64(h[hdrMaxTimestampAt:])), Magic: m,
	}, nil
}

// maxOffset bounds offsets so that LastOffset + 1 never overflows.
const maxOffset = 1<<63 - 2

// indexFloor returns a batch boundary at or below the batch that holds
// target (Kafka: the offset index lookup), verified against the .log: a
// batch must start at the entry's position and end at or below the entry's
// offset (Kafka indexes a batch's last offset; before 3.0, the last offset
// of the last batch of one append) and at or above the segment's base. Any
// boundary at or below the target's batch is a correct place to start
// scanning; a mismatch marks the index suspect and returns 0 (see
// indexFloorFrom). An entry damaged to point inside a batch, at bytes that
// frame as a header (a batch stored in a record's value), passes: the
// scans from indexFloor's answer (translate, FindOffsetByTimestamp,
// scanFromIndex) scan again from a known boundary when theirs meets bytes
// that frame as no batch, and TruncateTo checks its cut (insideBatch). A
// lookup of exactly the entry's offset, when those bytes frame as a batch
// whose last offset is the entry's, reads no further header and is
// misled: checking the next header there cost the random lookup of an
// every-batch index 12-15% (BenchmarkTranslate), and Kafka checks nothing
// of the kind (DESIGN law 5 names the exception).
func (s *Segment) indexFloor(target, limit int64) int64 {
	return s.indexFloorFrom(target, 0, limit)
}

// indexFloorFrom is max(indexFloor(target, limit), from) for from a batch
// boundary at or below target's batch, without the checks of an entry at
// or below from.
func (s *Segment) indexFloorFrom(target, from, limit int64) int64 {
	e := s.offIdx.Lookup(target)
	if e.Position <= from {
		return from
	}
	if e.Position >= limit {
		// Invariant 4: the entry's batch is not visible yet, so
		// target is past every visible batch.
		return limit
	}
	h, err := s.readHeader(e.Position, limit)
	if err == nil && (h.LastOffset > e.Offset || h.BaseOffset < s.base) {
		err = fmt.Errorf("batch [%d, %d]", h.BaseOffset, h.LastOffset)
	}
	if err != nil {
		s.suspect("offset index entry %d→%d does not match the log (%v)", e.Offset, e.Position, err)
		return from
	}
	return e.Position
}

// suspect marks the indexes as not matching the .log.
func (s *Segment) suspect(format string, args ...any) {
	if !s.indexSuspect.Swap(true) {
		s.log.Warn("partlog/segment: index does not match the log; lookups scan from the start until it is rebuilt",
			"segment", s.LogPath(), "detail", fmt.Sprintf(format, args...))
	}
}

// Translate returns the position of the first batch whose last offset is
// >= offset, and that batch's header (Kafka's translateOffset): the offset
// index gives the floor, then batch headers are scanned forward from
// max(floor, startPos). startPos must be a batch boundary (0 when
// unknown). found is false when no visible batch qualifies. err wraps
// batch.ErrCorrupt when the .log does not frame.
func (s *Segment) Translate(offset int64, startPos int64) (pos int64, info BatchInfo, found bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if s.released.Load() {
		return 0, BatchInfo{}, false, ErrClosed
	}
	if err := s.use(); err != nil {
		return 0, BatchInfo{}, false, err
	}
	defer s.unpin()
	limit := s.size.Load()
	info, found, err = s.translate(offset, startPos, limit)
	return info.Pos, info, found, err
}

// translate is Translate below limit.
func (s *Segment) translate(offset, startPos, limit int64) (BatchInfo, bool, error) {
	floor := s.indexFloorFrom(offset, startPos, limit)
	for pos := floor; pos < limit; {
		h, err := s.readHeader(pos, limit)
		if err != nil {
			if floor > startPos && base.IsCorruption(err) {
				return s.retranslate(offset, startPos, floor, limit, err)
			}
			return BatchInfo{}, false, err
		}
		if h.LastOffset >= offset {
			return h, true, nil
		}
		pos = h.End()
	}
	return BatchInfo{}, false, nil
}

// retranslate is translate after the scan from the offset index's
// position floor met bytes that do not frame (err, a corruption error): it
// scans again from startPos. If the bytes frame from there, the entry
// pointed inside a batch, and the index, not the log, is damaged: it is
// marked suspect.
func (s *Segment) retranslate(offset, startPos, floor, limit int64, err error) (BatchInfo, bool, error) {
	for pos := startPos; pos < limit; {
		h, err2 := s.readHeader(pos, limit)
		if err2 != nil {
			return BatchInfo{}, false, err2
		}
		if h.LastOffset >= offset {
			s.suspect("the scan from offset index position %d for offset %d met %v", floor, offset, err)
			return h, true, nil
		}
		pos = h.End()
	}
	s.suspect("the scan from offset index position %d for offset %d met %v", floor, offset, err)
	return BatchInfo{}, false, nil
}

// Read returns the whole batches to send for a fetch from startOffset
// (Kafka's LogSegment.read): from the batch holding startOffset (or the
// first after it), as many whole batches as fit in maxBytes, none ending
// past maxPosition (the visibility bound: the position of the high
// watermark or the log end). With minOneBatch the first batch is returned
// even if it is larger than maxBytes (but never past maxPosition). An
// empty Slice means nothing qualifies. The caller holds a read lease until
// it is done with the bytes of the range.
//
// The end of a long range is looked up in the offset index (the last
// indexed batch that fits, checked against its header), and only the
// headers after it are read: the cost of a read does not grow with the
// number of batches it returns. The batches in between are not checked
// here; a reader frames them as it iterates (a damaged one is an error
// there, as it is for a fetch client).
func (s *Segment) Read(startOffset int64, maxBytes int, maxPosition int64, minOneBatch bool) (_ Slice, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if maxBytes < 0 {
		return Slice{}, fmt.Errorf("%w: maxBytes %d", ErrOutOfRange, maxBytes)
	}
	if s.released.Load() {
		return Slice{}, ErrClosed
	}
	if err := s.use(); err != nil {
		return Slice{}, err
	}
	defer s.unpin()
	limit := s.size.Load()
	first, found, err := s.translate(startOffset, 0, limit)
	if err != nil || !found || first.End() > maxPosition {
		return Slice{}, err
	}
	budget := int64(maxBytes)
	if first.Size > budget {
		if !minOneBatch {
			return Slice{}, nil
		}
		budget = first.Size
	}
	bound := min(limit, maxPosition)
	if budget < bound-first.Pos { // first.Pos+budget could overflow for a huge maxBytes
		bound = first.Pos + budget
	}
	sl := Slice{Start: first.Pos, End: first.End(), FirstOffset: first.BaseOffset, NextOffset: first.NextOffset()}
	from, fromNext, jumped := sl.End, sl.NextOffset, false
	if bound-sl.End > readJumpBytes {
		// Many small batches: jump to the last indexed batch that fits
		// instead of walking every header up to it.
		if h, ok := s.lastIndexedBatch(sl.End, bound, limit); ok {
			from, fromNext, jumped = h.End(), h.NextOffset(), true
		}
	}
	end, next, err := s.walkHeaders(from, fromNext, bound, limit)
	if err != nil && jumped && base.IsCorruption(err) {
		// As in translate: the entry led to bytes that frame as no
		// batch. The walk from the first batch tells whether the index
		// or the log is damaged.
		var err2 error
		if end, next, err2 = s.walkHeaders(sl.End, sl.NextOffset, bound, limit); err2 == nil {
			s.suspect("the walk from the batch an offset index entry named, ending at %d, met %v", from, err)
		}
		err = err2
	}
	if err != nil {
		return Slice{}, err
	}
	sl.End, sl.NextOffset = end, next
	return sl, nil
}

// walkHeaders is Read's walk over the headers from end, a batch boundary
// where offset next starts, to the last batch that ends at or before
// bound: it returns where that batch ends and the offset after it. A
// header whose base offset is below next does not frame as the next batch
// (offsets only grow in a log): a corruption error, which is also what
// tells Read that a damaged index entry led its jump inside a batch.
func (s *Segment) walkHeaders(end, next, bound, limit int64) (int64, int64, error) {
	m := s.mapping()
	for end < bound {
		// The common case in line: a v2 batch header in the mapping,
		// with decodeHeader's checks; anything else (legacy, unmapped,
		// damaged) goes through readHeader.
		if at := end; m != nil && at+batch.HeaderSize <= min(limit, int64(len(m))) && int8(m[at+hdrMagicAt]) == batch.Magic {
			h := m[at : at+batch.HeaderSize]
			size := int64(int32(binary.BigEndian.Uint32(h[hdrLengthAt:]))) + batch.LogOverhead
			delta := int64(int32(binary.BigEndian.Uint32(h[hdrLastOffsetDeltaAt:])))
			bo := int64(binary.BigEndian.Uint64(h[hdrBaseOffsetAt:]))
			if size >= batch.HeaderSize && size <= limit-at && delta >= 0 && bo >= next && bo <= maxOffset-delta {
				if at+size > bound {
					break
				}
				end, next = at+size, bo+delta+1
				continue
			}
		}
		h, err := s.readHeader(end, limit)
		if err != nil {
			return 0, 0, err
		}
		if h.BaseOffset < next {
			return 0, 0, base.CorruptionErrorf(s.LogPath(), end, "baseOffset",
				"batch at offset %d after one that ends at %d", h.BaseOffset, next-1)
		}
		if h.End() > bound {
			break
		}
		end, next = h.End(), h.NextOffset()
	}
	return end, next, nil
}

// readJumpBytes is the length of a read range past which Read looks the
// end up in the offset index (lastIndexedBatch) before walking headers.
const readJumpBytes = 16 << 10

// lastIndexedBatch returns the header of the last batch the offset index
// names that starts after from and ends at or before bound (both batch
// boundaries or bound a position limit), found by a binary search of the
// index by position: Read then walks headers only from there to bound, not
// over every batch of a long range of small ones. An entry is used only
// when the header at its position is a batch whose last offset is the
// entry's offset; ok is false when there is no such entry (or the index is
// suspect), and Read walks from from. REQUIRES: from <= bound <= limit.
func (s *Segment) lastIndexedBatch(from, bound, limit int64) (h BatchInfo, ok bool) {
	if s.indexSuspect.Load() {
		return BatchInfo{}, false
	}
	idx := s.offIdx
	// Entries only grow while a read lease is held (truncation takes the
	// exclusive lease), so entry j and those before it stay valid.
	j := idx.SearchPosition(bound) - 1
	// The batch at the last entry below bound may end past it; the one
	// before ends where a later batch starts, so below bound.
	for tries := 0; tries < 2 && j >= 0; tries, j = tries+1, j-1 {
		e := idx.Entry(j)
		if e.Position <= from {
			return BatchInfo{}, false
		}
		h, err := s.readHeader(e.Position, limit)
		if err != nil || h.LastOffset != e.Offset {
			return BatchInfo{}, false // an older append's entry, or a damaged one: walk
		}
		if h.End() <= bound {
			return h, true
		}
	}
	return BatchInfo{}, false
}

// Bytes returns the bytes [start, end) of the .log, which must lie below
// Size. When the .log is mapped they alias the mapping (zero copy, no
// allocation) and stay valid while the caller holds a reference and a read
// lease; they must not be modified. Otherwise they are read into scratch
// (grown if it is too short) and returned from it.
func (s *Segment) Bytes(start, end int64, scratch []byte) ([]byte, error) {
	if s.released.Load() {
		return nil, ErrClosed
	}
	if start < 0 || start > end || end > s.size.Load() {
		return nil, fmt.Errorf("%w: [%d, %d) of %d bytes", ErrOutOfRange, start, end, s.size.Load())
	}
	if err := s.use(); err != nil {
		return nil, err
	}
	defer s.unpin()
	if m := s.mapping(); m != nil && end <= int64(len(m)) {
		return m[start:end:end], nil
	}
	n := int(end - start)
	if cap(scratch) < n {
		scratch = make([]byte, n)
	}
	scratch = scratch[:n]
	if _, err := s.logFile.ReadAt(scratch, start); err != nil {
		return nil, fmt.Errorf("partlog/segment: read %s [%d, %d): %w", s.LogPath(), start, end, err)
	}
	return scratch, nil
}

// batchBytes returns the whole batch described by h.
func (s *Segment) batchBytes(h BatchInfo, scratch []byte) (batch.Batch, error) {
	b, err := s.Bytes(h.Pos, h.End(), scratch)
	return batch.Batch(b), err
}

// FindOffsetByTimestamp returns the first record whose timestamp is >= ts
// and whose offset is >= startOffset, with its timestamp (Kafka's
// findOffsetByTimestamp): the time index gives the largest entry at or
// below ts, the offset index the position of the batch holding
// max(that entry's offset, startOffset); from there batch headers are
// scanned for the first batch whose maxTimestamp is >= ts, and its records
// for the first qualifying one. found is false when no record qualifies.
func (s *Segment) FindOffsetByTimestamp(ts int64, startOffset int64) (offset, timestamp int64, found bool, err error) {
	defer mmap.Recover(mmap.Protect(), &err) // a fault becomes ErrFault
	if s.released.Load() {
		return 0, 0, false, ErrClosed
	}
	if err := s.use(); err != nil {
		return 0, 0, false, err
	}
	defer s.unpin()
	limit := s.size.Load()
	te := s.timeIdx.Lookup(ts)
	from := max(te.Offset, startOffset)
	pos := s.indexFloor(from, limit)
	if te.Timestamp < 0 && (te.Timestamp != index.NoTimestamp || te.Offset != s.base) {
		// Lookup's "no entry" answer is {NoTimestamp, base}; entries
		// themselves never hold a negative timestamp.
		s.suspect("time index entry %d→%d has a negative timestamp", te.Timestamp, te.Offset)
	} else if te.Timestamp >= 0 && !s.indexSuspect.Load() {
		// Verify the time entry: the batch holding its offset has its
		// timestamp as maxTimestamp.
		h, ok, err := s.translate(te.Offset, 0, limit)
		if err != nil {
			return 0, 0, false, err
		}
		if ok && (h.MaxTimestamp != te.Timestamp || h.BaseOffset > te.Offset) {
			s.suspect("time index entry %d→%d does not match the log", te.Timestamp, te.Offset)
		}
	}
	if s.indexSuspect.Load() {
		pos = 0
	}
	dec := decoderPool.Get().(*batch.Decoder)
	defer decoderPool.Put(dec)
	offset, timestamp, found, err = s.scanByTime(ts, startOffset, pos, limit, dec)
	if err == nil || pos == 0 || !base.IsCorruption(err) {
		return offset, timestamp, found, err
	}
	// As in translate: the index's position led to bytes that frame as
	// no batch; if the scan from the start does not meet them, the
	// index is what is damaged.
	offset, timestamp, found, err2 := s.scanByTime(ts, startOffset, 0, limit, dec)
	if err2 == nil {
		s.suspect("the scan from offset index position %d for timestamp %d met %v", pos, ts, err)
	}
	return offset, timestamp, found, err2
}

// scanByTime is FindOffsetByTimestamp's scan: the first record at or
// after startOffset with a timestamp >= ts, in the batches from pos (a
// batch boundary) to limit.
func (s *Segment) scanByTime(ts, startOffset, pos, limit int64, dec *batch.Decoder) (offset, timestamp int64, found bool, err error) {
	var scratch []byte
	for pos < limit {
		h, err := s.readHeader(pos, limit)
		if err != nil {
			return 0, 0, false, err
		}
		pos = h.End()
		if h.MaxTimestamp < ts || h.LastOffset < startOffset {
			continue
		}
		b, err := s.batchBytes(h, scratch)
		if err != nil {
			return 0, 0, false, err
		}
		if !s.Mapped() {
			scratch = b
		}
		off, rts, ok, err := firstRecordAtOrAfter(b, dec, ts, startOffset)
		if err != nil {
			return 0, 0, false, base.WithFile(err, s.LogPath(), h.Pos)
		}
		if ok {
			return off, rts, true, nil
		}
	}
	return 0, 0, false, nil
}
