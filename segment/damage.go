package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
)

// This file is the one definition of damage in a .log: the walk every
// recovery, check and dump uses (Recover and RecoverSealed, package log's
// pre-scan, Verify and header walks through Segment.Check,
// package log's crash repair, dumplog), and the segment's own loops over its
// framing: Open's header scan, index rebuilds and TruncateTo
// (Segment.scan), Batches and Headers. It decides, entry by entry from a
// position:
//
//   - a valid entry: a RecordBatch v2 that frames (a length of at least
//     its header, inside the file, at most the batch limit) with a header
//     and CRC-32C that check (batch.ValidateHeader; nothing is
//     decompressed), or a legacy magic 0/1 message that frames (at least
//     its magic's smallest size) with its CRC-32 (legacy.Entry's
//     ValidateHeader); offsets strictly above the previous entry's and
//     inside the segment's relative offsets;
//   - at the first entry that is not valid, what the damage is: a torn tail
//     (base.IsTornTail: nothing valid starts anywhere after it, outside the
//     damaged batch's own records: what a crash leaves at the end of a
//     file), corruption (a valid batch or legacy message follows), or
//     legacy data recovery cannot prove torn (ErrLegacyKept: a legacy
//     message that frames but fails its checks in a sealed segment or with
//     valid data after it, or damage a valid legacy message follows), which
//     is never cut.
//
// Bytes it cannot read are no verdict but the walk's error, wrapping
// ErrFault: a fault on a mapped page, or a read that finds the file ending
// before the size the walk was given (peek), the same loss without the
// mapping. So a media error or a file cut behind the walk's back is never
// taken for a torn tail and cut.

// CheckOptions says how Check walks a .log. The zero value checks every
// entry from the start of an active segment, with no size limit.
type CheckOptions struct {
	// MaxBatchSize, when > 0, is the largest entry that counts as valid.
	MaxBatchSize int
	// Sealed says the segment is not the last of its log: damage in it is
	// never a torn tail the caller may cut, and a legacy message there that
	// frames but fails its checks is kept (RecoverResult.Kept).
	Sealed bool
	// HeadersOnly checks framing and offsets only: each entry's header is
	// read, its CRC is not checked and a compressed legacy wrapper counts
	// from its own offset. fn then gets the header bytes, not the entry.
	HeadersOnly bool
	// From is the position the walk starts at: 0, or the start of a batch
	// (an offset index entry's position).
	From int64
	// KeepGoing reports an entry that frames but fails its integrity checks
	// (magic, header, CRC) to fn, with the failure, and goes on after it,
	// as a dump does; offsets are then not checked against each other (the
	// caller checks continuity its own way). The walk still ends at the
	// first entry that does not frame.
	KeepGoing bool
	// LegacyFirst, when set, is asked for the first offset of each
	// compressed legacy wrapper the walk reads whole (pos is its position;
	// its CRC has checked), before the walk decodes it itself: a caller
	// that decodes the inner messages anyway (package log's Verify) then
	// decompresses each wrapper once. ok false (the caller could not
	// decode them) leaves it to the walk's own decoding.
	LegacyFirst func(pos int64, e []byte) (first int64, ok bool)
}

// Check walks the entries of the .log at path, a segment whose base offset
// is baseOffset, without changing anything: the file is opened read-only,
// no index is read or written. It is the damage definition Recover applies
// (see package doc, "Recovery"), for callers that must decide before
// anything changes or only read. fn, when not nil, is called for every
// valid entry in order with its description and bytes (h.Pos is its
// position; b aliases a buffer valid during the call only), and under
// KeepGoing for each framed entry that fails its checks with bad set; an
// error from fn ends the walk and is returned.
//
// The result is what Recover would find: ValidBytes where the valid entries
// end, NextOffset after the last of them, Cause and Kept as Recover reports
// them, TruncatedBytes what a cut at ValidBytes would remove (0 when Kept).
// An I/O error is returned as err.
func Check(fsys vfs.FS, path string, baseOffset int64, opts CheckOptions, fn func(h BatchInfo, b batch.Batch, bad error) error) (RecoverResult, error) {
	f, err := orOS(fsys).Open(path)
	if err != nil {
		return RecoverResult{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return RecoverResult{}, err
	}
	window := windowFor(st.Size())
	if opts.HeadersOnly {
		window = batch.HeaderSize // a header a read: the rest is skipped
	}
	src := &logSource{path: path, base: baseOffset, size: st.Size(), r: f, win: make([]byte, 0, window), wrapperFirst: opts.LegacyFirst}
	if opts.From < 0 || opts.From > src.size {
		return RecoverResult{}, fmt.Errorf("partlog/segment: check %s from position %d of %d", path, opts.From, src.size)
	}
	w, err := src.walk(walkOptions{maxBatchSize: opts.MaxBatchSize, sealed: opts.Sealed, headers: opts.HeadersOnly,
		from: opts.From, goOn: opts.KeepGoing}, fn)
	if err != nil {
		return RecoverResult{}, err
	}
	return w.result(src.size), nil
}

// Check is the package's Check over the segment's own bytes: the entries
// of [0, Size()), the bytes the segment serves, read through its mapping
// when it covers them and with reads of its open .log otherwise (opts.From,
// fn and the result as for Check; b aliases the mapping or a buffer and is
// valid during the call only). It changes nothing and takes no lease (the
// caller keeps truncations away, as package log does under its lock); it
// keeps the files open under a segment budget while it runs.
//
// A media fault is an error, never damage: a fault on a mapped page (the
// walk and fn run under the fault guard, see the package doc) or a read
// that finds the file ending before Size() (the same loss met without the
// mapping) returns an error wrapping ErrFault (a *FaultError naming the
// file and position), as Check and Recover return it, so a caller gets the
// same answer whether the segment is mapped or not.
func (s *Segment) Check(opts CheckOptions, fn func(h BatchInfo, b batch.Batch, bad error) error) (RecoverResult, error) {
	if s.released.Load() {
		return RecoverResult{}, ErrClosed
	}
	if err := s.use(); err != nil {
		return RecoverResult{}, err
	}
	defer s.unpin()
	size := s.Size()
	if opts.From < 0 || opts.From > size {
		return RecoverResult{}, fmt.Errorf("partlog/segment: check %s from position %d of %d", s.LogPath(), opts.From, size)
	}
	src := s.sourceOf(size)
	src.wrapperFirst = opts.LegacyFirst
	w, err := src.walk(walkOptions{maxBatchSize: opts.MaxBatchSize, sealed: opts.Sealed, headers: opts.HeadersOnly,
		from: opts.From, goOn: opts.KeepGoing}, fn)
	if err != nil {
		return RecoverResult{}, err
	}
	return w.result(size), nil
}

// checkWindow is how much of a .log the walk reads at a time when the
// file is not mapped.
const checkWindow = 1 << 20

// windowFor is the read window for a .log of size bytes: checkWindow, or
// the whole file when smaller.
func windowFor(size int64) int {
	return int(max(min(size, checkWindow), legacyPeekSize))
}

// logSource is a .log as the damage walk reads it: path and base offset
// for errors and offset checks, and its bytes, through the mapping when it
// covers them or by reads into a window.
type logSource struct {
	path string
	base int64
	size int64       // the file's length; nothing at or past it is read
	m    []byte      // the mapping, or nil
	r    io.ReaderAt // the file
	win  []byte      // file bytes [lo, lo+len(win))
	lo   int64
	// wrapperFirst is CheckOptions.LegacyFirst (legacyWalkFirst).
	wrapperFirst func(pos int64, e []byte) (int64, bool)
}

// sourceOf is the segment's .log as a logSource of fileSize bytes.
func (s *Segment) sourceOf(fileSize int64) *logSource {
	src := &logSource{path: s.LogPath(), base: s.base, size: fileSize, m: s.mapping(), r: s.logFile}
	if src.m == nil || int64(len(src.m)) < fileSize {
		src.win = make([]byte, 0, windowFor(fileSize))
	}
	return src
}

// peek returns n bytes of the .log at pos: the mapping, or the window
// (refilled from pos when it does not hold them). The bytes are valid until
// the next peek. Asking past src.size is a torn tail: the bytes are not
// there. A read that finds the file ending before src.size is not damage
// but a fault (mmap.ReadFault, wrapping ErrFault): the file lost bytes the
// walk was told it holds, the loss a read through the mapping meets as
// SIGBUS, which walk reports as the same error.
func (src *logSource) peek(pos int64, n int) ([]byte, error) {
	end := pos + int64(n)
	if end > src.size {
		return nil, base.TornTailErrorf(src.path, pos, "read", "file ends before %d bytes at %d", n, pos)
	}
	if src.m != nil && end <= int64(len(src.m)) {
		return src.m[pos:end:end], nil
	}
	if pos >= src.lo && end <= src.lo+int64(len(src.win)) {
		return src.win[pos-src.lo : end-src.lo : end-src.lo], nil
	}
	if cap(src.win) < n {
		src.win = make([]byte, 0, n)
	}
	fill := min(int64(cap(src.win)), src.size-pos)
	src.win = src.win[:fill]
	src.lo = pos
	if got, err := src.r.ReadAt(src.win, pos); err != nil && !(errors.Is(err, io.EOF) && got == len(src.win)) {
		src.win = src.win[:0]
		if errors.Is(err, io.EOF) {
			return nil, mmap.ReadFault(src.path, pos+int64(got))
		}
		return nil, fmt.Errorf("partlog/segment: read %s at %d: %w", src.path, pos, err)
	}
	return src.win[:n:n], nil
}

// walkOptions are CheckOptions for the walk (see there); headers is
// HeadersOnly, goOn KeepGoing. Two more serve the segment's own header
// scans (Segment.scan: index rebuild, open, truncation):
type walkOptions struct {
	maxBatchSize int
	sealed       bool
	headers      bool
	from         int64
	goOn         bool
	// stop ends the walk at the first entry that is not valid with that
	// entry's error (wrapping batch.ErrCorrupt) instead of classifying the
	// damage: no search of the bytes after it, nothing read past it.
	stop bool
	// wrapperBase, with headers, reads a compressed legacy wrapper whole
	// to count it from its first inner offset (as Recover does), so its
	// offsets are checked as strictly as a full walk checks them.
	wrapperBase bool
	// control, with headers, reads a control batch (a transaction marker)
	// whole and checks it as a full walk does, CRC included, so its one
	// record says which marker it holds (Segment.Headers).
	control bool
	// unguarded runs the walk, and fn, outside the fault guard: for a
	// source without a mapping whose fn runs a consumer's loop body
	// (Batches), whose panics are its own.
	unguarded bool
}

// walkResult is what the walk found: valid entries end at valid, the next
// offset after them; cause and kept as in RecoverResult.
type walkResult struct {
	valid, next int64
	cause       error
	kept        bool
}

// result is w as a RecoverResult of a file of size bytes.
func (w walkResult) result(size int64) RecoverResult {
	r := RecoverResult{ValidBytes: w.valid, TruncatedBytes: size - w.valid, NextOffset: w.next, Cause: w.cause, Kept: w.kept}
	if w.kept {
		r.TruncatedBytes = 0
	}
	return r
}

// walk checks the entries of src from o.from (see CheckOptions and the
// top of this file), calling fn for each valid one (and, under goOn, each
// framed one that fails its checks), and classifies the first damage.
func (src *logSource) walk(o walkOptions, fn func(h BatchInfo, b batch.Batch, bad error) error) (_ walkResult, err error) {
	if !o.unguarded {
		defer mmap.Recover(mmap.Protect(), &err) // a fault on the mapping becomes ErrFault
	}
	pos, prevLast := o.from, src.base-1
	res := walkResult{next: src.base}
	for pos < src.size {
		b, headers, err := src.readBatch(pos, o.maxBatchSize, o.headers, o.control)
		var h BatchInfo
		framed := err == nil
		if err == nil {
			h, err = src.checkEntry(b, pos, prevLast, headers, o.goOn, o.wrapperBase)
		}
		if err != nil && !base.IsCorruption(err) {
			return res, err
		}
		if err != nil && o.stop {
			res.valid = pos
			return res, err
		}
		if err == nil || (o.goOn && framed) {
			if err != nil {
				h = src.describeBad(b, pos)
			}
			if fn != nil {
				if ferr := fn(h, b, err); ferr != nil {
					return res, ferr
				}
			}
			if err == nil {
				prevLast = h.LastOffset
				res.next = h.NextOffset()
			}
			pos += h.Size
			continue
		}
		isLegacy := false
		if framed {
			isLegacy = legacy.Is(b)
		} else {
			var perr error
			if isLegacy, perr = src.legacyOverrun(pos); perr != nil {
				return res, perr
			}
		}
		if res.cause, res.kept, err = src.classify(err, pos, prevLast, o.maxBatchSize, isLegacy, o.sealed); err != nil {
			return res, err
		}
		break
	}
	res.valid = pos
	return res, nil
}

// legacyOverrun reports whether the entry at pos, which did not frame, is
// a legacy message whose size runs past the end of the file: its whole
// fixed header is there (legacy.Is) and only its key and value are
// missing. Partlog never writes legacy messages, so such an entry is no
// torn write of its own: classify keeps it where it keeps a framed one.
func (src *logSource) legacyOverrun(pos int64) (bool, error) {
	rest := src.size - pos
	if rest < legacy.MinSize {
		return false, nil
	}
	over, err := src.peek(pos, legacy.MinSize)
	if err != nil {
		return false, err
	}
	return legacy.Is(over) && src.entrySize(over) > rest, nil
}

// describeBad describes the framed entry b at pos that failed its checks:
// its header fields when they decode, else offsets -1.
func (src *logSource) describeBad(b []byte, pos int64) BatchInfo {
	size := src.entrySize(b)
	if h, err := decodeHeader(src.path, b[:min(len(b), batch.HeaderSize)], pos, src.size); err == nil {
		h.legacyWrapper = false
		return h
	}
	return BatchInfo{Pos: pos, Size: size, BaseOffset: -1, LastOffset: -1, MaxTimestamp: batch.NoTimestamp, Magic: int8(b[hdrMagicAt])}
}

// entrySize is the size the length field of the framed entry b (at least
// its first 12 bytes) gives.
func (src *logSource) entrySize(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[hdrLengthAt:]))) + batch.LogOverhead
}

// readBatch returns the entry at pos (with headers, only its first bytes:
// up to a v2 header, unless control and it is a v2 control batch), which
// frames: at least its magic's smallest size, inside the file, at most
// maxBatchSize when > 0; short says only its first bytes were read.
// Lengths are checked before anything is read whole. A legacy message
// (magic 0 or 1) is returned whole as well, its length checked against the
// smallest message of its magic.
func (src *logSource) readBatch(pos int64, maxBatchSize int, headers, control bool) (_ batch.Batch, short bool, _ error) {
	rest := src.size - pos
	if rest < legacyPeekSize {
		return nil, false, base.TornTailErrorf(src.path, pos, "batchLength", "%d bytes left, a batch needs %d", rest, batch.LogOverhead)
	}
	over, err := src.peek(pos, int(min(rest, legacy.MinSize)))
	if err != nil {
		return nil, false, err
	}
	size := src.entrySize(over)
	minSize := int64(batch.HeaderSize)
	if legacy.Is(over) {
		minSize = legacyMinSize(int8(over[hdrMagicAt]))
	}
	switch {
	case size < minSize:
		return nil, false, base.CorruptionErrorf(src.path, pos+hdrLengthAt, "batchLength", "batch of %d bytes is shorter than its header", size)
	case size > rest:
		return nil, false, base.TornTailErrorf(src.path, pos+hdrLengthAt, "batchLength", "batch of %d bytes overruns the file (%d bytes left)", size, rest)
	case maxBatchSize > 0 && size > int64(maxBatchSize):
		return nil, false, base.CorruptionErrorf(src.path, pos+hdrLengthAt, "batchLength", "batch of %d bytes exceeds the limit of %d", size, maxBatchSize)
	}
	if headers {
		// The v2 header holds the attributes (size >= HeaderSize here).
		hb, err := src.peek(pos, int(min(size, batch.HeaderSize)))
		if err != nil {
			return nil, false, err
		}
		if !control || int8(hb[hdrMagicAt]) != batch.Magic || !batch.Batch(hb).Attributes().IsControl() {
			return batch.Batch(hb), true, nil
		}
	}
	b, err := src.peek(pos, int(size))
	return batch.Batch(b), false, err
}

// checkEntry is the check of the framed entry b at pos (Kafka's
// LogSegment.recover): a RecordBatch v2's header and CRC-32C
// (batch.ValidateHeader), or a legacy message's framing and CRC-32
// (legacy.Entry.ValidateHeader); then, unless noOffsets, the offsets
// against prevLast and the segment's relative range. With headers, b is
// the entry's first bytes and only the header fields are checked (a
// compressed legacy wrapper from its first inner offset with
// wrapperBase, else from its own). It never
// decompresses a v2 batch: a batch whose CRC matches is byte for byte what
// the writer appended, and the writer validated its records before
// appending it. (A decompression limit here would cut valid, very
// compressible batches out of the log.) Only a legacy wrapper is
// decompressed, to learn its first offset, and not with headers.
func (src *logSource) checkEntry(b batch.Batch, pos, prevLast int64, headers, noOffsets, wrapperBase bool) (BatchInfo, error) {
	var h BatchInfo
	if headers {
		var err error
		if h, err = decodeHeader(src.path, b, pos, src.size); err != nil {
			return BatchInfo{}, err
		}
		if h.legacyWrapper && wrapperBase {
			// The wrapper whole (a peek at the same position: b keeps
			// its bytes) for its first inner offset.
			w, err := src.peek(pos, int(h.Size))
			if err != nil {
				return BatchInfo{}, err
			}
			h.BaseOffset = legacyFirst(legacy.Entry(w))
		}
		h.legacyWrapper = false // else counted from the wrapper's own offset
	} else if legacy.Is(b) {
		e := legacy.Entry(b)
		m := e.Magic()
		if err := e.ValidateHeader(); err != nil {
			return BatchInfo{}, base.WithFile(err, src.path, pos)
		}
		if e.Offset() < 0 || e.Offset() > maxOffset {
			return BatchInfo{}, base.CorruptionErrorf(src.path, pos, "offset", "offset %d", e.Offset())
		}
		h = BatchInfo{Pos: pos, Size: int64(len(b)), BaseOffset: src.legacyWalkFirst(pos, e), LastOffset: e.Offset(),
			MaxTimestamp: e.Timestamp(), Magic: m}
	} else {
		if err := b.ValidateHeader(); err != nil {
			return BatchInfo{}, base.WithFile(err, src.path, pos)
		}
		// baseOffset lies outside the CRC: damage to it passes the check
		// above, and base + lastOffsetDelta must not wrap (decodeHeader's
		// check: the next offset, LastOffset + 1, fits an int64).
		if bo := b.BaseOffset(); bo < 0 || bo > maxOffset-int64(b.LastOffsetDelta()) {
			return BatchInfo{}, base.CorruptionErrorf(src.path, pos, "baseOffset", "offset %d with lastOffsetDelta %d", bo, b.LastOffsetDelta())
		}
		h = BatchInfo{Pos: pos, Size: int64(len(b)), BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(),
			MaxTimestamp: b.MaxTimestamp(), Magic: batch.Magic}
	}
	if noOffsets {
		return h, nil
	}
	return h, checkOffsets(src.path, src.base, h, prevLast)
}

// checkOffsets checks that the batch h of the .log at path, whose base
// offset is segBase, follows prevLast and fits the segment's relative
// offsets.
func checkOffsets(path string, segBase int64, h BatchInfo, prevLast int64) error {
	switch {
	case h.BaseOffset <= prevLast:
		return base.CorruptionErrorf(path, h.Pos, "baseOffset",
			"offset %d does not follow offset %d", h.BaseOffset, prevLast)
	case h.BaseOffset < segBase || h.LastOffset-segBase > math.MaxInt32:
		return base.CorruptionErrorf(path, h.Pos, "baseOffset",
			"batch [%d, %d] outside the relative offsets of base %d", h.BaseOffset, h.LastOffset, segBase)
	}
	return nil
}

// classify turns the corruption err found at pos into a recovery Cause.
// The damage is a torn tail (an incomplete write at the end of the file:
// what a crash leaves) when no valid batch starts anywhere after pos: a
// short or zeroed rest of the file, a last batch cut short or failing its
// CRC, or bytes that are not batches at all. When a valid batch (framing,
// magic and CRC) does start after pos, data follows the damage and it
// is corruption.
//
// The search skips the damaged batch's own payload: when the entry at pos
// has an intact, uncompressed v2 header (payloadOf), a batch or legacy
// message lying inside one of its records (a record value may hold raw
// message sets, as a mirror stores them) is its data, not data after it.
// Its records are walked by their length prefixes, at most the header's
// record count of them and not past the end the header claims, so a
// damaged length field does not hide the entries that really follow.
//
// kept reports data recovery cannot prove torn (law 12), never to be cut:
// the entry at pos framed as a legacy message (legacy) and data follows it
// or the segment is sealed; or a valid legacy message follows the damage.
// Partlog never writes legacy messages, so no crash of its own can have
// left one half-written in the middle of a log.
func (src *logSource) classify(err error, pos, prevLast int64, maxBatchSize int, legacy, sealed bool) (cause error, kept bool, ioErr error) {
	follows, legacyFollows, ioErr := src.validBatchAfter(pos, prevLast, maxBatchSize)
	if ioErr != nil {
		return nil, false, ioErr
	}
	kept = legacyFollows || (legacy && (sealed || follows))
	switch {
	case kept:
		return keptError(src.path, pos, err), true, nil
	case base.IsTornTail(err) && !follows:
		return err, false, nil
	}
	// The cause names the field that failed (err's), and says which.
	at := &base.CorruptionError{File: src.path, Pos: pos, Field: "batch", Err: err}
	if ce := (*base.CorruptionError)(nil); errors.As(err, &ce) {
		at = &base.CorruptionError{File: ce.File, Pos: ce.Pos, Field: ce.Field, Err: ce.Err}
	}
	if follows {
		// Not a torn tail, even if err said so: data follows.
		at.Err = fmt.Errorf("%w: %v; valid batches follow", base.ErrCorrupt, at.Err)
		return at, false, nil
	}
	at.Err = fmt.Errorf("%w: nothing valid follows (%w)", base.ErrTornTail, at.Err)
	return at, false, nil
}

// keptError is the Cause for legacy data recovery cannot prove torn at
// pos of file, found because of err: it wraps ErrLegacyKept, and err unless
// err is a torn tail (a kept cause is never one).
func keptError(file string, pos int64, err error) error {
	format := "%w: legacy data recovery cannot prove torn, kept (%w)"
	if base.IsTornTail(err) {
		format = "%w: legacy data recovery cannot prove torn, kept (%v)"
	}
	return &base.CorruptionError{File: file, Pos: pos, Field: "legacy", Err: fmt.Errorf(format, ErrLegacyKept, err)}
}

// payload walks the records of a damaged v2 batch (see classify): in
// tail, which starts at file position tailPos, records from next, at most
// left more of them, none past end.
type payload struct {
	tail     []byte
	tailPos  int64
	next     int64 // file position of the next record's length prefix
	end      int64 // the batch's claimed end, at most the file's
	left     int64 // records not walked yet
	from, to int64 // the last record walked: [from, to)
}

// payloadOf returns a walk over the records of the entry at pos (tail is
// the file from pos) when it has an intact, uncompressed v2 header: magic
// 2, a length of at least a header and at most the batch limit, offsets
// following prevLast inside the segment's relative offsets. Otherwise nil.
func (src *logSource) payloadOf(tail []byte, pos, prevLast int64, maxBatchSize int) *payload {
	if len(tail) < batch.HeaderSize {
		return nil
	}
	hb := tail[:batch.HeaderSize] // tail starts at pos
	if int8(hb[hdrMagicAt]) != batch.Magic || batch.Batch(hb).Attributes().Compression() != batch.CompressionNone {
		return nil
	}
	h, err := decodeHeader(src.path, hb, pos, math.MaxInt64)
	limit := int64(batch.MaxBatchSize)
	if maxBatchSize > 0 {
		limit = min(limit, int64(maxBatchSize))
	}
	n := int64(int32(binary.BigEndian.Uint32(hb[batch.HeaderSize-4:])))
	if err != nil || h.Size > limit || n <= 0 || checkOffsets(src.path, src.base, h, prevLast) != nil {
		return nil
	}
	return &payload{tail: tail, tailPos: pos, next: pos + batch.HeaderSize,
		end: min(pos+h.Size, src.size), left: n}
}

// contains reports whether file position p (called with p increasing)
// lies inside a record of the walked payload.
func (w *payload) contains(p int64) bool {
	if w == nil {
		return false
	}
	for p >= w.to && w.left > 0 && w.next < w.end {
		l, n := binary.Varint(w.tail[w.next-w.tailPos:])
		if n <= 0 || l < 0 {
			w.left = 0
			break
		}
		w.from, w.to = w.next, min(w.next+int64(n)+l, w.end)
		w.next = w.to
		w.left--
	}
	return p >= w.from && p < w.to
}

// maxResyncBytes bounds the tail validBatchAfter reads when the .log is not
// mapped; a longer tail counts as followed by data (corruption), the
// conservative answer.
const maxResyncBytes = 64 << 20

// validBatchAfter reports whether a batch that frames, has magic 2, offsets
// above prevLast inside the segment's relative offsets and a matching
// CRC-32C, or a legacy message that frames and matches its CRC-32, starts
// anywhere in (pos, size) outside the records of the damaged batch at
// pos (classify); legacy whether such a legacy message does.
// The bytes checksummed are bounded by a budget proportional to the tail,
// so that hostile bytes cannot make the search quadratic; past the budget
// the answer is the conservative true (corruption).
func (src *logSource) validBatchAfter(pos, prevLast int64, maxBatchSize int) (follows, legacyData bool, err error) {
	rest := src.size - pos
	if rest-1 < legacy.MinSize {
		return false, false, nil
	}
	if (src.m == nil || src.size > int64(len(src.m))) && rest > maxResyncBytes {
		return true, false, nil
	}
	tail, err := src.peek(pos, int(rest)) // the file from pos
	if err != nil {
		if base.IsCorruption(err) {
			return false, false, nil
		}
		return false, false, err
	}
	own := src.payloadOf(tail, pos, prevLast, maxBatchSize)
	budget := 4*int64(len(tail)) + 1<<20
	for p := 1; p+legacy.MinSize <= len(tail); p++ {
		m := int8(tail[p+hdrMagicAt])
		isLegacy := legacy.IsMagic(m)
		if m != batch.Magic && !isLegacy {
			continue
		}
		h, err := decodeHeader(src.path, tail[p:min(p+batch.HeaderSize, len(tail))], 0, int64(len(tail)-p))
		if err != nil || checkOffsets(src.path, src.base, h, prevLast) != nil || own.contains(pos+int64(p)) {
			continue
		}
		if budget -= h.Size; budget < 0 {
			return true, false, nil
		}
		if isLegacy {
			if legacy.Entry(tail[p:p+int(h.Size)]).ValidateHeader() == nil {
				return true, true, nil
			}
			continue
		}
		if batch.Batch(tail[p:p+int(h.Size)]).ValidateHeader() == nil {
			return true, src.legacyFrom(tail, p+int(h.Size)), nil
		}
	}
	return false, false, nil
}

// legacyFrom reports whether, walking the entries of tail that frame from
// p on (after a valid batch), a legacy message that matches its CRC-32
// comes before the framing stops: legacy data a cut at the damage would
// destroy.
func (src *logSource) legacyFrom(tail []byte, p int) bool {
	for p+legacy.MinSize <= len(tail) {
		h, err := decodeHeader(src.path, tail[p:min(p+batch.HeaderSize, len(tail))], 0, int64(len(tail)-p))
		if err != nil {
			return false
		}
		if legacy.IsMagic(h.Magic) && legacy.Entry(tail[p:p+int(h.Size)]).ValidateHeader() == nil {
			return true
		}
		p += int(h.Size)
	}
	return false
}
