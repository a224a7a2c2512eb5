package log

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/segment"
)

// defaultBackgroundThreads is Kafka's background.threads: the default of
// DirConfig.BackgroundThreads.
const defaultBackgroundThreads = 10

// dirLockFile is the file at the root of a log directory that OpenDir
// locks (flock(2) on unix) until Close: Kafka's ".lock" name, so that a
// second Dir, in this process or another, cannot open the directory at the
// same time. A Kafka broker locks the same file with a POSIX record lock
// (Java's FileChannel.tryLock, fcntl), which does not conflict with flock
// on Linux: the lock does not keep a running Kafka broker out.
const dirLockFile = ".lock" // frozen: Kafka's name

// deleteDirSuffix ends the name of a partition directory DeletePartition
// renamed before removing it: "<topic>-<partition>.<32 hex digits>-delete",
// Kafka's name. OpenDir removes what a crash left of one.
const deleteDirSuffix = "-delete" // frozen: Kafka's name

// deleteDirPattern matches the names OpenDir takes for a deletion a crash
// interrupted, Kafka's DeleteDirPattern: "<topic>-<partition>.<id>-delete"
// without white space. Any other directory, such as a user's
// "backup-to-delete", is left alone.
var deleteDirPattern = regexp.MustCompile(`^(\S+)-(\S+)\.(\S+)-delete$`)

// metadataTopic is the topic of KRaft's metadata log: its directory,
// "__cluster_metadata-0", is in the first log directory of a KRaft broker
// and belongs to Kafka's Raft layer, which Kafka's LogManager leaves to it
// (it does not load it as a partition), and Kafka refuses to create a
// topic of that name.
const metadataTopic = "__cluster_metadata" // frozen: Kafka's name

// maxDirNameBytes is the longest file name the common Linux filesystems
// take (NAME_MAX), the bound Kafka caps a deleted partition's name to.
const maxDirNameBytes = 255

// deleteDirName returns the name DeletePartition renames tp's directory
// to: "<topic>-<partition>.<32 random hex digits>-delete", its topic cut
// short so that the whole name fits maxDirNameBytes (a topic of 214
// characters or more would not fit otherwise), as Kafka's
// logDeleteDirName does.
func deleteDirName(tp TopicPartition) string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	suffix := "-" + strconv.Itoa(int(tp.Partition)) + "." + hex.EncodeToString(id[:]) + deleteDirSuffix
	topic := tp.Topic
	if n := maxDirNameBytes - len(suffix); len(topic) > n {
		topic = topic[:n]
	}
	return topic + suffix
}

// ErrUnknownPartition is returned by Lookup, OpenPartition and
// DeletePartition for a partition the Dir does not hold. Kafka error code:
// UNKNOWN_TOPIC_OR_PARTITION (3).
var ErrUnknownPartition = errors.New("partlog/log: unknown partition")

// ErrInvalidPartition is returned by CreatePartition for a topic name
// Kafka does not accept (1 to 249 characters of [a-zA-Z0-9._-], not "."
// or ".."), the topic of KRaft's metadata log ("__cluster_metadata", whose
// creation Kafka refuses too), or a negative partition. Kafka error code:
// INVALID_TOPIC_EXCEPTION (17).
var ErrInvalidPartition = errors.New("partlog/log: invalid topic or partition")

// TopicPartition names a partition of a Dir.
type TopicPartition struct {
	// Topic is the topic name.
	Topic string
	// Partition is the partition number.
	Partition int32
}

// String returns the partition's directory name, "<topic>-<partition>".
func (tp TopicPartition) String() string { return checkpoint.DirName(tp.Topic, tp.Partition) }

// DirConfig configures a Dir. The zero value is Kafka's defaults.
type DirConfig struct {
	// Config is the configuration of the partitions of every topic
	// TopicConfig does not override. Its FS, Logger and Recovery are the
	// Dir's own.
	Config Config
	// TopicConfig, when set, returns the configuration of a topic's
	// partitions (Kafka's per-topic overrides), or nil for Config. The FS
	// of the Config it returns is replaced by the Dir's; a nil Logger
	// becomes the Dir's.
	TopicConfig func(topic string) *Config
	// RecoveryThreads is how many partitions OpenDir loads (and Close
	// closes) at once: Kafka's num.recovery.threads.per.data.dir. 0 means
	// 1, Kafka's default.
	RecoveryThreads int
	// MaxOpenSegments bounds the sealed segments of all the Dir's
	// partitions that keep their files open while no one reads them (one
	// segment.Budget shared by every partition; Config.MaxOpenSegments is
	// ignored in a Dir): the least recently used are closed and reopened
	// when read. Each open segment holds up to three descriptors and three
	// mappings. The active segments of written partitions count against
	// the bound too: when more are open than it allows, those written
	// least recently return to rest (sealed files the budget may close,
	// reopened by the next append; nothing is synced by it). Segments
	// being read are open beyond the bound. 0 (the default) keeps every
	// segment open, as Kafka does. Not a Kafka setting.
	MaxOpenSegments int
	// BackgroundThreads bounds the goroutines that run the partitions'
	// FlushInterval flushes (flush.ms): one scheduler for the whole Dir
	// hands the due partitions to at most this many workers, instead of a
	// goroutine per partition. Kafka's background.threads; 0 means 10,
	// its default.
	BackgroundThreads int
	// Remote, when set, tiers the Dir's partitions: their sealed segments
	// are copied to remote storage in the background and read back from
	// it below the local log start (see RemoteConfig and
	// docs/tiered-storage.md). Not a Kafka setting: Kafka's
	// remote.log.storage.system.enable and its remote storage manager.
	Remote *RemoteConfig
}

// Dir is a Kafka log directory: one directory holding a partition
// directory "<topic>-<partition>" per partition, and at its root the files
// Kafka keeps for all of them (docs/format.md, "Log directory"):
// recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint, one entry
// per partition each; the clean-shutdown marker .kafka_cleanshutdown; and
// the lock file .lock. A directory a Kafka broker wrote opens with its
// recovery points, log start offsets and high watermarks, and a directory
// a Dir wrote opens in Kafka.
//
// The partitions of a Dir keep no checkpoint of their own (only
// leader-epoch-checkpoint, which Kafka keeps per partition too): their
// entries live in the Dir, in memory, and every change a partition makes
// durable (DeleteRecordsBefore's log start, a lowered recovery point, a
// Sync) rewrites the root file whole and atomically, writes of many
// partitions at once batched into one. Nor does a partition of a Dir take
// its own lock (the .partlog.lock file Open takes): the Dir's lock covers
// every partition in it. Open of one of its partition directories sees
// the Dir's lock file there and fails with ErrLocked while the Dir is
// open. Once the Dir is closed, such an Open takes the partition's entries
// out of the root files into the partition's own checkpoint files, and the
// next OpenDir takes them back, so the two never hold different values.
//
// Every method is safe for concurrent use. Close the Dir, not its
// partitions: a Partition closed alone stays in the Dir, closed, until
// OpenPartition reopens it.
type Dir struct {
	path    string
	cfg     DirConfig
	fs      vfs.FS
	logger  *slog.Logger
	threads int
	root    *rootCheckpoints
	// dirOwner is the ownership of the log directory (dirLockFile),
	// held until Close and then until the last reader of a partition's
	// segments let go (ownership.go).
	dirOwner *ownership
	// budget is the segment budget shared by every partition (nil
	// without DirConfig.MaxOpenSegments).
	budget *segment.Budget
	// awake holds the partitions whose active segment holds its files
	// open for writing, counted against the budget (awake.go; nil
	// without a budget).
	awake *awakeSet
	// flusher runs every partition's FlushInterval flushes (dirflush.go).
	flusher *flushScheduler
	// tier copies segments to remote storage and deletes them (tier.go);
	// nil without DirConfig.Remote.
	tier *dirTier
	// fsSync syncs the filesystem that holds the Dir, whole
	// (vfs.FilesystemSyncer), for OpenDir after a crash and Close; nil
	// when the FS cannot, and the partitions sync their own files.
	// Opened with the Dir, so that it sees every write-back error from
	// then on.
	fsSync vfs.FilesystemSync

	// createMu serializes CreatePartition, DeletePartition and Close.
	createMu sync.Mutex
	// mu guards parts and closed; Partition takes it to read.
	mu     sync.RWMutex
	parts  map[TopicPartition]*Partition
	closed bool
}

// OpenDir opens the log directory at path, creating it when missing, and
// every partition in it.
//
// It first takes the directory's lock (Kafka's .lock file): a directory
// already open by a Dir, in this process or another, gets an error
// wrapping ErrLocked, as does one whose Dir was closed while Records of
// its partitions are still open (see Close). It reads the root checkpoint
// files (a missing one has no entries; one that does not parse goes to
// Config.Recovery: DefaultRecovery goes on without it, loudly,
// StrictRecovery refuses) and the clean-shutdown marker, which it then
// removes, durably, before loading anything (so that a crash while
// loading counts as unclean). It finishes
// the deletion of every "-delete" directory a crash interrupted, and opens
// every directory named "<topic>-<partition>" (a valid Kafka topic name and
// a partition number) as Open does, RecoveryThreads at a time, each with
// its entries of the root files: after a clean shutdown no batch is
// recovered; after an unclean one each partition recovers from its
// recovery point. When the filesystem syncs whole filesystems
// (vfs.FilesystemSyncer, which Default implements on Linux 5.8 and
// later), what the recoveries kept is made durable with one filesystem
// sync for the whole Dir (and a second for the producer snapshots written
// after it) before any recovery point moves, instead of each partition
// syncing its files and directory in turn; wrap the FS in a type that
// does not implement it to keep the per-partition syncs (syncfs waits for
// every dirty page of the filesystem, other programs' included). Other
// entries of the directory (meta.properties, Kafka's "-future" and
// "-stray" directories, KRaft's metadata log "__cluster_metadata-0",
// which Kafka does not load as a partition either, anything else) are
// left alone.
// Entries of the root files for partitions the directory does not hold are
// dropped the next time the file is written. A partition directory last
// used by a partition opened alone (it holds a .partlog.lock file:
// partlog's layout before Dir) keeps what its own files say: its offset
// checkpoints for the entries the root files lack, and its own
// clean-shutdown marker; the root files take them over. Progress is logged at INFO.
//
// When a partition fails to open, OpenDir closes the others, releases the
// lock and returns the errors (each naming its partition directory): Kafka
// takes the whole log directory offline too.
func OpenDir(path string, cfg DirConfig) (_ *Dir, err error) {
	cfg.Config.ensureDefaults()
	if err := cfg.Config.validate(); err != nil {
		return nil, err
	}
	if cfg.RecoveryThreads < 0 {
		return nil, fmt.Errorf("%w: num.recovery.threads.per.data.dir %d is negative", ErrInvalidConfig, cfg.RecoveryThreads)
	}
	if cfg.MaxOpenSegments < 0 {
		return nil, fmt.Errorf("%w: MaxOpenSegments %d is negative", ErrInvalidConfig, cfg.MaxOpenSegments)
	}
	if cfg.BackgroundThreads < 0 {
		return nil, fmt.Errorf("%w: background.threads %d is negative", ErrInvalidConfig, cfg.BackgroundThreads)
	}
	if cfg.BackgroundThreads == 0 {
		cfg.BackgroundThreads = defaultBackgroundThreads
	}
	fs := cfg.Config.FS
	d := &Dir{path: path, cfg: cfg, fs: fs, logger: cfg.Config.Logger, threads: max(cfg.RecoveryThreads, 1),
		parts: make(map[TopicPartition]*Partition)}
	if cfg.MaxOpenSegments > 0 {
		d.budget = segment.NewBudget(cfg.MaxOpenSegments)
		d.awake = newAwakeSet(d.budget)
	}
	if err := mkdirDurable(fs, path); err != nil {
		return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
	}
	lock, err := fs.Lock(filepath.Join(path, dirLockFile))
	if errors.Is(err, vfs.ErrLocked) {
		held := heldBy(filepath.Join(path, dirLockFile), dirLockFile+" is held by another owner")
		return nil, fmt.Errorf("partlog/log: open dir %s: %w (%s): %w", path, ErrLocked, held, err)
	}
	if err != nil {
		return nil, fmt.Errorf("partlog/log: open dir %s: lock: %w", path, err)
	}
	d.dirOwner = newOwnership(lock, filepath.Join(path, dirLockFile), path, "the closed Dir's partitions", d.logger)
	if cfg.Remote != nil {
		if d.tier, err = newDirTier(*cfg.Remote, d.logger); err != nil {
			_ = lock.Close()
			return nil, err
		}
	}
	d.flusher = newFlushScheduler(cfg.BackgroundThreads)
	if syncer, ok := fs.(vfs.FilesystemSyncer); ok {
		h, serr := syncer.OpenFilesystemSync(path)
		switch {
		case serr == nil:
			d.fsSync = h
		case errors.Is(serr, errors.ErrUnsupported):
		default:
			d.logger.Warn("partlog/log: cannot sync the log directory's filesystem whole; each partition syncs its own files",
				"dir", path, "err", serr)
		}
	}
	defer func() {
		if err != nil {
			d.flusher.close()
			if d.fsSync != nil {
				_ = d.fsSync.Close()
			}
			_ = lock.Close()
		}
	}()

	start := time.Now()
	clean, err := checkpoint.HasCleanShutdown(fs, path)
	if err != nil {
		return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
	}
	names, err := fs.List(path)
	if err != nil {
		return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
	}
	var tps []TopicPartition
	var deleted []string
	for _, name := range names {
		topic, part, isPart := checkpoint.ParseDirName(name)
		isPart = isPart && topic != metadataTopic // the Raft layer's
		isDelete := deleteDirPattern.MatchString(name)
		if !isPart && !isDelete {
			continue
		}
		fi, err := fs.Stat(filepath.Join(path, name))
		if err != nil {
			return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
		}
		switch {
		case !fi.IsDir():
		case isPart:
			tps = append(tps, TopicPartition{topic, part})
		default:
			deleted = append(deleted, name)
		}
	}
	present := make(map[TopicPartition]bool, len(tps))
	for _, tp := range tps {
		present[tp] = true
	}
	entries := make(map[string]map[TopicPartition]int64, len(rootCheckpointFiles))
	dropped := false
	for _, name := range rootCheckpointFiles {
		m, err := readRootCheckpoint(fs, path, name)
		if err != nil {
			if err := d.rootCheckpointProblem(name, clean, err); err != nil {
				return nil, err
			}
			dropped = true
		}
		for tp := range m {
			if !present[tp] {
				delete(m, tp)
				dropped = true
			}
		}
		entries[name] = m
	}
	d.root = newRootCheckpoints(fs, path, entries)
	d.logger.Info("partlog/log: loading log directory", "dir", path, "partitions", len(tps),
		"clean", clean, "threads", d.threads)

	if clean {
		if err := checkpoint.RemoveCleanShutdown(fs, path); err != nil {
			return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
		}
	}
	if len(deleted) > 0 {
		for _, name := range deleted {
			d.logger.Info("partlog/log: removing a partition directory whose deletion a crash interrupted", "dir", path, "name", name)
			if err := fs.RemoveAll(filepath.Join(path, name)); err != nil {
				return nil, fmt.Errorf("partlog/log: open dir %s: remove %s: %w", path, name, err)
			}
		}
		if err := syncDir(fs, path); err != nil {
			return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
		}
	}

	d.root.hold()
	if err := d.loadAll(tps, clean); err != nil {
		return nil, err
	}
	// Write what loading changed (recovery points of recovered
	// partitions, dropped entries) before the Dir is used.
	if err := d.root.release(dropped); err != nil {
		_, _, _ = d.closeAll(false)
		return nil, fmt.Errorf("partlog/log: open dir %s: %w", path, err)
	}
	d.logger.Info("partlog/log: loaded log directory", "dir", path, "partitions", len(tps),
		"clean", clean, "elapsed", time.Since(start))
	if d.tier != nil {
		d.tier.start()
	}
	return d, nil
}

// rootCheckpointProblem hands a root checkpoint file that does not parse
// to the recovery policy (nil: go on without it). After a clean shutdown a
// bad recovery point file is not needed and only logged.
func (d *Dir) rootCheckpointProblem(name string, clean bool, err error) error {
	var ce *base.CorruptionError
	if !isCorrupt(err) || !errors.As(err, &ce) {
		return fmt.Errorf("partlog/log: open dir %s: %s: %w", d.path, name, err)
	}
	if !(clean && name == recoveryPointCheckpointFile) {
		ev := RecoveryEvent{Dir: d.path, File: ce.File, Pos: ce.Pos, LastGoodOffset: -1, Checkpoint: true, Err: err}
		if perr := d.cfg.Config.Recovery.OnCorruption(ev); perr != nil {
			return perr
		}
	}
	d.logger.Warn("partlog/log: ignoring a root checkpoint that does not parse; it is rewritten from the partitions",
		"dir", d.path, "file", ce.File, "position", ce.Pos, "cause", err)
	return nil
}

// topicConfig returns the configuration of topic's partitions.
func (d *Dir) topicConfig(topic string) Config {
	cfg := d.cfg.Config
	if d.cfg.TopicConfig != nil {
		if c := d.cfg.TopicConfig(topic); c != nil {
			cfg = *c
			cfg.FS = d.fs
			if cfg.Logger == nil {
				cfg.Logger = d.logger
			}
		}
	}
	return cfg
}

// openPartition opens the partition tp of the directory. With syncLater
// (OpenDir on a filesystem that syncs whole filesystems) a recovery's
// files are left unsynced and recoveredEnd is the log end the Dir then
// makes durable (finishRecoveries); it is -1 when the partition recovered
// nothing or without syncLater.
func (d *Dir) openPartition(tp TopicPartition, clean, syncLater bool) (p *Partition, recoveredEnd int64, err error) {
	m := &dirMember{store: dirEntries{root: d.root, tp: tp}, clean: clean, budget: d.budget, flusher: d.flusher, awake: d.awake,
		syncLater: syncLater, recoveredEnd: -1, tiered: d.tier != nil, dirOwner: d.dirOwner}
	p, err = open(filepath.Join(d.path, tp.String()), d.topicConfig(tp.Topic), m)
	if err == nil && d.tier != nil {
		d.tier.attach(tp, p)
		p.cutEpochsBelowStart()
	}
	if err == nil {
		// An active segment created or recovered holds its files open:
		// counted against the budget from now on.
		p.lockAppender()
		p.awake.noteWrittenLocked(p.segs.Load().active())
		p.mu.Unlock()
	}
	return p, m.recoveredEnd, err
}

// loadAll opens tps with d.threads workers. On failure it closes what it
// opened and returns every failure.
//
// When the filesystem syncs whole filesystems (vfs.FilesystemSyncer), the
// partitions that recover leave what they kept unsynced, and
// finishRecoveries makes all of it durable with one call before any
// recovery point moves: after a crash each partition would otherwise sync
// its segments, its producer snapshot and its directory one after another,
// about four device cache flushes a partition.
func (d *Dir) loadAll(tps []TopicPartition, clean bool) error {
	syncLater := d.fsSync != nil
	opened := make([]*Partition, len(tps))
	recovered := make([]int64, len(tps))
	errs := make([]error, len(tps))
	var done atomic.Int64
	step := max(int64(len(tps))/10, 1)
	d.eachThread(len(tps), func(i int) {
		opened[i], recovered[i], errs[i] = d.openPartition(tps[i], clean, syncLater)
		if n := done.Add(1); n%step == 0 || n == int64(len(tps)) {
			d.logger.Info("partlog/log: loading log directory", "dir", d.path,
				"loaded", n, "of", len(tps))
		}
	})
	var pending []dirPart
	for i, p := range opened {
		if p == nil {
			continue
		}
		d.parts[tps[i]] = p
		if recovered[i] >= 0 {
			pending = append(pending, dirPart{p: p, end: recovered[i]})
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		err = d.finishRecoveries(pending)
	}
	if err != nil {
		_, _, _ = d.closeAll(false)
		return fmt.Errorf("partlog/log: open dir %s: %w", d.path, err)
	}
	return nil
}

// dirPart is a partition of the Dir that the Dir finishes: one an OpenDir
// recovered and left unsynced, with its log end, or one a Close closed
// with syncLater.
type dirPart struct {
	p   *Partition
	end int64
}

// finishRecoveries makes durable what the recoveries of pending kept and
// cut, writes their producer snapshots at the log end, and raises each
// one's recovery point to its log end. With the filesystem sync over the
// root and their directories: one sync, then the snapshots (only once the
// batches below them are durable), then a second sync for the snapshots
// when any was written (a partition whose newest snapshot lies at its
// log end keeps it: snapshotsAfterSyncLocked); when the filesystem
// declines (errors.ErrUnsupported) each partition's own syncs, d.threads
// at a time. A failed sync fails the open and raises no recovery point:
// the next open recovers again.
func (d *Dir) finishRecoveries(pending []dirPart) error {
	if len(pending) == 0 {
		return nil
	}
	dirs := make([]string, 0, len(pending)+1)
	dirs = append(dirs, d.path)
	for _, pr := range pending {
		dirs = append(dirs, pr.p.dir)
	}
	err := d.fsSync.Sync(dirs)
	if errors.Is(err, errors.ErrUnsupported) {
		_, err := d.eachPartition(pending, "open", func(pr dirPart) (bool, error) {
			return false, pr.p.recoveryDurableLocked(pr.p.segs.Load().list, pr.end)
		})
		return err
	}
	if err != nil {
		return fmt.Errorf("sync the recovered partitions: %w", err)
	}
	wrote, err := d.eachPartition(pending, "open", func(pr dirPart) (bool, error) {
		return pr.p.snapshotsAfterSyncLocked(true)
	})
	if err != nil {
		return err
	}
	if wrote {
		if err := d.fsSync.Sync(dirs); err != nil {
			return fmt.Errorf("sync the recovered partitions' producer snapshots: %w", err)
		}
	}
	_, err = d.eachPartition(pending, "open", func(pr dirPart) (bool, error) {
		return false, pr.p.recoverySyncedLocked(pr.end)
	})
	return err
}

// eachPartition calls f for each of prs with the partition's flushMu and
// mu held, d.threads at a time. It returns whether any call returned true,
// and every error, each naming the partition directory and what was done
// (op).
func (d *Dir) eachPartition(prs []dirPart, op string, f func(dirPart) (bool, error)) (bool, error) {
	errs := make([]error, len(prs))
	var anyTrue atomic.Bool
	d.eachThread(len(prs), func(i int) {
		p := prs[i].p
		p.flushMu.Lock()
		p.mu.Lock()
		yes, err := f(prs[i])
		p.mu.Unlock()
		p.flushMu.Unlock()
		if yes {
			anyTrue.Store(true)
		}
		if err != nil {
			errs[i] = fmt.Errorf("partlog/log: %s %s: %w", op, p.dir, err)
		}
	})
	return anyTrue.Load(), errors.Join(errs...)
}

// syncClosed makes durable everything the partitions wrote as they closed
// with syncLater: one filesystem sync over the root and every partition
// directory when unsynced (a partition left something, or failed), then
// the producer snapshots of closed (those the Close closed without an
// error), then a second sync when any was written. A Dir of idle
// partitions after a clean open syncs nothing. When the filesystem
// declines (errors.ErrUnsupported: a directory on a filesystem the handle
// cannot sync), every file and directory is synced one by one instead.
func (d *Dir) syncClosed(closed []dirPart, unsynced bool) error {
	dirs := make([]string, 0, len(d.parts)+1)
	dirs = append(dirs, d.path)
	for _, p := range d.parts {
		dirs = append(dirs, p.dir)
	}
	if unsynced {
		if err := d.syncDirs(dirs); err != nil {
			return fmt.Errorf("sync the partitions: %w", err)
		}
	}
	wrote, err := d.eachPartition(closed, "close", func(pr dirPart) (bool, error) {
		return pr.p.snapshotsAfterSyncLocked(false)
	})
	if err != nil {
		return err
	}
	if wrote {
		if err := d.syncDirs(dirs); err != nil {
			return fmt.Errorf("sync the partitions' producer snapshots: %w", err)
		}
	}
	return nil
}

// syncDirs syncs dirs with the Dir's filesystem sync, or, when it
// declines, each file below them and then each of them (syncEach).
func (d *Dir) syncDirs(dirs []string) error {
	err := d.fsSync.Sync(dirs)
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	d.logger.Warn("partlog/log: the filesystem declined a whole sync; syncing each file", "dir", d.path, "err", err)
	errs := make([]error, len(dirs))
	d.eachThread(len(dirs), func(i int) { errs[i] = syncEach(d.fs, dirs[i]) })
	return errors.Join(errs...)
}

// syncEach syncs every regular file in dir (fdatasync through a read-only
// handle covers what any handle wrote), then dir's entries.
func syncEach(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		st, err := fs.Stat(path)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			continue
		}
		f, err := fs.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	return syncDir(fs, dir)
}

// eachThread calls f(i) for every i below n, d.threads at a time.
func (d *Dir) eachThread(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(d.threads, max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// closeAll closes every partition, d.threads at a time, and returns every
// error but ErrClosed. With syncLater they sync nothing and leave their
// producer snapshots (Partition.closeWith): the caller syncs the
// filesystem when unsynced says that any of them left something (or
// failed), then has the partitions in closed, those this call closed
// without an error, write their snapshots.
func (d *Dir) closeAll(syncLater bool) (closed []dirPart, unsynced bool, err error) {
	ps := make([]*Partition, 0, len(d.parts))
	for _, p := range d.parts {
		ps = append(ps, p)
	}
	errs := make([]error, len(ps))
	left := make([]bool, len(ps))
	d.eachThread(len(ps), func(i int) {
		left[i], errs[i] = ps[i].closeWith(syncLater)
	})
	for i, err := range errs {
		switch {
		case err == nil:
			closed = append(closed, dirPart{p: ps[i]})
			unsynced = unsynced || left[i]
		case errors.Is(err, ErrClosed):
			errs[i] = nil
		default:
			unsynced = true
		}
	}
	return closed, unsynced, errors.Join(errs...)
}

// Path returns the log directory.
func (d *Dir) Path() string { return d.path }

// Partition returns the partition topic-partition, or nil when the Dir
// does not hold it (or is closed). Lookup says which.
func (d *Dir) Partition(topic string, partition int32) *Partition {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil
	}
	return d.parts[TopicPartition{topic, partition}]
}

// Lookup returns the partition topic-partition, or an error that says why
// there is none to use: ErrUnknownPartition when the Dir does not hold it,
// ErrClosed when the Dir is closed, and an error wrapping ErrClosed too
// when the partition was closed on its own (OpenPartition reopens it). A
// partition that failed (ErrFailed) or went offline (ErrFault) is
// returned: its methods report the failure. Lookup takes a read lock only
// and does no I/O: it is meant for every request of a server.
func (d *Dir) Lookup(topic string, partition int32) (*Partition, error) {
	tp := TopicPartition{topic, partition}
	d.mu.RLock()
	p, closed := d.parts[tp], d.closed
	d.mu.RUnlock()
	switch {
	case closed:
		return nil, fmt.Errorf("%w: log directory %s", ErrClosed, d.path)
	case p == nil:
		return nil, fmt.Errorf("%w: %s in %s", ErrUnknownPartition, tp, d.path)
	case p.closed.Load():
		return nil, fmt.Errorf("%w: partition %s in %s was closed (Dir.OpenPartition reopens it)", ErrClosed, tp, d.path)
	}
	return p, nil
}

// OpenPartition returns the partition topic-partition, open: the one the
// Dir holds, or, when that one was closed on its own, the partition
// opened again from its directory. A reopened partition recovers from its
// recovery point as after a crash, since the Dir cannot know whether its
// Close succeeded: the segment holding the recovery point (after a Close
// that succeeded, the active one) is read and validated again. It
// replaces the closed one in the Dir: Partition and
// Lookup return it from then on, and the closed one stays closed. This is
// how a partition that failed (ErrFailed after a failed fsync) or went
// offline (ErrFault) comes back while the Dir stays open: Close it, then
// call OpenPartition. OpenPartition waits for a Close still running in
// another goroutine to finish before it opens the directory again.
//
// Errors: ErrUnknownPartition when the Dir does not hold the partition
// (CreatePartition creates one), ErrClosed when the Dir is closed,
// ErrLocked while Records the closed partition returned (or other reads
// holding its segments) are still open (the reopen would cut the files
// they map: close them, then call OpenPartition again), and
// Open's when the reopen fails (the closed partition then stays in the
// Dir, and OpenPartition may be called again).
func (d *Dir) OpenPartition(topic string, partition int32) (*Partition, error) {
	tp := TopicPartition{topic, partition}
	d.createMu.Lock()
	defer d.createMu.Unlock()
	d.mu.RLock()
	p, closed := d.parts[tp], d.closed
	d.mu.RUnlock()
	switch {
	case closed:
		return nil, fmt.Errorf("%w: log directory %s", ErrClosed, d.path)
	case p == nil:
		return nil, fmt.Errorf("%w: %s in %s", ErrUnknownPartition, tp, d.path)
	case !p.closed.Load():
		return p, nil
	}
	// A second Close returns once the first one has released everything
	// (it holds the partition's locks throughout, and then waits for the
	// flushes it started), so that no two partitions use the directory
	// at once.
	if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
		return nil, fmt.Errorf("partlog/log: reopen %s in %s: %w", tp, d.path, err)
	}
	// Nor while readers of the closed one hold its segments: the new one
	// would truncate and rewrite the files they map (ownership.go).
	if p.segTracker.Live() > 0 {
		return nil, fmt.Errorf("partlog/log: reopen %s in %s: %w (readers of the closed partition still hold its segments: close what they read first)", tp, d.path, ErrLocked)
	}
	np, _, err := d.openPartition(tp, false, false)
	if err != nil {
		return nil, fmt.Errorf("partlog/log: reopen %s in %s: %w", tp, d.path, err)
	}
	d.mu.Lock()
	d.parts[tp] = np
	d.mu.Unlock()
	d.logger.Info("partlog/log: reopened partition", "dir", d.path, "partition", tp.String())
	return np, nil
}

// Partitions returns the partitions the Dir holds, sorted by topic then
// partition.
func (d *Dir) Partitions() []TopicPartition {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]TopicPartition, 0, len(d.parts))
	for tp := range d.parts {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

// CreatePartition returns the partition topic-partition, creating its
// directory "<topic>-<partition>" with a first segment when the Dir does
// not hold it (configured by DirConfig: TopicConfig(topic) or Config). A
// new partition records its log start offset in the root
// log-start-offset-checkpoint before CreatePartition returns. Errors:
// ErrInvalidPartition for a name Kafka refuses, ErrClosed, and Open's;
// a directory CreatePartition made for a partition whose open then failed
// is removed as DeletePartition removes one, so that the next OpenDir
// does not find the partition.
func (d *Dir) CreatePartition(topic string, partition int32) (*Partition, error) {
	if !checkpoint.ValidTopic(topic) || topic == metadataTopic || partition < 0 {
		return nil, fmt.Errorf("%w: %q partition %d", ErrInvalidPartition, topic, partition)
	}
	tp := TopicPartition{topic, partition}
	d.createMu.Lock()
	defer d.createMu.Unlock()
	d.mu.RLock()
	p, closed := d.parts[tp], d.closed
	d.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case p != nil:
		return p, nil
	}
	// Entries left of an earlier partition of this name must not apply
	// to a new one; a directory that is there (put in place while the
	// Dir was open) keeps its entries and opens as after a crash.
	_, err := d.fs.Stat(filepath.Join(d.path, tp.String()))
	switch {
	case errors.Is(err, errNotExist):
		if err := d.root.remove(tp); err != nil {
			return nil, fmt.Errorf("partlog/log: create %s in %s: %w", tp, d.path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("partlog/log: create %s in %s: %w", tp, d.path, err)
	}
	fresh := errors.Is(err, errNotExist)
	p, _, err = d.openPartition(tp, false, false)
	if err != nil {
		err = fmt.Errorf("partlog/log: create %s in %s: %w", tp, d.path, err)
		if fresh && !errors.Is(err, ErrLocked) {
			// What the failed open made of the new directory (a first
			// segment, entries in the root files) goes as a deleted
			// partition's does: the next OpenDir must not find a
			// partition whose creation failed.
			if _, rerr := d.removePartitionDir(tp); rerr != nil && !errors.Is(rerr, errNotExist) {
				err = errors.Join(err, fmt.Errorf("partlog/log: create %s in %s: remove the new directory: %w", tp, d.path, rerr))
			}
		}
		return nil, err
	}
	d.mu.Lock()
	d.parts[tp] = p
	d.mu.Unlock()
	d.logger.Info("partlog/log: created partition", "dir", d.path, "partition", tp.String())
	return p, nil
}

// DeletePartition closes the partition topic-partition and deletes it the
// way Kafka does: its directory is renamed to
// "<topic>-<partition>.<random hex>-delete", the topic cut short when the
// name would pass 255 bytes, as Kafka cuts it (durably: from then on the
// partition is gone, after a crash too), its entries are dropped from the
// root checkpoint files, and the renamed directory is removed (OpenDir
// finishes that after a crash). Records the partition returned stay
// readable until closed where the platform allows (unix). A tiered
// partition's copies are deleted from the remote store first: on a store
// error (wrapping ErrRemoteUnavailable, say) the partition stays in the
// Dir, open, without its copies (reads below its local log start fail;
// the Dir retries their deletion in the background), and DeletePartition
// may be called again.
// Errors: ErrUnknownPartition, ErrClosed, the store's, and I/O errors. A
// failed rename deletes nothing: the partition stays in the Dir, closed
// (OpenPartition reopens it), and DeletePartition may be called again.
// After the rename the partition is gone from the Dir even when a later
// step fails (an I/O error then leaves a "-delete" directory that the
// next OpenDir removes).
func (d *Dir) DeletePartition(topic string, partition int32) error {
	tp := TopicPartition{topic, partition}
	d.createMu.Lock()
	defer d.createMu.Unlock()
	d.mu.Lock()
	p, closed := d.parts[tp], d.closed
	d.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case p == nil:
		return fmt.Errorf("%w: %s in %s", ErrUnknownPartition, tp, d.path)
	}
	if d.tier != nil {
		// The copies go first (tier.go): on a store error the
		// partition stays.
		if err := d.tier.deletePartition(tp); err != nil {
			return fmt.Errorf("partlog/log: delete %s in %s: remote copies: %w", tp, d.path, err)
		}
	}
	d.mu.Lock()
	delete(d.parts, tp)
	d.mu.Unlock()
	if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
		d.logger.Warn("partlog/log: closing a partition to delete it failed; deleting it anyway",
			"dir", d.path, "partition", tp.String(), "err", err)
	}
	if renamed, err := d.removePartitionDir(tp); err != nil {
		if !renamed {
			// Nothing is deleted: the directory keeps its name, so the
			// partition stays the Dir's (closed; OpenPartition reopens
			// it), and a CreatePartition of the name does not take the
			// old records for a new partition's.
			d.mu.Lock()
			d.parts[tp] = p
			d.mu.Unlock()
		}
		return fmt.Errorf("partlog/log: delete %s in %s: %w", tp, d.path, err)
	}
	d.logger.Info("partlog/log: deleted partition", "dir", d.path, "partition", tp.String())
	return nil
}

// removePartitionDir removes the directory of tp, no partition's any
// more, the way Kafka deletes a partition: renamed to a "-delete" name
// (durably: from then on it is gone, after a crash too), its entries
// dropped from the root files, then removed (OpenDir finishes that after
// a crash). renamed reports whether the rename was done: when it was
// not, the directory is as it was. REQUIRES: createMu held.
func (d *Dir) removePartitionDir(tp TopicPartition) (renamed bool, err error) {
	from := filepath.Join(d.path, tp.String())
	to := filepath.Join(d.path, deleteDirName(tp))
	if err := d.fs.Rename(from, to); err != nil {
		return false, err
	}
	if err := syncDir(d.fs, d.path); err != nil {
		return true, err
	}
	if err := d.root.remove(tp); err != nil {
		return true, err
	}
	if err := d.fs.RemoveAll(to); err != nil {
		return true, err
	}
	return true, syncDir(d.fs, d.path)
}

// Close closes every partition (RecoveryThreads at a time; each seals and
// flushes as Partition.Close does), writes the root checkpoint files once
// for all of them and then, when every step succeeded and no partition had
// failed, the clean-shutdown marker at the root, so that the next OpenDir
// recovers nothing. When the filesystem syncs whole filesystems
// (vfs.FilesystemSyncer) the partitions sync nothing as they close: one
// call makes all of it durable, then their producer snapshots are written
// and a second call covers them, before the root files and the marker
// are written (when either call fails neither is); a Dir whose partitions
// changed nothing since a clean open syncs nothing. It releases the lock
// even when a step fails and returns every error; while Records of its
// partitions (or other reads holding their segments) are still open, the
// lock is released when the last of them is closed, and until then OpenDir
// of the directory, or Open of one of its partitions, fails with
// ErrLocked. A second Close returns ErrClosed.
func (d *Dir) Close() error {
	d.createMu.Lock()
	defer d.createMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.closed = true
	d.mu.Unlock()

	d.flusher.close() // no periodic flush from now on: Close flushes
	if d.tier != nil {
		d.tier.stop() // no copy or deletion from now on
	}
	d.root.hold()
	// On a filesystem that syncs whole filesystems the partitions write
	// without syncing and one call makes all of it durable, before the
	// root files record their recovery points and the marker is written;
	// if it fails, neither is (the raised recovery points are dropped:
	// the next open recovers from the older ones).
	syncLater := d.fsSync != nil
	closed, unsynced, err := d.closeAll(syncLater)
	errs := []error{err}
	synced := true
	if syncLater {
		if err := d.syncClosed(closed, unsynced); err != nil {
			errs = append(errs, err)
			synced = false
		}
	}
	failed := false
	for _, p := range d.parts {
		p.mu.Lock()
		failed = failed || p.mu.failed != nil || p.offlineErr() != nil
		p.mu.Unlock()
	}
	if synced {
		errs = append(errs, d.root.release(true))
	}
	if errors.Join(errs...) == nil && !failed {
		if err := checkpoint.MarkCleanShutdown(d.fs, d.path); err != nil {
			errs = append(errs, fmt.Errorf("clean shutdown marker: %w", err))
		}
	}
	if d.fsSync != nil {
		if err := d.fsSync.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the filesystem sync: %w", err))
		}
	}
	// The lock is released now, or when the last reader of a partition
	// lets go of its segments (ownership.go).
	if err := d.dirOwner.close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		d.logger.Warn("partlog/log: closing the log directory failed", "dir", d.path, "err", err)
		return fmt.Errorf("partlog/log: close dir %s: %w", d.path, err)
	}
	d.logger.Info("partlog/log: closed log directory", "dir", d.path, "partitions", len(d.parts))
	return nil
}
