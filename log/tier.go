package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// This file is tiered storage's background side (Kafka's KIP-405 for a
// Dir): a copier and deleter per Dir (dirTier) that runs, with a bounded
// number of workers, one pass at a time over each partition's tier part
// (partTier): clean up what a crash left, delete expired remote segments,
// copy the sealed segments below the high watermark and the last stable
// offset, and apply the local retention to segments whose copy is
// recorded. The read side is in tierread.go, the metadata file in
// tiermeta.go.

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
	// compacted topics out (Kafka refuses them): a partition that has a
	// cleaner checkpoint (a compaction ran on it) is never copied.
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
	// is older than RetentionMs, or while the remote and local sizes less
	// that copy stay at or above RetentionBytes. 0 or less means no
	// bound. Local segments are bounded by the partition's own retention
	// policy (Partition.DeleteExpired), as without tiering.
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
	// LogStartOffset is the first offset of the oldest copied segment
	// (the log start of the whole log, remote included); -1 when none is
	// copied.
	LogStartOffset int64
	// Segments and Bytes count the copied segments and their sizes.
	Segments int
	Bytes    int64
	// CopyLagSegments and CopyLagBytes count the sealed segments below
	// the high watermark and the last stable offset not copied yet, as of
	// the last pass.
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
	p.tierPart.Store(t)
	d.mu.Lock()
	d.parts[tp] = t
	d.mu.Unlock()
}

// detach stops tiering tp (the partition is being deleted).
func (d *dirTier) detach(tp TopicPartition) *partTier {
	d.mu.Lock()
	t := d.parts[tp]
	delete(d.parts, tp)
	d.mu.Unlock()
	if t != nil {
		t.runMu.Lock() // waits for a pass in progress
		t.detached = true
		t.runMu.Unlock()
	}
	return t
}

// start starts the scheduler.
func (d *dirTier) start() {
	d.wg.Go(d.loop)
}

// stop stops the scheduler and waits for the passes in progress (a copy is
// abandoned through its context; its record stays "copying" and the next
// start cleans it up).
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
// and counters. Passes run one at a time (runMu); only a pass changes the
// metadata, publishing each new version for lock-free readers.
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

	// runMu serializes passes. cleaned (under runMu) reports that this
	// run's startup cleanup is done; detached that the partition left
	// the Dir.
	runMu    sync.Mutex
	cleaned  bool
	detached bool

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
	for _, e := range t.meta.Load().segs {
		if e.state != remoteCopied {
			continue
		}
		if st.LogStartOffset < 0 {
			st.LogStartOffset = e.desc.BaseOffset
		}
		st.Segments++
		st.Bytes += e.desc.Size
	}
	return st
}

// publish makes m durable, then current. On error nothing is published
// and the file holds the old or the new version: the next pass starts
// with a cleanup, which settles either.
func (t *partTier) publish(m *remoteMeta) error {
	if err := m.store(t.p.cfg.FS, t.p.dir); err != nil {
		t.cleaned = false
		return fmt.Errorf("partlog/log: %s: write %s: %w", t.p.dir, remoteMetadataFile, err)
	}
	t.meta.Store(m)
	return nil
}

// pass is one round of the copier and deleter on the partition.
func (t *partTier) pass(ctx context.Context) {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if t.detached || t.broken != nil || t.p.closed.Load() {
		return
	}
	if !t.cleaned {
		if err := t.cleanup(ctx); err != nil {
			t.deleteFails.Add(1)
			t.warn("cleaning up remote segments failed; retrying next pass", err)
			// No copy starts before the cleanup is done; the copy lag
			// still counts what waits.
			_ = t.copyEligible(ctx, false)
			return
		}
		t.cleaned = true
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

// cleanup settles what the last run left: copies recorded "copying" or
// "deleting" are deleted remotely and their records dropped, and every
// remote object of the partition the metadata does not name (a copy whose
// "copying" record a crash lost with the file's new version) is deleted.
func (t *partTier) cleanup(ctx context.Context) error {
	st := t.d.cfg.Storage
	m := t.meta.Load()
	keep := &remoteMeta{}
	known := make(map[RemoteSegmentID]bool, len(m.segs))
	for _, e := range m.segs {
		known[e.desc.ID] = true
		if e.state == remoteCopied {
			keep.segs = append(keep.segs, e)
			continue
		}
		if err := st.DeleteSegment(ctx, e.desc.ID); err != nil {
			return fmt.Errorf("delete %s left %s: %w", e.desc.ID, remoteStateNames[e.state], err)
		}
	}
	if len(keep.segs) != len(m.segs) {
		if err := t.publish(keep); err != nil {
			return err
		}
	}
	ids, err := st.ListSegments(ctx, t.tp)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, id := range ids {
		if known[id] {
			continue
		}
		if err := st.DeleteSegment(ctx, id); err != nil {
			return fmt.Errorf("delete unrecorded %s: %w", id, err)
		}
	}
	return nil
}

// expireRemote applies the total retention to copies no longer held
// locally, oldest first: each is recorded "deleting", deleted, then its
// record dropped.
func (t *partTier) expireRemote(ctx context.Context) error {
	cfg := t.d.cfg
	if cfg.RetentionMs <= 0 && cfg.RetentionBytes <= 0 {
		return nil
	}
	localStart := t.p.LogStartOffset()
	localSize := t.p.Stats().Size
	now := time.Now().UnixMilli()
	for {
		m := t.meta.Load()
		var total int64
		for _, e := range m.segs {
			total += e.desc.Size
		}
		if len(m.segs) == 0 {
			return nil
		}
		e := m.segs[0]
		if e.desc.EndOffset >= localStart {
			return nil
		}
		byTime := cfg.RetentionMs > 0 && e.desc.MaxTimestamp >= 0 && now-e.desc.MaxTimestamp > cfg.RetentionMs
		bySize := cfg.RetentionBytes > 0 && total+localSize-e.desc.Size >= cfg.RetentionBytes
		if !byTime && !bySize {
			return nil
		}
		n := m.clone()
		n.segs[0].state = remoteDeleting
		if err := t.publish(n); err != nil {
			return err
		}
		if err := cfg.Storage.DeleteSegment(ctx, e.desc.ID); err != nil {
			t.cleaned = false // the cleanup retries it
			return fmt.Errorf("delete expired %s: %w", e.desc.ID, err)
		}
		n = n.clone()
		n.segs = n.segs[1:]
		if err := t.publish(n); err != nil {
			return err
		}
		t.deletes.Add(1)
	}
}

// copyEligible updates the copy lag: the sealed segments wholly below the
// high watermark and the last stable offset that start at or after the
// end of the last copy. With andCopy set it then copies them, oldest first.
func (t *partTier) copyEligible(ctx context.Context, andCopy bool) error {
	p := t.p
	if _, found, err := p.cleanerCheckpoint(); err != nil || found {
		// A compacted partition is not tiered (its segments are
		// rewritten under the copies).
		t.lagSegs.Store(0)
		t.lagBytes.Store(0)
		return err
	}
	segs, err := p.segmentRefs()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range segs {
			_ = s.Unref()
		}
	}()
	bound := min(p.HighWatermark(), p.LastStableOffset())
	var todo []*segment.Segment
	var lagBytes int64
	copiedEnd := t.meta.Load().copiedEnd()
	for _, s := range segs[:len(segs)-1] {
		if s.NextOffset() > bound {
			break
		}
		if s.BaseOffset() < copiedEnd || s.NextOffset() == s.BaseOffset() {
			continue
		}
		todo = append(todo, s)
		lagBytes += s.Size()
	}
	t.lagSegs.Store(int64(len(todo)))
	t.lagBytes.Store(lagBytes)
	if !andCopy {
		return nil
	}
	for _, s := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.copySegment(ctx, s); err != nil {
			return err
		}
		t.lagSegs.Add(-1)
		t.lagBytes.Add(-s.Size())
	}
	return nil
}

// copySegment copies one sealed segment: record it "copying", copy it,
// record it "copied". A failed copy is deleted at once when the store
// allows, else by the next pass's cleanup.
func (t *partTier) copySegment(ctx context.Context, s *segment.Segment) (err error) {
	p := t.p
	st := t.d.cfg.Storage
	if err := s.Pin(); err != nil {
		s.Unpin()
		return err
	}
	defer s.Unpin()
	truncations := p.truncations.Load()
	md := RemoteSegmentMetadata{ID: NewRemoteSegmentID(t.tp), BaseOffset: s.BaseOffset(),
		EndOffset: s.NextOffset() - 1, Size: s.Size()}
	md.MaxTimestamp, _ = s.MaxTimestamp()
	data, err := t.segmentData(s, &md)
	if err != nil {
		return fmt.Errorf("read segment %d: %w", s.BaseOffset(), err)
	}
	m := t.meta.Load().clone()
	m.segs = append(m.segs, remoteEntry{state: remoteCopying, desc: md})
	if err := t.publish(m); err != nil {
		return err
	}
	data.Segment = &segmentReader{seg: s, end: md.Size}
	if err := st.CopySegment(ctx, md, data); err != nil {
		t.dropCopying(md.ID)
		return fmt.Errorf("copy segment %d as %s: %w", md.BaseOffset, md.ID, err)
	}
	if p.truncations.Load() != truncations {
		// A truncation may have cut the segment during the copy.
		t.dropCopying(md.ID)
		return fmt.Errorf("copy segment %d as %s: the log was truncated during the copy", md.BaseOffset, md.ID)
	}
	m = m.clone()
	m.segs[len(m.segs)-1].state = remoteCopied
	if err := t.publish(m); err != nil {
		return err
	}
	t.copies.Add(1)
	t.copiedBytes.Add(md.Size)
	return nil
}

// dropCopying deletes a failed copy and its "copying" record; when the
// store refuses, the next pass's cleanup does it.
func (t *partTier) dropCopying(id RemoteSegmentID) {
	if err := t.d.cfg.Storage.DeleteSegment(context.WithoutCancel(t.d.ctx), id); err != nil {
		t.cleaned = false
		return
	}
	m := t.meta.Load().clone()
	if i := m.index(id); i >= 0 {
		m.segs = append(m.segs[:i], m.segs[i+1:]...)
		_ = t.publish(m) // on failure publish leaves cleaned false
	}
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
	snap, err := readWholeFile(p, producer.SnapshotFileName(md.EndOffset+1))
	if err != nil && !errors.Is(err, errNotExist) {
		return d, err
	}
	d.ProducerSnapshot = snap
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

// readWholeFile reads the file name of the partition's directory.
func readWholeFile(p *Partition, name string) ([]byte, error) {
	f, err := p.cfg.FS.Open(p.dir + "/" + name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
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
	got, err := r.seg.Bytes(r.pos, r.pos+n, b[:n])
	if err == nil {
		copy(b, got)
	}
	r.seg.ReleaseRead()
	if err != nil {
		return 0, err
	}
	r.pos += n
	return int(n), nil
}

// tierLocalRetention is the local retention policy tiering applies: the
// oldest segments wholly copied (below copiedEnd) and past the local
// retention go.
type tierLocalRetention struct {
	copiedEnd        int64
	maxAgeMs, maxLen int64
	now              int64
}

// Expired implements RetentionPolicy.
func (r tierLocalRetention) Expired(v *View) int {
	segs := v.Segments()
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	n := 0
	for _, s := range segs {
		if s.Active || s.NextOffset > r.copiedEnd {
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

// applyLocalRetention deletes the local segments the local retention
// expired among those whose copy is recorded.
func (t *partTier) applyLocalRetention(ctx context.Context) error {
	cfg := t.d.cfg
	if cfg.LocalRetentionMs <= 0 && cfg.LocalRetentionBytes <= 0 {
		return nil
	}
	end := t.meta.Load().copiedEnd()
	if end < 0 {
		return nil
	}
	res, err := t.p.DeleteExpired(ctx, tierLocalRetention{copiedEnd: end, maxAgeMs: cfg.LocalRetentionMs,
		maxLen: cfg.LocalRetentionBytes, now: time.Now().UnixMilli()})
	t.localDels.Add(int64(res.SegmentsDeleted))
	return err
}
