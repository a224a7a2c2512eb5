package log

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/invariants"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/segment"
)

// This file is the partition's side of its cleanup policies (package
// compaction's retention and key compaction, or a user's own): a policy
// looks at the partition through a View and hands back a plan — which of
// the oldest segments to delete (RetentionPolicy), or up to which offset to
// rewrite and which records to keep (Cleaner) — and the Partition carries
// it out. Every file a cleanup touches (the .cleaned segments, the
// .cleaned → .swap → .deleted protocol, the cleaner checkpoint) is written
// here, by the partition that owns the directory; a policy never touches a
// file. See DESIGN.md, "One owner of the files".

// ErrSwapIncomplete marks an error of Compact after the commit point of a
// segment swap (the .swap files were made durable): the files describe the
// new segments, but some renames did not happen. The partition refuses
// writes until it is reopened; Open then finishes the swap.
var ErrSwapIncomplete = errors.New("partlog/log: segment swap interrupted after its commit point")

// SegmentView describes one segment of a partition to a cleanup policy.
type SegmentView struct {
	SegmentInfo
	// FirstBatchMaxTimestamp is the maxTimestamp of the segment's first
	// batch, -1 when it has none (Kafka ages a dirty section by it for
	// max.compaction.lag.ms).
	FirstBatchMaxTimestamp int64
	// Modified is the .log file's modification time: when a batch was
	// last appended to it or compaction wrote it (the segment's creation
	// time when the filesystem cannot say).
	Modified time.Time
}

// View is what a cleanup policy sees of a partition during one round: a
// consistent snapshot of its segments and offsets, and read-only walks
// over the batches of the snapshot's segments. It is valid only during the
// RetentionPolicy or Cleaner call it is passed to, and is not safe for
// concurrent use.
type View struct {
	p        *Partition
	segs     []*segment.Segment
	infos    []SegmentView
	logStart int64
	hw       int64
	lso      int64 // at most hw
	read     int64 // bytes read by Batches and Headers
}

// newView takes a snapshot of p's segments (a reference on each, dropped by
// release).
func (p *Partition) newView() (*View, error) {
	segs, err := p.segmentRefs()
	if err != nil {
		return nil, err
	}
	hw := p.HighWatermark()
	v := &View{p: p, segs: segs, logStart: p.LogStartOffset(), hw: hw, lso: min(p.LastStableOffset(), hw)}
	v.infos = make([]SegmentView, len(segs))
	for i, s := range segs {
		ts, _ := s.MaxTimestamp()
		mod := s.Created()
		if st, err := p.cfg.FS.Stat(s.LogPath()); err == nil {
			mod = st.ModTime()
		}
		v.infos[i] = SegmentView{
			SegmentInfo: SegmentInfo{BaseOffset: s.BaseOffset(), NextOffset: s.NextOffset(), Size: s.Size(),
				MaxTimestamp: ts, Active: i == len(segs)-1},
			FirstBatchMaxTimestamp: s.FirstBatchMaxTimestamp(),
			Modified:               mod,
		}
	}
	return v, nil
}

// release drops the view's references.
func (v *View) release() {
	for _, s := range v.segs {
		if s != nil {
			_ = s.Unref()
		}
	}
	v.segs = nil
}

// drop drops the view's references on segs, segments the round no longer
// reads (a run compaction replaced), so that their files go when their
// readers let go, not when the round ends. REQUIRES: segs is a subslice of
// v.segs (it is cleared in place).
func (v *View) drop(segs []*segment.Segment) {
	for i, s := range segs {
		if s != nil {
			_ = s.Unref()
			segs[i] = nil
		}
	}
}

// Dir returns the partition's directory.
func (v *View) Dir() string { return v.p.dir }

// LogStartOffset and HighWatermark are the partition's offsets when the
// view was taken: nothing at or past the high watermark is ever deleted or
// cleaned.
func (v *View) LogStartOffset() int64 { return v.logStart }

// HighWatermark returns the high watermark when the view was taken.
func (v *View) HighWatermark() int64 { return v.hw }

// LastStableOffset returns the partition's last stable offset when the
// view was taken (Partition.LastStableOffset), at most HighWatermark:
// Compact rewrites nothing at or past it. It comes from the partition's
// producer state, so it also counts a transaction that is still open
// while its data lies below the log start (DeleteRecordsBefore and
// retention are bounded by the high watermark only, as in Kafka), which
// no batch header of the view shows.
func (v *View) LastStableOffset() int64 { return v.lso }

// Segments describes the snapshot's segments in ascending base offset
// order; the last one is the active segment. The slice is the view's: do
// not modify it.
func (v *View) Segments() []SegmentView { return v.infos }

// CleanerCheckpoint returns the offset below which the partition's
// cleaner-offset-checkpoint file says the log is cleaned; found is false
// when there is none.
func (v *View) CleanerCheckpoint() (offset int64, found bool, err error) {
	return v.p.ckpts.readCleaner()
}

// Batches walks the entries of the i-th segment of the snapshot whose last
// offset is at or after from (segment.Segment.Batches: v2 batches and
// legacy messages, framing and CRC checked, each valid until the next
// iteration).
func (v *View) Batches(i int, from int64) iter.Seq2[batch.Batch, error] {
	return v.count(v.segs[i].Batches(from))
}

// Headers walks the batch headers of the i-th segment of the snapshot
// (segment.Segment.Headers: control batches whole, legacy messages
// skipped).
func (v *View) Headers(i int) iter.Seq2[batch.Batch, error] {
	return v.count(v.segs[i].Headers())
}

// count adds the bytes seq yields to v.read.
func (v *View) count(seq iter.Seq2[batch.Batch, error]) iter.Seq2[batch.Batch, error] {
	return func(yield func(batch.Batch, error) bool) {
		for b, err := range seq {
			v.read += int64(len(b))
			if !yield(b, err) {
				return
			}
		}
	}
}

// CleanResult reports what a cleanup round did to the partition.
type CleanResult struct {
	// SegmentsDeleted and BytesDeleted count the segments deleted or
	// replaced and their .log sizes.
	SegmentsDeleted int
	BytesDeleted    int64
	// SegmentsWritten and BytesWritten count the segments a compaction
	// wrote and their sizes; BytesRead the bytes the round read (the
	// policy's walks and the rewrite).
	SegmentsWritten int
	BytesWritten    int64
	BytesRead       int64
	// RecordsRemoved counts the records a compaction dropped.
	RecordsRemoved int64
	// CleanedTo is the cleaner checkpoint a compaction wrote, -1 when it
	// wrote none (no round, or a truncation started during the round and
	// the checkpoint TruncateTo clamped stays).
	CleanedTo int64
}

// RetentionPolicy decides which of a partition's oldest segments to
// delete (package compaction's Retention is one).
type RetentionPolicy interface {
	// Expired returns how many of the oldest segments of v to delete now.
	// Returning every segment, the active one included, makes the
	// partition roll and ask again (see Partition.DeleteExpired).
	Expired(v *View) int
}

// DeleteExpired applies a retention policy: it asks r which of the oldest
// segments are expired and deletes them, oldest first (Kafka's
// deleteOldSegments). The partition raises its log start offset to the
// next segment's base, persists it, renames the segments' files .deleted
// and removes them at the last reader's release, and syncs the directory.
//
// When r says every segment is expired, the active one included, the log
// rolls first (as Kafka does) and r is asked again over
// the new snapshot, whose segments but the new empty active one can no
// longer change: what it picks is what is deleted (never the new active
// segment). When the log end offset lies past math.MaxInt64 -
// math.MaxInt32 the log cannot roll (ErrLogFull) and the active segment
// stays. Nothing at or past the high watermark is deleted. In a partition
// its Dir tiers, nothing whose copy is not recorded yet is deleted either,
// unless it lies wholly below the log start offset: the segments r picks
// from the first uncopied one on stay (law 14). When a
// truncation or another round changed the segment list between the plan
// and the deletion the error wraps ErrSegmentsChanged and nothing changed.
func (p *Partition) DeleteExpired(ctx context.Context, r RetentionPolicy) (CleanResult, error) {
	res := CleanResult{CleanedTo: -1}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	truncations := p.truncations.Load() // before the snapshot
	v, err := p.newView()
	if err != nil {
		return res, err
	}
	defer func() { v.release() }()
	n := min(max(r.Expired(v), 0), len(v.segs))
	if n, err = p.tierPart.Load().keepUncopied(v, n); err != nil {
		return res, err
	}
	if n == len(v.segs) {
		v.release()
		// Past the largest segment base the active segment is the log's
		// last and stays (ErrLogFull): the others may still go.
		if err := p.Roll(); err != nil && !errors.Is(err, ErrLogFull) {
			return res, err
		}
		truncations = p.truncations.Load()
		if v, err = p.newView(); err != nil {
			v = &View{}
			return res, err
		}
		n = min(max(r.Expired(v), 0), len(v.segs)-1)
		if n, err = p.tierPart.Load().keepUncopied(v, n); err != nil {
			return res, err
		}
	}
	if n == 0 {
		return res, nil
	}
	old := slices.Clone(v.segs[:n])
	var bytes int64
	for _, s := range old {
		bytes += s.Size()
	}
	// The view's references go first: held through the deletion, they
	// would keep every deleted segment's files, and its disk space, until
	// the round ends. deleteSegments compares pointers under the
	// partition's lock: a segment another round deleted meanwhile is no
	// longer in the list.
	v.release()
	if err := p.deleteSegments(old, truncations); err != nil {
		return res, err
	}
	res.SegmentsDeleted, res.BytesDeleted = n, bytes
	return res, nil
}

// RecordVerdict is a Cleaner's decision on one record.
type RecordVerdict uint8

// Record verdicts.
const (
	// RecordDrop removes the record.
	RecordDrop RecordVerdict = iota
	// RecordKeep keeps the record.
	RecordKeep
	// RecordKeepUntilHorizon keeps the record and asks that its batch carry
	// a delete horizon (a tombstone, or a transaction marker whose
	// transaction's data is gone): a batch without one is rewritten with
	// BatchDecision.Horizon (attribute bit 6, baseTimestamp), as Kafka's
	// cleaner stamps it; a later round drops the record once the horizon
	// has passed.
	RecordKeepUntilHorizon
)

// BatchAction is what a Cleaner does with a whole batch.
type BatchAction uint8

// Batch actions.
const (
	// BatchCopy keeps the batch byte for byte; Keep is not called.
	BatchCopy BatchAction = iota
	// BatchDrop removes every record of the batch; Keep is not called.
	BatchDrop
	// BatchFilter asks Keep about each record.
	BatchFilter
)

// BatchDecision is a Cleaner's decision on one batch.
type BatchDecision struct {
	// Action says what happens to the batch.
	Action BatchAction
	// KeepEmpty keeps the batch's header, with no records, when none of
	// its records stays (Kafka keeps the last batch of a live producer so
	// its sequence state survives). Ignored for a control batch, which
	// is then dropped whole.
	KeepEmpty bool
	// Horizon is the delete horizon, in milliseconds, to stamp on the
	// rewritten batch when a record is kept with RecordKeepUntilHorizon
	// and the batch carries no horizon yet.
	Horizon int64
}

// Cleaner is a key-compaction policy (package compaction's Compactor is
// one; a user can write their own). Partition.Compact runs it: Plan looks
// at the partition and says up to which offset to rewrite, then the
// partition rewrites its segments from the start, asking Batch about each
// batch and Keep about each record, in offset order, from the goroutine
// that called Compact.
type Cleaner interface {
	// Plan returns the offset below which the partition rewrites its
	// sealed segments, and records as the log's cleaner checkpoint after
	// the round; an end at or below the log start offset means no round.
	// The segments rewritten are those, below the first segment that is
	// active or reaches past the last stable offset (View.LastStableOffset,
	// at most the high watermark), whose base is below end. Plan may read
	// the view's batches (to build an offset map).
	Plan(ctx context.Context, v *View) (end int64, err error)
	// Batch decides what happens to b, a RecordBatch v2 batch of the
	// rewritten segments. Legacy messages (magic 0 and 1) are never
	// passed to Batch or Keep: a LegacyCleaner is asked about their
	// records through KeepLegacy, and any other Cleaner has them copied
	// as they are.
	Batch(b batch.Batch) BatchDecision
	// Keep decides whether rec, a record of b (which Batch answered
	// BatchFilter), stays.
	Keep(b batch.Batch, rec batch.Record) RecordVerdict
}

// LegacyCleaner is a Cleaner that decides about legacy messages too
// (magic 0 and 1, which Kafka wrote before 0.11 and which a log upgraded
// in place still holds); package compaction's Compactor is one. Compact
// asks KeepLegacy about every record of every legacy message it rewrites,
// in offset order among the batches, and carries out the answers as
// Kafka's cleaner does: a plain message is kept or dropped whole; a
// compressed wrapper from which some records go is written again with the
// others, at their original offsets, with its magic and codec
// (batch.Decoder.AppendLegacyFiltered); a wrapper from which all go is
// dropped. A legacy message has no header to carry a delete horizon:
// RecordKeepUntilHorizon keeps the record as RecordKeep does. When the
// last records of the last entry of a rewritten run go, a header-only v2
// batch at the entry's offset takes their place (after what stays of a
// wrapper), as an emptied last batch stays, so that the new segment ends
// where the old ones did.
//
// A Cleaner that does not implement LegacyCleaner has legacy messages
// copied as they are.
type LegacyCleaner interface {
	Cleaner
	// KeepLegacy decides whether rec, a record of a legacy message of
	// the given magic, stays. rec has its absolute offset, key, value,
	// timestamp (-1 under magic 0) and attribute byte, and nil Headers;
	// its Key and Value are valid during the call.
	KeepLegacy(magic int8, rec batch.Record) RecordVerdict
}

// Compact runs one round of a key-compaction policy (Kafka's log cleaner)
// under the partition's cleaning claim, so one round at a time runs on a
// partition whoever starts it (another gets an error wrapping
// ErrCleaningInProgress and changes nothing):
//
//  1. c.Plan looks at a snapshot and returns end;
//  2. the sealed segments below end (those below the first that is active
//     or reaches past the last stable offset, View.LastStableOffset) are
//     grouped, as Kafka's groupSegmentsBySize does, into runs that fit one
//     segment, and each run is rewritten into one new segment with c's
//     decisions: written with the .cleaned suffix, sealed and synced; then,
//     under the
//     partition's lock, renamed .swap and the directory synced (the
//     commit point), the old segments renamed .deleted and the directory
//     synced, the .swap files renamed to their plain names and the
//     directory synced, and the new list published. A lone segment from
//     which nothing is removed is left as it is. Offsets are never
//     renumbered; the last batch of each run is always kept (emptied if
//     need be), so a new segment ends where the ones it replaces ended;
//  3. the cleaner-offset-checkpoint file records end (the
//     segments it covers made durable first: Open takes a segment ending
//     early below the checkpoint for a compaction's), under
//     the partition's lock and only when no truncation started during
//     the round (TruncateTo lowers the checkpoint; offsets appended after
//     a cut are dirty): CleanResult.CleanedTo is then -1. A swap after
//     a truncation is refused with ErrSegmentsChanged (the segments read
//     may have been cut and written again since).
//
// Legacy messages (magic 0 and 1) are rewritten with the answers of
// c.KeepLegacy when c is a LegacyCleaner, and copied as they are
// otherwise.
//
// A crash at any step leaves, after Open, either the old segments of a run
// or the new one (docs/crash-safety.md, "Recovery rules"). Readers holding
// replaced segments keep reading them. An error after a swap's commit point wraps
// ErrSwapIncomplete and the partition refuses writes until reopened.
//
// A partition its Dir tiers is never compacted: Compact returns an error
// wrapping ErrTieredCompaction and changes nothing, as Kafka refuses
// compaction with remote storage.
func (p *Partition) Compact(ctx context.Context, c Cleaner) (CleanResult, error) {
	res := CleanResult{CleanedTo: -1}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if p.tierPart.Load() != nil {
		return res, fmt.Errorf("%w: compact %s: its copies in remote storage would keep the records a round removes", ErrTieredCompaction, p.dir)
	}
	ctx, release, err := p.cleaning.claim(ctx, p.closed.Load(), p.dir)
	if err != nil {
		return res, err
	}
	defer release()
	res, err = p.compact(ctx, c)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errCompactionStopped) {
		// Close stopped the round: say so rather than context.Canceled.
		err = fmt.Errorf("partlog/log: compact %s: %w", p.dir, cause)
	}
	return res, err
}

// compact runs Compact's round under the cleaning claim; ctx ends when
// Close stops the round.
func (p *Partition) compact(ctx context.Context, c Cleaner) (CleanResult, error) {
	res := CleanResult{CleanedTo: -1}
	truncations := p.truncations.Load() // before the snapshot
	v, err := p.newView()
	if err != nil {
		return res, err
	}
	defer v.release()
	end, err := c.Plan(ctx, v)
	res.BytesRead = v.read
	if err != nil || end <= v.logStart {
		return res, err
	}
	segs := v.segs
	n := 0
	for n+1 < len(segs) && segs[n].BaseOffset() < end &&
		segs[n].NextOffset() <= v.lso && segs[n+1].BaseOffset() <= v.lso {
		n++
	}
	if n == 0 {
		return res, nil
	}
	rw := rewriter{p: p, c: c, ctx: ctx, truncations: truncations}
	for _, g := range groupForCleaning(segs[:n], p.cfg.SegmentBytes, p.segCfg.MaxIndexBytes) {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := rw.group(g, &res); err != nil {
			res.BytesRead = v.read + rw.read
			return res, fmt.Errorf("partlog/log: compact %s: %w", p.dir, err)
		}
		v.drop(g)
	}
	res.BytesRead = v.read + rw.read
	written, err := p.writeCleanerCheckpoint(end, truncations)
	if err != nil {
		return res, fmt.Errorf("partlog/log: compact %s: %w", p.dir, err)
	}
	if written {
		res.CleanedTo = end
	}
	return res, nil
}

// groupForCleaning splits segs into runs that fit one segment, as Kafka's
// groupSegmentsBySize does: total size within segmentBytes (the
// partition's Config.SegmentBytes), offsets within MaxInt32 of the run's
// base, and index entries within what one segment's indexes of
// maxIndexBytes hold, so that the run's batches, copied, fit one new
// segment's indexes (rebuilt ones can need more entries: the rewrite then
// grows the new segment's indexes). A limit <= 0 is the default's.
func groupForCleaning(segs []*segment.Segment, segmentBytes int64, maxIndexBytes int) [][]*segment.Segment {
	if segmentBytes <= 0 {
		segmentBytes = segment.DefaultMaxSegmentBytes
	}
	if maxIndexBytes <= 0 {
		maxIndexBytes = segment.DefaultMaxIndexBytes
	}
	const offsetEntrySize, timeEntrySize = 8, 12 // Kafka's .index and .timeindex entries
	maxOff, maxTime := maxIndexBytes/offsetEntrySize-1, maxIndexBytes/timeEntrySize-2
	var groups [][]*segment.Segment
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].Size()
		offs, times := segs[i].IndexEntries()
		for j < len(segs) {
			o, t := segs[j].IndexEntries()
			if size+segs[j].Size() > segmentBytes || offs+o+1 > maxOff || times+t+1 > maxTime ||
				segs[j].NextOffset()-1-segs[i].BaseOffset() > math.MaxInt32 {
				break
			}
			size += segs[j].Size()
			offs += o + 1
			times += t + 1
			j++
		}
		groups = append(groups, segs[i:j])
		i = j
	}
	return groups
}

// rewriter carries out a Cleaner's decisions on runs of segments.
type rewriter struct {
	p *Partition
	c Cleaner
	// ctx is the round's context: a run stops between batches when it
	// ends (Close stops a round this way).
	ctx  context.Context
	dec  batch.Decoder
	bld  batch.Builder
	buf  []byte
	keep []bool
	read int64
	// tailBuf holds the header-only batch that ends a run at a legacy
	// message's offset (emptyAt).
	tailBuf []byte
	// removed counts the records dropped in the current run.
	removed int64
	// markers holds the base offsets, in order, of the control batches
	// the current run wrote.
	markers []int64
	// truncations is the partition's truncation count before the round's
	// snapshot: a swap after a truncation is refused (replaceSegments).
	truncations uint64
}

// group rewrites the segments of g into one new segment and swaps it in.
func (w *rewriter) group(g []*segment.Segment, res *CleanResult) error {
	p := w.p
	cfg := p.segCfg
	var in int64
	for _, s := range g {
		in += s.Size()
	}
	// The output is not bounded by the input: a rebuilt batch can be
	// larger than the one it replaces (a delete horizon becomes the
	// baseTimestamp, so every record's timestamp delta is re-encoded; a
	// subset of records may compress worse). The window is only address
	// space until Seal maps the file at its final size, so it is the
	// largest a segment may be.
	cfg.MaxSegmentBytes = segment.MaxSegmentBytesLimit
	out, err := segment.CreateWithSuffix(p.cfg.FS, p.dir, g[0].BaseOffset(), segment.CleanedSuffix, cfg)
	if err != nil {
		return err
	}
	discard := func(err error) error {
		if derr := out.MarkDeleted(); derr != nil {
			err = errors.Join(err, derr)
		}
		if derr := out.Unref(); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	w.removed = 0
	w.markers = w.markers[:0]
	verbatim := true
	for i, s := range g {
		lastSeg := i == len(g)-1
		for b, err := range s.Batches(s.BaseOffset()) {
			if err != nil {
				return discard(err)
			}
			if err := w.ctx.Err(); err != nil {
				return discard(err)
			}
			w.read += int64(len(b))
			nb, tail := batch.Batch(b), batch.Batch(nil)
			copied := true
			if m, _ := batch.PeekMagic(b); !legacy.IsMagic(m) {
				last := lastSeg && b.LastOffset() == s.NextOffset()-1
				if nb, copied, err = w.batch(b, last); err != nil {
					return discard(fmt.Errorf("%s: batch at offset %d: %w", s.LogPath(), b.BaseOffset(), err))
				}
				if nb != nil && nb.Attributes().IsControl() {
					w.markers = append(w.markers, nb.BaseOffset())
				}
			} else if lc, ok := w.c.(LegacyCleaner); ok {
				off := legacy.Entry(b).Offset()
				last := lastSeg && off == s.NextOffset()-1
				if nb, tail, copied, err = w.legacyEntry(lc, m, b, last); err != nil {
					return discard(fmt.Errorf("%s: legacy message at offset %d: %w", s.LogPath(), off, err))
				}
			}
			verbatim = verbatim && copied
			for _, x := range []batch.Batch{nb, tail} {
				if x == nil {
					continue
				}
				if out.FreeIndexEntries() == 0 {
					// The run's indexes fitted one segment's, but a
					// rebuilt batch can be larger than the one it
					// replaces, so entries fall due more often here.
					if err := out.GrowIndexes(); err != nil {
						return discard(err)
					}
				}
				if _, err := out.Append(x); err != nil {
					return discard(err)
				}
			}
		}
	}
	if len(g) == 1 && verbatim {
		return discard(nil) // nothing to change in a lone segment
	}
	// The aborted transactions whose markers the new segment holds stay
	// aborted for read_committed readers of whatever records the Cleaner
	// kept (Kafka's cleaner copies the transaction index the same way). A
	// transaction whose marker the Cleaner dropped has no data left to
	// mark: its entry goes with the marker, as in Kafka's cleaned index,
	// so that the index keeps no entry for a transaction the log no longer
	// holds (nor more entries than the segment has batches).
	for _, s := range g {
		for _, a := range s.AbortedTxns() {
			if _, kept := slices.BinarySearch(w.markers, a.LastOffset); !kept {
				continue
			}
			if err := out.AppendAbortedTxn(a); err != nil {
				return discard(fmt.Errorf("%s: transaction index: %w", s.LogPath(), err))
			}
		}
	}
	if err := out.Seal(); err != nil {
		return discard(err)
	}
	if err := out.Flush(); err != nil {
		return discard(err)
	}
	sw := segmentSwap{fs: p.cfg.FS, dir: p.dir, old: g, out: out}
	if err := p.replaceSegments(g, []*segment.Segment{out}, w.truncations, sw.commit); err != nil {
		if sw.committed {
			// Past the commit point: Open finishes the swap; drop only
			// our reference.
			_ = out.Unref()
			return err
		}
		return discard(err)
	}
	res.SegmentsDeleted += len(g)
	res.BytesDeleted += in
	res.SegmentsWritten++
	res.BytesWritten += out.Size()
	res.RecordsRemoved += w.removed
	return nil
}

// segmentSwap is the file half of a compaction swap (see Compact): out, a
// sealed .cleaned segment, replaces the run old. replaceSegments runs
// commit under the partition's lock, once it checked that old is still
// the partition's.
type segmentSwap struct {
	fs  vfs.FS
	dir string
	old []*segment.Segment
	out *segment.Segment
	// committed is set once the swap passed its commit point (the .swap
	// names durable): from then on Open finishes it, whatever fails.
	committed bool
}

// commit renames out .cleaned to .swap and syncs the directory (the commit
// point; a failed sync takes the rename back), renames old .deleted and
// syncs, then renames out to its plain names and syncs. An error after the
// commit point wraps ErrSwapIncomplete.
func (s *segmentSwap) commit() error {
	if err := s.out.ChangeSuffix(segment.CleanedSuffix, segment.SwapSuffix); err != nil {
		return err
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		// Not durable yet: take the rename back.
		_ = s.out.ChangeSuffix(segment.SwapSuffix, segment.CleanedSuffix)
		return err
	}
	s.committed = true
	for _, seg := range s.old {
		if err := seg.MarkDeleted(); err != nil {
			return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
		}
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
	}
	if err := s.out.ChangeSuffix(segment.SwapSuffix, ""); err != nil {
		return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("%w: %w", ErrSwapIncomplete, err)
	}
	return nil
}

// batch applies the Cleaner's decisions to b (a v2 batch): nb is the batch
// to write (b itself when copied, a rebuilt or empty one, or nil to drop
// it). last forces the batch to stay, emptied if need be (the last batch
// of a run).
func (w *rewriter) batch(b batch.Batch, last bool) (nb batch.Batch, copied bool, err error) {
	d := w.c.Batch(b)
	a := b.Attributes()
	control := a.IsControl()
	keepEmpty := last || (d.KeepEmpty && !control)
	// emptied is what becomes of b when none of its records stays.
	emptied := func(removed int64) (batch.Batch, bool, error) {
		switch {
		case !keepEmpty:
			w.removed += removed
			return nil, false, nil
		case removed == 0:
			return b, true, nil
		case control:
			return b, true, nil // the last marker of a run stays whole
		}
		w.removed += removed
		w.buf = batchaccess.AppendEmptyBatch(w.buf[:0], b)
		return batch.Batch(w.buf), false, nil
	}
	switch d.Action {
	case BatchCopy:
		return b, true, nil
	case BatchDrop:
		return emptied(int64(b.RecordsCount()))
	case BatchFilter:
	default:
		return nil, false, fmt.Errorf("partlog/log: cleaner returned batch action %d", d.Action)
	}
	w.keep = w.keep[:0]
	var kept, removed, pending int64
	for rec, err := range b.All(&w.dec) {
		if err != nil {
			return nil, false, err
		}
		v := w.c.Keep(b, rec)
		switch v {
		case RecordKeep:
			kept++
		case RecordKeepUntilHorizon:
			kept++
			pending++
		default:
			removed++
		}
		w.keep = append(w.keep, v != RecordDrop)
	}
	switch {
	case kept == 0:
		return emptied(removed)
	case removed == 0 && (pending == 0 || a.HasDeleteHorizon()):
		return b, true, nil
	}
	horizon := int64(0)
	if pending > 0 {
		horizon = d.Horizon
		if a.HasDeleteHorizon() {
			horizon = b.BaseTimestamp()
		}
	}
	nb, err = w.rebuild(b, horizon)
	if err != nil {
		return nil, false, err
	}
	w.removed += removed
	return nb, false, nil
}

// legacyEntry applies a LegacyCleaner's decisions to e, a legacy message
// of the given magic (see LegacyCleaner): nb is the entry to write (e
// itself when copied, a rewritten wrapper, or nil to drop it). last is
// set for the run's last entry, which must still end the run: when
// nothing of e stays, nb is a header-only v2 batch at e's offset; when a
// rewritten wrapper ends before e did (its last records went), tail is
// such a batch, to write after nb.
func (w *rewriter) legacyEntry(c LegacyCleaner, magic int8, e []byte, last bool) (nb, tail batch.Batch, copied bool, err error) {
	out, kept, removed, err := w.dec.AppendLegacyFiltered(w.buf[:0], e, func(r batch.Record) bool {
		return c.KeepLegacy(magic, r) != RecordDrop
	})
	if err != nil {
		return nil, nil, false, err
	}
	w.buf = out
	if removed == 0 {
		return batch.Batch(e), nil, true, nil
	}
	w.removed += int64(removed)
	end := legacy.Entry(e).Offset()
	if kept > 0 {
		if invariants.Enabled {
			if verr := w.dec.ValidateLegacy(w.buf); verr != nil {
				return nil, nil, false, fmt.Errorf("partlog/log: rewritten legacy message: %w", verr)
			}
		}
		if last && legacy.Entry(w.buf).Offset() < end {
			if tail, err = w.emptyAt(end); err != nil {
				return nil, nil, false, err
			}
		}
		return batch.Batch(w.buf), tail, false, nil
	}
	if !last {
		return nil, nil, false, nil
	}
	nb, err = w.emptyAt(end)
	return nb, nil, false, err
}

// emptyAt returns a header-only v2 batch covering offset off alone, in
// w.tailBuf: it stands in for the end of a legacy message whose last
// records went, at the end of a run. It carries no timestamp, as the
// records it replaces are gone.
func (w *rewriter) emptyAt(off int64) (batch.Batch, error) {
	w.bld.Reset(batch.BuilderOptions{BaseOffset: off})
	var err error
	w.tailBuf, err = w.bld.AppendTo(w.tailBuf[:0])
	if err != nil {
		return nil, err
	}
	return batch.Batch(w.tailBuf), nil
}

// rebuild re-encodes b's kept records (w.keep): same base offset,
// lastOffsetDelta, codec, timestamp type, producer fields, leader epoch
// and control bit. A positive horizon stamps the batch with that delete
// horizon.
func (w *rewriter) rebuild(b batch.Batch, horizon int64) (batch.Batch, error) {
	a := b.Attributes()
	opts := batch.BuilderOptions{
		Compression:          a.Compression(),
		BaseOffset:           b.BaseOffset(),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Transactional:        a.IsTransactional(),
		Control:              a.IsControl(),
		LogAppendTime:        a.LogAppendTime(),
		AppendTime:           b.MaxTimestamp(),
		DeleteHorizon:        horizon,
	}
	if pid := b.ProducerID(); pid != batch.NoProducerID || b.ProducerEpoch() != batch.NoProducerEpoch || b.BaseSequence() != batch.NoSequence {
		opts.Producer = &batch.Producer{ID: pid, Epoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence()}
	}
	w.bld.Reset(opts)
	i := 0
	for rec, err := range b.All(&w.dec) {
		if err != nil {
			return nil, err
		}
		if i >= len(w.keep) {
			return nil, fmt.Errorf("partlog/log: batch at offset %d decoded more records the second time", b.BaseOffset())
		}
		if w.keep[i] {
			if err := w.bld.AddAt(rec); err != nil {
				return nil, err
			}
		}
		i++
	}
	if err := w.bld.SetLastOffsetDelta(b.LastOffsetDelta()); err != nil {
		return nil, err
	}
	var err error
	w.buf, err = w.bld.AppendTo(w.buf[:0])
	if err == nil && invariants.Enabled {
		if verr := batch.Batch(w.buf).Validate(); verr != nil {
			return nil, fmt.Errorf("partlog/log: rebuilt batch at offset %d: %w", b.BaseOffset(), verr)
		}
	}
	return batch.Batch(w.buf), err
}
