package compaction

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
	"github.com/partlog/partlog/segment/repair"
)

// RecoverDir finishes or undoes, in partition directory dir, whatever a
// crash left of a segment swap or deletion, with the rules log.Open applies
// (package segment/repair: Kafka's load passes, and a .swap replaces live
// segments only when it is a valid segment covering every offset of the
// segments it replaces). log.Open runs the same steps itself; RecoverDir is
// for a directory that is not open (a broker's start-up, a tool): it takes
// the partition directory's lock (log.LockFile, which log.Open holds until
// Close) for the time it works, so on a directory a Partition has open (in
// this process or another) it returns an error wrapping log.ErrLocked (and
// vfs.ErrLocked) and changes nothing, rather than completing or undoing
// that Partition's live compaction. The lock file is created when missing
// and left in place, as log.Open leaves it. A partition opened through
// log.OpenDir does not hold log.LockFile (the Dir's lock at the log
// directory's root covers it): do not run RecoverDir inside an open Dir.
//
//  1. every *.deleted file is removed;
//  2. if a .cleaned file exists, the swap never reached its commit point:
//     every .cleaned file, and every .swap file at or above the lowest
//     .cleaned base offset, is removed (the old segments are intact);
//  3. every NNN.log.swap that is a valid segment covering the segments in
//     [NNN, its next offset) completes: those segments' plain files are
//     removed and its files renamed to their plain names; an empty one
//     that may not complete is removed; any other is refused with an error
//     wrapping base.ErrCorrupt that names it, and nothing is changed;
//  4. a leftover .index.swap or .timeindex.swap whose .log already has its
//     plain name is renamed too, any other removed;
//  5. the directory is synced if anything changed.
//
// Indexes that went missing on the way are rebuilt by segment.Open. A nil
// fsys is the operating system's filesystem.
func RecoverDir(fsys segment.FS, dir string) (err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	lock, err := fsys.Lock(filepath.Join(dir, plog.LockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("partlog/compaction: recover %s: %w (%s is held by another owner): %w", dir, plog.ErrLocked, plog.LockFile, err)
	}
	if err != nil {
		return fmt.Errorf("partlog/compaction: recover %s: lock: %w", dir, err)
	}
	defer func() {
		if cerr := lock.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("partlog/compaction: recover %s: unlock: %w", dir, cerr)
		}
	}()
	plan, err := repair.Make(fsys, dir)
	if err != nil {
		return fmt.Errorf("partlog/compaction: recover %s: %w", dir, err)
	}
	if len(plan.Bad) > 0 {
		return fmt.Errorf("partlog/compaction: recover %s: %w", dir, errors.Join(plan.Bad...))
	}
	if !plan.Work() {
		return nil
	}
	if err := plan.Apply(fsys, dir, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("partlog/compaction: recover %s: %w", dir, err)
	}
	return nil
}
