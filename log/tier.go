package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/mmap"
	"github.com/partlog/partlog/segment"
)

// This file is tiered storage's background side (Kafka's KIP-405 for a
// Dir): a copier and deleter per Dir (dirTier) that runs, with a bounded
// number of workers, one pass at a time over each partition's tier part
// (partTier): settle the copies left "copying" or "deleting", delete
// expired remote segments, copy the durable sealed segments below the high
// watermark and the last stable offset, and apply the local retention to
// segments whose copy is recorded. A truncation drops the copies of the
// offsets it cuts before the cut is visible (partTier.dropFrom,
// partTier.restartAt), and DeleteRecordsBefore those below the whole
// log's new start (partTier.moveStart). The read
// side is in tierread.go, the metadata file in tiermeta.go.

// RemoteConfig turns on tiered storage for a Dir (DirConfig.Remote): the
// sealed segments of its partitions are copied to Storage in the
// background, local segments are deleted once copied and past the local
// retention, and reads below a partition's local log start are served
// from the copies.
type RemoteConfig struct {
	// Storage is where the copies go. Required.
	Storage RemoteStorage
	// TopicEnabled reports whether a topic's partitions are tiered
	// (Kafka's remote.storage.enable); nil means every topic. Leave
	// compacted topics out (Kafka refuses them): Partition.Compact
	// refuses a tiered partition with ErrTieredCompaction, and a
	// partition that has a cleaner checkpoint (compacted while it was
	// not tiered) is neither copied nor trimmed by the local retention.
	TopicEnabled func(topic string) bool
	// LocalRetentionMs and LocalRetentionBytes bound what stays local
	// (Kafka's local.retention.ms and local.retention.bytes): the oldest
	// segment whose copy is recorded is deleted locally when its newest
	// record is older than LocalRetentionMs, or while the partition's
	// local size less that segment stays at or above
	// LocalRetentionBytes. 0 or less means no bound of that kind; with
	// neither, no local segment is deleted by tiering. The active segment
	// and segments not yet copied are never deleted by tiering.
	LocalRetentionMs, LocalRetentionBytes int64
	// RetentionMs and RetentionBytes bound the whole log, remote copies
	// included (Kafka's retention.ms and retention.bytes): a copy no
	// longer held locally is deleted from Storage when its newest record
	// is older than RetentionMs, or while the size of the whole log (the
	// copies no longer held locally plus the local segments, so that a
	// copy still held locally counts once) less that copy stays at or
	// above RetentionBytes. 0 or less means no bound. Local segments are
	// bounded by the partition's own retention policy
	// (Partition.DeleteExpired), as without tiering. Every time rule reads
	// the partition's Config.Now.
	RetentionMs, RetentionBytes int64
	// Workers bounds the partitions the Dir copies to and deletes from
	// Storage at once (Kafka's remote.log.manager.thread.pool.size); 0
	// means 2.
	Workers int
	// Interval is how often each partition is looked at (Kafka's
	// remote.log.manager.task.interval.ms); 0 means 30 seconds.
	Interval time.Duration
	// CacheBytes bounds the memory of the Dir's cache of fetched remote
	// indexes and segment chunks; 0 means 64 MiB.
	CacheBytes int64
	// ChunkBytes is the size of the segment chunks reads fetch and
	// cache; 0 means 1 MiB.
	ChunkBytes int64
}

const (
	defaultRemoteWorkers  = 2
	defaultRemoteInterval = 30 * time.Second
	defaultRemoteCache    = 64 << 20
	defaultRemoteChunk    = 1 << 20
)

// RemoteStats are the tiered storage figures of a partition
// (Stats.Remote); zero when the partition is not tiered.
type RemoteStats struct {
	// Enabled reports that the partition is tiered.
	Enabled bool
	// LogStartOffset is the log start of the whole log, remote included:
	// the first offset of the oldest copied segment, or the log start
	// DeleteRecordsBefore moved inside it; -1 when no copy holds offsets
	// at or past the whole log's start.
	LogStartOffset int64
	// Segments and Bytes count the copied segments and their sizes.
	Segments int
	Bytes    int64
	// CopyLagSegments and CopyLagBytes count the sealed segments below
	// the high watermark, the last stable offset and the recovery point
	// not copied yet, as of the last pass (a truncation clears them).
	CopyLagSegments int
	CopyLagBytes    int64
	// Copies counts the segments copied since Open, CopiedBytes their
	// sizes; CopyFailures the copies that failed (each is retried).
	Copies, CopiedBytes, CopyFailures int64
	// Deletes counts the copies total retention deleted; DeleteFailures
	// the passes whose cleanup or deletions failed (retried next pass).
	Deletes, DeleteFailures int64
	// LocalSegmentsDeleted counts the local segments the local retention
	// deleted after their copy was recorded.
	LocalSegmentsDeleted int64
	// RemoteReads counts reads served from copies; ReadFailures those that
	// failed.
	RemoteReads, ReadFailures int64
}

// dirTier is a Dir's copier and deleter.
type dirTier struct {
	cfg    RemoteConfig
	logger *slog.Logger
	cache  *remoteCache

	mu    sync.Mutex
	parts map[TopicPartition]*partTier

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newDirTier checks cfg and returns the Dir's tier, not running yet.
func newDirTier(cfg RemoteConfig, logger *slog.Logger) (*dirTier, error) {
	if cfg.Storage == nil {
		return nil, fmt.Errorf("%w: RemoteConfig.Storage is nil", ErrInvalidConfig)
	}
	if cfg.Workers < 0 || cfg.Interval < 0 || cfg.CacheBytes < 0 || cfg.ChunkBytes < 0 {
		return nil, fmt.Errorf("%w: RemoteConfig has a negative worker count, interval or size", ErrInvalidConfig)
	}
	if cfg.Workers == 0 {
		cfg.Workers = defaultRemoteWorkers
	}
	if cfg.Interval == 0 {
		cfg.Interval = defaultRemoteInterval
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = defaultRemoteCache
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = defaultRemoteChunk
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &dirTier{cfg: cfg, logger: logger, cache: newRemoteCache(cfg.CacheBytes),
		parts: make(map[TopicPartition]*partTier), ctx: ctx, cancel: cancel}, nil
}

// epochsStart returns where the leader epoch cache starts when the local
// log starts at localStart: the whole log's start (wholeStart), as
// Kafka's cache follows its logStartOffset, not the local one, since the
// copies below the local start are still the log's. A nil part (no
// tiering), or one whose metadata could not be read (nothing below the
// local start is served), gives localStart.
func (t *partTier) epochsStart(localStart int64) int64 {
	if t == nil || t.broken != nil {
		return localStart
	}
	start, _, _ := t.wholeStart(localStart)
	return start
}

// cutEpochsBelowStart cuts the leader epoch cache of a partition a Dir
// that tiers just opened at the whole log's start (epochsStart), which
// Open left to it (dirMember.tiered): the entries below it go and the
// first remaining one moves up to it, in memory (the next write of the
// file keeps it; a crash before, the next Open does it again).
func (p *Partition) cutEpochsBelowStart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.epochs.TruncateFromStart(p.tierPart.Load().epochsStart(p.logStart.Load()))
}

// attach makes p, the partition tp just opened, tiered when its topic is.
func (d *dirTier) attach(tp TopicPartition, p *Partition) {
	if d.cfg.TopicEnabled != nil && !d.cfg.TopicEnabled(tp.Topic) {
		return
	}
	t := &partTier{d: d, p: p, tp: tp}
	m, err := loadRemoteMeta(p.cfg.FS, p.dir, tp)
	if err != nil {
		t.broken = fmt.Errorf("partlog/log: %s: %s: %w", p.dir, remoteMetadataFile, err)
		d.logger.Error("partlog/log: tiered storage is off for a partition whose remote log metadata cannot be read",
			"partition", tp.String(), "err", err)
		m = &remoteMeta{}
	}
	t.meta.Store(m)
	// Copies of offsets past the log end (a crash took the end of the
	// log after they were made) describe batches the log no longer
	// holds: they are dropped, durably, before anything is appended in
	// their place.
	if err := t.dropFrom(p.LogEndOffset()); err != nil {
		t.broken = err
		d.logger.Error("partlog/log: tiered storage is off for a partition whose copies past its log end cannot be dropped",
			"partition", tp.String(), "err", err)
	}
	p.tierPart.Store(t)
	// A whole log start past the local one is a DeleteRecordsBefore a
	// crash interrupted after the metadata recorded it and before the
	// log start checkpoint did: it is finished, so that the local
	// segments below it are not served either.
	if start := t.meta.Load().start; start > p.LogStartOffset() {
		// The high watermark reached start when the call began; under
		// DisableAutoHighWatermark its checkpoint may lag behind it, and
		// Kafka never leaves it below the log start.
		var err error
		if start > p.HighWatermark() {
			err = p.SetHighWatermark(start)
		}
		if err == nil {
			err = p.DeleteRecordsBefore(start)
		}
		if err != nil {
			d.logger.Warn("partlog/log: the log start recorded in the remote log metadata is past the local log start and cannot be moved there",
				"partition", tp.String(), "start", start, "localStart", p.LogStartOffset(), "err", err)
		}
	}
	d.mu.Lock()
	d.parts[tp] = t
	d.mu.Unlock()
}

// deletePartition stops tiering tp, whose partition is being deleted, and
// deletes every copy its metadata records: they are recorded "deleting"
// (durably, so that a crash leaves them to the cleanup of the partition,
// which is not deleted yet), deleted from the store, then their records
// dropped. On a store error the partition stays tiered with its copies
// recorded "deleting" (its next passes delete them) and the error is
// returned. The partition stays open meanwhile; reads of its copies fail
// from the start.
func (d *dirTier) deletePartition(tp TopicPartition) error {
	d.mu.Lock()
	t := d.parts[tp]
	delete(d.parts, tp)
	d.mu.Unlock()
	if t == nil {
		return nil
	}
	t.runMu.Lock() // waits for a pass in progress
	defer t.runMu.Unlock()
	if t.broken != nil {
		d.logger.Warn("partlog/log: the copies of a deleted partition whose remote log metadata cannot be read stay in the store",
			"partition", tp.String(), "err", t.broken)
		t.detached = true
		return nil
	}
	err := t.dropFrom(-1)
	if err == nil {
		err = t.cleanup(d.ctx)
	}
	if err != nil {
		d.mu.Lock()
		d.parts[tp] = t
		d.mu.Unlock()
		return err
	}
	t.detached = true
	return nil
}

// start starts the scheduler.
func (d *dirTier) start() {
	d.wg.Go(d.loop)
}

// stop stops the scheduler and waits for the passes in progress (a copy is
// abandoned through its context; its record stays "copying" and the next
// pass of the next run cleans it up).
func (d *dirTier) stop() {
	d.cancel()
	d.wg.Wait()
}

// loop runs a pass over every tiered partition each Interval, Workers
// partitions at a time; the first one Interval after
// OpenDir.
func (d *dirTier) loop() {
	timer := time.NewTimer(d.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-timer.C:
		}
		d.passAll()
		timer.Reset(d.cfg.Interval)
	}
}

// passAll runs one pass over every tiered partition.
func (d *dirTier) passAll() {
	d.mu.Lock()
	ts := make([]*partTier, 0, len(d.parts))
	for _, t := range d.parts {
		ts = append(ts, t)
	}
	d.mu.Unlock()
	jobs := make(chan *partTier)
	var wg sync.WaitGroup
	for range min(d.cfg.Workers, max(len(ts), 1)) {
		wg.Go(func() {
			for t := range jobs {
				t.pass(d.ctx)
			}
		})
	}
	for _, t := range ts {
		select {
		case jobs <- t:
		case <-d.ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
}

// partTier is a partition's tiered storage part: its remote log metadata
// and counters. Passes run one at a time (runMu). A pass and a truncation
// (dropFrom) change the metadata, under metaMu, publishing each new
// version for lock-free readers.
type partTier struct {
	d  *dirTier
	p  *Partition
	tp TopicPartition

	// meta is the current remote log metadata, replaced whole.
	meta atomic.Pointer[remoteMeta]
	// broken is set when the metadata could not be read at attach: the
	// partition is never copied or cleaned (reads of its offsets below
	// the local start fail with it).
	broken error

	// runMu serializes passes; detached (under runMu) reports that the
	// partition left the Dir.
	runMu    sync.Mutex
	detached bool

	// metaMu serializes the changes of the metadata: each loads the
	// current version, changes a copy and publishes it under metaMu.
	// cuts counts the truncations (dropFrom, restartAt) and the moves
	// of the whole log's start (moveStart): a copy is recorded only when
	// none came since its segment list was taken, so each either sees
	// the copy recorded and drops it, or the copy is never recorded.
	// Lock order: the partition's mu, then metaMu.
	metaMu sync.Mutex
	cuts   uint64
	// unsure is set while the file may hold another version than the
	// published one: a write failed, perhaps after its rename
	// (publishLocked). The local retention writes the published version
	// again before it deletes anything (a failed truncation may have
	// left the copies of the segments it would delete "deleting" in the
	// file). Guarded by metaMu.
	unsure bool

	lagSegs, lagBytes               atomic.Int64
	copies, copiedBytes, copyFails  atomic.Int64
	deletes, deleteFails, localDels atomic.Int64
	remoteReads, readFails          atomic.Int64
}

// stats returns the partition's RemoteStats.
func (t *partTier) stats() RemoteStats {
	st := RemoteStats{Enabled: true, LogStartOffset: -1,
		CopyLagSegments: int(t.lagSegs.Load()), CopyLagBytes: t.lagBytes.Load(),
		Copies: t.copies.Load(), CopiedBytes: t.copiedBytes.Load(), CopyFailures: t.copyFails.Load(),
		Deletes: t.deletes.Load(), DeleteFailures: t.deleteFails.Load(), LocalSegmentsDeleted: t.localDels.Load(),
		RemoteReads: t.remoteReads.Load(), ReadFailures: t.readFails.Load()}
	m := t.meta.Load()
	for _, e := range m.segs {
		if e.state != remoteCopied {
			continue
		}
		if st.LogStartOffset < 0 {
			// No copy in use lies wholly below the start (remoteMeta).
			st.LogStartOffset = max(e.desc.BaseOffset, m.start)
		}
		st.Segments++
		st.Bytes += e.desc.Size
	}
	return st
}

// publishLocked makes m durable, then current. On error nothing is
// published and the file holds the old or the new version; either is
// safe: every change writes a state that holds whichever of the two a
// crash leaves (a "copying" or "deleting" record, settled by the next
// pass, or one fewer record of a copy already deleted), and the next
// publish writes the current version again. Until one succeeds, nothing
// destroys what the version that failed still needs: the cleanup records
// its deletions first, and the local retention writes the current
// version again first (unsure).
// REQUIRES: metaMu held.
func (t *partTier) publishLocked(m *remoteMeta) error {
	if err := m.store(t.p.cfg.FS, t.p.dir); err != nil {
		t.unsure = true
		return fmt.Errorf("partlog/log: %s: write %s: %w", t.p.dir, remoteMetadataFile, err)
	}
	t.meta.Store(m)
	t.unsure = false
	return nil
}

// resync writes the published metadata again when a write failed since
// the last one that succeeded (unsure), so that the file holds it.
func (t *partTier) resync() error {
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	if !t.unsure {
		return nil
	}
	return t.publishLocked(t.meta.Load())
}

// change applies f to a copy of the current metadata and publishes the
// result when f reports a change.
func (t *partTier) change(f func(m *remoteMeta) bool) error {
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	m := t.meta.Load().clone()
	if !f(m) {
		return nil
	}
	return t.publishLocked(m)
}

// dropFrom records "deleting" every copy holding offsets at or past end
// (all of them when end < 0), durably, and counts a truncation: a
// truncation to end calls it before the cut is visible (the partition's
// mu held), attach with the log end. The copy lag is cleared (the next
// pass counts it again). The next pass deletes the copies from the store.
// On error the truncation changes nothing. A nil part (a partition its
// Dir does not tier) has nothing to drop: the core calls it without a
// check.
func (t *partTier) dropFrom(end int64) error { return t.cut(end, math.MaxInt64) }

// cut is dropFrom(end) that also lowers the whole log's start to start
// when it is above, in the same durable write (restartAt).
func (t *partTier) cut(end, start int64) error {
	if t == nil || t.broken != nil {
		return nil // nothing is recorded: reads and copies are off
	}
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	t.cuts++
	t.lagSegs.Store(0)
	t.lagBytes.Store(0)
	m := t.meta.Load()
	var n *remoteMeta
	if start < m.start {
		n = m.clone()
		n.start = start
	}
	for i, e := range m.segs {
		if e.desc.EndOffset < end || e.state == remoteDeleting {
			continue
		}
		if n == nil {
			n = m.clone()
		}
		n.segs[i].state = remoteDeleting
	}
	if n == nil {
		return nil
	}
	return t.publishLocked(n)
}

// moveStart raises the whole log's start to offset, durably, for
// DeleteRecordsBefore (the partition's mu held), before the local log
// start moves: the copies wholly below offset are recorded "deleting" in
// the same write (no read uses them from then on, and the next pass
// deletes them from the store), and no copy started before is recorded,
// since its segment may lie below offset: as Kafka's DeleteRecords moves
// UnifiedLog.logStartOffset, and its RemoteLogManager deletes the remote
// segments wholly below it. Nothing changes when offset is at or below
// the start. On error nothing changed. A nil part has nothing to move, and
// neither has a part whose metadata could not be read (no offset below the
// local log start is read through it).
func (t *partTier) moveStart(offset int64) error {
	if t == nil || t.broken != nil {
		return nil
	}
	t.metaMu.Lock()
	defer t.metaMu.Unlock()
	m := t.meta.Load()
	if offset <= m.start {
		return nil
	}
	n := m.clone()
	n.start = offset
	for i, e := range n.segs {
		if e.desc.EndOffset < offset && e.state != remoteDeleting {
			n.segs[i].state = remoteDeleting
		}
	}
	if err := t.publishLocked(n); err != nil {
		return err
	}
	t.cuts++
	return nil
}

// restartAt records every copy "deleting" and lowers the whole log's
// start to at when it is above, durably, for a truncation that restarts
// the whole log empty at at (the partition's mu held): TruncateTo below
// the local log start and TruncateFullyAndStartAt, as Kafka's
// truncateFullyAndStartAt sets logStartOffset to the new offset, leaving
// every remote segment below it to the RemoteLogManager's deletion. The
// copies held offsets either at or past at (cut) or below it (below the
// new start). Like dropFrom it counts a truncation and clears the copy
// lag. On error nothing changed. A nil part has nothing to drop.
func (t *partTier) restartAt(at int64) error { return t.cut(math.MinInt64, at) }

// drop removes the records of ids.
func (t *partTier) drop(ids []RemoteSegmentID) error {
	if len(ids) == 0 {
		return nil
	}
	return t.change(func(m *remoteMeta) bool {
		m.segs = slices.DeleteFunc(m.segs, func(e remoteEntry) bool { return slices.Contains(ids, e.desc.ID) })
		return true
	})
}

// pass is one round of the copier and deleter on the partition.
func (t *partTier) pass(ctx context.Context) {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if t.detached || t.broken != nil || t.p.closed.Load() {
		return
	}
	if err := t.cleanup(ctx); err != nil {
		t.deleteFails.Add(1)
		t.warn("cleaning up remote segments failed; retrying next pass", err)
		// No copy starts before the cleanup is done; the copy lag
		// still counts what waits.
		_ = t.copyEligible(ctx, false)
		return
	}
	if err := t.expireRemote(ctx); err != nil {
		t.deleteFails.Add(1)
		t.warn("deleting expired remote segments failed; retrying next pass", err)
	}
	if err := t.copyEligible(ctx, true); err != nil {
		t.copyFails.Add(1)
		t.warn("copying a segment failed; retrying next pass", err)
	}
	if err := t.applyLocalRetention(ctx); err != nil {
		t.warn("local retention failed; retrying next pass", err)
	}
}

func (t *partTier) warn(msg string, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return
	}
	t.d.logger.Warn("partlog/log: tiered storage: "+msg, "partition", t.tp.String(), "err", err)
}

// cleanup settles the records that are not "copied": a "copying" one (a
// copy a crash, a failed record or a failed deletion left, complete or
// not) and the "deleting" ones (expired, cut by a truncation, or of a
// deleted partition). Each copy is deleted from the store, then the
// records of those deleted are dropped. The store is never listed: every
// copy is recorded "copying" durably before CopySegment starts, so no
// crash leaves a copy the metadata does not name, and objects the
// metadata does not name may be another Dir's (docs/tiered-storage.md).
//
// The "copying" records are recorded "deleting" first, durably: the file
// may hold one "copied" (a record that failed after its rename, which
// publishLocked leaves to either version), and a crash after the deletion
// would bring it back, for a copy the store no longer holds.
func (t *partTier) cleanup(ctx context.Context) error {
	err := t.change(func(m *remoteMeta) bool {
		changed := false
		for i := range m.segs {
			if m.segs[i].state == remoteCopying {
				m.segs[i].state = remoteDeleting
				changed = true
			}
		}
		return changed
	})
	if err != nil {
		return err
	}
	st := t.d.cfg.Storage
	var done []RemoteSegmentID
	for _, e := range t.meta.Load().segs {
		if e.state == remoteCopied {
			continue
		}
		if derr := st.DeleteSegment(ctx, e.desc.ID); derr != nil {
			err = fmt.Errorf("delete %s left %s: %w", e.desc.ID, remoteStateNames[e.state], derr)
			break
		}
		done = append(done, e.desc.ID)
	}
	return errors.Join(err, t.drop(done))
}

// expireRemote applies the total retention to copies no longer held
// locally, oldest first: each is recorded "deleting", deleted, then its
// record dropped (a failed deletion is retried by the next pass's
// cleanup). The size of the whole log is Kafka's: the copies below the
// local log start plus the local segments.
func (t *partTier) expireRemote(ctx context.Context) error {
	cfg := t.d.cfg
	if cfg.RetentionMs <= 0 && cfg.RetentionBytes <= 0 {
		return nil
	}
	localStart := t.p.LogStartOffset()
	total := t.p.Stats().Size
	now := t.p.cfg.Now().UnixMilli()
	m := t.meta.Load()
	for _, e := range m.segs {
		if e.state == remoteCopied && e.desc.EndOffset < localStart {
			total += e.desc.Size
		}
	}
	for _, e := range m.segs {
		if e.state != remoteCopied || e.desc.EndOffset >= localStart {
			return nil
		}
		byTime := cfg.RetentionMs > 0 && e.desc.MaxTimestamp >= 0 && now-e.desc.MaxTimestamp > cfg.RetentionMs
		bySize := cfg.RetentionBytes > 0 && total-e.desc.Size >= cfg.RetentionBytes
		if !byTime && !bySize {
			return nil
		}
		marked := false
		err := t.change(func(n *remoteMeta) bool {
			i := n.index(e.desc.ID)
			if marked = i >= 0 && n.segs[i].state == remoteCopied; marked {
				n.segs[i].state = remoteDeleting
			}
			return marked
		})
		if err != nil || !marked { // !marked: a truncation dropped it
			return err
		}
		if err := cfg.Storage.DeleteSegment(ctx, e.desc.ID); err != nil {
			return fmt.Errorf("delete expired %s: %w", e.desc.ID, err)
		}
		if err := t.drop([]RemoteSegmentID{e.desc.ID}); err != nil {
			return err
		}
		total -= e.desc.Size
		t.deletes.Add(1)
	}
	return nil
}

// compacted reports whether a compaction ran on the partition (it has a
// cleaner checkpoint). Such a partition is neither copied nor trimmed by
// the local retention: its segments were rewritten, so a copy made before
// a round holds records the round removed, and deleting the cleaned
// segment for it would serve them again below the local log start. Compact
// refuses a tiered partition (ErrTieredCompaction); a checkpoint comes
// from rounds run while the Dir did not tier the partition.
func (t *partTier) compacted() (bool, error) {
	_, found, err := t.p.ckpts.readCleaner()
	return found, err
}

// copyEligible updates the copy lag: the sealed segments past the end of
// the copies that are durable (below the recovery point) and wholly below
// the high watermark and the last stable offset. With andCopy set it then
// copies them, oldest first. The copies stay contiguous with the log: the
// first segment past the end of the copies must start at or after it
// (one holding offsets on both sides is never skipped: nothing after it
// is copied, and the pass fails). No segment wholly below the whole log's
// start is copied: DeleteRecordsBefore deletes it locally after moving
// the start, which abandons a copy that listed it (partTier.moveStart).
func (t *partTier) copyEligible(ctx context.Context, andCopy bool) error {
	p := t.p
	if compacted, err := t.compacted(); err != nil || compacted {
		t.lagSegs.Store(0)
		t.lagBytes.Store(0)
		return err
	}
	if !p.dur.manual {
		// The rolls' background flush, done now if it has not run yet:
		// the sealed segments become durable (the recovery point passes
		// them) and their roll snapshots are written. Under the manual
		// mode the tests run it themselves.
		if err := p.flushRolled(); err != nil {
			return err
		}
	}
	t.metaMu.Lock()
	cuts := t.cuts
	copiedEnd := t.meta.Load().copiedEnd()
	t.metaMu.Unlock()
	segs, err := p.segmentRefs()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range segs {
			_ = s.Unref()
		}
	}()
	// Only what a crash cannot take: copies past the recovery point would
	// describe batches the log may not have after a restart.
	bound := min(p.HighWatermark(), p.LastStableOffset(), p.dur.currentRecoveryPoint())
	var todo []*segment.Segment
	var lagBytes int64
	var straddle error
	for _, s := range segs[:len(segs)-1] {
		if s.NextOffset() > bound {
			break
		}
		if s.NextOffset() <= copiedEnd || s.NextOffset() == s.BaseOffset() {
			continue // copied, or empty
		}
		if s.BaseOffset() < copiedEnd && straddle == nil {
			straddle = fmt.Errorf("segment %d (offsets %d..%d) holds offsets on both sides of the end of the copies %d; nothing past it is copied",
				s.BaseOffset(), s.BaseOffset(), s.NextOffset()-1, copiedEnd)
		}
		todo = append(todo, s)
		lagBytes += s.Size()
	}
	t.lagSegs.Store(int64(len(todo)))
	t.lagBytes.Store(lagBytes)
	if !andCopy || straddle != nil {
		return straddle
	}
	for _, s := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.copySegment(ctx, s, cuts); err != nil {
			return err
		}
		t.lagSegs.Add(-1)
		t.lagBytes.Add(-s.Size())
	}
	return nil
}

// errCutDuringCopy reports a copy abandoned because a truncation or a
// move of the whole log's start came after its segment list was taken.
var errCutDuringCopy = errors.New("the log was truncated or its start moved during the copy")

// copySegment copies one sealed segment: record it "copying", copy it,
// record it "copied". Each record is made only when no truncation or move
// of the whole log's start came since cuts was read (with the segment
// list): each records "deleting" the copies it removes from the log
// before the change is visible, so a copy of a segment it cut, or of one
// below the new start, is never recorded "copied". A failed copy is
// deleted at once when the store allows, else by the next pass's cleanup.
func (t *partTier) copySegment(ctx context.Context, s *segment.Segment, cuts uint64) (err error) {
	st := t.d.cfg.Storage
	if err := s.Pin(); err != nil {
		s.Unpin()
		return err
	}
	defer s.Unpin()
	md := RemoteSegmentMetadata{ID: NewRemoteSegmentID(t.tp), BaseOffset: s.BaseOffset(),
		EndOffset: s.NextOffset() - 1, Size: s.Size()}
	md.MaxTimestamp, _ = s.MaxTimestamp()
	data, err := t.segmentData(s, &md)
	if err != nil {
		return fmt.Errorf("read segment %d: %w", s.BaseOffset(), err)
	}
	var cut, overlap bool
	err = t.change(func(m *remoteMeta) bool {
		cut = t.cuts != cuts
		// The records stay in offset order without overlaps
		// (tiermeta.go): a record past md's base (one a truncation left
		// "deleting") waits for the next pass's cleanup.
		overlap = len(m.segs) > 0 && m.segs[len(m.segs)-1].desc.EndOffset >= md.BaseOffset
		if cut || overlap {
			return false
		}
		m.segs = append(m.segs, remoteEntry{state: remoteCopying, desc: md})
		return true
	})
	switch {
	case err != nil:
		return err
	case cut:
		return fmt.Errorf("copy segment %d: %w", md.BaseOffset, errCutDuringCopy)
	case overlap:
		return fmt.Errorf("copy segment %d: a record past its base waits for the cleanup", md.BaseOffset)
	}
	data.Segment = &segmentReader{seg: s, end: md.Size}
	if err := st.CopySegment(ctx, md, data); err != nil {
		t.dropCopy(md.ID)
		return fmt.Errorf("copy segment %d as %s: %w", md.BaseOffset, md.ID, err)
	}
	recorded := false
	err = t.change(func(m *remoteMeta) bool {
		i := m.index(md.ID)
		if recorded = t.cuts == cuts && i >= 0 && m.segs[i].state == remoteCopying; recorded {
			m.segs[i].state = remoteCopied
		}
		return recorded
	})
	if err != nil {
		return err // the record stays "copying": the next pass's cleanup deletes the copy
	}
	if !recorded {
		t.dropCopy(md.ID)
		return fmt.Errorf("copy segment %d as %s: %w", md.BaseOffset, md.ID, errCutDuringCopy)
	}
	t.copies.Add(1)
	t.copiedBytes.Add(md.Size)
	return nil
}

// dropCopy deletes a copy that is not recorded "copied" and its record;
// when the store refuses, the next pass's cleanup does it.
func (t *partTier) dropCopy(id RemoteSegmentID) {
	if err := t.d.cfg.Storage.DeleteSegment(context.WithoutCancel(t.d.ctx), id); err != nil {
		return
	}
	_ = t.drop([]RemoteSegmentID{id}) // on failure the next cleanup drops it
}

// segmentData builds the files copied with s: an offset and a time index
// in Kafka's formats, rebuilt from the batch headers (so the copy never
// depends on the state of the local index files), the transaction index,
// the producer snapshot at the segment's end if there is one, and the
// leader epoch slice, also set in md.
func (t *partTier) segmentData(s *segment.Segment, md *RemoteSegmentMetadata) (RemoteSegmentData, error) {
	p := t.p
	var d RemoteSegmentData
	interval := int64(p.cfg.IndexIntervalBytes)
	base := s.BaseOffset()
	var pos, sinceEntry int64
	lastTs := int64(-1)
	first := true
	for b, err := range s.Batches(base) {
		if err != nil {
			return d, err
		}
		last := remoteLastOffset(b)
		if first || sinceEntry >= interval {
			d.OffsetIndex = appendBE32(appendBE32(d.OffsetIndex, uint32(b.BaseOffset()-base)), uint32(pos))
			sinceEntry = 0
		}
		// A legacy message's timestamp is indexed too (magic 0 has none,
		// -1): a lookup by time must not skip one (OffsetForTimestamp).
		var bts int64
		if b.Magic() >= 2 {
			bts = b.MaxTimestamp()
		} else {
			bts = legacy.Entry(b).Timestamp()
		}
		if bts > lastTs {
			lastTs = bts
			d.TimeIndex = appendBE32(appendBE32(appendBE32(d.TimeIndex, uint32(uint64(lastTs)>>32)), uint32(lastTs)), uint32(last-base))
		}
		first = false
		pos += int64(len(b))
		sinceEntry += int64(len(b))
	}
	if pos != md.Size {
		return d, fmt.Errorf("batches end at %d of %d bytes", pos, md.Size)
	}
	for _, a := range s.AbortedTxns() {
		d.TxnIndex = segment.AppendTxnIndexEntry(d.TxnIndex, a)
	}
	// The snapshot at the segment's end, read under the partition's
	// locks (a roll's snapshot not written yet comes from memory; a
	// file is never read while a writer rewrites it).
	snap, err := p.ProducerSnapshot(md.EndOffset + 1)
	switch {
	case errors.Is(err, errNotExist):
	case errors.Is(err, batch.ErrCorrupt):
		// Optional in a copy (a reader rebuilds the state from the
		// batches): one that does not decode is left out.
		t.warn("a producer snapshot that does not decode is left out of a copy", err)
	case err != nil:
		return d, err
	default:
		d.ProducerSnapshot = snap
	}
	for _, e := range p.LeaderEpochs() {
		switch {
		case e.StartOffset <= base:
			md.LeaderEpochs = []EpochStart{{Epoch: e.Epoch, StartOffset: base}}
		case e.StartOffset <= md.EndOffset:
			md.LeaderEpochs = append(md.LeaderEpochs, e)
		}
	}
	ep := []byte("0\n" + strconv.Itoa(len(md.LeaderEpochs)) + "\n")
	for _, e := range md.LeaderEpochs {
		ep = fmt.Appendf(ep, "%d %d\n", e.Epoch, e.StartOffset)
	}
	d.LeaderEpochs = ep
	return d, nil
}

func appendBE32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// remoteLastOffset returns the last offset of an entry: a v2 batch's base
// plus its last offset delta, a legacy message's own offset (a wrapper's
// is its last inner offset).
func remoteLastOffset(b batch.Batch) int64 {
	if b.Magic() >= 2 {
		return b.LastOffset()
	}
	return b.BaseOffset()
}

// segmentReader reads a pinned, referenced segment's .log from the start
// to end, taking the segment's read lease for each read (so a truncation
// is not held up for the whole copy).
type segmentReader struct {
	seg      *segment.Segment
	pos, end int64
}

func (r *segmentReader) Read(b []byte) (int, error) {
	if r.pos >= r.end {
		return 0, io.EOF
	}
	n := min(int64(len(b)), r.end-r.pos, 1<<20)
	r.seg.AcquireRead()
	err := r.readAt(b[:n])
	r.seg.ReleaseRead()
	if err != nil {
		return 0, err
	}
	r.pos += n
	return int(n), nil
}

// readAt copies the .log's bytes from r.pos into b under the fault guard:
// they may alias the mapping, and a page the kernel cannot read (a media
// error, the file cut behind the partition's back) is an error wrapping
// ErrFault, not a SIGBUS. REQUIRES: a read lease on r.seg.
func (r *segmentReader) readAt(b []byte) (err error) {
	defer mmap.Recover(mmap.Protect(), &err)
	got, err := r.seg.Bytes(r.pos, r.pos+int64(len(b)), b)
	if err == nil {
		copy(b, got)
	}
	return err
}

// tierLocalRetention is the local retention policy tiering applies: the
// oldest segments wholly copied (below the end of the copies) and past the
// local retention go. The end of the copies is read when Partition.DeleteExpired
// asks (after it read the truncation count it checks when deleting): a
// truncation drops the copies it cuts before it counts itself, so the
// policy never sees copies of offsets cut by a truncation it missed.
type tierLocalRetention struct {
	meta             *atomic.Pointer[remoteMeta]
	maxAgeMs, maxLen int64
	now              int64
}

// Expired implements RetentionPolicy.
func (r tierLocalRetention) Expired(v *View) int {
	copiedEnd := r.meta.Load().copiedEnd()
	segs := v.Segments()
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	n := 0
	for _, s := range segs {
		if s.Active || s.NextOffset > copiedEnd {
			break
		}
		ts := s.MaxTimestamp
		if ts < 0 {
			ts = s.Modified.UnixMilli()
		}
		byTime := r.maxAgeMs > 0 && r.now-ts > r.maxAgeMs
		bySize := r.maxLen > 0 && size-s.Size >= r.maxLen
		if !byTime && !bySize {
			break
		}
		size -= s.Size
		n++
	}
	return n
}

// keepUncopied caps n, the number of v's oldest segments a retention
// policy picked (Partition.DeleteExpired), at the segments a tiered
// partition may delete locally (law 14, nothing uncopied is lost): those
// whose copy is recorded, and those wholly below the log start offset
// (DeleteRecordsBefore moved the start of the whole log past their records
// first, and no copy is made of them), as Kafka's deleteOldSegments keeps
// every segment of a remote-enabled log past its highest offset in remote
// storage. A nil part, one whose metadata could not be read (tiering is
// off) and a compacted partition (never copied, see compacted) leave n as
// it is.
func (t *partTier) keepUncopied(v *View, n int) (int, error) {
	if t == nil || t.broken != nil {
		return n, nil
	}
	if compacted, err := t.compacted(); err != nil || compacted {
		return n, err
	}
	copiedEnd := t.meta.Load().copiedEnd()
	for i, s := range v.Segments()[:n] {
		if s.NextOffset > copiedEnd && s.NextOffset > v.LogStartOffset() {
			return i, nil
		}
	}
	return n, nil
}

// applyLocalRetention deletes the local segments the local retention
// expired among those whose copy is recorded.
func (t *partTier) applyLocalRetention(ctx context.Context) error {
	cfg := t.d.cfg
	if cfg.LocalRetentionMs <= 0 && cfg.LocalRetentionBytes <= 0 {
		return nil
	}
	if t.meta.Load().copiedEnd() < 0 {
		return nil
	}
	if compacted, err := t.compacted(); err != nil || compacted {
		return err
	}
	if err := t.resync(); err != nil {
		return err
	}
	res, err := t.p.DeleteExpired(ctx, tierLocalRetention{meta: &t.meta, maxAgeMs: cfg.LocalRetentionMs,
		maxLen: cfg.LocalRetentionBytes, now: t.p.cfg.Now().UnixMilli()})
	t.localDels.Add(int64(res.SegmentsDeleted))
	return err
}
