package log

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/epochs"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/segment"
)

// Opening a partition directory (DESIGN.md, "Parts of a Partition: opening
// and recovery"). Open's first half reads every file that says what the
// log should be (the checkpoints, the directory listing, each segment's
// end) and decides whether the directory may be loaded (checkDir,
// opencheck.go) before it writes anything, so that a refusal changes
// nothing; then it finishes or undoes what a crash interrupted, opens the
// segments and, after an unclean shutdown, recovers them (recovery.go).
// That half is the opening part below: it runs before the Partition is
// built, hands the partition what it found (opened) and is dropped. The
// rules are docs/crash-safety.md's "Recovery rules" and "Directory checks".

// opening is what an Open needs while it reads and recovers the partition
// directory. It is used by Open's goroutine only, before the partition is
// shared, so it has no lock; it never reaches the Partition.
type opening struct {
	// fs, dir, segCfg, logger, policy, ckpt, inDir and readHighWatermark
	// are set by newOpening and never change.
	fs     vfs.FS
	dir    string
	segCfg segment.Config
	logger *slog.Logger
	// policy is Config.Recovery: it is asked about every contradiction
	// or invalid data a policy may accept, before anything is cut.
	policy RecoveryPolicy
	// ckpt is the partition's checkpoint store (its own files, or its
	// Dir's root files).
	ckpt checkpointStore
	// inDir is set for a partition of a Dir (no lock or clean-shutdown
	// marker of its own).
	inDir bool
	// readHighWatermark is Config.DisableAutoHighWatermark: the high
	// watermark checkpoint is read.
	readHighWatermark bool
	// ownLock is set by the core for a partition of a Dir whose directory
	// holds lockFile (it was last opened alone; the core's probeFree
	// looked), so that adoptOwnCheckpoints need not look again.
	ownLock bool
	// dirParent is set by the core for a partition opened alone whose
	// directory is a partition of a closed Dir (its parent holds
	// dirLockFile): load removes the Dir's clean-shutdown marker, which
	// would vouch for this partition at the next OpenDir even after a
	// crash here, once it has decided and before it changes anything,
	// so that OpenDir goes by the partition's own marker
	// (adoptOwnCheckpoints).
	dirParent bool
	// fromRoot are the entries the closed Dir's root files hold for a
	// partition opened alone with dirParent (readRootEntries), by file
	// name. They win over the partition's own files, as in OpenDir, and
	// load moves them into those files (takeRootEntries).
	fromRoot map[string]int64
	// tiered is dirMember.tiered, set by the core: the leader epoch
	// entries below the local log start may be the copies' epochs, which
	// settleEmptyTail leaves to the Dir's cut at the whole log's start
	// (Partition.cutEpochsBelowStart).
	tiered bool

	// saved are the offsets the checkpoints hold (readCheckpoints), less
	// the ones the policy let the open ignore.
	saved savedOffsets
	// listing is the directory's file names a clean open read once
	// (checkDir), used for the producer snapshot files while listed: a
	// repair or a recovery that may change the directory ends it
	// (dropListing).
	listing []string
	listed  bool
	// epochs is the leader epoch cache: loaded from its checkpoint, fed
	// the epochs of the batches recovery reads, cleared when the open
	// finishes a restart of the log.
	epochs epochs.Cache
	// dirDirty is set when the open created, renamed or removed files
	// and has not synced the directory since.
	dirDirty bool
	// stats is what recovery did (Stats.Recovery).
	stats RecoveryStats
}

// savedOffsets are the offsets an open read from the partition's
// checkpoints. A have flag is false when there is no entry, or the policy
// let the open go on without one that does not parse or contradicts the
// segments.
type savedOffsets struct {
	// logStart is the log start offset checkpoint.
	logStart     int64
	haveLogStart bool
	// recoveryPoint is the recovery point checkpoint: every batch below
	// it was synced. Not read after a clean shutdown when it does not
	// parse (the log end is the recovery point then).
	recoveryPoint     int64
	haveRecoveryPoint bool
	// highWatermark is the high watermark checkpoint, read under
	// Config.DisableAutoHighWatermark only.
	highWatermark     int64
	haveHighWatermark bool
	// cleanerAt is the cleaner checkpoint, -1 when there is none or it
	// does not parse: a sealed segment ending before a next base at or
	// below it was rewritten by a compaction, which syncs what it writes
	// (compactedGap).
	cleanerAt int64
}

// rp returns the recovery point, -1 when there is none.
func (s savedOffsets) rp() int64 {
	if s.haveRecoveryPoint {
		return s.recoveryPoint
	}
	return -1
}

// opened is what an opening hands the partition it opens.
type opened struct {
	// list holds the segments in base offset order, the last one
	// active, each with the reference segment.Open or Create returned
	// (the partition's own).
	list []*segment.Segment
	// clean: no segment was recovered (a clean shutdown the segments
	// confirm, or nothing to recover).
	clean bool
	// created: the directory held no segment and the open created the
	// first one, at the log start checkpoint or 0; the partition records
	// its checkpoints.
	created bool
	// saved, epochs, dirDirty and stats are the opening's, final.
	saved    savedOffsets
	epochs   epochs.Cache
	dirDirty bool
	stats    RecoveryStats
	// listing is the clean open's directory listing, for the producer
	// snapshot part (producerSnapshots.useListing), when listed.
	listing []string
	listed  bool
}

// newOpening returns the opening of the partition in dir, configured by
// cfg (defaults applied) and segCfg, with its checkpoint store ckpt; inDir
// says the partition is a Dir's.
func newOpening(dir string, cfg *Config, segCfg segment.Config, ckpt checkpointStore, inDir bool) *opening {
	return &opening{fs: cfg.FS, dir: dir, segCfg: segCfg, logger: cfg.Logger, policy: cfg.Recovery,
		ckpt: ckpt, inDir: inDir, readHighWatermark: cfg.DisableAutoHighWatermark,
		saved: savedOffsets{cleanerAt: -1}}
}

// load reads the directory and decides (readCheckpoints, checkDir), then
// carries out what a crash left of a compaction or deletion (applyPlan),
// removes the clean-shutdown marker, opens the segments, creating the
// first one when there is none, recovers them after an unclean shutdown
// from the segment holding the recovery point (recoverSegments), settles
// an empty last segment (settleEmptyTail) and checks that the segments do
// not overlap. dirClean is a Dir's root marker (a Dir's partition only).
// On an error the segments it opened are released, and nothing was
// written when the error wraps ErrRecoveryRefused or is the policy's.
// The caller holds the directory's lock.
func (o *opening) load(dirClean bool) (_ opened, err error) {
	clean, err := o.readCheckpoints(dirClean)
	if err != nil {
		return opened{}, err
	}
	dc, err := o.checkDir(clean)
	if err != nil {
		return opened{}, err
	}
	if o.dirParent {
		if err := checkpoint.RemoveCleanShutdown(o.fs, filepath.Dir(o.dir)); err != nil {
			return opened{}, fmt.Errorf("partlog/log: open %s: remove the log directory's clean-shutdown marker: %w", o.dir, err)
		}
		if err := o.takeRootEntries(); err != nil {
			return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
		}
	}
	if !clean {
		o.dropListing() // repairs and recovery may change the directory
	}
	if dc.distrustLogStart {
		o.saved.haveLogStart = false
	}
	if err := o.applyPlan(dc); err != nil {
		return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
	}
	if (clean || o.inDir) && slices.Contains(dc.plan.Names, checkpoint.CleanShutdownFile) {
		// In a Dir the marker is the Dir's; one left here by an Open
		// alone is stale and goes too. (checkDir's listing says
		// whether there is one: a Dir's partitions have none.)
		if err := checkpoint.RemoveCleanShutdown(o.fs, o.dir); err != nil {
			return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
		}
	}
	if dc.unclean {
		clean = false
		o.dropListing() // recovery may change the directory
	}
	bases := dc.plan.Bases
	if len(bases) == 0 {
		clean = true // nothing to recover
	}
	list, created, err := o.openSegments(bases, clean)
	if err != nil {
		return opened{}, err
	}
	defer func() {
		if err != nil {
			for _, s := range list {
				_ = s.Unref() // not Close: it would cut what Open left out of Size
			}
		}
	}()
	o.stats.Clean = clean
	if !clean {
		// Recover from the segment holding the recovery point (Kafka:
		// min(checkpoint, log end); a checkpoint past the end selects
		// the last segment).
		from := len(list) - 1
		for from > 0 && list[from].BaseOffset() > o.saved.rp() {
			from--
		}
		// Below the recovery point every batch was synced: damage
		// that Open met there (the batches ending before the last
		// offset index entries) is not a torn write, and is refused
		// as before recovery looked at it (law 12). Those wholly below
		// the log start are no reader's.
		for i, seg := range list[:from] {
			if err := seg.LoadDamage(); err != nil && !(o.saved.haveLogStart && list[i+1].BaseOffset() <= o.saved.logStart) {
				return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
			}
		}
		// Nor below the segment holding the log start: those wholly
		// below it are no reader's (checkDir skips them too).
		for o.saved.haveLogStart && from+1 < len(list) && list[from+1].BaseOffset() <= o.saved.logStart {
			from++
		}
		if list, err = o.recoverSegments(list, from); err != nil {
			return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
		}
	}
	n := len(list)
	if list, err = o.settleEmptyTail(list); err != nil {
		return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
	}
	if clean && len(list) != n {
		if err := syncDir(o.fs, o.dir); err != nil {
			return opened{}, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
		}
		o.dirDirty = false
	}
	active := list[len(list)-1]
	// Under a segment budget the files stay sealed (closable at rest)
	// until the first append: an idle partition holds none open.
	if err := active.UnsealOnWrite(); err != nil {
		return opened{}, fmt.Errorf("partlog/log: open %s: activate segment %d: %w", o.dir, active.BaseOffset(), err)
	}
	for i := 1; i < len(list); i++ {
		if prev, cur := list[i-1], list[i]; prev.NextOffset() > cur.BaseOffset() {
			return opened{}, fmt.Errorf("partlog/log: open %s: segment %d ends at offset %d, past the next segment's base %d: %w",
				o.dir, prev.BaseOffset(), prev.NextOffset(), cur.BaseOffset(), errOverlap)
		}
	}
	res := opened{list: list, clean: clean, created: created, saved: o.saved, epochs: o.epochs,
		dirDirty: o.dirDirty, stats: o.stats}
	if o.listed {
		res.listing, res.listed = o.listing, true
	}
	return res, nil
}

// readCheckpoints reads whether the shutdown was clean (for a Dir's
// partition, dirClean or what adoptOwnCheckpoints finds), the offset
// checkpoints into saved and the leader epoch cache. A checkpoint that
// does not parse goes to the policy (checkpointProblem), except a recovery
// point after a clean shutdown, which is not needed then.
func (o *opening) readCheckpoints(dirClean bool) (clean bool, err error) {
	if o.inDir {
		if clean, err = o.adoptOwnCheckpoints(dirClean); err != nil {
			return false, err
		}
	} else if clean, err = checkpoint.HasCleanShutdown(o.fs, o.dir); err != nil {
		return false, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
	}
	if o.dirParent {
		if err := o.readRootEntries(); err != nil {
			return false, err
		}
	}
	s := &o.saved
	if s.logStart, s.haveLogStart, err = o.readSaved(logStartOffsetCheckpointFile); err != nil {
		if err := o.checkpointProblem(logStartOffsetCheckpointFile, err); err != nil {
			return false, err
		}
		s.haveLogStart = false
	}
	if s.recoveryPoint, s.haveRecoveryPoint, err = o.readSaved(recoveryPointCheckpointFile); err != nil {
		if !clean {
			if err := o.checkpointProblem(recoveryPointCheckpointFile, err); err != nil {
				return false, err
			}
		}
		s.haveRecoveryPoint = false // clean: the log end is the recovery point
	}
	if o.readHighWatermark {
		if s.highWatermark, s.haveHighWatermark, err = o.readSaved(highWatermarkCheckpointFile); err != nil {
			if err := o.checkpointProblem(highWatermarkCheckpointFile, err); err != nil {
				return false, err
			}
			s.haveHighWatermark = false
		}
	}
	// The leader epoch cache (epochs.go); a file that does not parse goes
	// to the recovery policy (ignored: start without it).
	o.epochs = epochs.New(o.fs, filepath.Join(o.dir, leaderEpochCheckpointFile))
	if dropped, err := o.epochs.Load(); err != nil {
		if err := o.checkpointProblem(leaderEpochCheckpointFile, err); err != nil {
			return false, err
		}
	} else if dropped >= 0 {
		o.logger.Warn("partlog/log: leader epoch checkpoint out of order; ignoring the rest", "dir", o.dir, "entry", dropped)
	}
	// A cleaner checkpoint that cannot be read only explains no gap here
	// (Compact reports it when it reads it).
	if off, ok, err := o.readSaved(cleanerCheckpointFile); err == nil && ok {
		s.cleanerAt = off
	}
	return clean, nil
}

// checkpointProblem hands a checkpoint that does not parse to the policy;
// nil means: go on without it.
func (o *opening) checkpointProblem(name string, err error) error {
	var ce *base.CorruptionError
	if !errors.As(err, &ce) {
		return fmt.Errorf("partlog/log: open %s: %s: %w", o.dir, name, err)
	}
	ev := RecoveryEvent{Dir: o.dir, File: ce.File, Pos: ce.Pos, LastGoodOffset: -1, Checkpoint: true, Err: err}
	if perr := o.policy.OnCorruption(ev); perr != nil {
		return perr
	}
	o.logger.Warn("partlog/log: ignoring a checkpoint that does not parse", "dir", o.dir,
		"file", ce.File, "position", ce.Pos, "cause", err)
	return nil
}

// readSaved reads checkpoint name for readCheckpoints: the closed Dir's
// root entry when there is one (fromRoot), else the partition's store.
func (o *opening) readSaved(name string) (int64, bool, error) {
	if off, ok := o.fromRoot[name]; ok {
		return off, true, nil
	}
	return o.ckpt.read(name)
}

// readRootEntries reads into fromRoot the entries of the closed Dir's
// root files for the partition (dirParent): the Dir wrote them after
// anything the partition's own files hold (OpenDir takes those over), so
// they win, as they do in OpenDir. A root file that does not parse goes
// to the policy (checkpointProblem) and is left alone.
func (o *opening) readRootEntries() error {
	topic, part, ok := checkpoint.ParseDirName(filepath.Base(o.dir))
	if !ok {
		return nil // no Dir opens it as a partition
	}
	tp := TopicPartition{topic, part}
	for _, name := range rootCheckpointFiles {
		m, err := readRootCheckpoint(o.fs, filepath.Dir(o.dir), name)
		if err != nil {
			if err := o.checkpointProblem(name, err); err != nil {
				return err
			}
			continue
		}
		if off, ok := m[tp]; ok {
			if o.fromRoot == nil {
				o.fromRoot = make(map[string]int64)
			}
			o.fromRoot[name] = off
		}
	}
	return nil
}

// takeRootEntries moves fromRoot into the partition's own files, durably,
// then drops the partition's entries from the root files, durably, with
// the Dir's lock held (no Dir opens meanwhile, nor does another partition
// opened alone rewrite the files). The next OpenDir finds no entry of the
// partition at its root and takes its own files over (adoptOwnCheckpoints),
// which the partition keeps current from now on: root entries left in
// place would win over them although they are older. A crash between the
// two steps leaves the same offsets in both.
func (o *opening) takeRootEntries() error {
	if len(o.fromRoot) == 0 {
		return nil
	}
	for _, name := range rootCheckpointFiles {
		if off, ok := o.fromRoot[name]; ok {
			if err := o.ckpt.write(name, off, false); err != nil {
				return err
			}
		}
	}
	root := filepath.Dir(o.dir)
	lock, err := rootLocks.lock(o.fs, filepath.Join(root, dirLockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("%w (the log directory's %s is held): %w", ErrLocked, dirLockFile, err)
	}
	if err != nil {
		return fmt.Errorf("lock the log directory: %w", err)
	}
	defer func() { _ = lock.Close() }()
	topic, part, _ := checkpoint.ParseDirName(filepath.Base(o.dir))
	tp := TopicPartition{topic, part}
	for _, name := range rootCheckpointFiles {
		if _, ok := o.fromRoot[name]; !ok {
			continue
		}
		m, err := readRootCheckpoint(o.fs, root, name)
		if err != nil {
			return err
		}
		if _, ok := m[tp]; !ok {
			continue
		}
		delete(m, tp)
		keys := make([]TopicPartition, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareTP)
		entries := make([]checkpoint.PartitionOffset, len(keys))
		for i, k := range keys {
			entries[i] = checkpoint.PartitionOffset{Topic: k.Topic, Partition: k.Partition, Offset: m[k]}
		}
		if err := checkpoint.Write(o.fs, filepath.Join(root, name), checkpoint.OffsetFormat, entries); err != nil {
			return fmt.Errorf("drop the partition's entry from %s: %w", name, err)
		}
	}
	return nil
}

// adoptOwnCheckpoints takes over, for a partition of a Dir whose
// directory was last used by a partition opened alone (it holds lockFile),
// the checkpoints it kept in its own directory: each offset checkpoint the
// Dir has no entry for, and its own clean-shutdown marker (written by its
// Close; a Dir removes it when it opens the partition, so it is never
// stale). The files stay where they are; the entries reach the root files
// with the Dir's next write (ownLock: the directory holds lockFile).
// Returns whether the open is clean.
func (o *opening) adoptOwnCheckpoints(dirClean bool) (bool, error) {
	fs, dir := o.fs, o.dir
	if !o.ownLock {
		return dirClean, nil
	}
	own := partitionFiles{fs: fs, dir: dir, logger: o.logger}
	for _, name := range rootCheckpointFiles {
		if _, ok, _ := o.ckpt.read(name); ok {
			continue
		}
		off, ok, err := own.read(name)
		if err != nil {
			if err := o.checkpointProblem(name, err); err != nil {
				return false, err
			}
			continue
		}
		if !ok {
			continue
		}
		// Lazy: until the root file holds it, the partition's own file
		// still does, and the next OpenDir takes it again.
		if err := o.ckpt.write(name, off, true); err != nil {
			return false, fmt.Errorf("partlog/log: open %s: %w", dir, err)
		}
		o.logger.Info("partlog/log: took over a checkpoint of the partition directory", "dir", dir, "file", name, "offset", off)
	}
	if dirClean {
		return true, nil
	}
	clean, err := checkpoint.HasCleanShutdown(fs, dir)
	if err != nil {
		return false, fmt.Errorf("partlog/log: open %s: %w", dir, err)
	}
	return clean, nil
}

// applyPlan carries out dc's plan (repair.Plan.Apply), unless there is
// nothing to do or the policy changes nothing.
func (o *opening) applyPlan(dc *dirCheck) error {
	if dc.skipRemove || !dc.plan.Work() {
		return nil
	}
	o.dropListing() // the directory changes
	return dc.plan.Apply(o.fs, o.dir, o.logger)
}

// useListing keeps names, the directory's listing, for the producer
// snapshot files until dropListing.
func (o *opening) useListing(names []string) { o.listing, o.listed = names, true }

// dropListing ends the use of the listing: the directory changes.
func (o *opening) dropListing() { o.listing, o.listed = nil, false }

// newestSnapshot returns the offset of the newest producer snapshot file
// (ok false when there is none): from the open's listing while it is in
// use, else from the directory.
func (o *opening) newestSnapshot() (offset int64, ok bool, err error) {
	var offs []int64
	if o.listed {
		offs = producer.SnapshotOffsets(o.listing)
	} else if offs, err = producer.ListSnapshots(o.fs, o.dir); err != nil {
		return 0, false, err
	}
	if len(offs) == 0 {
		return 0, false, nil
	}
	return offs[len(offs)-1], true, nil
}

// openSegments opens the segments at bases, reading no batch data when
// clean (segment.OpenClean: every segment's time index ends with its
// final entry), or, when there are none, creates the first one (created)
// at the log start checkpoint, or 0. On an error it releases what it
// opened.
func (o *opening) openSegments(bases []int64, clean bool) (list []*segment.Segment, created bool, err error) {
	if len(bases) == 0 {
		base := int64(0)
		if o.saved.haveLogStart && o.saved.logStart > 0 {
			base = o.saved.logStart
		}
		seg, err := segment.Create(o.fs, o.dir, base, o.segCfg)
		if err != nil {
			return nil, false, fmt.Errorf("partlog/log: open %s: create segment %d: %w", o.dir, base, err)
		}
		o.dirDirty = true
		if o.inDir {
			// A Dir's checkpoints live at its root, whose fsync does not
			// cover this directory: the segment's entry is made durable
			// here, before a roll can create a later one (a crash must not
			// keep a later segment without the first).
			if err := syncDir(o.fs, o.dir); err != nil {
				_ = seg.Unref()
				return nil, false, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
			}
			o.dirDirty = false
		}
		return []*segment.Segment{seg}, true, nil
	}
	openSegment := segment.Open
	if clean {
		openSegment = segment.OpenClean
	}
	for _, base := range bases {
		seg, err := openSegment(o.fs, o.dir, base, o.segCfg)
		if err != nil {
			for _, s := range list {
				_ = s.Unref()
			}
			return nil, false, fmt.Errorf("partlog/log: open %s: %w", o.dir, err)
		}
		list = append(list, seg)
	}
	return list, false, nil
}

// settleEmptyTail decides, at Open, about a last segment that holds no
// batch and starts above the previous segment's next offset (an offset
// gap before an empty segment) or at or below the log start offset, and
// returns the segments that remain. Four things leave one:
//
//   - a follower's roll across a gap (rollAcrossGapLocked) whose first
//     batch a crash lost: the roll persisted the recovery point at the new
//     segment's base once the segment existed;
//   - a TruncateFullyAndStartAt that a crash interrupted before its commit
//     (the log start offset checkpoint at the new segment's base): the
//     recovery point and log start are still the old log's;
//   - a TruncateFullyAndStartAt that a crash interrupted after its commit:
//     the log start offset checkpoint is at the new segment's base (with
//     or without a gap before it: a restart at the log end has none);
//   - a DeleteRecordsBefore up to the log end, which cannot remove the
//     active segment, then a roll: the log start offset checkpoint is at
//     the new segment's base and the segments before it lie wholly below.
//
// The first two remove the empty segment (and then an empty segment
// before it that is one of these, as the next Open would): the log ends
// where the previous segment does (as TruncateTo ends it when it would empty a segment after
// a gap), so that no segment follows an offset gap its own batches do not
// show (a batch appended at the empty segment's base would otherwise
// leave one, which checkDir refuses). A segment that holds nothing loses
// nothing when removed; the offsets of the gap held nothing either. The
// last two remove every earlier segment, all below the log start offset.
// The restart also empties the leader epoch cache: Open finishes that when
// the cache still holds an entry below the log start offset (the restart
// empties the cache durably before it removes any old segment, and
// DeleteRecordsBefore up to the log end writes the cache, moved up to the
// log start, durably before it returns, so its entries all start at or
// after the new segment's base). A DeleteRecordsBefore that a crash
// interrupted before that write looks like the restart and is finished the
// same way, its cache emptied: the next batch's epoch starts it again.
// list holds at least one segment.
func (o *opening) settleEmptyTail(list []*segment.Segment) ([]*segment.Segment, error) {
	n := len(list)
	if n < 2 {
		return list, nil
	}
	logStart, haveLogStart := o.saved.logStart, o.saved.haveLogStart
	last, prev := list[n-1], list[n-2]
	b := last.BaseOffset()
	if last.Size() != 0 || (prev.NextOffset() >= b && !(haveLogStart && logStart >= b)) {
		return list, nil
	}
	remove := func(segs []*segment.Segment) error {
		for i := len(segs) - 1; i >= 0; i-- {
			if err := segs[i].MarkDeleted(); err != nil {
				return fmt.Errorf("remove segment %d: %w", segs[i].BaseOffset(), err)
			}
			if err := segs[i].Close(); err != nil {
				o.logger.Warn("partlog/log: releasing a segment failed", "dir", o.dir, "err", err)
			}
		}
		o.dirDirty = true
		return nil
	}
	switch {
	case haveLogStart && logStart >= b:
		o.logger.Warn("partlog/log: removing the segments wholly below the log start offset (a restart of the log or a DeleteRecordsBefore that a crash interrupted, or a roll after a DeleteRecordsBefore up to the log end)",
			"dir", o.dir, "logStart", b, "segmentsRemoved", n-1)
		if err := remove(list[:n-1]); err != nil {
			return list, err
		}
		// In a Dir that tiers, the copies below b keep their epochs
		// (a retention the crash interrupted leaves them):
		// cutEpochsBelowStart cuts the cache at the whole log's start,
		// which a DeleteRecordsBefore or a restart moved before its log
		// start checkpoint.
		if first, ok := o.epochs.First(); ok && first.StartOffset < b && !o.tiered {
			o.epochs.Clear()
		}
		return list[n-1:], nil
	case haveLogStart && logStart > prev.NextOffset():
		// The log start offset inside the gap: only a DeleteRecordsBefore
		// after the gap's first batch moves it there, and that batch was
		// synced first. Keep the log ending at b rather than move the log
		// start back.
		return list, nil
	default:
		o.logger.Warn("partlog/log: removing an empty segment after an offset gap (a follower's roll across the gap whose first batch a crash lost, or a restart a crash interrupted)",
			"dir", o.dir, "segment", b, "previousEnd", prev.NextOffset())
		if err := remove(list[n-1:]); err != nil {
			return list, err
		}
		// The segment before may be such a one too (a crash lost the
		// batches of a roll across a gap and of the roll after it, and
		// recovery cut the log there): settle it as the next Open would.
		return o.settleEmptyTail(list[:n-1])
	}
}

// emptyTailExplained is checkDir's answer for an empty last segment (file
// path, base b) after an offset gap down to prevNext: true when the
// recovery point reaches b (a follower's roll across a gap persisted it
// once the segment existed), or, after a crash, when the policy accepts it
// as a torn tail; settleEmptyTail then removes it, or finishes the restart
// the log start checkpoint committed. After a clean shutdown without that
// recovery point the gap is unexplained: a stray file or a missing
// segment.
func (o *opening) emptyTailExplained(path string, b, prevNext int64, clean bool) (bool, error) {
	if o.saved.haveRecoveryPoint && o.saved.recoveryPoint >= b {
		return true, nil
	}
	if clean {
		return false, nil
	}
	cause := base.TornTailErrorf(path, 0, "baseOffset",
		"an empty segment at offset %d after the previous segment ended at %d: a follower's roll or a restart of the log that a crash interrupted", b, prevNext)
	if err := o.askPolicy(path, false, true, cause); err != nil {
		return false, err
	}
	return true, nil
}
