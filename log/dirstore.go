package log

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
)

// rootCheckpointFiles are the offset checkpoints a Dir keeps at the root of
// its log directory, one file each for all the partitions, as Kafka does.
var rootCheckpointFiles = []string{
	recoveryPointCheckpointFile,
	logStartOffsetCheckpointFile,
	highWatermarkCheckpointFile,
	cleanerCheckpointFile,
}

// rootCheckpoints holds a Dir's root checkpoint files: each in memory as a
// map from partition to offset, written whole (sorted by topic, then
// partition) and atomically (checkpoint.WriteOffsets) when an entry
// changes.
type rootCheckpoints struct {
	files map[string]*rootFile
}

// rootFile is one root checkpoint file. Writers of many partitions are
// batched (group commit): an entry is set in the map, then one writer at
// a time writes the whole map, and the writers that set entries while it
// wrote wait for it and let the first of them write for all.
type rootFile struct {
	fs   vfs.FS
	path string

	mu   sync.Mutex
	cond sync.Cond // L is &mu; signalled when a write ends
	// entries are the offsets; gen counts their changes and durable is
	// the gen the file on disk holds.
	entries map[TopicPartition]int64
	// keys are entries' keys in the file's order (topic, then
	// partition), kept sorted as keys come and go so that a write of N
	// entries does not sort them again.
	keys         []TopicPartition
	gen, durable uint64
	// writing is set while one writer writes the file without mu.
	writing bool
	// held defers lazy writes (while the Dir loads or closes its
	// partitions) until release.
	held bool
	// pending holds the entries lazy writes set while held. They stay out
	// of entries, so that a write of the file before release (another
	// partition's durable write) does not carry them: what a deferred
	// value records may become durable only with the Dir's filesystem
	// sync that precedes release (Dir.Close), and written before it, a
	// raised recovery point would claim unsynced segments. release moves
	// them into entries.
	pending map[TopicPartition]int64
}

// newRootCheckpoints returns the root files of dir holding entries (by
// file name; missing names are empty).
func newRootCheckpoints(fs vfs.FS, dir string, entries map[string]map[TopicPartition]int64) *rootCheckpoints {
	rc := &rootCheckpoints{files: make(map[string]*rootFile, len(rootCheckpointFiles))}
	for _, name := range rootCheckpointFiles {
		f := &rootFile{fs: fs, path: filepath.Join(dir, name), entries: entries[name]}
		if f.entries == nil {
			f.entries = make(map[TopicPartition]int64)
		}
		for tp := range f.entries {
			f.keys = append(f.keys, tp)
		}
		slices.SortFunc(f.keys, compareTP)
		f.cond.L = &f.mu
		rc.files[name] = f
	}
	return rc
}

// hold defers lazy writes until release.
func (rc *rootCheckpoints) hold() {
	for _, f := range rc.files {
		f.mu.Lock()
		f.held = true
		f.mu.Unlock()
	}
}

// release ends hold, takes the deferred entries in, and writes every file
// whose entries changed since it was last written (all files when force).
func (rc *rootCheckpoints) release(force bool) error {
	var errs []error
	for _, name := range rootCheckpointFiles {
		f := rc.files[name]
		f.mu.Lock()
		f.held = false
		for tp, off := range f.pending {
			f.setLocked(tp, off)
		}
		f.pending = nil
		if force && f.gen == f.durable {
			f.gen++
		}
		errs = append(errs, f.persistLocked(f.gen))
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// remove drops the entries of tps from every file, durably: also from a
// file whose last write failed (its entries already gone from memory may
// still be on disk).
func (rc *rootCheckpoints) remove(tps ...TopicPartition) error {
	var errs []error
	for _, name := range rootCheckpointFiles {
		f := rc.files[name]
		f.mu.Lock()
		changed := f.durable < f.gen
		for _, tp := range tps {
			delete(f.pending, tp)
			if f.deleteLocked(tp) {
				changed = true
			}
		}
		if changed {
			errs = append(errs, f.persistLocked(f.gen))
		}
		f.mu.Unlock()
	}
	return errors.Join(errs...)
}

// persistLocked returns once the file on disk holds generation target or
// a later one, writing it unless another writer is: then it waits for that
// one, and writes itself when that did not cover target (it started
// earlier, or failed). REQUIRES: f.mu held (released while writing).
func (f *rootFile) persistLocked(target uint64) error {
	for f.durable < target {
		if f.writing {
			f.cond.Wait()
			continue
		}
		f.writing = true
		gen := f.gen
		entries := make([]checkpoint.PartitionOffset, len(f.keys))
		for i, tp := range f.keys {
			entries[i] = checkpoint.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: f.entries[tp]}
		}
		f.mu.Unlock()
		// Not WriteOffsets: the keys are unique and valid by construction
		// (a map's; topics of partition directories, offsets >= 0).
		err := checkpoint.Write(f.fs, f.path, checkpoint.OffsetFormat, entries)
		f.mu.Lock()
		f.writing = false
		f.cond.Broadcast()
		if err != nil {
			return fmt.Errorf("partlog/log: write %s: %w", f.path, err)
		}
		f.durable = max(f.durable, gen)
	}
	return nil
}

// compareTP orders partitions as the root files list them: by topic,
// then partition.
func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// setLocked sets tp's entry. REQUIRES: f.mu held.
func (f *rootFile) setLocked(tp TopicPartition, offset int64) {
	cur, ok := f.entries[tp]
	if !ok {
		i, _ := slices.BinarySearchFunc(f.keys, tp, compareTP)
		f.keys = slices.Insert(f.keys, i, tp)
	}
	if !ok || cur != offset {
		f.entries[tp] = offset
		f.gen++
	}
}

// restoreLocked puts tp's entry back to prev (removes it when !had).
// REQUIRES: f.mu held.
func (f *rootFile) restoreLocked(tp TopicPartition, prev int64, had bool) {
	if had {
		f.setLocked(tp, prev)
		return
	}
	f.deleteLocked(tp)
}

// deleteLocked removes tp's entry and reports whether there was one.
// REQUIRES: f.mu held.
func (f *rootFile) deleteLocked(tp TopicPartition) bool {
	if _, ok := f.entries[tp]; !ok {
		return false
	}
	delete(f.entries, tp)
	if i, found := slices.BinarySearchFunc(f.keys, tp, compareTP); found {
		f.keys = slices.Delete(f.keys, i, i+1)
	}
	f.gen++
	return true
}

// dirEntries is the checkpointStore of a partition of a Dir: its entries
// in the Dir's root files.
type dirEntries struct {
	root *rootCheckpoints
	tp   TopicPartition
}

func (d dirEntries) path(name string) string { return d.root.files[name].path }

// read returns the partition's latest value, a deferred one included.
func (d dirEntries) read(name string) (int64, bool, error) {
	f := d.root.files[name]
	f.mu.Lock()
	defer f.mu.Unlock()
	if off, ok := f.pending[d.tp]; ok {
		return off, true, nil
	}
	off, ok := f.entries[d.tp]
	return off, ok, nil
}

func (d dirEntries) write(name string, offset int64, lazy bool) error {
	f := d.root.files[name]
	f.mu.Lock()
	defer f.mu.Unlock()
	if lazy && f.held {
		if f.pending == nil {
			f.pending = make(map[TopicPartition]int64)
		}
		f.pending[d.tp] = offset
		return nil
	}
	// A durable write supersedes a deferred value of the partition.
	pending, deferred := f.pending[d.tp]
	delete(f.pending, d.tp)
	prev, had := f.entries[d.tp]
	f.setLocked(d.tp, offset)
	if err := f.persistLocked(f.gen); err != nil {
		// The caller gives up on what the entry was to record (a log
		// start, a recovery point): the entry must not claim it either,
		// or a reopen of the partition (OpenPartition), which reads the
		// entries, would act on a value the file never got. No write
		// holding the new value succeeded (it would have covered this
		// generation), so the file holds the old one.
		f.restoreLocked(d.tp, prev, had)
		if deferred {
			f.pending[d.tp] = pending
		}
		return err
	}
	return nil
}

// lower lowers the deferred value and the written one independently: a
// written value below end stays, as the deferred one may claim segments
// the Dir has not synced yet.
func (d dirEntries) lower(name string, end int64) error {
	f := d.root.files[name]
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.pending[d.tp]; ok && cur > end {
		f.pending[d.tp] = end
	}
	if cur, ok := f.entries[d.tp]; !ok || cur <= end {
		return nil
	}
	f.setLocked(d.tp, end)
	return f.persistLocked(f.gen)
}

// readRootCheckpoint reads the root checkpoint file name of dir: a missing
// file has no entries (Kafka's reading too); entries whose topic is not a
// valid Kafka topic name are dropped (no partition directory can hold
// them). A malformed file is an error wrapping base.ErrCorrupt.
func readRootCheckpoint(fs vfs.FS, dir, name string) (map[TopicPartition]int64, error) {
	entries, err := checkpoint.ReadOffsets(fs, filepath.Join(dir, name))
	if errors.Is(err, errNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := make(map[TopicPartition]int64, len(entries))
	for _, e := range entries {
		if checkpoint.ValidTopic(e.Topic) {
			m[TopicPartition{e.Topic, e.Partition}] = e.Offset
		}
	}
	return m, nil
}

// isCorrupt reports whether err is a malformed file (not an I/O error).
func isCorrupt(err error) bool { return errors.Is(err, base.ErrCorrupt) }
