package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/segment"
)

// SegmentInfo describes one segment of the partition, for tools and tests.
type SegmentInfo struct {
	// BaseOffset is the offset in the segment's file names.
	BaseOffset int64
	// NextOffset is the offset after its last batch (BaseOffset when empty).
	NextOffset int64
	// Size is the .log's size in bytes.
	Size int64
	// MaxTimestamp is the largest batch maxTimestamp, -1 when none.
	MaxTimestamp int64
	// Active is true for the last segment, the one appends go to.
	Active bool
}

// SegmentInfos describes the current segments in ascending base offset
// order. It returns nil only once the partition is closed.
func (p *Partition) SegmentInfos() []SegmentInfo {
	if p.closed.Load() {
		return nil
	}
	p.showBuffered() // writebehind.go
	snap, err := p.acquireSnapshot()
	if err != nil {
		return nil // closed
	}
	defer p.releaseSnapshot(snap)
	out := make([]SegmentInfo, len(snap.list))
	for i, seg := range snap.list {
		ts, _ := seg.MaxTimestamp()
		out[i] = SegmentInfo{BaseOffset: seg.BaseOffset(), NextOffset: seg.NextOffset(),
			Size: seg.Size(), MaxTimestamp: ts, Active: i == len(snap.list)-1}
	}
	return out
}

// Verify checks the partition's files against the invariants the package
// maintains, and returns the first violation:
//
//   - every batch frames, has magic 2 and a valid CRC-32C and records, or
//     is a legacy message (magic 0 or 1, from Kafka before 0.11) with a
//     valid CRC-32 and inner messages;
//   - offsets only grow: each batch starts after the previous one's last
//     offset, across segments too, and at or above its segment's base
//     offset; the active segment ends at the log end offset (batches are
//     contiguous in a log partlog wrote and never compacted, which
//     logtest.Check verifies against its model; compaction and Kafka's
//     compacted logs leave gaps);
//   - every offset index entry points at the start of a batch and names an
//     offset inside that batch or, as Kafka before 3.0 indexed an append
//     of many batches, a later one; entries increase;
//   - every time index entry names an offset inside the segment whose
//     batch has the entry's timestamp as maxTimestamp and is the first batch
//     of the segment to reach it; entries increase;
//   - (the active segment's indexes are preallocated and their entry count
//     is not on disk, so there the entries are checked up to the first one
//     that does not fit, which is taken as the end);
//   - every .txnindex is well formed (whole 34-byte version-0 entries),
//     its entries in marker order, each naming an offset of the segment
//     (firstOffset <= lastOffset, lastStableOffset <= lastOffset+1) where,
//     unless compaction removed it, an ABORT marker of the entry's producer
//     lies; and every transaction the batches show aborted in the segment
//     (a producer's transactional batches, then its ABORT marker) has its
//     entry, with a first offset at or below the transaction's first
//     batch (compaction may remove an aborted transaction's batches);
//   - log start <= high watermark <= log end.
//
// Verify reads whole segments (it is meant for tests and tools, not hot
// paths) and blocks appends while it runs. Each .log is walked with the
// walk that defines damage for recovery (segment.Check), each valid
// batch's records validated on top. Errors about file contents wrap
// batch.ErrCorrupt and name the file and position; bytes that cannot be
// read (a fault on a mapped page, or a file cut behind the partition's
// back) are an error wrapping ErrFault, and the partition goes offline.
func (p *Partition) Verify() error {
	p.lockWriter()
	defer p.mu.Unlock()
	if p.mu.closed {
		return ErrClosed
	}
	if err := p.offlineErr(); err != nil {
		return err
	}
	// The index files are read by the base's names, which a segment a
	// roll adopted carries only once settled (spare.go).
	if err := p.dur.spare.settleAdoptions(); err != nil {
		return p.noteFault(err)
	}
	start, hw, end := p.logStart.Load(), p.mu.hw, p.mu.end
	if start > hw.Offset || hw.Offset > end.Offset {
		return base.AssertionFailedf("partlog/log: offsets out of order: log start %d, high watermark %d, log end %d", start, hw.Offset, end.Offset)
	}
	snap := p.segs.Load()
	v := newVerifier(p.cfg.FS, p.dir)
	for _, seg := range snap.list {
		if err := v.checkSegment(seg); err != nil {
			return p.noteFault(err)
		}
	}
	active := snap.active()
	if v.next > end.Offset {
		return base.AssertionFailedf("partlog/log: last batch ends before %d, log end offset is %d", v.next, end.Offset)
	}
	// The log end is the active segment's next offset, or the log start
	// offset when a truncation into a compaction gap left nothing above it.
	if want := max(active.NextOffset(), start); end.Offset != want {
		return base.AssertionFailedf("partlog/log: active segment %d ends at %d, log end offset is %d", active.BaseOffset(), active.NextOffset(), end.Offset)
	}
	return nil
}

// verifyEntry validates the records of the entry b, which the walk h
// describes found valid (framing, header, CRC, offsets): a RecordBatch
// v2's records (batch.Batch.ValidateBody: Validate without the header and
// CRC the walk checked; decompressed, every record framed), or
// a legacy message's key and value or, for a compressed wrapper, its inner
// messages (lv.check: batch.Decoder.ValidateLegacy without the framing and
// CRC-32 the walk checked; the wrapper decompressed once, by the walk's
// LegacyFirst). It returns what checkSegment keeps of it, without pos: a
// legacy message's offsets are the walk's (a wrapper's first is its first
// inner message's, as the segment counts it).
func verifyEntry(h segment.BatchInfo, b batch.Batch, dec *batch.Decoder, lv *legacyVerify) (verifiedBatch, error) {
	if legacy.IsMagic(h.Magic) {
		if err := lv.check(h.Pos, b, dec); err != nil {
			return verifiedBatch{}, err
		}
		return verifiedBatch{base: h.BaseOffset, last: h.LastOffset, maxTS: h.MaxTimestamp}, nil
	}
	// The walk checked the header, CRC included (ValidateHeader): the
	// records are what is left to check.
	if _, err := b.ValidateBody(); err != nil {
		return verifiedBatch{}, err
	}
	return verifiedBatch{base: b.BaseOffset(), last: b.LastOffset(), maxTS: b.MaxTimestamp()}, nil
}

// legacyVerify decodes the legacy messages of Verify's walk once each: the
// walk asks first for a compressed wrapper's first offset (first, its
// CheckOptions.LegacyFirst), which decodes and checks the inner messages
// and keeps the outcome for check, called on the same entry next.
type legacyVerify struct {
	recs []batch.Record // decoding scratch
	// at is the position of the wrapper first decoded (-1: none), err
	// what its decoding found.
	at  int64
	err error
}

// first decodes the compressed wrapper e at pos with every check of
// batch.Decoder.ValidateLegacy but the outer CRC (the walk's), keeps the
// outcome for check, and returns the first inner offset; ok is false when
// the wrapper does not decode (the walk then counts it as it does without
// Verify).
func (lv *legacyVerify) first(dec *batch.Decoder, pos int64, e []byte) (int64, bool) {
	recs, err := dec.AppendLegacyRecords(lv.recs[:0], e, true)
	lv.recs = recs[:0]
	lv.at, lv.err = pos, err
	if err != nil {
		return 0, false
	}
	return recs[0].Offset, true
}

// check validates the legacy message b at pos, which the walk found valid
// (framing and CRC-32): the outcome first kept for a compressed wrapper,
// else b's decoding with the inner checks of ValidateLegacy.
func (lv *legacyVerify) check(pos int64, b []byte, dec *batch.Decoder) error {
	if lv.at == pos {
		lv.at = -1
		return lv.err
	}
	recs, err := dec.AppendLegacyRecords(lv.recs[:0], b, true)
	lv.recs = recs[:0]
	return err
}

// verifier is Verify's walk over the segments, oldest first: each .log
// walked with the walk that defines damage and its records validated, the
// offsets checked across segments, each index checked against the batches,
// the transactions replayed from segment to segment. It reads the
// segments it is given and the index files by their names in dir through
// fs, and nothing else of the partition: Verify holds mu while it runs, so
// no writer changes the files under it. One walk only; not safe for
// concurrent use.
type verifier struct {
	// fs and dir are set by newVerifier and never change.
	fs  vfs.FS
	dir string
	// next is the offset the next segment's batches must start at or
	// after (-1 before the first segment): the offset after the last
	// batch checked, or the first segment's base while none was.
	next int64
	// txns is the transactions' replay.
	txns verifyTxns
}

// newVerifier returns a walk over the segments of the partition in dir.
func newVerifier(fs vfs.FS, dir string) *verifier {
	return &verifier{fs: fs, dir: dir, next: -1, txns: verifyTxns{open: map[int64]int64{}}}
}

// verifiedBatch is what checkSegment remembers of a batch.
type verifiedBatch struct {
	pos, base, last, maxTS int64
}

// checkSegment checks seg, the segment after the ones checked before (its
// first batch must start at or after next), and moves next past it.
//
// The .log is walked by seg.Check, the walk that defines damage for
// recovery (framing, header, CRC, offsets increasing inside the segment):
// the first damage it finds is Verify's answer (a *base.CorruptionError
// naming the file and position, classified as recovery classifies it), and
// a media fault is the walk's error (wrapping ErrFault), never damage. Each
// valid entry's records are then validated, its offsets checked against
// the previous segment, and its transaction markers replayed.
func (v *verifier) checkSegment(seg *segment.Segment) error {
	next, txns := v.next, &v.txns
	logPath := seg.LogPath()
	if next >= 0 && seg.BaseOffset() < next {
		return base.CorruptionErrorf(logPath, 0, "baseOffset", "segment base %d, the previous segment ends before %d", seg.BaseOffset(), next)
	}
	var batches []verifiedBatch
	var dec batch.Decoder
	lv := legacyVerify{at: -1}
	txns.startSegment()
	opts := segment.CheckOptions{Sealed: seg.Sealed(), LegacyFirst: func(pos int64, e []byte) (int64, bool) { return lv.first(&dec, pos, e) }}
	res, err := seg.Check(opts, func(h segment.BatchInfo, b batch.Batch, _ error) error {
		vb, err := verifyEntry(h, b, &dec, &lv)
		if err != nil {
			return base.WithFile(err, logPath, h.Pos)
		}
		if want := max(next, seg.BaseOffset()); vb.base < want {
			return base.CorruptionErrorf(logPath, h.Pos, "baseOffset", "batch starts at %d, expected at least %d", vb.base, want)
		}
		vb.pos = h.Pos
		batches = append(batches, vb)
		if !legacy.IsMagic(h.Magic) {
			txns.observe(b, &dec)
		}
		next = vb.last + 1
		return nil
	})
	switch {
	case err != nil:
		if !base.IsCorruption(err) && !errors.Is(err, errFault) {
			err = fmt.Errorf("partlog/log: verify %s: %w", logPath, err)
		}
		return err
	case res.Cause != nil:
		return res.Cause
	}
	if len(batches) > 0 && seg.NextOffset() != next {
		return base.AssertionFailedf("partlog/log: segment %s reports next offset %d, its batches end before %d", logPath, seg.NextOffset(), next)
	}
	if err := v.offsetIndex(seg, batches); err != nil {
		return err
	}
	if err := v.timeIndex(seg, batches); err != nil {
		return err
	}
	if err := v.txnIndex(seg, batches); err != nil {
		return err
	}
	if next < 0 {
		next = seg.BaseOffset()
	}
	v.next = next
	return nil
}

// readIndexFile returns the first limit bytes (fewer if the file is
// shorter) of one of seg's index files. An index has at most one entry per
// batch (plus the final time entry), so the caller bounds limit by that and
// never reads a whole preallocated file.
func (v *verifier) readIndexFile(seg *segment.Segment, suffix string, limit int) (string, []byte, error) {
	path := filepath.Join(v.dir, segment.FileName(seg.BaseOffset(), suffix)+seg.Suffix())
	f, err := v.fs.Open(path)
	if err != nil {
		return path, nil, fmt.Errorf("partlog/log: verify: %w", err)
	}
	defer func() { _ = f.Close() }()
	if seg.Sealed() && seg.TrimPending() {
		// A sealed segment whose index trim the roll left to the
		// background: the file is still preallocated, and past its
		// entries lie zeros or entries a truncation dropped. Only the
		// entries count (the trim cuts the file to them).
		offEntries, timeEntries := seg.IndexEntries()
		switch suffix {
		case segment.IndexSuffix:
			limit = min(limit, offEntries*offsetEntrySize)
		case segment.TimeIndexSuffix:
			limit = min(limit, timeEntries*timeEntrySize)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)))
	if err != nil {
		return path, nil, fmt.Errorf("partlog/log: verify: read %s: %w", path, err)
	}
	return path, data, nil
}

// Index entry layouts (Kafka's, big-endian). Frozen.
const (
	offsetEntrySize = 8  // i32 relative offset, i32 position
	timeEntrySize   = 12 // i64 timestamp, i32 relative offset
)

// offsetIndex checks the .index of seg against its batches. The
// entries are read up to the first one that does not increase (an active
// segment's index is preallocated and zero past its entries).
func (v *verifier) offsetIndex(seg *segment.Segment, batches []verifiedBatch) error {
	path, data, err := v.readIndexFile(seg, segment.IndexSuffix, (len(batches)+1)*offsetEntrySize)
	if err != nil {
		return err
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i := 0; (i+1)*offsetEntrySize <= len(data); i++ {
		e := data[i*offsetEntrySize:]
		rel := int64(int32(binary.BigEndian.Uint32(e)))
		pos := int64(int32(binary.BigEndian.Uint32(e[4:])))
		if i > 0 && rel <= prevRel {
			break // the unused tail
		}
		at := int64(i * offsetEntrySize)
		j, ok := findBatchAt(batches, pos)
		off := seg.BaseOffset() + rel
		bad := ""
		switch {
		case pos <= prevPos:
			bad = fmt.Sprintf("position %d after %d", pos, prevPos)
		case !ok:
			bad = fmt.Sprintf("position %d is not a batch start", pos)
		case off < batches[j].base:
			bad = fmt.Sprintf("offset %d below its batch [%d, %d]", off, batches[j].base, batches[j].last)
		case off > batches[j].last:
			// Kafka before 3.0 indexed an append of many batches (a
			// follower's) by its last offset, at its first batch.
			if _, held := findBatchHolding(batches, off); !held {
				bad = fmt.Sprintf("offset %d after its batch [%d, %d] is in no batch of the segment", off, batches[j].base, batches[j].last)
			}
		}
		if bad != "" {
			if !seg.Sealed() {
				// An active segment's index is preallocated: past its
				// entries lie zeros or entries a truncation dropped.
				// Its entry count is not on disk (KAFKA-12734), so the
				// first entry that does not fit ends the check.
				break
			}
			return base.CorruptionErrorf(path, at, "index entry", "entry %d: %s", i, bad)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// timeIndex checks the .timeindex of seg against its batches.
func (v *verifier) timeIndex(seg *segment.Segment, batches []verifiedBatch) error {
	path, data, err := v.readIndexFile(seg, segment.TimeIndexSuffix, (len(batches)+2)*timeEntrySize)
	if err != nil {
		return err
	}
	// maxBefore[j] is the largest maxTimestamp of batches[0..j].
	maxBefore := make([]int64, len(batches))
	for j, b := range batches {
		maxBefore[j] = b.maxTS
		if j > 0 {
			maxBefore[j] = max(maxBefore[j], maxBefore[j-1])
		}
	}
	prevTS := int64(-1 << 63)
	for i := 0; (i+1)*timeEntrySize <= len(data); i++ {
		e := data[i*timeEntrySize:]
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int64(int32(binary.BigEndian.Uint32(e[8:])))
		if i > 0 && ts <= prevTS {
			break // the unused tail
		}
		at := int64(i * timeEntrySize)
		off := seg.BaseOffset() + rel
		j, ok := findBatchHolding(batches, off)
		bad := ""
		switch {
		case !ok:
			bad = fmt.Sprintf("offset %d is in no batch of the segment", off)
		case batches[j].maxTS != ts:
			bad = fmt.Sprintf("timestamp %d, the batch holding offset %d has maxTimestamp %d", ts, off, batches[j].maxTS)
		case j > 0 && maxBefore[j-1] >= ts:
			bad = fmt.Sprintf("timestamp %d at offset %d, an earlier batch already has %d", ts, off, maxBefore[j-1])
		}
		if bad != "" {
			if !seg.Sealed() {
				break // see offsetIndex
			}
			return base.CorruptionErrorf(path, at, "time index entry", "entry %d: %s", i, bad)
		}
		prevTS = ts
	}
	return nil
}

// findBatchAt returns the index of the batch starting at pos.
func findBatchAt(batches []verifiedBatch, pos int64) (int, bool) {
	lo, hi := 0, len(batches)
	for lo < hi {
		m := (lo + hi) / 2
		if batches[m].pos < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(batches) && batches[lo].pos == pos
}

// findBatchHolding returns the index of the batch whose offsets include off.
func findBatchHolding(batches []verifiedBatch, off int64) (int, bool) {
	lo, hi := 0, len(batches)
	for lo < hi {
		m := (lo + hi) / 2
		if batches[m].last < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(batches) && batches[lo].base <= off
}

// verifyTxns replays the transactions of the batches Verify walks, oldest
// first: which producers have an open transaction and from which offset,
// and the markers and aborted transactions of the segment being walked.
type verifyTxns struct {
	open    map[int64]int64 // producer id -> first offset of its open transaction
	markers map[int64]verifyMarker
	aborted []segment.AbortedTxn // ABORT markers of the segment ending a seen transaction
}

// verifyMarker is a transaction marker Verify saw: its producer, and
// whether it aborts.
type verifyMarker struct {
	pid   int64
	abort bool
}

// startSegment forgets the markers of the previous segment.
func (v *verifyTxns) startSegment() {
	v.markers = map[int64]verifyMarker{}
	v.aborted = v.aborted[:0]
}

// observe replays the valid RecordBatch b, as the producer state does: a
// transactional data batch opens its producer's transaction, a
// transaction marker ends it.
func (v *verifyTxns) observe(b batch.Batch, dec *batch.Decoder) {
	attrs := b.Attributes()
	if !attrs.IsTransactional() && !attrs.IsControl() {
		return // a control batch is a marker whatever its transactional bit
	}
	pid := b.ProducerID()
	if !attrs.IsControl() {
		if _, ok := v.open[pid]; !ok {
			v.open[pid] = b.BaseOffset()
		}
		return
	}
	if b.RecordsCount() == 0 {
		return // a marker compaction emptied
	}
	for r, err := range b.All(dec) {
		if err != nil {
			return
		}
		cr, err := batch.ParseControlRecord(r)
		if err != nil || !cr.Type.IsTxnMarker() {
			return
		}
		abort := cr.Type == batch.ControlAbort
		v.markers[b.BaseOffset()] = verifyMarker{pid: pid, abort: abort}
		if first, ok := v.open[pid]; ok && abort {
			v.aborted = append(v.aborted, segment.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.BaseOffset()})
		}
		delete(v.open, pid)
		return
	}
}

// txnIndex checks the .txnindex of seg against its batches and the
// aborted transactions the replay saw end in it (see Verify).
func (v *verifier) txnIndex(seg *segment.Segment, batches []verifiedBatch) error {
	txns := &v.txns
	path, data, err := v.readIndexFile(seg, segment.TxnIndexSuffix, (len(batches)+1)*segment.TxnIndexEntrySize)
	if errors.Is(err, fs.ErrNotExist) {
		err, data = nil, nil // no aborted transaction: Kafka creates it lazily
	}
	if err != nil {
		return err
	}
	entries, err := segment.DecodeTxnIndex(path, data)
	if err != nil {
		return err
	}
	if len(entries) > len(batches) {
		return base.CorruptionErrorf(path, int64(len(batches)*segment.TxnIndexEntrySize), "txnindex length",
			"more entries than the segment has batches (%d)", len(batches))
	}
	prev := int64(-1)
	for i, e := range entries {
		at := int64(i * segment.TxnIndexEntrySize)
		bad := ""
		j, holds := findBatchHolding(batches, e.LastOffset)
		m, isMarker := txns.markers[e.LastOffset]
		switch {
		case e.LastOffset <= prev:
			bad = fmt.Sprintf("marker offset %d does not follow %d", e.LastOffset, prev)
		case e.LastOffset < seg.BaseOffset() || e.LastOffset >= seg.NextOffset():
			bad = fmt.Sprintf("marker offset %d outside the segment's offsets [%d, %d)", e.LastOffset, seg.BaseOffset(), seg.NextOffset())
		case e.FirstOffset < 0 || e.FirstOffset > e.LastOffset:
			bad = fmt.Sprintf("first offset %d, marker offset %d", e.FirstOffset, e.LastOffset)
		case e.LastStableOffset < 0 || e.LastStableOffset > e.LastOffset+1:
			bad = fmt.Sprintf("last stable offset %d after marker offset %d", e.LastStableOffset, e.LastOffset)
		case holds && (batches[j].base != e.LastOffset || !isMarker || !m.abort || m.pid != e.ProducerID):
			bad = fmt.Sprintf("the batch at offset %d is not an ABORT marker of producer %d", e.LastOffset, e.ProducerID)
		}
		if bad != "" {
			return base.CorruptionErrorf(path, at, "txnindex entry", "entry %d: %s", i, bad)
		}
		prev = e.LastOffset
	}
	for _, a := range txns.aborted {
		i := slices.IndexFunc(entries, func(e segment.AbortedTxn) bool { return e.LastOffset == a.LastOffset })
		switch {
		case i < 0:
			return base.CorruptionErrorf(path, int64(len(entries)*segment.TxnIndexEntrySize), "txnindex entry",
				"no entry for the transaction of producer %d aborted at offset %d (first offset %d)", a.ProducerID, a.LastOffset, a.FirstOffset)
		case entries[i].FirstOffset > a.FirstOffset:
			return base.CorruptionErrorf(path, int64(i*segment.TxnIndexEntrySize), "txnindex entry",
				"entry %d: first offset %d, the transaction's first batch is at %d", i, entries[i].FirstOffset, a.FirstOffset)
		}
	}
	return nil
}
