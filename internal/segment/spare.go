package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/partlog/partlog/internal/index"
)

// SpareSuffix is the suffix of a spare segment's files
// ("00000000000000000000.log.spare.deleted"): an empty segment made ahead
// of a roll, which the roll renames to its base offset (AdoptAs) instead
// of creating the files under the partition's lock. The names end in
// DeletedSuffix, so that every start-up (partlog's and Kafka's, which
// both remove *.deleted files and never read them) removes a spare a
// crash left; they are not Kafka's N.log.deleted names
// (ParseFileName refuses them), so they never collide with a deleted
// segment's files.
const SpareSuffix = ".spare" + DeletedSuffix

// spareBase is the base offset in a spare's file names; its real one is
// given by AdoptAs.
const spareBase = 0

// CreateSpare creates an empty segment under the spare names (SpareSuffix)
// in dir, replacing a spare left there, for a roll to adopt later
// (AdoptAs): the files Create makes (the index files preallocated, their
// first page written, the .log and both indexes mapped). Nothing is
// synced: a crash may leave the files, which the next start-up removes.
// One spare per directory: the names do not depend on anything else.
func CreateSpare(fsys FS, dir string, cfg Config) (*Segment, error) {
	return CreateWithSuffix(fsys, dir, spareBase, SpareSuffix, cfg)
}

// AdoptAs makes a spare (CreateSpare) the empty segment with base offset
// base: it removes a stale .txnindex of that base, renames the .log, the
// .index and the .timeindex to the base's names (metadata operations: no
// file is created, preallocated or mapped) and gives the segment and its
// indexes the base. The segment must be the spare as CreateSpare returned
// it, not yet shared with a reader. On failure the renames done are undone
// (best effort) and the spare should be discarded (Discard). Writer side.
func (s *Segment) AdoptAs(base int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w.suffix != SpareSuffix || s.Size() != 0 || s.w.fileSize != 0 {
		return fmt.Errorf("%w: %s is not an empty spare (suffix %q, %d bytes)", ErrSuffix, s.LogPath(), s.w.suffix, s.Size())
	}
	if base < 0 || base > index.MaxBaseOffset {
		return fmt.Errorf("%w: base offset %d", ErrOffsetOverflow, base)
	}
	name := func(kind string) string { return filepath.Join(s.dir, FileName(base, kind)) }
	// Create replaces a .txnindex of the name too; the segment opens one
	// lazily, by its name, on its first aborted transaction.
	if err := s.fs.Remove(name(TxnIndexSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	oldLog, newLog := s.LogPath(), name(LogSuffix)
	oldIdx, oldTime := s.offIdx.Path(), s.timeIdx.Path()
	if err := s.fs.Rename(oldLog, newLog); err != nil {
		return err
	}
	if err := s.offIdx.Rename(name(IndexSuffix)); err != nil {
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	if err := s.timeIdx.Rename(name(TimeIndexSuffix)); err != nil {
		_ = s.offIdx.Rename(oldIdx)
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	if err := s.offIdx.Rebase(base); err != nil {
		_ = s.timeIdx.Rename(oldTime)
		_ = s.offIdx.Rename(oldIdx)
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	if err := s.timeIdx.Rebase(base); err != nil {
		_ = s.offIdx.Rebase(spareBase)
		_ = s.timeIdx.Rename(oldTime)
		_ = s.offIdx.Rename(oldIdx)
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	s.base = base
	s.w.suffix = ""
	s.logPath.Store(&newLog)
	if s.region != nil {
		s.region.SetName(newLog)
	}
	s.publishEmpty()
	return nil
}

// Discard closes a segment nobody else holds and removes its files (a
// spare the partition no longer wants); errors removing them are
// returned, the files then stay for the next start-up to remove.
func (s *Segment) Discard() error {
	s.deleteOnRelease.Store(true)
	return s.Close()
}
