package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/epochs"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// Partition is one Kafka partition stored in a directory of segments. See
// the package documentation for the concurrency contract: every method is
// safe for concurrent use; appends and the other mutating methods are
// serialized by one mutex, reads take no lock.
type Partition struct {
	// dirOwner is the ownership of the directory the partition holds
	// (its own lockFile, or for a partition of a Dir the Dir's lock), from
	// Open until Close and then until segTracker counts no segment
	// (ownership.go); Close takes it (nil after).
	dirOwner *ownership
	// segTracker counts the partition's segments not yet released: after
	// Close, the ones readers still hold (segment.Tracker, through
	// segCfg).
	segTracker segment.Tracker
	// ckpt keeps the partition's offset checkpoints: its own files
	// (partitionFiles) or, in a Dir, the log directory's root files. Set
	// by Open, never changed. Open reads it; the parts that write the
	// entries hold it too (dur, ckpts).
	ckpt checkpointStore
	// ckpts is the log start and cleaner checkpoint part (checkpoint.go;
	// DESIGN.md, "Parts of a Partition: checkpoints"). Set by Open, never
	// changed.
	ckpts checkpoints
	// inDir is set for a partition a Dir opened: no lock of its own, and
	// the clean-shutdown marker is the Dir's.
	inDir bool
	// dir, cfg and segCfg are set by Open and never change.
	dir    string
	cfg    Config
	segCfg segment.Config
	logger *slog.Logger

	// segs is the current segment list, an immutable snapshot. Written
	// under mu (Swap), read by anyone (acquireSnapshot; under mu a Load).
	segs atomic.Pointer[segments]
	// bounds publishes the high watermark and the log end offset with
	// their positions. Written under mu, read lock-free.
	bounds bounds
	// logStart is the log start offset. Written under mu, read lock-free.
	logStart atomic.Int64
	// truncations counts TruncateTo calls that cut the log and restarts
	// (TruncateFullyAndStartAt); it is incremented after the lowered bounds are published and before any
	// file is cut, so that a reader whose bounds predate a cut notices it
	// (see "Lock-free reads" in the package documentation).
	truncations atomic.Uint64
	// closed is set by Close; readers check it.
	closed atomic.Bool
	// offline is set once, when a read or an append met a fault in a
	// mapped file (ErrFault): every later call returns it (see
	// noteFault). Read lock-free.
	offline atomic.Pointer[error]
	// hasFailed is set with mu.failed (setFailedLocked), for Wait.
	hasFailed atomic.Bool
	// stats holds the counters Stats reports (stats.go).
	stats counters
	// leaderEpoch is stamped into appended batches when
	// cfg.StampLeaderEpoch is set.
	leaderEpoch atomic.Int32

	// flushMu serializes flushes and group syncs (one syncer at a time)
	// and Close. Lock order: flushMu, then mu. Appenders take it after
	// they released mu.
	flushMu sync.Mutex
	// rolled is the lock of the checkpoint and snapshot files a roll's
	// background flush writes without mu (flush.go).
	rolled checkpointLock
	// dur is the durability part: flush policies, group commit, the
	// roll's background flush, the recovery point, the spare segment
	// (durability.go; DESIGN.md, "Parts of a Partition: durability").
	// Its fields say which lock guards each.
	dur durability
	// wb is the write-behind state (Config.WriteBehind; writebehind.go).
	wb writeBehind
	// snaps is the producer snapshot part: the .snapshot files, the
	// snapshots rolls took and not yet wrote, the replay after the newest
	// (snapshot.go; DESIGN.md, "Parts of a Partition: producer
	// snapshots"). Its fields say which lock guards each.
	snaps producerSnapshots
	// batchRules is the append rules part: the checks of what an append
	// is given and the headers the partition stores (appendrules.go;
	// DESIGN.md, "Parts of a Partition: append rules"). Its scratch is
	// guarded by mu.
	batchRules appendRules

	// mu serializes every writer: appends, rolls, truncation, retention,
	// high watermark moves, Sync and Close. Lock order: mu, then a
	// segment's locks (a read lease in SetHighWatermark while truncating;
	// TruncateTo takes the write side after releasing mu), then the
	// indexes' and the filesystem's. Readers never take mu.
	mu struct {
		sync.Mutex
		// closed is set by Close; every later call returns ErrClosed.
		closed bool
		// failed is a sticky error set when a truncation or retention
		// step failed halfway and the files may disagree with the
		// published state: every later write returns it.
		failed error
		// hw and end are the authoritative high watermark and log end
		// (what bounds publishes). Invariant: logStart <= hw.Offset <=
		// end.Offset, and end.Offset is the active segment's NextOffset.
		// (Lock-free readers may see logStart above the published bounds
		// for a moment: a restart below the log start publishes the
		// bounds before it lowers the start, truncateFullyLocked.)
		hw, end position
		// rollAfter is the active segment's time limit: SegmentTime
		// minus its jitter; 0 when time rolls are off (ShouldRoll
		// then never rolls by time).
		rollAfter time.Duration
		// dirDirty is set when files were created, renamed or removed
		// since the directory was last synced.
		dirDirty bool
		// writeSeq counts successful batch writes; it never goes back.
		writeSeq uint64
		// epochs is the leader epoch cache (LeaderEpochs) and its
		// checkpoint file (epochs.go, internal/epochs).
		epochs epochs.Cache
		// producers is the producer state and the open transactions
		// (package internal/producer; producer.go), set by Open.
		producers *producer.State
		// truncating is the segment TruncateTo waits, without mu, to take
		// the exclusive lease of (nil otherwise); nothing is changed
		// before it has it. While it is set, writers wait on truncated
		// (lockWriter); only SetHighWatermark, LeaderEpochs and the
		// read-only calls of lockReader run.
		truncating *segment.Segment
	}
	// truncated is signalled (with mu held) when TruncateTo clears
	// mu.truncating. Its Locker is &mu.Mutex.
	truncated sync.Cond
	// cleaning is the partition's cleaning claim, held by the running
	// Compact round (segments.go; Close stops the round).
	cleaning cleaningClaim
	// truncStats backs the truncation fields of Stats.
	truncStats truncationStats
	// tierPart is the partition's tiered storage part (tier.go), nil when
	// its Dir does not tier it.
	tierPart atomic.Pointer[partTier]
	// txn is the transactions' lock-free state (txn.go).
	txn txnState
	// awake is the partition's part in its Dir's awake set (awake.go).
	awake awakeState
}

// lockWriter takes mu for a writer, waiting (with mu released) while a
// TruncateTo waits for read leases (see mu.truncating), and writes what
// appenders queued for the group syncer (groupwrite.go), so that the
// writer finds every appended batch in its segment.
func (p *Partition) lockWriter() {
	p.lockAppender()
	p.writeQueuedLocked()
}

// Open opens the partition stored in dir, creating the directory and a
// first segment when there are none, and locks the directory until Close
// (and after it, until the last Records still open is closed).
// After a crash it recovers the log as Config.Recovery allows (see Files
// and Recovery in the package documentation). When dir is a partition
// directory of a closed Dir, Open removes the Dir's clean-shutdown marker,
// durably, before it changes anything in dir: the next OpenDir then goes
// by the partition's own marker, and recovers it when it was not closed.
// Such an Open also reads the partition's entries of the Dir's root
// checkpoint files, which win over its own files as they do in OpenDir,
// and then, with the marker gone, writes them to its own files and drops
// them from the root files, durably (the Dir's lock held meanwhile): the
// next OpenDir takes the partition's own files over, which it keeps
// current. The zero Config is Kafka's
// defaults. Errors wrap ErrLocked, ErrInvalidConfig, ErrRecoveryRefused
// (nothing was written) or batch.ErrCorrupt (naming the file), or are I/O
// errors.
func Open(dir string, cfg Config) (*Partition, error) {
	return open(dir, cfg, nil)
}

// dirMember is how a Dir opens one of its partitions: through the Dir's
// checkpoint store, without a lock of its own, clean when the Dir's root
// marker said so.
type dirMember struct {
	store checkpointStore
	clean bool
	// budget is the Dir's segment budget (nil: none).
	budget *segment.Budget
	// flusher is the Dir's flush scheduler, which runs the partition's
	// FlushInterval flushes instead of a goroutine of its own.
	flusher *flushScheduler
	// awake is the Dir's set of partitions whose active segment holds
	// its files open for writing (nil without a budget; awake.go).
	awake *awakeSet
	// syncLater, set by an OpenDir whose filesystem syncs whole
	// filesystems, leaves what a recovery kept unsynced and the producer
	// snapshot at the end unwritten: the Dir makes every recovered
	// partition durable with one call, writes their snapshots, syncs
	// again and then raises their recovery points
	// (Dir.finishRecoveries). Open sets recoveredEnd to the log end of a
	// partition it left so, -1 when it recovered nothing.
	syncLater    bool
	recoveredEnd int64
	// tiered is set when the Dir tiers (DirConfig.Remote): Open leaves the
	// leader epoch entries below the local log start, which copies may
	// hold, for the Dir to cut at the whole log's start once it attached
	// the tier part (Partition.cutEpochsBelowStart).
	tiered bool
	// dirOwner is the Dir's ownership of the log directory, which the
	// partition holds until it is closed and its readers let go.
	dirOwner *ownership
}

// open is Open, for a partition alone (m == nil) or of a Dir. Its steps
// are docs/crash-safety.md's "Recovery rules": the directory's lock
// (lockFile, or for a Dir's partition a probe that nobody holds it); then
// the opening part (opening.go), which reads every file and checks the
// directory as a whole (checkDir) before anything is written, so that a
// refusal changes nothing, finishes or undoes the file operations a crash
// interrupted, removes the clean-shutdown marker, and opens the segments
// and, after an unclean shutdown, recovers them from the recovery point;
// then, with what the opening handed over, the log start offset, the high
// watermark, the durable state after a recovery and the producer state
// (the newest snapshot at or below the log end, the batches after it
// replayed, and a snapshot at the log end written when anything was
// replayed or recovered).
func open(dir string, cfg Config, m *dirMember) (_ *Partition, err error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Partition{dir: dir, cfg: cfg, segCfg: cfg.segmentConfig(), logger: cfg.Logger}
	p.segCfg.Tracker = &p.segTracker // every segment the partition creates or opens
	p.ckpt = partitionFiles{fs: cfg.FS, dir: dir, logger: cfg.Logger}
	var awake *awakeSet // a Dir's under a segment budget (awake.go)
	if m != nil {
		p.ckpt, p.inDir, p.dirOwner = m.store, true, m.dirOwner
		p.segCfg.Budget = m.budget // the Dir's, shared (budget.go)
		awake = m.awake
	}
	p.awake.init(awake, p)
	p.leaderEpoch.Store(cfg.LeaderEpoch)
	p.ckpts.init(p.ckpt)
	p.dur.init(p, p, durabilityConfig{dir: dir, cfg: &p.cfg, segCfg: p.segCfg, stats: &p.stats, ckpt: p.ckpt, ckptMu: &p.rolled.ckptMu,
		closed: &p.closed, truncations: &p.truncations})
	if cfg.FlushMessages != 1 {
		p.wb.delay = cfg.WriteBehind
	}
	p.snaps.init(&p.dur, &p.truncations, cfg.FS, dir, cfg.Logger, &p.rolled.ckptMu)
	p.batchRules.init(dir, &p.cfg)
	p.truncated.L = &p.mu.Mutex
	p.mu.producers = producer.NewState(producer.Config{Expiration: cfg.ProducerIDExpiration, Now: cfg.Now})
	fs := cfg.FS
	if err := mkdirDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("partlog/log: open %s: %w", dir, err)
	}
	ownLock := false   // the directory holds lockFile: it was opened alone
	dirParent := false // alone, in a closed Dir's log directory
	if m != nil {
		// A partition of a Dir holds no lock of its own (the Dir's root
		// lock covers it), but one opened alone must not own it now
		// (lockDir explains the order that makes this safe).
		if ownLock, err = probeFree(fs, filepath.Join(dir, lockFile)); err != nil {
			if errors.Is(err, vfs.ErrLocked) {
				held := heldBy(filepath.Join(dir, lockFile), lockFile+" is held: the partition is open on its own")
				return nil, fmt.Errorf("partlog/log: open %s: %w (%s): %w", dir, ErrLocked, held, err)
			}
			return nil, fmt.Errorf("partlog/log: open %s: check %s: %w", dir, lockFile, err)
		}
	} else {
		lock, inDirParent, lerr := lockDir(fs, dir)
		if lerr != nil {
			return nil, lerr
		}
		dirParent = inDirParent
		p.dirOwner = newOwnership(lock, filepath.Join(dir, lockFile), dir, "the closed partition", cfg.Logger)
		defer func() {
			if err != nil {
				_ = lock.Close()
			}
		}()
	}
	// The opening reads everything first and decides (opening.go); a
	// refusal changes nothing. It hands over the segments, recovered.
	opening := newOpening(dir, &p.cfg, p.segCfg, p.ckpt, p.inDir)
	opening.ownLock, opening.dirParent = ownLock, dirParent
	opening.tiered = m != nil && m.tiered
	res, err := opening.load(m != nil && m.clean)
	if err != nil {
		return nil, err
	}
	list, clean, saved := res.list, res.clean, res.saved
	fail := func(err error) (*Partition, error) {
		for _, s := range list {
			_ = s.Unref() // not Close: it would cut what Open left out of Size
		}
		return nil, err
	}
	p.mu.epochs, p.mu.dirDirty, p.stats.recovery = res.epochs, res.dirDirty, res.stats
	if res.listed {
		// The clean open listed the directory once: the snapshots are
		// taken from that listing until the producer state is loaded.
		p.snaps.useListing(res.listing)
	}
	p.dur.loadRecoveryPoint(saved.rp())
	if res.created {
		base := list[0].BaseOffset()
		if !saved.haveLogStart {
			// A new partition records its log start, so that a later
			// Open notices a first segment gone missing (checkDir).
			if err := p.ckpts.writeLogStart(base); err != nil {
				return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
			}
		} else {
			// Every segment was gone (a restart of the log that a crash
			// interrupted): the one created at the log start must be
			// durable before anything above it, or a crash in a
			// restart above it leaves a later segment over a log start
			// below it, which Open refuses.
			if err := p.dur.syncDir(); err != nil {
				return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
			}
		}
		// And its recovery point, so that the segments a crash leaves
		// above it are recovered by the rules for unsynced data
		// (recoverSegments) from the first roll on.
		if err := p.dur.setRecoveryPointLocked(base); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
	}
	active := list[len(list)-1]
	end := position{Offset: active.NextOffset(), SegBase: active.BaseOffset(), Pos: active.Size()}
	start := list[0].BaseOffset()
	if saved.haveLogStart && saved.logStart > start {
		start = saved.logStart
	}
	if start > end.Offset {
		p.logger.Warn("partlog/log: log start offset checkpoint is past the log end; clamped",
			"dir", dir, "checkpoint", saved.logStart, "logEnd", end.Offset)
		start = end.Offset
	}
	p.logStart.Store(start)
	p.mu.end = end
	p.mu.hw = end
	if saved.cleanerAt > end.Offset {
		// A TruncateTo into a compaction gap that failed or crashed
		// before its last step left the cleaner checkpoint above the log
		// end. Lowered before anything is appended: segments rolled below
		// it would pass for a compaction's (compactedGap), and a crash
		// that lost one's unsynced tail would leave a hole.
		if err := p.ckpts.clampCleanerLocked(end.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: cleaner checkpoint: %w", dir, err))
		}
	}
	// Epochs whose batches are gone (a crash, a cut): none may start at or
	// past the log end (one starting at it is a leader that had not
	// appended yet: Kafka's LogLoader removes it too, so that a follower
	// fetching by epoch does not truncate to it again and again); none
	// below the log start (in a Dir that tiers, the whole log's start:
	// cutEpochsBelowStart, once the copies are known).
	p.mu.epochs.TruncateFromEnd(end.Offset)
	if m == nil || !m.tiered {
		p.mu.epochs.TruncateFromStart(start)
	}
	if cfg.DisableAutoHighWatermark {
		at := start
		if saved.haveHighWatermark {
			at = min(max(saved.highWatermark, start), end.Offset)
			p.dur.loadHighWatermarkCheckpoint(saved.highWatermark)
		}
		hw, err := positionIn(list, at, end)
		if err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
		p.mu.hw = hw
		// A checkpoint past the log end (a crash inside TruncateTo) is
		// lowered with the clamp (durability.lowerHighWatermarkLocked).
		if err := p.dur.lowerHighWatermarkLocked(hw.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
	}
	p.mu.rollAfter = p.newRollAfter()
	if !clean && m != nil && m.syncLater {
		// Nothing recovery kept is flushed until the Dir's sync
		// (recoverySyncedLocked): a flush before it (a failed OpenDir
		// closing the partition) flushes every segment.
		p.dur.setFlushedBelowLocked(list[0].BaseOffset())
	} else {
		p.dur.setFlushedBelowLocked(active.BaseOffset())
	}
	if rp := p.dur.currentRecoveryPoint(); clean && (rp < 0 || rp > end.Offset) {
		// After a clean shutdown everything is durable: a directory
		// without a recovery point (one Kafka wrote) gets one before a
		// roll can leave unsynced segments above it; one past the log
		// end (settleEmptyTail removed an empty segment after a gap,
		// whose base it was) moves back to the end.
		if err := p.dur.setRecoveryPointLocked(end.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
	}
	if err := p.mu.epochs.Persist(); err != nil {
		return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
	}
	// Producer state: newest snapshot at or below the end, then the log
	// replayed from there; a fresh snapshot when anything was replayed.
	replayed, err := p.loadProducersLocked(list, end.Offset)
	if err != nil {
		return fail(fmt.Errorf("partlog/log: open %s: producer state: %w", dir, err))
	}
	// A damaged .txnindex entry the replay did not rewrite was synced:
	// its aborted transaction cannot be told from the rest, so read
	// committed reads would be wrong. Refused under every policy.
	for _, seg := range list {
		if derr := seg.TxnIndexDamage(); derr != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w: transaction index of segment %d: %w", dir, ErrRecoveryRefused, seg.BaseOffset(), derr))
		}
	}
	switch {
	case !clean && m != nil && m.syncLater:
		// The Dir makes what recovery kept durable with one call for
		// the filesystem, then writes the snapshot at the end (only once
		// the batches below it are durable: see lostend.go) unless the
		// one the load read lies there, syncs again when a partition
		// wrote one, and only then raises the recovery point
		// (Dir.finishRecoveries).
		m.recoveredEnd = end.Offset
	case !clean:
		if err := p.recoveryDurableLocked(list, end.Offset); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
	case replayed:
		if err := p.snaps.durableLocked(p.mu.producers, end.Offset, p.mu.writeSeq, &p.mu.dirDirty); err != nil {
			return fail(fmt.Errorf("partlog/log: open %s: %w", dir, err))
		}
	default:
		p.snaps.keepLoadedLocked(end.Offset, p.mu.writeSeq) // the clean shutdown synced it
	}
	p.segs.Store(newSegments(list))
	// newSegments took the snapshot chain's references; the ones Open and Create
	// returned are the partition's own.
	if !clean && (m == nil || !m.syncLater) {
		p.dropBelowStartLocked() // the recovered log and its producer snapshot are durable
	}
	p.publishLocked()
	if m != nil && m.flusher != nil {
		p.dur.sched = m.flusher // flushes after rolls (durability.go)
		m.flusher.add(&p.dur)   // dirflush.go
	} else {
		p.dur.startFlusher()
	}
	p.dirOwner.hold() // let go by Close, once segTracker counts no segment
	p.logger.Debug("partlog/log: opened", "dir", dir, "segments", len(list), "clean", clean,
		"logStart", start, "logEnd", end.Offset)
	return p, nil
}

// recoveryDurableLocked makes what a recovery kept and cut durable before
// anything is appended after it, then moves the recovery point to end, the
// log end: each segment of list flushed (after the producer replay, whose
// .txnindex entries it covers), the producer snapshot at end written and
// fsynced, then one directory sync for it and for the recovered files'
// entries (a crash may have left them unsynced), not one for each: OpenDir
// after a crash without a filesystem sync costs these syncs, one after
// another. REQUIRES: mu held (or Open, before the partition is published).
func (p *Partition) recoveryDurableLocked(list []*segment.Segment, end int64) error {
	for _, seg := range list {
		if err := seg.Flush(); err != nil {
			return fmt.Errorf("flush segment %d: %w", seg.BaseOffset(), err)
		}
	}
	if err := p.snaps.durableLocked(p.mu.producers, end, p.mu.writeSeq, &p.mu.dirDirty); err != nil {
		return err
	}
	p.dur.setFlushedBelowLocked(list[len(list)-1].BaseOffset())
	return p.dur.setRecoveryPointLocked(end)
}

// recoverySyncedLocked is recoveryDurableLocked after the Dir synced the
// filesystem (FilesystemSyncer) that holds what an Open left unsynced,
// then wrote or kept the snapshot at end (snapshotsAfterSyncLocked), then
// synced the filesystem again if any partition wrote one: the snapshot
// and the directory count as synced, and the recovery point moves to end.
// REQUIRES: mu held.
func (p *Partition) recoverySyncedLocked(end int64) error {
	p.snaps.syncedLocked(end, p.mu.writeSeq, &p.mu.dirDirty)
	p.dur.setFlushedBelowLocked(p.segs.Load().active().BaseOffset())
	if err := p.dur.setRecoveryPointLocked(end); err != nil {
		return err
	}
	p.dropBelowStartLocked()
	return nil
}

// dropBelowStartLocked deletes the segments that an Open after a crash
// found wholly below the log start (the next segment starts at or below
// it): a DeleteRecordsBefore or a retention that the crash interrupted
// after it moved the log start checkpoint. Left in place, they outlived
// the next clean shutdown, whose Open then took the checkpoint for
// damage (past the second segment's base) and ignored it, serving the
// deleted records again. It runs once the recovered log and the producer
// snapshot at its end are durable; a failure is logged (the partition
// fails as a deletion's failure fails it). REQUIRES: mu held (or Open),
// the segments stored.
func (p *Partition) dropBelowStartLocked() {
	list := p.segs.Load().list
	n := 0
	for n+1 < len(list) && list[n+1].BaseOffset() <= p.logStart.Load() {
		n++
	}
	if n == 0 {
		return
	}
	if err := p.dropOldestLocked(n, "a deletion a crash interrupted"); err != nil {
		p.logger.Warn("partlog/log: removing the segments below the log start failed", "dir", p.dir, "err", err)
	}
}

// snapshotsAfterSyncLocked writes, unsynced, the producer snapshots an Open
// or a Close with syncLater leaves until its Dir synced the filesystem (a
// snapshot is written only once the batches below it are durable, which
// the sync made them): those the rolls left pending and the one at the
// log end, unless it is kept and nothing changed since; wrote reports
// whether it wrote any. The Dir's second sync makes them durable. After
// an open (opened) the sync covered the partition's directory, so no
// entry is left unsynced, and the snapshot the load read counts as kept
// when it lies at the log end, as after a clean shutdown: the sync made
// it durable, and nothing was replayed after it. A Dir of idle partitions
// then writes no snapshot and makes no second sync. REQUIRES: mu held.
func (p *Partition) snapshotsAfterSyncLocked(opened bool) (wrote bool, err error) {
	if opened {
		p.mu.dirDirty = false
		p.snaps.keepLoadedLocked(p.mu.end.Offset, p.mu.writeSeq)
	}
	if p.snaps.writePendingLocked() {
		p.mu.dirDirty, wrote = true, true
	}
	if p.snaps.keptCurrentLocked(p.mu.end.Offset, p.mu.writeSeq, p.mu.dirDirty) {
		return wrote, nil
	}
	return true, p.snaps.writeUnsyncedLocked(p.mu.producers, p.mu.end.Offset, &p.mu.dirDirty)
}

// mkdirDurable creates dir and its missing parents and syncs the parent of
// each directory it created, so that a crash cannot lose the partition
// directory (a new directory entry is durable only once its parent is
// synced).
func mkdirDurable(fs vfs.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := fs.Stat(d)
		if err == nil {
			if len(created) == 0 && st.IsDir() {
				return nil // nothing to make (a Dir opening its partitions)
			}
			break
		}
		if !errors.Is(err, errNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncDir(fs, filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}

// errOverlap wraps base.ErrCorrupt: segments whose offset ranges overlap.
var errOverlap = fmt.Errorf("%w: overlapping segments", batch.ErrCorrupt)

// newRollAfter draws the time limit of a newly active segment: SegmentTime
// minus a jitter in [0, min(SegmentJitter, SegmentTime)).
func (p *Partition) newRollAfter() time.Duration {
	if p.cfg.SegmentTime < 0 {
		return 0 // no time roll
	}
	j := min(p.cfg.SegmentJitter, p.cfg.SegmentTime)
	if j <= 0 {
		return p.cfg.SegmentTime
	}
	return p.cfg.SegmentTime - time.Duration(rand.Int64N(int64(j)))
}

// positionIn locates offset (in [first base, end.Offset]) in list.
func positionIn(list []*segment.Segment, offset int64, end position) (position, error) {
	if offset >= end.Offset {
		return end, nil
	}
	i := len(list) - 1
	for i > 0 && list[i].BaseOffset() > offset {
		i--
	}
	seg := list[i]
	pos, found, err := locate(seg, offset)
	if err != nil {
		return position{}, err
	}
	if !found {
		pos = seg.Size()
	}
	return position{Offset: offset, SegBase: seg.BaseOffset(), Pos: pos}, nil
}

// Dir returns the partition's directory.
func (p *Partition) Dir() string { return p.dir }

// LogStartOffset returns the first offset a reader may read: the first
// segment's base offset, or higher after DeleteRecordsBefore.
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// HighWatermark returns the offset below which records are visible to
// ReadFrom: by default the log end offset (a single node commits what it
// wrote); under Config.DisableAutoHighWatermark what SetHighWatermark last
// set, clamped down by TruncateTo.
func (p *Partition) HighWatermark() int64 {
	p.showBuffered() // writebehind.go
	return p.bounds.hwOff.Load()
}

// LogEndOffset returns the offset the next appended record will get: the
// last batch's last offset + 1.
func (p *Partition) LogEndOffset() int64 {
	p.showBuffered() // writebehind.go
	return p.bounds.endOff.Load()
}

// LeaderEpoch returns the leader epoch stamped into appended batches when
// Config.StampLeaderEpoch is set.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// SetLeaderEpoch sets the leader epoch stamped into batches appended from
// now on (when Config.StampLeaderEpoch is set). With stamping on, an epoch
// higher than every epoch of the leader epoch cache is also recorded there
// at once, starting at the log end offset (as a Kafka broker does when it
// becomes leader), and written durably to leader-epoch-checkpoint before
// SetLeaderEpoch returns. An epoch lower than the latest cached one gives
// ErrStaleLeaderEpoch (a leader's epoch never goes
// back; batches stamped with it would cut the cache, as a follower's
// do). On an error (ErrStaleLeaderEpoch, I/O, ErrClosed, ErrFailed) the
// stamped epoch and the cache are unchanged. Without stamping it only
// stores the epoch and never fails.
func (p *Partition) SetLeaderEpoch(epoch int32) error {
	if !p.cfg.StampLeaderEpoch {
		p.leaderEpoch.Store(epoch)
		return nil
	}
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if latest, ok := p.mu.epochs.Latest(); ok && epoch >= 0 && epoch < latest {
		return fmt.Errorf("%w: leader epoch %d, the latest is %d", ErrStaleLeaderEpoch, epoch, latest)
	}
	if p.mu.epochs.StartsEpoch(epoch) {
		if err := p.assignEpochLocked(epoch, p.mu.end.Offset); err != nil {
			return err
		}
	}
	p.leaderEpoch.Store(epoch)
	return nil
}

// SetHighWatermark moves the high watermark to offset, for embedders that
// replicate (Config.DisableAutoHighWatermark); it may move backwards, as
// Kafka's does on a leader change. offset must lie in [LogStartOffset,
// LogEndOffset]; otherwise the error wraps ErrOffsetOutOfRange and nothing
// changes. An offset inside a batch hides that whole batch from ReadFrom
// (no byte at or past the high watermark is returned).
//
// SetHighWatermark does not wait for a TruncateTo that waits for readers,
// so a goroutine holding Records may call it (the truncation has changed
// nothing yet; it clamps the high watermark when it cuts).
func (p *Partition) SetHighWatermark(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	p.writeBehindLocked() // the batches below offset may be buffered (writebehind.go)
	if err := p.checkWritableLocked(); err != nil {
		return err // that write failed the partition
	}
	if start := p.logStart.Load(); offset < start || offset > p.mu.end.Offset {
		return fmt.Errorf("%w: high watermark %d outside [%d, %d]", ErrOffsetOutOfRange, offset, start, p.mu.end.Offset)
	}
	// A TruncateTo waiting for read leases (mu.truncating) has changed
	// nothing yet, and cuts only under mu: the segments are as mu.end
	// says. (No read lease here: mu is never held while waiting for one.)
	hw, err := positionIn(p.segs.Load().list, offset, p.mu.end)
	if err != nil {
		return fmt.Errorf("partlog/log: set high watermark %d in %s: %w", offset, p.dir, err)
	}
	p.mu.hw = hw
	p.publishLocked()
	return nil
}

// checkWritableLocked returns ErrClosed or the sticky failure.
// REQUIRES: mu held.
func (p *Partition) checkWritableLocked() error {
	if p.mu.closed {
		return ErrClosed
	}
	if p.mu.failed != nil {
		return p.mu.failed
	}
	return p.offlineErr()
}

// Close seals the active segment (its final time index entry), flushes
// everything as Sync does, writes the producer state snapshot at the log
// end and, when all of that succeeded and the partition had not failed,
// the clean-shutdown marker, so that the next Open skips recovery. It
// stops the FlushInterval goroutine and waits for a flush in progress.
// Records still open stay valid, their bytes unchanged, until they are
// closed: the partition keeps its directory locked until the last of
// them (and of every other read still holding its segments) is closed,
// and until then an Open of the directory (or, in a Dir, OpenPartition)
// fails with ErrLocked, so that no new owner cuts or rewrites the files
// they map. Close releases everything else even when a step fails and
// returns the first error, or the failure that failed the partition
// before (ErrFailed), perhaps in a background flush. A Compact round in
// progress is stopped first (it returns an error wrapping ErrClosed and
// removes its unfinished files) and Close waits for it. Every later call,
// Close included, returns ErrClosed.
func (p *Partition) Close() error {
	_, err := p.closeWith(false)
	return err
}

// closeWith is Close. With syncLater (Dir.Close on a filesystem that syncs
// whole filesystems) it writes what Close writes but the producer
// snapshots and syncs none of it (closeFlushLocked): the Dir makes every
// partition's files durable with one filesystem sync, then writes their
// snapshots (snapshotsAfterSyncLocked) and syncs again, before it writes the
// root checkpoints and the clean-shutdown marker. unsynced reports that
// the partition left something for that sync (closeFlushLocked).
func (p *Partition) closeWith(syncLater bool) (unsynced bool, err error) {
	if p.dur.syncEveryAppend() {
		// Appenders wait for their fdatasync (groupCommit): Close's own
		// flush answers the writes it finds queued, as it would alone;
		// the Dir's later sync could not (they would be told ErrClosed
		// about batches the log then keeps).
		syncLater = false
	}
	p.cleaning.stop() // a running Compact ends with ErrClosed before anything closes
	owner, unsynced, err := p.close(syncLater)
	p.dur.bg.Wait() // background flushes after a roll, the spare's goroutines; they find ErrClosed
	// The directory's ownership goes last: the goroutines waited for
	// above write and remove files (a spare's, under names another
	// owner's spare would take too), so nobody else may own the
	// directory before they ended. Nor before the last reader let go of
	// the segments (a Records kept open, a lease): a new owner would
	// truncate and rewrite the files it maps. The partition holds the
	// ownership until then (ownership.go).
	if owner != nil {
		if !p.segTracker.WhenIdle(owner.letGo) {
			owner.letGo()
		}
		if !p.inDir { // a Dir's is the Dir's to close
			if uerr := owner.close(); uerr != nil {
				p.logger.Warn("partlog/log: close failed", "dir", p.dir, "err", uerr)
				if err == nil {
					err = uerr
				}
			}
		}
	}
	return unsynced, err
}

// close implements closeWith but for the release of the directory's
// ownership, which it returns (nil when the partition was closed
// already). It takes flushMu (so a running sync or a roll's background
// flush ends first), then mu, then each segment's locks, in DESIGN.md's
// lock order, and drops the partition's references on its segments: their
// files close now or when the last Records holding them is closed.
func (p *Partition) close(syncLater bool) (owner *ownership, unsynced bool, err error) {
	p.dur.flusher.stop()
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.lockWriter()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, false, ErrClosed
	}
	p.stopWriteBehindLocked() // lockWriter wrote the queue (writebehind.go)
	if syncLater && p.dur.flushDueLocked() {
		// An append past FlushMessages records waits for flushMu to
		// flush: this Close's own full flush answers it (afterAppend),
		// which the Dir's later sync could not (it would be told
		// ErrClosed about a batch the log then keeps).
		syncLater = false
	}
	p.mu.closed = true
	p.closed.Store(true)
	p.bounds.wakeAll()
	p.awake.leaveLocked()       // awake.go
	p.dur.spare.discardLocked() // spare.go
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	snap := p.segs.Load()
	if p.mu.failed == nil && p.offlineErr() == nil {
		if err := snap.active().Seal(); err != nil {
			keep(fmt.Errorf("partlog/log: close %s: seal segment %d: %w", p.dir, snap.active().BaseOffset(), err))
		}
		if first == nil {
			if syncLater {
				var err error
				unsynced, err = p.closeFlushLocked()
				keep(err)
			} else {
				keep(p.fullFlushLocked())
			}
		}
		if first == nil && !syncLater { // with syncLater: the Dir's, after its sync
			keep(p.snaps.closeLocked(p.mu.producers, p.mu.end.Offset, p.mu.writeSeq, &p.mu.dirDirty)) // producer state at the log end
		}
	}
	p.dur.closeSyncFile()
	keep(p.dur.releaseUnsyncedLocked())
	for _, seg := range snap.list {
		// Drops the partition's own reference; the files close now or
		// when the last reader lets go.
		if err := seg.Close(); err != nil {
			keep(fmt.Errorf("partlog/log: close %s: segment %d: %w", p.dir, seg.BaseOffset(), err))
		}
	}
	snap.retire()
	keep(snap.unref()) // the partition's reference on the snapshot
	if first == nil && p.mu.failed != nil {
		// A failure nobody saw (a flush in the background after a roll,
		// or the FlushInterval goroutine's) is reported here at the
		// latest: nothing since it is durable.
		first = p.mu.failed
	}
	if first == nil && p.mu.failed == nil && p.offlineErr() == nil && !p.inDir {
		if err := checkpoint.MarkCleanShutdown(p.cfg.FS, p.dir); err != nil {
			keep(fmt.Errorf("partlog/log: close %s: clean shutdown marker: %w", p.dir, err))
		}
	}
	owner, p.dirOwner = p.dirOwner, nil
	if first != nil {
		p.logger.Warn("partlog/log: close failed", "dir", p.dir, "err", first)
	}
	return owner, unsynced, first
}

// spliceSegmentsLocked publishes a new snapshot whose list is the current
// one with list[lo:hi] replaced by mid, and releases the partition's
// reference on the old one. It takes segment references only on mid and
// drops them only on list[lo:hi] (state.go, snapLink). REQUIRES: mu held;
// see segments.splice.
func (p *Partition) spliceSegmentsLocked(lo, hi int, mid ...*segment.Segment) error {
	old := p.segs.Load()
	p.segs.Store(old.splice(lo, hi, mid))
	return old.unref()
}
