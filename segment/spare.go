package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/index/vfs"
)

// SpareSuffix is the suffix of a spare segment's files
// ("00000000000000000000.log.spare.deleted"): an empty segment made ahead
// of a roll, which the roll adopts at its base offset (BeginAdoptAs, in
// memory) instead of creating the files under the partition's lock, and
// renames to the base's names afterwards (SettleAdoption). The names end in
// DeletedSuffix, so that every start-up (partlog's and Kafka's, which
// both remove *.deleted files and never read them) removes a spare a
// crash left; they are not Kafka's N.log.deleted names
// (ParseFileName refuses them), so they never collide with a deleted
// segment's files.
const SpareSuffix = ".spare" + DeletedSuffix

// spareBase is the base offset in a spare's file names; its real one is
// given by BeginAdoptAs.
const spareBase = 0

// CreateSpare creates an empty segment under the spare names (SpareSuffix)
// in dir, replacing a spare left there, for a roll to adopt later
// (BeginAdoptAs): the files Create makes (the index files preallocated, their
// first page written, the .log and both indexes mapped), and it reserves
// the disk blocks of the .log's first SparePreallocBytes (at most the
// segment's size) without changing its length (vfs.File.Preallocate,
// fallocate with KEEP_SIZE on Linux): the appends into a segment adopted
// from a spare write into blocks already allocated, which measured about
// 7% cheaper at the median than letting each write reserve its own, with
// no measurable change in the tail (README, "Rolls: where the tail comes
// from"). The file's length, hence
// its content and format, does not change: recovery, Verify and every
// reader look only below the length, and what is reserved past it is
// released when the segment is sealed and its indexes trimmed, or closed,
// and when it is truncated or deleted; one a crash
// left is released by the next Open of the segment. Nothing is
// synced: a crash may leave the files, which the next start-up removes.
// One spare per directory: the names do not depend on anything else. A
// failed reservation (a full disk) fails the call, after removing the
// files.
func CreateSpare(fsys vfs.FS, dir string, cfg Config) (*Segment, error) {
	s, err := CreateWithSuffix(fsys, dir, spareBase, SpareSuffix, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.logFile.Preallocate(0, min(s.window, SparePreallocBytes)); err != nil {
		err = fmt.Errorf("partlog/segment: reserve %d bytes for %s: %w", min(s.window, SparePreallocBytes), s.LogPath(), err)
		return nil, errors.Join(err, s.Discard())
	}
	s.reserved.Store(true)
	return s, nil
}

// SparePreallocBytes is how much of a spare's .log CreateSpare reserves:
// the whole segment up to 16 MiB. A reservation lasts while the segment
// is active, so it is capped: with Kafka's default 1 GiB segments, a
// reservation of the whole segment would hold 1 GiB of disk for each
// partition that appends.
const SparePreallocBytes = 16 << 20

// releaseReserved releases the disk blocks reserved past the .log's end
// (reserved): a cut of the file to its length, which leaves the length,
// the bytes and the modification time as they are (ext4 frees the blocks
// past the end on any truncate; releasePastEnd). REQUIRES: the segment is sealed or being closed (no append
// changes the length meanwhile) and its files are open.
func (s *Segment) releaseReserved() error {
	if !s.reserved.Load() {
		return nil
	}
	if err := releasePastEnd(s.logFile, s.size.Load()); err != nil {
		return fmt.Errorf("partlog/segment: release the blocks reserved past the end of %s: %w", s.LogPath(), err)
	}
	s.reserved.Store(false)
	return nil
}

// AdoptAs makes a spare (CreateSpare) the empty segment with base offset
// base and settles its file names at once: BeginAdoptAs followed by
// SettleAdoption.
func (s *Segment) AdoptAs(base int64) error {
	if err := s.BeginAdoptAs(base); err != nil {
		return err
	}
	return s.SettleAdoption()
}

// BeginAdoptAs makes a spare (CreateSpare) the empty segment with base
// offset base in memory only, with no filesystem operation: the segment
// and its indexes get the base, the segment accepts appends at it, and
// its files keep the spare's names until SettleAdoption renames them (a
// roll adopts the spare under the partition's lock and leaves the renames
// to after it). Until then the segment's data lives in files every
// start-up removes, so nothing in it may be called durable:
// every method that syncs the segment, names its files or changes them by
// name settles the adoption first (Flush, Close, ChangeSuffix,
// MarkDeleted, TruncateTo, Recover, Unseal, TrimSealedIndexes, the
// .txnindex's methods), and a Budget never closes it at rest while the
// adoption is pending. Seal and Append do not: a roll past a segment whose
// adoption is pending still does no filesystem operation for it.
//
// The segment must be the spare as CreateSpare returned it, not yet shared
// with a reader; on failure nothing changed. Writer side.
func (s *Segment) BeginAdoptAs(base int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w.suffix != SpareSuffix || s.Size() != 0 || s.w.fileSize != 0 {
		return fmt.Errorf("%w: %s is not an empty spare (suffix %q, %d bytes)", ErrSuffix, s.LogPath(), s.w.suffix, s.Size())
	}
	if base < 0 || base > index.MaxBaseOffset {
		return fmt.Errorf("%w: base offset %d", ErrOffsetOverflow, base)
	}
	if err := s.offIdx.Rebase(base); err != nil {
		return err
	}
	if err := s.timeIdx.Rebase(base); err != nil {
		_ = s.offIdx.Rebase(spareBase)
		return err
	}
	s.base = base
	s.w.suffix = ""
	s.adopt.pending.Store(true)
	s.publishEmpty()
	return nil
}

// adoptState is the part of an adoption BeginAdoptAs leaves for later:
// the renames of the spare's files to the base's names (SettleAdoption).
type adoptState struct {
	// mu serializes SettleAdoption: a second caller waits until the
	// renames of the first are done.
	mu sync.Mutex
	// pending is set by BeginAdoptAs and cleared, under mu, once the
	// files carry the base's names.
	pending atomic.Bool
	// err is a failed settlement's error, returned by every later call
	// (the files may be half renamed: the segment can no longer be made
	// durable). Guarded by mu.
	err error
}

// AdoptionPending reports whether the segment was adopted (BeginAdoptAs)
// and its files still carry the spare's names.
func (s *Segment) AdoptionPending() bool { return s.adopt.pending.Load() }

// SettleAdoption finishes an adoption BeginAdoptAs began: it removes a
// stale .txnindex of the base's name (a segment of that base deleted or
// truncated away by a crash may leave one; the segment would otherwise
// read it as its own at its next open) and renames the .log, the .index
// and the .timeindex from the spare's names to the base's, then the
// segment reports the new paths. It does nothing when no adoption is
// pending, and waits for a settlement running in another goroutine. On
// failure the renames done are undone (best effort) and the error is
// returned by this and every later call. Nothing is synced: the caller
// syncs the directory before it calls anything in the segment durable.
//
// Unlike the other writer-side methods it may run without the writer's
// lock, concurrently with Append, Seal and reads (which use the open
// descriptors and mappings, never the names); the writer-side methods
// that use or change the names settle the adoption first.
func (s *Segment) SettleAdoption() error {
	if !s.adopt.pending.Load() {
		return nil
	}
	s.adopt.mu.Lock()
	defer s.adopt.mu.Unlock()
	if !s.adopt.pending.Load() {
		return nil
	}
	if s.adopt.err != nil {
		return s.adopt.err
	}
	if err := s.renameAdopted(); err != nil {
		s.adopt.err = fmt.Errorf("partlog/segment: adopt %s as segment %d: %w", s.LogPath(), s.base, err)
		return s.adopt.err
	}
	s.adopt.pending.Store(false)
	return nil
}

// renameAdopted does SettleAdoption's filesystem operations. REQUIRES:
// adopt.mu held.
func (s *Segment) renameAdopted() error {
	// Create replaces a .txnindex of the name too; the segment opens one
	// lazily, by its name, on its first aborted transaction (txnFile
	// settles the adoption first, so none was made yet).
	if err := s.fs.Remove(s.path(TxnIndexSuffix, "")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	oldLog, newLog := s.LogPath(), s.path(LogSuffix, "")
	oldIdx := s.offIdx.Path()
	if err := s.fs.Rename(oldLog, newLog); err != nil {
		return err
	}
	if err := s.offIdx.Rename(s.path(IndexSuffix, "")); err != nil {
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	if err := s.timeIdx.Rename(s.path(TimeIndexSuffix, "")); err != nil {
		_ = s.offIdx.Rename(oldIdx)
		_ = s.fs.Rename(newLog, oldLog)
		return err
	}
	s.logPath.Store(&newLog)
	// The region is replaced only by writer-side methods, which settle
	// the adoption first; SetName is atomic.
	if s.region != nil {
		s.region.SetName(newLog)
	}
	return nil
}

// Discard closes a segment nobody else holds and removes its files (a
// spare the partition no longer wants); errors removing them are
// returned, the files then stay for the next start-up to remove.
func (s *Segment) Discard() error {
	s.deleteOnRelease.Store(true)
	return s.Close()
}
