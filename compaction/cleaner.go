package compaction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
)

// Compactor is the compact policy: key-based compaction, Kafka's log
// cleaner, one partition at a time. It is a log.Cleaner: it plans the round
// and decides record by record; the partition (log.Partition.Compact)
// writes the new segments, swaps them in with its crash protocol and
// writes the cleaner checkpoint. A round:
//
//  1. finds the cleanable section: the sealed segments below the first one
//     that is active, holds an offset at or past the high watermark or the
//     last stable offset (below), or is dirty (holds an offset at or past
//     the first dirty offset) and younger than MinCompactionLag (by its
//     largest record timestamp, or the modification time of its .log when
//     no record has one), as Kafka checks the lag on the dirty segments
//     only; the first dirty offset comes from the partition's
//     cleaner-offset-checkpoint (the log start offset when absent);
//  2. decides whether to clean: dirty bytes / (clean + dirty bytes) >
//     MinCleanableDirtyRatio, or the first batch of some dirty sealed
//     segment, in the cleanable section or past it, is older than
//     MaxCompactionLag (and the section holds dirty bytes);
//  3. builds the offset map (key → latest offset) over the dirty section,
//     legacy messages included, skipping aborted transactional batches;
//     when the map is full it stops at a batch boundary and the round
//     cleans only up to there;
//  4. has the partition rewrite every segment from the log start to that
//     offset (see "Rewriting");
//  5. the partition writes the checkpoint: the next round starts where the
//     map stopped.
//
// # Rewriting
//
// A record is kept when it has a key, no later record of its key is
// mapped, and it is not a tombstone (null value) whose delete horizon has
// passed. Offsets are never renumbered: a rewritten batch keeps its base
// offset and its lastOffsetDelta, its codec (records are decompressed,
// filtered and recompressed), its timestamp type, its producer id, epoch
// and base sequence, and its leader epoch. A batch from which nothing is
// removed is copied byte for byte. A batch left with no record is dropped,
// except an empty header-only batch is kept, as Kafka keeps it, for the
// last batch of each live producer id (its sequence state; see
// Config.ProducerIDExpiration: the empty header of an expired producer goes
// at the next round, so a log with ever new producers does not grow by a
// header per producer without bound), and the partition keeps the last
// batch of each rewritten group: a new segment then always ends exactly
// where the segments it replaces ended, which is how Open knows which
// segments a .swap segment replaces (and the log end never moves back).
//
// Tombstones are kept for DeleteRetention after the first round that
// rewrites their batch: that round sets the batch's delete-horizon bit
// (attribute bit 6) and stores now + DeleteRetention in its
// baseTimestamp, as Kafka does; a later round drops them once now is past
// the horizon and every older record of their key is gone (the tombstone
// lies below the offset the round's map reached).
//
// # Legacy messages
//
// Legacy messages (magic 0 and 1, which Kafka wrote before 0.11 and which
// a log upgraded in place still holds) are compacted as Kafka's cleaner
// compacts them. Every record they hold, a compressed wrapper's inner
// messages included, enters the offset map at its absolute offset, and
// shadows older records of its key whatever their format. A legacy record
// stays when it has a key, no later record of its key is mapped, and it is
// not a tombstone past the legacy delete horizon. A legacy message has no
// header to stamp a horizon on, so the horizon is Kafka's for magic 0 and
// 1: the modification time of the last segment below the round's first
// dirty offset minus DeleteRetention; the legacy tombstones of a segment
// last modified at or before it go (none in a round with no clean
// segment). A record without a key is dropped, as Kafka's cleaner drops it
// as invalid. A plain legacy message is kept or dropped whole; a
// compressed wrapper from which some records go is written again by the
// partition with the others, at their offsets, with its magic and codec
// (see log.LegacyCleaner).
//
// # Transactions
//
// A round reads the headers of the whole log below the high watermark and
// follows each producer's transactions through their markers (control
// batches), as Kafka's cleaner follows its transaction index: a
// transactional batch belongs to the transaction its producer's next
// marker ends, which is aborted when that marker is ABORT. A transaction
// with no marker below the high watermark is open: the last stable offset
// is the first offset of the oldest open one, and nothing at or past it is
// cleaned (the section stops at the segment holding it). Aborted batches
// are dropped whole and their keys never enter the offset map, so an
// aborted record never shadows a committed one. A marker (KIP-534) stays
// while any batch of its transaction is in the log; the first round that
// finds its transaction's data gone stamps the marker's batch with a delete
// horizon (now + DeleteRetention), and the first round past that horizon
// drops it. The last batch of a rewritten group stays whatever it is.
type Compactor struct {
	cfg Config
	m   *offsetMap
	// producers is the round's producer table (scanProducers), kept
	// across rounds.
	producers map[int64]producerLast
	txns      txnTable
	rd        roundState
}

// NewCompactor returns the compact policy for cfg (defaults applied). A
// Compactor cleans one partition at a time: the Runner gives each worker
// its own.
func NewCompactor(cfg Config) (*Compactor, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Compactor{cfg: cfg}, nil
}

// Name returns "compaction".
func (c *Compactor) Name() string { return "compaction" }

// section describes a partition's cleanable section, as a round sees it.
type section struct {
	// firstDirty is the first offset not cleaned yet (the checkpoint).
	firstDirty int64
	// firstUncleanable is the base offset of the first segment that may
	// not be cleaned (active, past the high watermark or the last stable
	// offset, or dirty and too young).
	firstUncleanable int64
	// cleanBytes and dirtyBytes are the sizes of the cleanable segments
	// below and above firstDirty.
	cleanBytes, dirtyBytes int64
	// ratio is dirtyBytes / (cleanBytes + dirtyBytes), 0 when empty.
	ratio float64
	// due is set when the round should clean: ratio above the minimum, or
	// the maximum compaction lag passed.
	due bool
	// cleanable is the number of cleanable segments.
	cleanable int
}

// section computes the cleanable section of v below lso.
func (c *Compactor) section(v *plog.View, lso int64, now time.Time) (section, error) {
	hw := min(v.HighWatermark(), lso)
	start := v.LogStartOffset()
	segs := v.Segments()
	var sec section
	cp, found, err := v.CleanerCheckpoint()
	if err != nil {
		return sec, err
	}
	first := max(start, segs[0].BaseOffset)
	if !found || cp < first || cp > segs[len(segs)-1].NextOffset {
		cp = first
	}
	sec.firstDirty = cp
	u := 0
	minLagMs := now.Add(-c.cfg.MinCompactionLag).UnixMilli()
	for ; u+1 < len(segs); u++ {
		s := segs[u]
		if s.NextOffset > hw || segs[u+1].BaseOffset > hw {
			break
		}
		// Only a dirty segment waits for MinCompactionLag, as Kafka's
		// cleanableOffsets checks only the segments from the first dirty
		// offset on: a clean segment that is young by the rule (stamped
		// ahead of the clock, or cleaned before the lag was raised) must
		// not hold back the dirty ones after it.
		if c.cfg.MinCompactionLag > 0 && s.NextOffset > cp && largestTimestamp(s) > minLagMs {
			break
		}
	}
	sec.cleanable = u
	sec.firstUncleanable = segs[u].BaseOffset
	for _, s := range segs[:u] {
		if s.NextOffset <= cp {
			sec.cleanBytes += s.Size
			continue
		}
		sec.dirtyBytes += s.Size
	}
	if total := sec.cleanBytes + sec.dirtyBytes; total > 0 {
		sec.ratio = float64(sec.dirtyBytes) / float64(total)
	}
	if sec.firstDirty >= sec.firstUncleanable || sec.dirtyBytes == 0 {
		return sec, nil
	}
	sec.due = sec.ratio > c.cfg.MinCleanableDirtyRatio
	if c.cfg.MaxCompactionLag > 0 {
		if ts, ok := earliestDirtyBatch(segs, cp); ok && now.UnixMilli()-ts > c.cfg.MaxCompactionLag.Milliseconds() {
			sec.due = true
		}
	}
	return sec, nil
}

// earliestDirtyBatch returns the earliest first-batch max timestamp of the
// sealed segments of segs that hold an offset at or past firstDirty, and
// false when none has one above 0. These are all the dirty segments, also
// those past the cleanable section (younger than MinCompactionLag, past
// the high watermark or the last stable offset), as Kafka's
// LogCleanerManager.maxCompactionDelay takes them: a segment that may not
// be cleaned yet still makes the partition due, and the round cleans what
// it may. A timestamp of 0 or less tells nothing of a batch's age (-1: none
// was set) and is left out, as Kafka leaves it out.
func earliestDirtyBatch(segs []plog.SegmentView, firstDirty int64) (int64, bool) {
	earliest, found := int64(0), false
	for _, s := range segs[:len(segs)-1] {
		ts := s.FirstBatchMaxTimestamp
		if s.NextOffset <= firstDirty || ts <= 0 {
			continue
		}
		if !found || ts < earliest {
			earliest, found = ts, true
		}
	}
	return earliest, found
}

// largestTimestamp returns the timestamp MinCompactionLag ages s by, in
// milliseconds: its largest record timestamp or, when no record of s
// carries one (v2 records stamped -1, legacy magic 0 messages), the
// modification time of its .log. Kafka's LogSegment.largestTimestamp falls
// back to the file's the same way; without it a segment with no timestamp
// would count as older than any lag and be compacted the moment it is
// sealed.
func largestTimestamp(s plog.SegmentView) int64 {
	if s.MaxTimestamp < 0 {
		return s.Modified.UnixMilli()
	}
	return s.MaxTimestamp
}

// Apply runs one compaction round on p if it is due (see Compactor).
func (c *Compactor) Apply(ctx context.Context, p Partition) (Result, error) {
	c.rd = roundState{}
	r, err := p.Compact(ctx, c)
	res := fromClean(r)
	res.Compacted = c.rd.planned && err == nil
	res.TombstonesRemoved = c.rd.tombs
	if err != nil {
		return res, wrapDir("compact", p, err)
	}
	if res.Compacted {
		c.cfg.Logger.Info("partlog/compaction: cleaned", "dir", p.Dir(), "firstDirty", c.rd.firstDirty,
			"cleanedTo", res.CleanedTo, "keys", c.m.Len(), "segmentsIn", res.SegmentsDeleted,
			"segmentsOut", res.SegmentsWritten, "bytesIn", res.BytesDeleted, "bytesOut", res.BytesWritten,
			"recordsRemoved", res.RecordsRemoved)
	}
	return res, nil
}

// Plan implements log.Cleaner: steps 1 to 3 of a round. It returns 0 when
// the round is not due.
func (c *Compactor) Plan(ctx context.Context, v *plog.View) (int64, error) {
	now := c.cfg.Now()
	c.rd = roundState{now: now, horizon: now.Add(c.cfg.DeleteRetention).UnixMilli(),
		producerExpiry: now.Add(-c.cfg.ProducerIDExpiration).UnixMilli()}
	lso, err := c.scanProducers(ctx, v)
	if err != nil {
		return 0, err
	}
	// The partition's own bound also counts a transaction that is open
	// while its data lies below the log start, which the headers cannot
	// show.
	sec, err := c.section(v, min(lso, v.LastStableOffset()), now)
	if err != nil || !sec.due {
		return 0, err
	}
	if c.m == nil {
		c.m = newOffsetMap(c.cfg.OffsetMapBytes, c.cfg.KeyHash)
	} else {
		c.m.reset()
	}
	end, err := c.buildMap(ctx, v, sec)
	if err != nil {
		return 0, err
	}
	c.rd.end, c.rd.firstDirty, c.rd.planned = end, sec.firstDirty, true
	c.legacyHorizon(v, sec)
	return end, nil
}

// legacyHorizon finds the segments whose legacy tombstones the round may
// drop, as Kafka's cleaner does for tombstones below magic 2, which carry
// no delete horizon of their own: the horizon is the modification time of
// the last segment below the first dirty offset minus DeleteRetention (no
// such segment, no horizon), and a segment last modified at or before it
// has its legacy tombstones dropped.
func (c *Compactor) legacyHorizon(v *plog.View, sec section) {
	c.rd.legacyExpired = c.rd.legacyExpired[:0]
	segs := v.Segments()[:sec.cleanable]
	clean := -1
	for i, s := range segs {
		if s.BaseOffset < sec.firstDirty {
			clean = i
		}
	}
	if clean < 0 {
		return
	}
	horizon := segs[clean].Modified.UnixMilli() - c.cfg.DeleteRetention.Milliseconds()
	for _, s := range segs {
		if s.Modified.UnixMilli() <= horizon {
			c.rd.legacyExpired = append(c.rd.legacyExpired, offsetRange{s.BaseOffset, s.NextOffset})
		}
	}
}

// offsetRange is the offsets [from, to) of a segment.
type offsetRange struct{ from, to int64 }

// legacyDeletable reports whether a legacy tombstone at off lies in a
// segment whose legacy tombstones the round drops (legacyHorizon).
func (c *Compactor) legacyDeletable(off int64) bool {
	r := c.rd.legacyExpired
	i := sort.Search(len(r), func(i int) bool { return r[i].to > off })
	return i < len(r) && r[i].from <= off
}

// errMapFull stops the map scan.
var errMapFull = errors.New("offset map full")

// buildMap maps the keys of the dirty section [firstDirty,
// firstUncleanable) and returns the offset the round cleans up to:
// firstUncleanable, or the base of the first batch that did not fit the
// map. Aborted transactional batches and control batches map nothing.
func (c *Compactor) buildMap(ctx context.Context, v *plog.View, sec section) (int64, error) {
	from, to := sec.firstDirty, sec.firstUncleanable
	end := to
	var dec batch.Decoder
	var recs []batch.Record // a legacy message's records
	segs := v.Segments()
	err := func() error {
		for i, s := range segs[:sec.cleanable] {
			if s.NextOffset <= from {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			for b, err := range v.Batches(i, from) {
				if err != nil {
					return err
				}
				if isLegacy(b) {
					// Every record of a legacy message is mapped at its
					// absolute offset, a wrapper's inner ones included,
					// as Kafka's buildOffsetMap maps them.
					if recs, err = dec.AppendLegacyRecords(recs[:0], b, false); err != nil {
						return fmt.Errorf("legacy message at offset %d: %w", legacy.Entry(b).Offset(), err)
					}
					if recs[0].Offset >= to {
						return errMapFull
					}
					for _, rec := range recs {
						if rec.Key == nil || rec.Offset < from {
							continue
						}
						if !c.m.Put(rec.Key, rec.Offset) {
							end = recs[0].Offset
							return errMapFull
						}
					}
					continue
				}
				if b.BaseOffset() >= to {
					return errMapFull
				}
				if b.Attributes().IsControl() || c.txns.aborted(b) {
					continue
				}
				for rec, err := range b.All(&dec) {
					if err != nil {
						return fmt.Errorf("batch at offset %d: %w", b.BaseOffset(), err)
					}
					if rec.Key == nil || rec.Offset < from {
						continue
					}
					if !c.m.Put(rec.Key, rec.Offset) {
						end = b.BaseOffset()
						return errMapFull
					}
				}
			}
		}
		return nil
	}()
	if err != nil && !errors.Is(err, errMapFull) {
		return 0, err
	}
	if end <= from {
		return 0, fmt.Errorf("%w: %d bytes hold %d keys", ErrMapTooSmall, c.cfg.OffsetMapBytes, c.m.Len())
	}
	return end, nil
}

// isLegacy reports whether b is a legacy message (magic 0 or 1) rather
// than a RecordBatch v2 (see Compactor, "Legacy messages").
func isLegacy(b batch.Batch) bool {
	m, ok := batch.PeekMagic(b)
	return ok && legacy.IsMagic(m)
}

// producerLast is what a round knows of a producer's last batch.
type producerLast struct {
	// lastOffset is the last offset of the producer's last data batch
	// (markers excluded), -1 when the log holds none.
	lastOffset int64
	// maxTimestamp is the max timestamp of the producer's last batch or
	// marker: expiry measures idleness from it.
	maxTimestamp int64
	// openTxn: the last batch is transactional data, so no marker has
	// ended its transaction yet.
	openTxn bool
}

// scanProducers reads the header of every batch of the log: for every
// producer id its last batch (if compaction empties that batch, an empty
// header of it stays while the producer is live, roundState.liveLast), and
// its transactions below the high watermark (txnTable). It returns the
// last stable offset: the first offset of the oldest open transaction, or
// the high watermark.
func (c *Compactor) scanProducers(ctx context.Context, v *plog.View) (int64, error) {
	if c.producers == nil {
		c.producers = make(map[int64]producerLast)
	}
	clear(c.producers)
	hw := v.HighWatermark()
	c.txns.reset()
	var dec batch.Decoder
	for i := range v.Segments() {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for b, err := range v.Headers(i) {
			if err != nil {
				return 0, err
			}
			pid := b.ProducerID()
			if pid < 0 {
				continue
			}
			a := b.Attributes()
			// A marker ends the producer's transaction and refreshes its
			// last timestamp, but its last batch stays the last data batch
			// (Kafka's lastDataOffset): that batch keeps the producer's
			// sequence for a replica that rebuilds producer state from the
			// compacted log.
			pl, seen := c.producers[pid]
			if !seen {
				pl.lastOffset = -1
			}
			pl.maxTimestamp, pl.openTxn = b.MaxTimestamp(), a.IsTransactional() && !a.IsControl()
			if !a.IsControl() {
				pl.lastOffset = b.LastOffset()
			}
			c.producers[pid] = pl
			// A control batch is a marker whatever its transactional bit,
			// as the partition's producer state takes it.
			if (!a.IsTransactional() && !a.IsControl()) || b.BaseOffset() >= hw {
				continue
			}
			if !a.IsControl() {
				c.txns.data(pid, b.BaseOffset())
				continue
			}
			typ, ok, err := markerType(b, &dec)
			if err != nil {
				return 0, fmt.Errorf("marker at offset %d: %w", b.BaseOffset(), err)
			}
			if ok {
				c.txns.marker(pid, b.BaseOffset(), typ == batch.ControlAbort)
			}
		}
	}
	return c.txns.lastStable(hw), nil
}

// markerType returns the type of the transaction marker control batch b
// holds; ok is false for any other control batch.
func markerType(b batch.Batch, dec *batch.Decoder) (batch.ControlType, bool, error) {
	for rec, err := range b.All(dec) {
		if err != nil {
			return 0, false, err
		}
		cr, err := batch.ParseControlRecord(rec)
		if err != nil {
			return 0, false, err
		}
		return cr.Type, cr.Type.IsTxnMarker(), nil
	}
	return 0, false, nil
}

// roundState is what every batch decision of a round needs.
type roundState struct {
	planned    bool // Plan found the round due
	now        time.Time
	firstDirty int64
	end        int64 // the map covers offsets below end (with earlier rounds)
	horizon    int64 // the delete horizon the round stamps
	// producerExpiry is now minus Config.ProducerIDExpiration: a producer
	// whose last batch's max timestamp is at or below it has expired.
	producerExpiry int64
	// tombs counts the tombstones the round removed.
	tombs int64
	// legacyExpired holds the segments, in offset order, whose legacy
	// tombstones the round drops (legacyHorizon).
	legacyExpired []offsetRange
}

// liveLast reports whether b is the last batch of a live producer, whose
// empty header compaction keeps. A producer is live, as Kafka's producer
// expiry has it, while its last batch's max timestamp lies less than
// Config.ProducerIDExpiration before now, or while its transaction is open
// (its last batch is transactional data: no marker has ended it).
func (c *Compactor) liveLast(b batch.Batch) bool {
	pid := b.ProducerID()
	if pid < 0 {
		return false
	}
	pl, ok := c.producers[pid]
	return ok && pl.lastOffset == b.LastOffset() && (pl.openTxn || pl.maxTimestamp > c.rd.producerExpiry)
}

// Batch implements log.Cleaner: what becomes of batch b (see "Rewriting"
// and "Transactions").
func (c *Compactor) Batch(b batch.Batch) plog.BatchDecision {
	a := b.Attributes()
	if a.IsControl() {
		t, ok := c.txns.markerAt(b.ProducerID(), b.BaseOffset())
		if !ok || t.batches > 0 || b.LastOffset() >= c.rd.end {
			return plog.BatchDecision{Action: plog.BatchCopy}
		}
		// The transaction's data is gone (KIP-534).
		if a.HasDeleteHorizon() {
			if c.rd.now.UnixMilli() >= b.BaseTimestamp() {
				return plog.BatchDecision{Action: plog.BatchDrop}
			}
			return plog.BatchDecision{Action: plog.BatchCopy}
		}
		return plog.BatchDecision{Action: plog.BatchFilter, Horizon: c.rd.horizon}
	}
	keepEmpty := c.liveLast(b)
	if c.txns.aborted(b) {
		return plog.BatchDecision{Action: plog.BatchDrop, KeepEmpty: keepEmpty}
	}
	return plog.BatchDecision{Action: plog.BatchFilter, KeepEmpty: keepEmpty, Horizon: c.rd.horizon}
}

// Keep implements log.Cleaner: whether record rec of b stays.
func (c *Compactor) Keep(b batch.Batch, rec batch.Record) plog.RecordVerdict {
	if b.Attributes().IsControl() {
		return plog.RecordKeepUntilHorizon // a marker being stamped (Batch)
	}
	if rec.Key == nil {
		return plog.RecordDrop
	}
	if off, found := c.m.Get(rec.Key); found && rec.Offset < off {
		return plog.RecordDrop
	}
	if rec.Value != nil {
		return plog.RecordKeep
	}
	a := b.Attributes()
	if a.HasDeleteHorizon() && c.rd.now.UnixMilli() >= b.BaseTimestamp() && rec.Offset < c.rd.end {
		c.rd.tombs++
		return plog.RecordDrop
	}
	return plog.RecordKeepUntilHorizon
}

// KeepLegacy implements log.LegacyCleaner: whether rec, a record of a
// legacy message, stays (see "Legacy messages").
func (c *Compactor) KeepLegacy(magic int8, rec batch.Record) plog.RecordVerdict {
	if rec.Key == nil {
		return plog.RecordDrop
	}
	if off, found := c.m.Get(rec.Key); found && rec.Offset < off {
		return plog.RecordDrop
	}
	if rec.Value == nil && rec.Offset < c.rd.end && c.legacyDeletable(rec.Offset) {
		c.rd.tombs++
		return plog.RecordDrop
	}
	return plog.RecordKeep
}
