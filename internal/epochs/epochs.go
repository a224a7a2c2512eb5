// Package epochs is a partition's leader epoch cache: for each leader epoch
// that wrote batches (or was announced before its first batch), the offset
// where it starts, kept in memory and in the partition's
// leader-epoch-checkpoint file (Kafka's LeaderEpochFileCache and its
// checkpoint, same rules and file format: see internal/checkpoint).
//
// The cache holds entries with strictly increasing epochs and
// non-decreasing start offsets:
//
//	epoch 0 starts at offset 0
//	epoch 3 starts at offset 1207
//	epoch 5 starts at offset 2950   <- the latest epoch, still being written
//
// Its rules, all Kafka's: an epoch is added only when it is higher than
// every cached one, and entries starting at or after its start go first (at
// most one epoch starts at an offset) ([Cache.Assign], [Cache.Observe]); a
// truncation of the log's end removes the entries that start at or past
// the new end ([Cache.TruncateFromEnd]); a move of the log start drops the
// entries wholly below it and moves the first remaining one up to it
// ([Cache.TruncateFromStart]); [Cache.EndOffsetFor] answers
// OffsetsForLeaderEpoch.
//
// # Durability
//
// [Cache.Assign] writes the file before it returns (temporary file, fsync,
// rename, directory fsync: checkpoint.WriteLeaderEpochs), so that no batch
// of a new epoch reaches the log before its entry is durable. Every other
// change only marks the cache dirty; [Cache.Persist] writes it when the
// owner decides (a full flush, a truncation).
//
// # Concurrency
//
// A Cache is not safe for concurrent use: the partition keeps it under its
// write lock (log.Partition.mu), and every method is called with that lock
// held, or by Open's single goroutine.
package epochs

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/checkpoint"
)

// Undefined is the epoch of an answer the cache cannot give (Kafka's
// UNDEFINED_EPOCH), with the end offset UndefinedOffset.
const Undefined int32 = -1

// UndefinedOffset is the end offset of an answer with the epoch Undefined
// (Kafka's UNDEFINED_EPOCH_OFFSET).
const UndefinedOffset int64 = -1

// Entry is one cache entry: the epoch and the first offset written under
// it.
type Entry = checkpoint.EpochEntry

// Cache is the leader epoch cache of one partition and the file that keeps
// it. The zero Cache is empty and has no file; use New.
type Cache struct {
	// fs and path name the checkpoint file; set by New, never changed.
	fs   vfs.FS
	path string
	// entries are the cached epochs: epochs strictly increasing, start
	// offsets non-decreasing. A slice handed out before a change is never
	// written through (Assign builds a new array when it replaces entries,
	// so that a failed write can restore the old ones).
	entries []Entry
	// dirty is set when entries differ from the file's.
	dirty bool
}

// New returns an empty cache kept in the file at path (not read: see
// Load).
func New(fsys vfs.FS, path string) Cache {
	return Cache{fs: fsys, path: path}
}

// Load reads the checkpoint file into the cache. A missing file leaves the
// cache empty. A file that does not parse is returned as the error
// (wrapping base.ErrCorrupt) and leaves the cache empty: the owner decides
// whether to go on without it. When the entries are out of order, only the
// ordered prefix is kept, the cache is marked dirty (the next Persist
// rewrites the file) and dropped is the index of the first entry left out;
// otherwise dropped is -1.
func (c *Cache) Load() (dropped int, err error) {
	c.entries, c.dirty = nil, false
	// Read without ReadLeaderEpochs' order check: out-of-order entries
	// cost the entries from the first of them, not the file.
	entries, err := checkpoint.Read(c.fs, c.path, checkpoint.EpochFormat)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return -1, nil
	case err != nil:
		return -1, err
	}
	dropped = -1
	for i, e := range entries {
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset < entries[i-1].StartOffset) {
			entries, dropped, c.dirty = entries[:i], i, true
			break
		}
	}
	c.entries = entries
	return dropped, nil
}

// Len returns the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Entries returns a copy of the entries, oldest epoch first.
func (c *Cache) Entries() []Entry { return slices.Clone(c.entries) }

// First returns the oldest entry; ok is false when the cache is empty.
func (c *Cache) First() (e Entry, ok bool) {
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[0], true
}

// Dirty reports whether the cache differs from its file.
func (c *Cache) Dirty() bool { return c.dirty }

// Latest returns the highest cached epoch; ok is false when the cache is
// empty.
func (c *Cache) Latest() (epoch int32, ok bool) {
	if n := len(c.entries); n > 0 {
		return c.entries[n-1].Epoch, true
	}
	return Undefined, false
}

// StartsEpoch reports whether epoch is not negative and higher than every
// cached one: a leader's new epoch.
func (c *Cache) StartsEpoch(epoch int32) bool {
	latest, ok := c.Latest()
	return epoch >= 0 && (!ok || epoch > latest)
}

// Changes reports whether Assign or Observe of (epoch, start) would change
// the cache, Kafka's rule (LeaderEpochFileCache.isUpdateNeeded): epoch is
// not negative, and the cache is empty, or its latest entry has another
// epoch (higher or lower), or the same epoch starting after start.
func (c *Cache) Changes(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	n := len(c.entries)
	return n == 0 || c.entries[n-1].Epoch != epoch || start < c.entries[n-1].StartOffset
}

// keepBefore returns how many leading entries stay when (epoch, start)
// is assigned: the trailing entries of an epoch at or above epoch, or
// starting at or after start, go (Kafka's
// maybeTruncateNonMonotonicEntries), so the cache stays increasing in
// both epoch and start offset.
func (c *Cache) keepBefore(epoch int32, start int64) int {
	i := len(c.entries)
	for i > 0 && (c.entries[i-1].Epoch >= epoch || c.entries[i-1].StartOffset >= start) {
		i--
	}
	return i
}

// Assign records that epoch starts at offset start (the log end offset)
// and writes the file before it returns, Kafka's
// LeaderEpochFileCache.assign (the file never misses an entry a batch
// depends on): when Changes says the cache changes, the trailing entries
// of an epoch at or above epoch or starting at or after start go, then
// (epoch, start) is added. A follower that copies a batch of a lower epoch
// than the latest cached one thus cuts the cache back to it, as Kafka's
// does. Otherwise nothing changes and nothing is written; on a failed
// write the cache is as it was before the call.
func (c *Cache) Assign(epoch int32, start int64) error {
	if !c.Changes(epoch, start) {
		return nil
	}
	old, oldDirty := c.entries, c.dirty
	i := c.keepBefore(epoch, start)
	entry := Entry{Epoch: epoch, StartOffset: start}
	if i == len(old) {
		c.entries = append(old, entry) // old keeps its length: a revert restores it
	} else {
		c.entries = append(old[:i:i], entry) // a new array: old stays intact
	}
	c.dirty = true
	if err := c.Persist(); err != nil {
		c.entries, c.dirty = old, oldDirty
		return err
	}
	return nil
}

// Observe adds epoch, starting at start (a batch's base offset), when it
// is higher than every cached epoch, in memory only (the cache becomes
// dirty); entries starting at or after start go first. It is recovery's
// rule, Kafka's (LogSegment.recover assigns only an epoch above the
// latest): recovery replays batches from the recovery point, which may lie
// below entries the file already holds, and must not cut those back.
func (c *Cache) Observe(epoch int32, start int64) {
	if !c.StartsEpoch(epoch) {
		return
	}
	i := c.firstStartingAtOrAfter(start)
	c.entries = append(c.entries[:i], Entry{Epoch: epoch, StartOffset: start})
	c.dirty = true
}

// firstStartingAtOrAfter returns the index of the first of the trailing
// entries that start at or after start (len when none does).
func (c *Cache) firstStartingAtOrAfter(start int64) int {
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= start {
		i--
	}
	return i
}

// TruncateFromEnd removes the entries of the epochs starting at or after
// end (their batches are gone).
func (c *Cache) TruncateFromEnd(end int64) {
	if i := c.firstStartingAtOrAfter(end); i < len(c.entries) {
		c.entries = c.entries[:i]
		c.dirty = true
	}
}

// TruncateFromStart drops the entries wholly below start and moves the one
// holding start up to it (Kafka's truncateFromStart).
func (c *Cache) TruncateFromStart(start int64) {
	if len(c.entries) == 0 {
		return
	}
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= start {
		i++
	}
	if i > 0 {
		// Also when entry i starts exactly at start: the ones before it
		// name no remaining batch.
		c.entries = slices.Delete(c.entries, 0, i)
		c.dirty = true
	}
	if c.entries[0].StartOffset < start {
		c.entries[0].StartOffset = start
		c.dirty = true
	}
}

// Restore puts back entries, a copy Entries returned before a change
// that must be undone (the batch an Assign was made for was not written),
// and marks the cache dirty: Persist writes it.
func (c *Cache) Restore(entries []Entry) {
	c.entries, c.dirty = entries, true
}

// Clear removes every entry (the log restarted, or its batches went).
func (c *Cache) Clear() {
	c.entries, c.dirty = nil, true
}

// Persist writes the file when the cache differs from it.
func (c *Cache) Persist() error {
	if !c.dirty {
		return nil
	}
	if err := checkpoint.WriteLeaderEpochs(c.fs, c.path, c.entries); err != nil {
		return fmt.Errorf("partlog/epochs: write %s: %w", c.path, err)
	}
	c.dirty = false
	return nil
}

// EndOffsetFor answers Kafka's OffsetsForLeaderEpoch for the requested
// epoch (LeaderEpochFileCache.endOffsetFor) in a log whose end offset is
// logEnd: the largest cached epoch at or below the requested one and the
// offset where the next higher epoch starts. Kafka's edge cases:
//
//   - requested Undefined: (Undefined, UndefinedOffset);
//   - requested the latest cached epoch: (it, logEnd);
//   - requested above every cached epoch, or an empty cache: (Undefined,
//     UndefinedOffset);
//   - requested below the first cached epoch: (requested, the first
//     entry's start offset);
//   - requested between two entries: (the entry below it, the start offset
//     of the entry above it).
func (c *Cache) EndOffsetFor(requested int32, logEnd int64) (epoch int32, endOffset int64) {
	es := c.entries
	n := len(es)
	switch {
	case requested == Undefined:
		return Undefined, UndefinedOffset
	case n > 0 && es[n-1].Epoch == requested:
		return requested, logEnd
	}
	// higher: the first entry above requested; entries increase.
	higher := 0
	for higher < n && es[higher].Epoch <= requested {
		higher++
	}
	switch {
	case higher == n:
		return Undefined, UndefinedOffset
	case higher == 0:
		return requested, es[0].StartOffset
	}
	return es[higher-1].Epoch, es[higher].StartOffset
}

// ListOffsetsEpochs returns the leader epochs Kafka's log gives its
// ListOffsets answers for the latest and the earliest offset, in a log
// whose start offset is logStart: the latest cached epoch, and the epoch
// of the last entry starting at or below logStart (Kafka's
// epochForOffset: entries below logStart remain when the cache starts
// lower, at a tiered log's whole start); Undefined when none does, or
// with an empty cache.
func (c *Cache) ListOffsetsEpochs(logStart int64) (latest, earliest int32) {
	latest, earliest = Undefined, Undefined
	if n := len(c.entries); n > 0 {
		latest = c.entries[n-1].Epoch
	}
	for _, e := range c.entries {
		if e.StartOffset > logStart {
			break
		}
		earliest = e.Epoch
	}
	return latest, earliest
}
