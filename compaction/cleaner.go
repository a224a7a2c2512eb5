package compaction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/segment"
)

// ErrSwapIncomplete marks an error from the commit step of a segment swap
// that happened after the swap's commit point (the .swap files were made
// durable): the files now describe the new segments, but some renames did
// not happen. The partition must refuse writes until it is reopened;
// RecoverDir then finishes the swap.
var ErrSwapIncomplete = errors.New("partlog/compaction: segment swap interrupted after its commit point")

// Compactor is the compact policy: key-based compaction, Kafka's log
// cleaner, one partition at a time. A round:
//
//  1. finds the cleanable section: the sealed segments below the first one
//     that is active, holds an offset at or past the high watermark, or is
//     younger than MinCompactionLag; the first dirty offset comes from the
//     partition's cleaner-offset-checkpoint (Kafka's format; the log start
//     offset when absent);
//  2. decides whether to clean: dirty bytes / (clean + dirty bytes) >
//     MinCleanableDirtyRatio, or the first dirty segment's first batch is
//     older than MaxCompactionLag;
//  3. builds the offset map (key → latest offset) over the dirty section;
//     when the map is full it stops at a batch boundary and the round
//     cleans only up to there;
//  4. rewrites every segment from the log start to that offset, in groups
//     whose total size fits one segment, each group into one new segment
//     (see "Rewriting" and "Crash safety");
//  5. writes the checkpoint: the next round starts where the map stopped.
//
// # Rewriting
//
// A record is kept when it has a key, no later record of its key is
// mapped, and it is not a tombstone (null value) whose delete horizon has
// passed. Offsets are never renumbered: a rewritten batch keeps its base
// offset and its lastOffsetDelta, its codec (records are decompressed,
// filtered and recompressed), its timestamp type, its producer id, epoch
// and base sequence, and its leader epoch. A batch from which nothing is
// removed is copied byte for byte. Control batches (transaction markers)
// are copied as they are. A batch left with no record is dropped, except
// an empty header-only batch is kept, as Kafka keeps it, for the last batch
// of each live producer id (its sequence state; see
// Config.ProducerIDExpiration: the empty header of an expired producer goes
// at the next round, so a log with ever new producers does not grow by a
// header per producer without bound), and for the last batch of each
// rewritten group: a new segment then always ends exactly where the
// segments it replaces ended, which is how RecoverDir knows which segments
// a .swap segment replaces (and the log end never moves back).
//
// Tombstones are kept for DeleteRetention after the first round that
// rewrites their batch: that round sets the batch's delete-horizon bit
// (attribute bit 6) and stores now + DeleteRetention in its
// baseTimestamp, as Kafka does; a later round drops them once now is past
// the horizon and every older record of their key is gone (the tombstone
// lies below the offset the round's map reached).
//
// # Crash safety
//
// Each group is written as a segment with the .cleaned suffix, sealed and
// fsynced; then, under the partition's lock (Log.ReplaceSegments): its
// files are renamed .swap and the directory synced (the commit point), the
// old segments are renamed .deleted and the directory synced, the .swap
// files are renamed to their final names and the directory synced. A crash
// at any step leaves, after RecoverDir, either the old segments or the new
// one, never a mix.
//
// Not done (as the log keeps no transaction index yet): aborted
// transactional records are not removed, and transaction markers are never
// dropped.
type Compactor struct {
	cfg Config
	m   *offsetMap
	sc  scanner
	dec batch.Decoder
	bld *batch.Builder
	buf []byte
	// keep is per-record scratch of one batch's decisions.
	keep []bool
	// producers is the round's producer table (producerLastBatches),
	// kept across rounds.
	producers map[int64]producerLast
}

// NewCompactor returns the compact policy for cfg (defaults applied). A
// Compactor cleans one partition at a time: the Runner gives each worker
// its own.
func NewCompactor(cfg Config) (*Compactor, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Compactor{cfg: cfg, bld: batch.NewBuilder(batch.BuilderOptions{})}, nil
}

// Name returns "compaction".
func (c *Compactor) Name() string { return "compaction" }

// Section describes a partition's cleanable section, as a round sees it.
type Section struct {
	// FirstDirty is the first offset not cleaned yet (the checkpoint).
	FirstDirty int64
	// FirstUncleanable is the base offset of the first segment that may
	// not be cleaned (active, past the high watermark, or too young).
	FirstUncleanable int64
	// CleanBytes and DirtyBytes are the sizes of the cleanable segments
	// below and above FirstDirty.
	CleanBytes, DirtyBytes int64
	// Ratio is DirtyBytes / (CleanBytes + DirtyBytes), 0 when empty.
	Ratio float64
	// Due is set when the round should clean: Ratio above the minimum, or
	// the maximum compaction lag passed.
	Due bool
	// cleanable is the number of cleanable segments.
	cleanable int
}

// checkpointPath returns the partition's cleaner checkpoint path and the
// topic and partition its entry uses: those of the directory name
// ("topic-partition"), else the name itself (spaces and control characters
// replaced) and partition 0.
func checkpointPath(dir string) (path, topic string, partition int32) {
	topic, partition = checkpoint.EntryName(dir)
	return filepath.Join(dir, checkpoint.CleanerOffsetFile), topic, partition
}

// truncationAware is what *log.Partition adds to Log so that a round's
// cleaner checkpoint never survives a truncation that started during the
// round: TruncateTo lowers the checkpoint to the new log end, and a round
// that computed its end before the cut must not raise it again (offsets
// appended after the cut are dirty).
type truncationAware interface {
	// Truncations counts the truncations started so far.
	Truncations() uint64
	// WriteCleanerCheckpoint writes the checkpoint under the partition's
	// lock unless the count moved past truncations (then written is
	// false and nothing is written).
	WriteCleanerCheckpoint(offset int64, truncations uint64) (written bool, err error)
}

// cleanerCheckpointer is what *log.Partition adds to Log so that a
// partition of a log.Dir, whose cleaner checkpoint is an entry of the log
// directory's root file, is read through the partition.
type cleanerCheckpointer interface {
	CleanerCheckpoint() (offset int64, found bool, err error)
}

// ReadCleanerCheckpoint returns the first dirty offset the partition's
// cleaner-offset-checkpoint records; found is false when there is none.
func ReadCleanerCheckpoint(l Log) (offset int64, found bool, err error) {
	if c, ok := l.(cleanerCheckpointer); ok {
		return c.CleanerCheckpoint()
	}
	path, topic, part := checkpointPath(l.Dir())
	off, found, err := checkpoint.ReadOffset(l.FS(), path, topic, part)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return off, found, err
}

// section computes the cleanable section of segs (a Segments snapshot).
func (c *Compactor) section(l Log, segs []*segment.Segment, now time.Time) (Section, error) {
	hw := l.HighWatermark()
	start := l.LogStartOffset()
	var sec Section
	u := 0
	minLagMs := now.Add(-c.cfg.MinCompactionLag).UnixMilli()
	for ; u+1 < len(segs); u++ {
		s := segs[u]
		if s.NextOffset() > hw || segs[u+1].BaseOffset() > hw {
			break
		}
		if ts, _ := s.MaxTimestamp(); c.cfg.MinCompactionLag > 0 && ts > minLagMs {
			break
		}
	}
	sec.cleanable = u
	sec.FirstUncleanable = segs[u].BaseOffset()
	cp, found, err := ReadCleanerCheckpoint(l)
	if err != nil {
		return sec, err
	}
	first := max(start, segs[0].BaseOffset())
	if !found || cp < first || cp > segs[len(segs)-1].NextOffset() {
		cp = first
	}
	sec.FirstDirty = cp
	var oldestDirty int64 = -1
	for _, s := range segs[:u] {
		if s.NextOffset() <= cp {
			sec.CleanBytes += s.Size()
			continue
		}
		sec.DirtyBytes += s.Size()
		if oldestDirty < 0 {
			oldestDirty = s.FirstBatchMaxTimestamp()
		}
	}
	if total := sec.CleanBytes + sec.DirtyBytes; total > 0 {
		sec.Ratio = float64(sec.DirtyBytes) / float64(total)
	}
	if sec.FirstDirty >= sec.FirstUncleanable || sec.DirtyBytes == 0 {
		return sec, nil
	}
	sec.Due = sec.Ratio > c.cfg.MinCleanableDirtyRatio
	if c.cfg.MaxCompactionLag > 0 && oldestDirty >= 0 && now.UnixMilli()-oldestDirty > c.cfg.MaxCompactionLag.Milliseconds() {
		sec.Due = true
	}
	return sec, nil
}

// Section returns l's cleanable section as the next round would see it.
func (c *Compactor) Section(l Log) (Section, error) {
	segs, err := l.Segments()
	if err != nil {
		return Section{}, err
	}
	defer releaseAll(segs)
	return c.section(l, segs, c.cfg.Now())
}

// Apply runs one compaction round on l if it is due (see Compactor).
func (c *Compactor) Apply(ctx context.Context, l Log) (Result, error) {
	res := Result{CleanedTo: -1}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	// One round at a time per partition, whoever runs it: two would write
	// the same .cleaned files and swap segments under each other.
	release, err := l.ClaimCleaning()
	if err != nil {
		return res, wrapDir("compact", l, err)
	}
	defer release()
	var truncations uint64
	if tw, ok := l.(truncationAware); ok {
		truncations = tw.Truncations() // before the snapshot
	}
	segs, err := l.Segments()
	if err != nil {
		return res, wrapDir("compact", l, err)
	}
	defer releaseAll(segs)
	now := c.cfg.Now()
	sec, err := c.section(l, segs, now)
	if err != nil {
		return res, wrapDir("compact", l, err)
	}
	if !sec.Due {
		return res, nil
	}
	r, err := c.clean(ctx, l, segs, sec, now, truncations)
	if err != nil {
		return r, wrapDir("compact", l, err)
	}
	return r, nil
}

// clean runs steps 3 to 5 of a round.
func (c *Compactor) clean(ctx context.Context, l Log, segs []*segment.Segment, sec Section, now time.Time, truncations uint64) (Result, error) {
	res := Result{CleanedTo: -1}
	c.sc.read = 0
	if c.m == nil {
		c.m = newOffsetMap(c.cfg.OffsetMapBytes, c.cfg.KeyHash)
	} else {
		c.m.reset()
	}
	end, err := c.buildMap(ctx, segs[:sec.cleanable], sec.FirstDirty, sec.FirstUncleanable)
	if err != nil {
		return res, err
	}
	producers, err := c.producerLastBatches(segs)
	if err != nil {
		return res, err
	}
	// The segments to rewrite: from the first to the one holding end-1.
	n := 0
	for n < sec.cleanable && segs[n].BaseOffset() < end {
		n++
	}
	groups := c.group(segs[:n], l.SegmentBytes(), l.SegmentConfig().MaxIndexBytes)
	rd := &roundState{now: now, end: end, horizon: now.Add(c.cfg.DeleteRetention).UnixMilli(), producers: producers,
		producerExpiry: now.Add(-c.cfg.ProducerIDExpiration).UnixMilli()}
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := c.cleanGroup(l, g, rd, &res); err != nil {
			return res, err
		}
	}
	if tw, ok := l.(truncationAware); ok {
		// Written under the partition's lock, and only when no truncation
		// started since the round took its snapshot (the one TruncateTo
		// clamped then stays).
		written, err := tw.WriteCleanerCheckpoint(end, truncations)
		if err != nil {
			return res, err
		}
		if !written {
			end = -1
		}
	} else {
		path, topic, part := checkpointPath(l.Dir())
		if err := checkpoint.WriteOffset(l.FS(), path, topic, part, end); err != nil {
			return res, err
		}
	}
	res.Compacted = true
	res.CleanedTo = end
	res.BytesRead = c.sc.read
	c.cfg.Logger.Info("partlog/compaction: cleaned", "dir", l.Dir(), "firstDirty", sec.FirstDirty,
		"cleanedTo", end, "ratio", sec.Ratio, "keys", c.m.Len(), "segmentsIn", n,
		"segmentsOut", res.SegmentsWritten, "bytesIn", res.BytesDeleted, "bytesOut", res.BytesWritten,
		"recordsRemoved", res.RecordsRemoved)
	return res, nil
}

// errMapFull stops the map scan.
var errMapFull = errors.New("offset map full")

// buildMap maps the keys of the dirty section [from, to) and returns the
// offset the round cleans up to: to, or the base of the first batch that
// did not fit the map.
func (c *Compactor) buildMap(ctx context.Context, segs []*segment.Segment, from, to int64) (int64, error) {
	end := to
	for _, s := range segs {
		if s.NextOffset() <= from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		err := c.sc.forEach(s, from, func(b batch.Batch, _ int64) error {
			if isLegacy(b) {
				// Kept verbatim, keys not mapped (see isLegacy).
				if batch.Legacy(b).Offset() >= to {
					return errMapFull
				}
				return nil
			}
			if b.BaseOffset() >= to {
				return errMapFull
			}
			if b.Attributes().IsControl() {
				return nil
			}
			it := b.Records(&c.dec)
			for {
				rec, ok, err := it.Next()
				if err != nil {
					return fmt.Errorf("%s: batch at offset %d: %w", s.LogPath(), b.BaseOffset(), err)
				}
				if !ok {
					return nil
				}
				if rec.Key == nil || rec.Offset < from {
					continue
				}
				if !c.m.Put(rec.Key, rec.Offset) {
					end = b.BaseOffset()
					return errMapFull
				}
			}
		})
		if errors.Is(err, errMapFull) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if end <= from {
		return 0, fmt.Errorf("%w: %d bytes hold %d keys", ErrMapTooSmall, c.cfg.OffsetMapBytes, c.m.Len())
	}
	return end, nil
}

// producerLast is what a round knows of a producer's last batch.
type producerLast struct {
	lastOffset   int64
	maxTimestamp int64
	// openTxn: the batch is transactional data, so no marker has ended
	// its transaction yet.
	openTxn bool
}

// producerLastBatches returns, for every producer id in the log, what its
// last batch says: if compaction empties that batch, an empty header of it
// stays while the producer is live (roundState.liveLast), so the producer's
// sequence state survives.
func (c *Compactor) producerLastBatches(segs []*segment.Segment) (map[int64]producerLast, error) {
	if c.producers == nil {
		c.producers = make(map[int64]producerLast)
	}
	clear(c.producers)
	for _, s := range segs {
		err := c.sc.forEachHeader(s, func(b batch.Batch) error {
			if pid := b.ProducerID(); pid >= 0 {
				a := b.Attributes()
				c.producers[pid] = producerLast{lastOffset: b.LastOffset(), maxTimestamp: b.MaxTimestamp(),
					openTxn: a.IsTransactional() && !a.IsControl()}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c.producers, nil
}

// group splits segs into runs that fit one segment, as Kafka's
// groupSegmentsBySize does: total size within segmentBytes, offsets within
// MaxInt32 of the run's base, and index entries within what one segment's
// indexes (maxIndexBytes each) hold, so that appending the run's batches
// to one new segment cannot run out of index room.
func (c *Compactor) group(segs []*segment.Segment, segmentBytes int64, maxIndexBytes int) [][]*segment.Segment {
	if segmentBytes <= 0 {
		segmentBytes = segment.DefaultMaxSegmentBytes
	}
	if maxIndexBytes <= 0 {
		maxIndexBytes = segment.DefaultMaxIndexBytes
	}
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

// Index entry sizes (frozen: Kafka's .index and .timeindex formats).
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// roundState is what every batch decision of a round needs.
type roundState struct {
	now     time.Time
	end     int64 // the map covers offsets below end (with earlier rounds)
	horizon int64 // the delete horizon the round stamps
	// producers maps each producer id in the log to its last batch.
	producers map[int64]producerLast
	// producerExpiry is now minus Config.ProducerIDExpiration: a producer
	// whose last batch's max timestamp is at or below it has expired.
	producerExpiry int64
}

// liveLast reports whether b is the last batch of a live producer, whose
// empty header compaction keeps. A producer is live, as Kafka's producer
// expiry has it, while its last batch's max timestamp lies less than
// Config.ProducerIDExpiration before now, or while its transaction is open
// (its last batch is transactional data: no marker has ended it).
func (rd *roundState) liveLast(b batch.Batch) bool {
	pid := b.ProducerID()
	if pid < 0 {
		return false
	}
	pl, ok := rd.producers[pid]
	return ok && pl.lastOffset == b.LastOffset() && (pl.openTxn || pl.maxTimestamp > rd.producerExpiry)
}
