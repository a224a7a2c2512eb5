package log

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/log/internal/repair"
	"github.com/partlog/partlog/segment"
)

// lockFile is the name of the lock file Open creates (empty) in the
// partition directory and holds an exclusive lock on (flock(2) on unix)
// until Close, and after Close until the last reader let go of the
// partition's segments (ownership): a second Open of the directory, in
// this process or another, fails with ErrLocked instead of appending over
// the first or cutting files its readers map. The file is
// left in place after Close (removing it would let a later Open lock a new
// file while an earlier owner still held the old one). Its name starts
// with a dot and carries no base offset, so neither Kafka's loader nor
// partlog's takes it for a segment file (docs/format.md).
const lockFile = ".partlog.lock" // frozen: on-disk name

// ErrLocked is wrapped by the error Open or OpenDir returns when the
// directory already has an owner, in this process or another: another
// Open of the partition, a Dir whose log directory holds it (Open of a
// Dir's partition on its own), or a partition open on its own (OpenDir or
// CreatePartition of it). A closed owner stays the owner while Records
// (or other reads) it returned are still open: until the last is closed,
// a reopen fails with ErrLocked too, and in this process the error says
// so. The error names the directory.
var ErrLocked = errors.New("partlog/log: partition directory is already open")

// lockDir takes the partition directory's lock for a partition opened
// alone, then makes sure no Dir owns the log directory above it (a
// partition of an open Dir must not get a second owner, in this process
// or another, which would append over the Dir's partition).
//
// The two kinds of owner exclude each other by the order of their locks:
// Open takes lockFile first and then probes the parent's dirLockFile; a
// Dir takes dirLockFile first and then probes the lockFile of each
// partition it opens (probeFree in openPartition). Whichever probes
// second finds the other's lock held and refuses, so at most one of them
// owns the partition (both may refuse when they race). A probe only locks
// a file that exists: neither owner creates the other's lock file.
// dirParent reports that the parent holds dirLockFile: dir is a partition
// of a closed Dir, whose clean-shutdown marker the opening removes before
// it changes anything (opening.dirParent).
func lockDir(fs vfs.FS, dir string) (_ io.Closer, dirParent bool, _ error) {
	name := filepath.Join(dir, lockFile)
	l, err := fs.Lock(name)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, false, fmt.Errorf("partlog/log: open %s: %w (%s): %w", dir, ErrLocked, heldBy(name, lockFile+" is held by another owner"), err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("partlog/log: open %s: lock: %w", dir, err)
	}
	root := filepath.Join(filepath.Dir(dir), dirLockFile)
	inDir, err := probeFreeWith(fs, root, func(name string) (io.Closer, error) { return rootLocks.lock(fs, name) })
	if err != nil {
		_ = l.Close()
		if errors.Is(err, vfs.ErrLocked) {
			held := heldBy(root, "the log directory's "+root+" is held: a Dir owns the partition")
			return nil, false, fmt.Errorf("partlog/log: open %s: %w (%s): %w", dir, ErrLocked, held, err)
		}
		return nil, false, fmt.Errorf("partlog/log: open %s: check %s: %w", dir, root, err)
	}
	return l, inDir, nil
}

// probeFree reports whether the lock file name is free: nil when it does
// not exist or when a Lock of it succeeds (the lock is released at once),
// an error wrapping vfs.ErrLocked when another owner holds it; and
// whether it exists.
func probeFree(fs vfs.FS, name string) (exists bool, err error) {
	return probeFreeWith(fs, name, fs.Lock)
}

// probeFreeWith is probeFree, taking the lock with lock.
func probeFreeWith(fs vfs.FS, name string, lock func(string) (io.Closer, error)) (exists bool, err error) {
	if _, err := fs.Stat(name); err != nil {
		if errors.Is(err, errNotExist) {
			return false, nil
		}
		return false, err
	}
	l, err := lock(name)
	if err != nil {
		return true, err
	}
	return true, l.Close()
}

// dirCheck is what Open learned about the directory before changing
// anything (checkDir).
type dirCheck struct {
	// plan is what the directory needs (repair.Make); skipRemove is set
	// when the policy changes nothing, so files plan.Remove names stay
	// (only *.deleted files then, which the loader ignores), and so do
	// plan.Orphans (index files without a .log, which it ignores too).
	plan       *repair.Plan
	skipRemove bool
	// distrustLogStart: the log start checkpoint contradicts the
	// segments and the policy let Open go on without it.
	distrustLogStart bool
	// unclean: the clean-shutdown marker is contradicted (the active
	// segment does not end on a batch): recover as after a crash.
	unclean bool
}

// compactedGap reports whether the offsets missing between a sealed
// segment and the next one, whose base is nextBase, are a compaction's:
// the cleaner checkpoint reaches nextBase, so the segment was rewritten by
// a cleaner, which syncs the segments it writes before they replace the
// old ones (partlog's Compact and Kafka's cleaner both do). Such a segment
// lost nothing in a crash, even above the recovery point: partlog moves
// the recovery point past what it compacts first, but Kafka's cleaner
// does not, so a crashed directory Kafka wrote may hold compacted
// segments above its recovery point. TruncateTo lowers the checkpoint to
// the new log end, and Open lowers one above the recovered log end (a
// TruncateTo into a compaction gap that failed before its last step), so
// segments rolled after a truncation are never covered by an older
// compaction's checkpoint.
func compactedGap(cleanerAt, nextBase int64) bool { return cleanerAt >= 0 && cleanerAt >= nextBase }

// strictNoRepair reports whether the policy is StrictRecovery without
// AllowTornTail: it refuses even what a crash normally leaves (an
// unfinished compaction) and changes no file.
func strictNoRepair(pol RecoveryPolicy) bool {
	switch s := pol.(type) {
	case StrictRecovery:
		return !s.AllowTornTail
	case *StrictRecovery:
		return s != nil && !s.AllowTornTail
	}
	return false
}

// refused builds Open's error for damage no policy may accept: it wraps
// ErrRecoveryRefused and every finding (each a *base.CorruptionError
// naming a file), after logging each at ERROR.
func (o *opening) refused(findings []error) error {
	for _, f := range findings {
		o.logger.Error("partlog/log: the partition directory is damaged; refusing to open it", "dir", o.dir, "cause", f)
	}
	return fmt.Errorf("partlog/log: open %s: %w: %w", o.dir, ErrRecoveryRefused, errors.Join(findings...))
}

// askPolicy hands a contradiction the policy may accept to
// Config.Recovery; nil means go on (the caller logs what it does).
func (o *opening) askPolicy(file string, checkpoint, tornTail bool, cause error) error {
	ev := RecoveryEvent{Dir: o.dir, File: file, LastGoodOffset: -1, Checkpoint: checkpoint, TornTail: tornTail, Err: cause}
	return o.policy.OnCorruption(ev)
}

// checkDir reads the directory, without changing anything, and decides
// whether Open may load it (see "Directory checks" in docs/crash-safety.md):
//
//   - what a crash left of a compaction or deletion is planned with
//     Kafka's rules (package internal/repair); a .swap that may not
//     replace the live segments it names is refused, an empty one is the
//     policy's to remove;
//   - every segment's .log is walked from the batch its last offset index
//     entry points at (O(1) for a well-formed segment) to find where its
//     batches end and its next offset;
//   - a sealed segment whose batches stop before the end of the file, when
//     it lies below the recovery point or the shutdown was clean (it was
//     flushed whole), is refused: recovery would never read it;
//   - after a crash, a sealed segment above the recovery point that ends
//     before the next one's base (its unsynced tail lost: a roll leaves
//     its flush to the background) is where recovery cuts the log; the
//     later segments are not checked;
//   - offsets missing between segments (a segment ends below the next
//     one's base) are refused unless compaction explains them: the cleaner
//     checkpoint covers them, or either segment has offset gaps of its
//     own (a follower's copy of a compacted log has them too), or they
//     lie below the log start checkpoint (no reader's), or the
//     later segment holds no batch, is the last or, after a crash, the
//     first one recovery reads (where it cuts the log), and either the
//     recovery point reaches its base or, after a crash, the policy
//     accepts it as a torn tail (emptyTailExplained);
//   - offsets missing below the first segment (it starts past the log
//     start checkpoint: DeleteRecordsBefore and retention write the
//     checkpoint before they delete, and a new partition writes its
//     first) are refused;
//   - a log start checkpoint past the log end, or, for a partition opened
//     alone after a clean shutdown, past the second segment's base
//     (DeleteRecordsBefore had finished: it removes every segment whose
//     successor starts at or below it), goes to the policy:
//     DefaultRecovery ignores the checkpoint, loudly. A Dir's root file
//     is Kafka's, and Kafka's DeleteRecords only moves the log start: the
//     segments wholly below it stay until its next retention pass, also
//     across a clean shutdown;
//   - a recovery point past the log end means synced batches are missing:
//     refused after a clean shutdown, the policy's after a crash (a
//     TruncateTo the crash interrupted leaves it; DefaultRecovery moves
//     it back to the log end, loudly);
//   - so does a producer snapshot past the log end, which is written
//     once the batches below it are synced (lostend.go): the policy's, as
//     a torn tail after a crash (DefaultRecovery logs an error; loading
//     the producer state removes the snapshot); not when the last segment
//     has bytes past its batches (the policy is asked about their cut).
func (o *opening) checkDir(clean bool) (*dirCheck, error) {
	fs, dir := o.fs, o.dir
	cpStart, haveCP := o.saved.logStart, o.saved.haveLogStart
	rp, haveRP := o.saved.recoveryPoint, o.saved.haveRecoveryPoint
	plan, err := repair.Make(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("partlog/log: open %s: %w", dir, err)
	}
	// The open lists the directory once: the snapshots are taken from
	// this listing until the directory changes (load drops it after an
	// unclean checkDir, before anything is repaired or recovered) or the
	// producer state is loaded.
	o.useListing(plan.Names)
	dc := &dirCheck{plan: plan}
	if len(plan.Bad) > 0 {
		return nil, o.refused(plan.Bad)
	}
	if strictNoRepair(o.policy) {
		var work []string
		for _, name := range plan.Remove {
			if !strings.HasSuffix(name, segment.DeletedSuffix) {
				work = append(work, name)
			}
		}
		for _, sw := range plan.Swaps {
			work = append(work, segment.FileName(sw.Base, segment.LogSuffix)+segment.SwapSuffix)
		}
		if len(work) > 0 {
			return nil, fmt.Errorf("partlog/log: open %s: %w: an interrupted compaction left %s; StrictRecovery{AllowTornTail: true} or DefaultRecovery finishes it",
				dir, ErrRecoveryRefused, strings.Join(work, ", "))
		}
		dc.skipRemove = true
	}
	for _, name := range plan.Empty {
		cause := base.CorruptionErrorf(filepath.Join(dir, name), 0, "swap", "an empty .swap file named after a live segment: no compaction wrote it")
		if err := o.askPolicy(filepath.Join(dir, name), false, false, cause); err != nil {
			return nil, err
		}
	}

	bases := plan.Bases
	n := len(bases)
	if n == 0 {
		// The open creates the first segment at the log start
		// checkpoint, or 0 (openSegments): a recovery point or producer
		// snapshot past it names synced batches that are missing (every
		// segment file removed).
		end := int64(0)
		if haveCP && cpStart > 0 {
			end = cpStart
		}
		active := segment.FileName(end, segment.LogSuffix)
		var err error
		if haveRP && rp > end {
			err = o.recoveryPointPastEnd(rp, end, clean, active)
		} else {
			err = o.checkSnapshotsPastEnd(end, clean, active)
		}
		if err != nil {
			return nil, err
		}
		return dc, nil
	}
	probes := make([]repair.Probe, n)
	swaps := map[int64]repair.Probe{}
	for _, sw := range plan.Swaps {
		swaps[sw.Base] = sw.Probe
	}
	for i, b := range bases {
		if pr, ok := swaps[b]; ok {
			probes[i] = pr
			continue
		}
		pr, err := repair.ProbeLog(fs, filepath.Join(dir, segment.FileName(b, segment.LogSuffix)),
			filepath.Join(dir, segment.FileName(b, segment.IndexSuffix)), b, false)
		if err != nil {
			return nil, fmt.Errorf("partlog/log: open %s: %w", dir, err)
		}
		probes[i] = pr
	}
	// from: the first segment an unclean open recovers.
	from := 0
	if !clean && haveRP {
		from = n - 1
		for from > 0 && bases[from] > rp {
			from--
		}
	}
	var hard []error
	cutAt := n // the first segment recovery may cut; later checks stop there
	for i, pr := range probes {
		if pr.Framed == pr.Size {
			continue
		}
		if !clean && haveCP && i+1 < n && cpStart >= bases[i+1] {
			// Wholly below the log start: no reader's. A restart
			// removes the old segments after its commit (the log start
			// checkpoint), and a crash may keep any of them with its
			// unsynced tail torn: recovery does not read them (load
			// starts it no lower than the segment holding the log
			// start), so they decide nothing about the log's end.
			continue
		}
		switch {
		case i == n-1 && clean:
			o.logger.Warn("partlog/log: the active segment does not end on a batch although the shutdown was clean; recovering it",
				"dir", dir, "file", pr.Path, "batchesEnd", pr.Framed, "fileSize", pr.Size)
			dc.unclean = true
		case i == n-1:
		case clean || i < from:
			hard = append(hard, base.CorruptionErrorf(pr.Path, pr.Framed, "size",
				"sealed segment of %d bytes whose batches stop at byte %d (offset %d); the next segment starts at offset %d: truncated or damaged: %v",
				pr.Size, pr.Framed, pr.Next, bases[i+1], pr.Cause))
		case !haveRP || pr.Next < bases[i+1]:
			cutAt = i
		default:
			// Above the recovery point, batches reaching the next
			// segment's base: recovery cuts the bytes after them and
			// keeps the later segments (recoverSegments).
		}
		if cutAt < n {
			break
		}
	}
	cleanerAt := o.saved.cleanerAt
	for i := 0; i+1 < n && i < cutAt; i++ {
		if probes[i].Next >= bases[i+1] {
			continue // an overlap is refused once the segments are open
		}
		// Offsets missing below the log start offset are no reader's: a
		// restart (TruncateFullyAndStartAt) removes the old segments
		// after its commit, in any order a crash may keep.
		belowStart := haveCP && cpStart >= bases[i+1]
		// An empty segment after the gap is the log's tail when it is the
		// last one, or when it is the first an unclean open recovers:
		// recovery cuts the log there (endsShort) and removes the later
		// segments. A follower's roll across a gap moves the recovery
		// point to the new segment's base before the batch after the gap
		// is written, so a crash may lose that batch, the only sign of
		// the gap, while a later segment keeps its own.
		emptyNext := probes[i+1].Start == 0 && probes[i+1].Batches == 0
		emptyTail := emptyNext && (i+1 == n-1 || (!clean && haveRP && i+1 == from))
		if !clean && haveRP && i >= from && !belowStart && !emptyTail && !compactedGap(cleanerAt, bases[i+1]) {
			// Above the recovery point: a crash after the roll that
			// sealed this segment, before the roll's background flush,
			// lost its unsynced tail. Recovery cuts the log there and
			// removes the later segments, which were never promised
			// either (recoverSegments); no compaction wrote here
			// (compactedGap).
			cutAt = i
			break
		}
		explained := cleanerAt >= bases[i+1] || belowStart
		if !explained && emptyTail {
			// An empty last segment after a gap (follower.go,
			// settleEmptyTail, which removes it): a follower's roll
			// across a gap whose recovery point reaches it, or a
			// crash's leftover, which goes to the policy as a torn tail.
			ok, err := o.emptyTailExplained(probes[i+1].Path, bases[i+1], probes[i].Next, clean)
			if err != nil {
				return nil, err
			}
			explained = ok
		}
		for _, j := range []int{i, i + 1} {
			if explained {
				break
			}
			full, err := repair.ProbeLog(fs, probes[j].Path, "", bases[j], false)
			if err != nil {
				return nil, fmt.Errorf("partlog/log: open %s: %w", dir, err)
			}
			explained = full.Gaps
		}
		if explained {
			o.logger.Debug("partlog/log: offset gap between segments left by compaction", "dir", dir,
				"from", probes[i].Next, "to", bases[i+1])
			continue
		}
		hard = append(hard, base.CorruptionErrorf(probes[i+1].Path, 0, "baseOffset",
			"offsets [%d, %d) are missing: %s ends at offset %d and the next segment starts at %d, and no compaction explains the gap (a segment file removed or misnamed?)",
			probes[i].Next, bases[i+1], filepath.Base(probes[i].Path), probes[i].Next, bases[i+1]))
	}
	if haveCP && cpStart < bases[0] {
		hard = append(hard, base.CorruptionErrorf(probes[0].Path, 0, "baseOffset",
			"offsets [%d, %d) are missing: the log start checkpoint says %d but the first segment starts at %d (a segment file removed?)",
			cpStart, bases[0], cpStart, bases[0]))
	}
	if len(hard) > 0 {
		return nil, o.refused(hard)
	}
	end := probes[min(cutAt, n-1)].Next // an upper bound when recovery may cut
	cpPath := o.ckpt.path(logStartOffsetCheckpointFile)
	var startBad error
	switch {
	case haveCP && cpStart > end:
		startBad = base.CorruptionErrorf(cpPath, 0, "offset", "log start offset %d is past the log end %d", cpStart, end)
	case haveCP && clean && !o.inDir && n > 1 && cpStart > bases[1]:
		// DeleteRecordsBefore removes every segment whose successor starts
		// at or below the new log start before it returns; segments rolled
		// later start at or above it. Not in a Dir: the root file may be
		// Kafka's, whose DeleteRecords leaves those segments to its next
		// retention pass.
		startBad = base.CorruptionErrorf(cpPath, 0, "offset",
			"log start offset %d is past the second segment's base %d after a clean shutdown", cpStart, bases[1])
	}
	if startBad != nil {
		if err := o.askPolicy(cpPath, true, false, startBad); err != nil {
			return nil, err
		}
		o.logger.Error("partlog/log: the log start checkpoint contradicts the segments; ignoring it (every segment stays readable, retention does not act on it)",
			"dir", dir, "file", cpPath, "checkpoint", cpStart, "firstSegment", bases[0], "logEnd", end, "cause", startBad)
		dc.distrustLogStart = true
	}
	if haveRP && rp > end && cutAt == n {
		if err := o.recoveryPointPastEnd(rp, end, clean && !dc.unclean, filepath.Base(probes[n-1].Path)); err != nil {
			return nil, err
		}
	} else if cutAt == n && probes[n-1].Framed == probes[n-1].Size {
		// The same loss without a recovery point to say so (lostend.go).
		// A last segment with bytes past its batches is cut, and the
		// policy asked about that cut, by recovery.
		if err := o.checkSnapshotsPastEnd(end, clean && !dc.unclean, filepath.Base(probes[n-1].Path)); err != nil {
			return nil, err
		}
	}
	return dc, nil
}

// recoveryPointPastEnd reports a recovery point rp past end, the log end
// Open found: batches below it were synced and are missing. After a clean
// shutdown it is refused; after a crash the policy is asked, as about a
// torn tail (a TruncateTo the crash interrupted leaves it), and nil
// means go on after logging it. active names the last segment's file for
// the message.
func (o *opening) recoveryPointPastEnd(rp, end int64, clean bool, active string) error {
	rpPath := o.ckpt.path(recoveryPointCheckpointFile)
	cause := base.CorruptionErrorf(rpPath, 0, "offset",
		"recovery point %d is past the log end %d: batches below it were synced and are missing (the active segment %s removed or cut?)",
		rp, end, active)
	if clean {
		return o.refused([]error{cause})
	}
	if err := o.askPolicy(rpPath, true, true, cause); err != nil {
		return err
	}
	o.logger.Error("partlog/log: the recovery point is past the log end; recovering the last segment and moving it back",
		"dir", o.dir, "file", rpPath, "recoveryPoint", rp, "logEnd", end)
	return nil
}

// rootLocks tells the Opens alone of this process apart from a Dir when
// they find a log directory's dirLockFile held: each takes it for a
// moment (lockDir's probe, opening.takeRootEntries), so two partitions of
// a closed Dir opened at once would otherwise find each other's lock and
// fail with ErrLocked as if a Dir owned them.
var rootLocks rootLockUses

// rootLockUses is the type of rootLocks.
type rootLockUses struct {
	mu   sync.Mutex
	cond sync.Cond
	// holding counts, by lock file (absolute path), the Opens alone of
	// this process that hold it. Their attempts are made under mu, so a
	// lock found held while it counts none is held by someone else.
	holding map[string]int
}

// lock locks the dirLockFile name for an Open alone. When another Open
// alone of this process holds it, it waits for the release and tries
// again; a lock held by anyone else (a Dir, another process) is an error
// wrapping vfs.ErrLocked, as fs.Lock's.
func (u *rootLockUses) lock(fs vfs.FS, name string) (io.Closer, error) {
	key := name
	if abs, err := filepath.Abs(name); err == nil {
		key = abs
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cond.L == nil {
		u.cond.L = &u.mu
		u.holding = make(map[string]int)
	}
	for {
		l, err := fs.Lock(name) // does not wait (flock's LOCK_NB)
		if err == nil {
			u.holding[key]++
			return &rootLock{Closer: l, u: u, key: key}, nil
		}
		if !errors.Is(err, vfs.ErrLocked) || u.holding[key] == 0 {
			return nil, err
		}
		for u.holding[key] > 0 {
			u.cond.Wait()
		}
	}
}

// rootLock is a dirLockFile held through rootLocks.
type rootLock struct {
	io.Closer
	u    *rootLockUses
	key  string
	once sync.Once
}

// Close releases the lock, then wakes the Opens alone waiting for it.
func (l *rootLock) Close() error {
	err := l.Closer.Close()
	l.once.Do(func() {
		u := l.u
		u.mu.Lock()
		if u.holding[l.key]--; u.holding[l.key] == 0 {
			delete(u.holding, l.key)
		}
		u.cond.Broadcast()
		u.mu.Unlock()
	})
	return err
}
