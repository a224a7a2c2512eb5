package log

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/segment"
)

// ErrSegmentsChanged is returned by DeleteExpired and Compact when
// the segments they were given are no longer what the partition holds (a
// roll, a truncation, retention or another compaction round changed the
// list since the caller took its snapshot), or are segments they may not
// touch (the active one, or one at or past the high watermark). Nothing
// changed; take a new snapshot and try again. Internal: no Kafka code.
var ErrSegmentsChanged = errors.New("partlog/log: segments changed")

// ErrCleaningInProgress is returned by Compact while another compaction
// round holds the partition's cleaning claim. Nothing changed; try again after that
// round ends. Internal: no Kafka code.
var ErrCleaningInProgress = errors.New("partlog/log: cleaning in progress")

// ErrTieredCompaction is returned by Compact on a partition its Dir tiers
// (DirConfig.Remote, RemoteConfig.TopicEnabled): a round would rewrite
// segments whose copies keep the records it removes, and reads below the
// local log start would serve them again once the local retention deleted
// the cleaned segments. Nothing changed. Kafka refuses compaction on a
// topic with remote storage enabled (its config validation answers
// INVALID_CONFIG (40)); leave compacted topics out of TopicEnabled.
var ErrTieredCompaction = errors.New("partlog/log: compaction of a tiered partition")

// segmentRefs returns the current segments in ascending base offset order;
// the last one is the active segment. The caller owns one reference on each
// (taken for it) and must drop it with Unref; the segments stay open and
// readable until then even if the partition deletes or replaces them.
func (p *Partition) segmentRefs() ([]*segment.Segment, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	snap, err := p.acquireSnapshot()
	if err != nil {
		return nil, err
	}
	defer p.releaseSnapshot(snap)
	out := make([]*segment.Segment, len(snap.list))
	for i, seg := range snap.list {
		seg.Ref()
		out[i] = seg
	}
	return out, nil
}

// errCompactionStopped is the cause a compaction round's context ends
// with when Close stops it; Compact returns it (wrapping ErrClosed).
var errCompactionStopped = fmt.Errorf("%w: compaction stopped by Close", ErrClosed)

// cleaningClaim is the partition's cleaning claim: at most one cleaning
// round holds it (Compact takes it for the whole round), so two rounds
// never write the same .cleaned files or swap segments under each other,
// whoever runs them; a second claim fails at once with
// ErrCleaningInProgress, as Kafka's cleaner skips a partition another
// cleaner thread is cleaning. Close (stop) ends the running round and
// waits for it. The claim is in memory only: it serializes the cleaners of
// this Partition value, not of other processes opening the same
// directory. The zero value is ready to use.
type cleaningClaim struct {
	mu sync.Mutex
	// stopped is set by stop: no claim is granted after it.
	stopped bool
	// cancel ends the running round's context, and done is closed when
	// the round releases the claim; both nil when no round runs.
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// claim grants the claim for one round unless closed or stop was called
// (ErrClosed) or a round holds it (ErrCleaningInProgress). The round runs
// under the returned context, which stop ends with a cause wrapping
// ErrClosed; release ends the claim and may be called more than once.
func (c *cleaningClaim) claim(ctx context.Context, closed bool, dir string) (context.Context, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if closed || c.stopped {
		return nil, nil, ErrClosed
	}
	if c.done != nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrCleaningInProgress, dir)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	c.cancel, c.done = cancel, done
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			cancel(nil)
			close(done)
			c.cancel, c.done = nil, nil
		})
	}
	return ctx, release, nil
}

// stop refuses every later claim, ends the running round's context (if a
// round runs) and waits until that round has released the claim.
func (c *cleaningClaim) stop() {
	c.mu.Lock()
	c.stopped = true
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if done == nil {
		return
	}
	cancel(errCompactionStopped)
	<-done
}

// deleteSegments removes the oldest segments, as time or size based
// retention does (DeleteExpired): oldest must be exactly the first len(oldest) segments of
// the current list (the same pointers), not the active one, and the next
// segment's base offset must be at or below the high watermark; otherwise
// the error wraps ErrSegmentsChanged and nothing changes, as when the
// partition's truncation count is no longer truncations (a segment cut and
// sealed again by later appends is the same pointer, with other batches).
// The log start offset rises to the next segment's base offset (persisted first, as
// DeleteRecordsBefore does); the segments' files are renamed *.deleted and
// removed when the last reader lets go; the directory is synced.
func (p *Partition) deleteSegments(oldest []*segment.Segment, truncations uint64) error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if p.truncations.Load() != truncations {
		return fmt.Errorf("%w: the partition was truncated after the segments were planned", ErrSegmentsChanged)
	}
	if len(oldest) == 0 {
		return nil
	}
	list := p.segs.Load().list
	n := len(oldest)
	if n >= len(list) {
		return fmt.Errorf("%w: %d segments to delete, the partition has %d (the active one stays)", ErrSegmentsChanged, n, len(list))
	}
	for i, seg := range oldest {
		if list[i] != seg {
			return fmt.Errorf("%w: segment %d is not the partition's segment %d", ErrSegmentsChanged, seg.BaseOffset(), i)
		}
	}
	next := list[n].BaseOffset()
	if next > p.mu.hw.Offset {
		return fmt.Errorf("%w: deleting up to offset %d would pass the high watermark %d", ErrSegmentsChanged, next, p.mu.hw.Offset)
	}
	// The log start must not pass the recovery point over segments a
	// roll has not flushed yet (durability.go): Open would cut the log
	// at one of them.
	if err := p.flushSealedBelowLocked(next); err != nil {
		return fmt.Errorf("partlog/log: delete segments of %s: %w", p.dir, err)
	}
	if next > p.logStart.Load() {
		// The producer state of the segments must be durable before
		// the checkpoint moves: an Open after a crash removes the
		// segments wholly below the log start (dropOldestLocked's
		// check then finds the snapshot on disk).
		if err := p.producersDurableFromLocked(next); err != nil {
			return fmt.Errorf("partlog/log: delete segments of %s: %w", p.dir, err)
		}
		if err := p.ckpts.writeLogStart(next); err != nil {
			return fmt.Errorf("partlog/log: delete segments of %s: %w", p.dir, err)
		}
		p.logStart.Store(next)
		// Tiered, the copies below next are still the log's: the
		// cache follows the whole log's start (tier.go).
		p.mu.epochs.TruncateFromStart(p.tierPart.Load().epochsStart(next))
	}
	return p.dropOldestLocked(n, "retention")
}

// dropOldestLocked publishes the list without its first n segments and
// deletes them (oldest first: a failure leaves a suffix, which the log start
// checkpoint already covers), then syncs the directory. REQUIRES: mu held;
// the log start offset is at or above the (n+1)th segment's base.
func (p *Partition) dropOldestLocked(n int, why string) error {
	// The dropped segments may hold the only durable record of a
	// producer's batches or open transaction: the roll snapshot at the
	// first segment kept may not be written yet.
	if err := p.producersDurableFromLocked(p.segs.Load().list[n].BaseOffset()); err != nil {
		return fmt.Errorf("partlog/log: delete segments of %s (%s): %w", p.dir, why, err)
	}
	snap := p.segs.Load()
	dropped := snap.list[:n]
	if err := p.spliceSegmentsLocked(0, n); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
	err := deleteSegmentFiles(dropped, false, &p.dur)
	p.mu.dirDirty = true
	if err != nil {
		p.setFailedLocked(failedf(fmt.Errorf("partlog/log: delete segments of %s (%s): %w", p.dir, why, err)))
		return p.mu.failed
	}
	p.snaps.dropBelowLocked(p.logStart.Load()) // snapshot.go
	if err := p.dur.syncDir(); err != nil {
		return fmt.Errorf("partlog/log: delete segments of %s (%s): %w", p.dir, why, err)
	}
	p.mu.dirDirty = false
	p.logger.Info("partlog/log: deleted segments", "dir", p.dir, "why", why,
		"segments", n, "logStart", p.logStart.Load())
	return nil
}

// producersDurableFromLocked makes sure that a producer snapshot at or
// above from, and at or below the log end, is durable when the partition
// knows any producer, before the segments below from are deleted (now, or
// by an Open after a roll): one on disk gets its directory entry synced;
// without one, the snapshot of the state at the log end is written and
// synced once the batches below it are durable (as RestoreProducers writes
// one). A crash after the deletion then still knows every producer.
// REQUIRES: mu held.
func (p *Partition) producersDurableFromLocked(from int64) error {
	if len(p.mu.producers.Entries()) == 0 {
		return nil
	}
	if p.snaps.onDiskFromLocked(from, p.mu.end.Offset) {
		return p.dur.syncDir()
	}
	if p.dur.group.syncedSeq() != p.mu.writeSeq {
		if err := p.flushLocked(); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: flush %s: %w", p.dir, err))
			return p.mu.failed
		}
	}
	return p.snaps.durableLocked(p.mu.producers, p.mu.end.Offset, p.mu.writeSeq, &p.mu.dirDirty)
}

// replaceSegments swaps new segments in for old ones, for Compact: old
// must be a contiguous run of sealed segments of the current list (the same
// pointers), not the active one, and the segment after the last of them
// must start at or below the high watermark (the segment holding the high
// watermark is never replaced); otherwise the error wraps
// ErrSegmentsChanged and commit is not called. new must be sealed segments
// in ascending base offset order covering offsets inside old's range
// (compaction never renumbers), possibly none; when old starts with the
// first segment, new must start with a segment of the same base offset.
// truncations is the partition's truncation count when the caller read old:
// after a truncation old may hold other batches than the ones new was
// made from (a cut segment sealed again by later appends is the same
// pointer), so a changed count is ErrSegmentsChanged too.
//
// Under the partition's write lock replaceSegments calls commit, which
// renames the files (compaction: new .cleaned to .swap, old to .deleted
// with MarkDeleted, new .swap to plain names, syncing the directory
// between). If commit fails, nothing is published and its error is
// returned. Otherwise the list with new in place of old is published, the
// partition takes over the reference each new segment was created with, and
// drops its own references on old (their files are removed at the last
// reader's Unref). The log start offset does not change.
func (p *Partition) replaceSegments(old, new []*segment.Segment, truncations uint64, commit func() error) error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if p.truncations.Load() != truncations {
		return fmt.Errorf("%w: the partition was truncated after the segments were read", ErrSegmentsChanged)
	}
	if len(old) == 0 {
		return fmt.Errorf("%w: nothing to replace", ErrSegmentsChanged)
	}
	list := p.segs.Load().list
	first := -1
	for i, seg := range list {
		if seg == old[0] {
			first = i
			break
		}
	}
	last := first + len(old) - 1
	if first < 0 || last >= len(list)-1 {
		return fmt.Errorf("%w: segment %d is not a sealed segment of the partition", ErrSegmentsChanged, old[0].BaseOffset())
	}
	for i, seg := range old {
		if list[first+i] != seg || !seg.Sealed() {
			return fmt.Errorf("%w: segment %d is not the partition's sealed segment %d", ErrSegmentsChanged, seg.BaseOffset(), first+i)
		}
	}
	if next := list[last+1].BaseOffset(); next > p.mu.hw.Offset {
		return fmt.Errorf("%w: segments up to offset %d reach past the high watermark %d", ErrSegmentsChanged, next, p.mu.hw.Offset)
	}
	lo, hi := old[0].BaseOffset(), list[last+1].BaseOffset()
	prev := lo
	for _, seg := range new {
		if !seg.Sealed() || seg.BaseOffset() < prev || seg.NextOffset() > hi {
			return base.AssertionFailedf("partlog/log: replacement segment %d [%d, %d) is unsealed or outside [%d, %d) or out of order",
				seg.BaseOffset(), seg.BaseOffset(), seg.NextOffset(), lo, hi)
		}
		prev = seg.NextOffset()
	}
	if first == 0 && (len(new) == 0 || new[0].BaseOffset() != lo) {
		// Reads locate an offset by the last segment whose base is at or
		// below it: the first segment must keep its base.
		return base.AssertionFailedf("partlog/log: replacing the first segment (base %d) needs a first replacement with the same base", lo)
	}
	// A replacement may end below hi: that gap must lie below the
	// recovery point, where Open explains it by compaction, not above
	// it, where Open cuts the log at a segment ending early
	// (durability.go).
	if err := p.flushSealedBelowLocked(hi); err != nil {
		return fmt.Errorf("partlog/log: replace segments of %s: %w", p.dir, err)
	}
	if err := commit(); err != nil {
		// The files may now hold the old segments, the new ones or a
		// compaction's .swap leftovers (Open completes or undoes it):
		// refuse writes until a reopen sorts it out.
		p.setFailedLocked(failedf(fmt.Errorf("partlog/log: replace segments of %s: %w", p.dir, err)))
		return err
	}
	// A published bound may name a replaced segment only when it sits
	// exactly at the next segment's base (after a roll, before the next
	// append): name that segment instead, whose position 0 is the same
	// place in the log.
	for _, b := range []*position{&p.mu.hw, &p.mu.end} {
		if b.SegBase >= lo && b.SegBase < hi {
			if b.Offset != hi {
				return base.AssertionFailedf("partlog/log: bound at offset %d in segment %d, inside the replaced range [%d, %d)", b.Offset, b.SegBase, lo, hi)
			}
			*b = position{Offset: hi, SegBase: hi, Pos: 0}
		}
	}
	p.publishLocked()
	if err := p.spliceSegmentsLocked(first, last+1, new...); err != nil {
		p.logger.Warn("partlog/log: releasing a segment failed", "dir", p.dir, "err", err)
	}
	var firstErr error
	for _, seg := range old {
		if err := seg.Unref(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("partlog/log: replace segments of %s: release segment %d: %w", p.dir, seg.BaseOffset(), err)
		}
	}
	p.logger.Info("partlog/log: replaced segments", "dir", p.dir, "old", len(old), "new", len(new),
		"from", lo, "to", hi)
	return firstErr
}
