// Package repair decides, without changing anything, what a partition
// directory needs before it can be loaded — what a crash left of a segment
// deletion or a compaction swap — checks that each step is safe, and then
// carries the steps out. Package log's Open is its one user: a partition
// directory is recovered only by opening it.
//
// The rules are Kafka's (LogLoader.removeTempFilesAndCollectSwapFiles and
// the swap passes of LogLoader.load), with one addition: a .swap file
// replaces live segments only when it is a valid segment that covers every
// offset of the segments it replaces. Kafka renames any .swap over the
// segment of the same name; an empty or damaged .swap would then replace a
// synced segment (issue 12, item 11).
//
//  1. *.deleted files are removed: their segments had already left the log.
//  2. If a .cleaned file exists, compaction had not reached its commit
//     point: every .cleaned file and every .swap file whose base offset is
//     at or above the lowest .cleaned base are removed.
//  3. Each remaining NNN.log.swap is walked batch by batch (framing, CRC,
//     increasing offsets: segment.Check, the walk recovery uses). It may complete its swap when every batch is
//     valid and, for every plain segment whose base lies in [NNN, N) (N the
//     swap's next offset; the segment named NNN included), that segment
//     ends at or below N: a compaction's output ends where its last input
//     ended. Then the plain files of those segments are removed and the
//     swap's files renamed to their plain names.
//  4. A .swap that may not complete is Bad: it holds batches the live
//     segments may not have, so the directory is refused; an empty one
//     (no batch) holds nothing and is Empty: it may be removed.
//  5. A leftover index .swap is renamed when its .log has its plain name
//     after step 3, removed otherwise.
//  6. An index file with its plain name (.index, .timeindex, .txnindex)
//     whose segment has no plain .log once steps 1-3 are done is an
//     orphan, removed as Kafka's loader removes it: a crash kept it and
//     lost its .log (a spare's index renames kept, its .log rename lost; a
//     segment deletion or creation cut short). Its content is derived from
//     a .log that is gone, so removing it loses nothing; left in place, a
//     later segment of that base would find it beside its own .log.
package repair

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/segment"
)

// segmentKinds are the per-segment files a swap replaces.
var segmentKinds = []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix}

// Swap is a NNN.log.swap file allowed to complete its swap.
type Swap struct {
	// Base is NNN; Next the swap's next offset.
	Base, Next int64
	// Replaces are the base offsets of the plain segments it replaces.
	Replaces []int64
	// Probe is the walk over the swap's batches.
	Probe Probe
}

// Plan is what a directory needs: the names of the files to remove or
// rename, and what may not be done.
type Plan struct {
	// Names is the directory's listing Make read (names, ascending): an
	// open that changes nothing in the directory before it needs the
	// listing again may use it.
	Names []string
	// Remove are the files steps 1 and 2 remove (names, not paths).
	Remove []string
	// Swaps are the log swaps that complete (step 3), by base.
	Swaps []Swap
	// Empty are .log.swap files holding no batch that may not complete:
	// removing them loses nothing.
	Empty []string
	// Bad describe .log.swap files that may not complete and hold
	// batches: each a *base.CorruptionError naming the file.
	Bad []error
	// Bases are the base offsets of the plain .log files once the plan
	// is carried out (Empty removed), ascending.
	Bases []int64
	// Orphans are the plain index files (.index, .timeindex, .txnindex)
	// whose base is not in Bases, nor a segment a swap replaces (step 6),
	// ascending by name.
	Orphans []string
	// strayIndexSwaps counts index .swap files (step 5).
	strayIndexSwaps int
}

// Work reports whether carrying out the plan changes anything (Bad aside).
func (p *Plan) Work() bool {
	return len(p.Remove) > 0 || len(p.Swaps) > 0 || len(p.Empty) > 0 || p.strayIndexSwaps > 0 || len(p.Orphans) > 0
}

// Make reads dir and returns its plan. It changes nothing: swaps and the
// segments they would replace are only read.
func Make(fsys vfs.FS, dir string) (*Plan, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	p := &Plan{Names: names}
	type file struct {
		name string
		base int64
	}
	var cleaned, swaps, indexes []file
	plain := map[int64]bool{}
	for _, name := range names {
		b, suffix, ok := segment.ParseFileName(name)
		switch {
		case strings.HasSuffix(name, segment.DeletedSuffix):
			p.Remove = append(p.Remove, name)
		case !ok:
		case strings.HasSuffix(suffix, segment.CleanedSuffix):
			cleaned = append(cleaned, file{name, b})
		case strings.HasSuffix(suffix, segment.SwapSuffix):
			swaps = append(swaps, file{name, b})
		case suffix == segment.LogSuffix:
			plain[b] = true
		case suffix == segment.IndexSuffix || suffix == segment.TimeIndexSuffix || suffix == segment.TxnIndexSuffix:
			indexes = append(indexes, file{name, b})
		}
	}
	if len(cleaned) > 0 {
		low := cleaned[0].base
		for _, f := range cleaned {
			low = min(low, f.base)
			p.Remove = append(p.Remove, f.name)
		}
		kept := swaps[:0]
		for _, f := range swaps {
			if f.base >= low {
				p.Remove = append(p.Remove, f.name)
				continue
			}
			kept = append(kept, f)
		}
		swaps = kept
	}
	slices.SortFunc(swaps, func(a, b file) int { return cmpInt(a.base, b.base) })
	live := slices.Sorted(maps.Keys(plain))
	for _, f := range swaps {
		if f.name != segment.FileName(f.base, segment.LogSuffix+segment.SwapSuffix) {
			continue // an index swap: step 5
		}
		pr, err := ProbeLog(fsys, filepath.Join(dir, f.name), "", f.base, true)
		if err != nil {
			return nil, err
		}
		sw := Swap{Base: f.base, Next: pr.Next, Probe: pr}
		var bad error
		if pr.Cause != nil {
			bad = fmt.Errorf("%s is not a valid segment: %w", f.name, pr.Cause)
		}
		for _, b := range live {
			if b < f.base || (b >= pr.Next && b != f.base) {
				continue
			}
			if bad == nil {
				lp := filepath.Join(dir, segment.FileName(b, segment.LogSuffix))
				old, err := ProbeLog(fsys, lp, filepath.Join(dir, segment.FileName(b, segment.IndexSuffix)), b, false)
				if err != nil {
					return nil, err
				}
				if old.Next > pr.Next || (old.Batches > 0 && pr.Batches == 0) {
					bad = base.CorruptionErrorf(filepath.Join(dir, f.name), 0, "nextOffset",
						"the swap ends at offset %d but would replace %s, which ends at offset %d: it is not the compaction of that segment",
						pr.Next, segment.FileName(b, segment.LogSuffix), old.Next)
				}
			}
			sw.Replaces = append(sw.Replaces, b)
		}
		switch {
		case bad == nil:
			p.Swaps = append(p.Swaps, sw)
			for _, b := range sw.Replaces {
				delete(plain, b)
			}
			plain[f.base] = true
		case pr.Batches == 0 && pr.Cause == nil || pr.Size == 0:
			p.Empty = append(p.Empty, f.name)
		default:
			var ce *base.CorruptionError
			if !errors.As(bad, &ce) {
				bad = base.CorruptionErrorf(filepath.Join(dir, f.name), 0, "swap", "%v", bad)
			}
			p.Bad = append(p.Bad, bad)
		}
	}
	for _, f := range swaps {
		if f.name != segment.FileName(f.base, segment.LogSuffix+segment.SwapSuffix) {
			p.strayIndexSwaps++
		}
	}
	p.Bases = slices.Sorted(maps.Keys(plain))
	for _, f := range indexes {
		// A live segment's files are removed by the swap that replaces
		// it, if any; the rest of the live ones stay.
		if !plain[f.base] && !slices.Contains(live, f.base) {
			p.Orphans = append(p.Orphans, f.name)
		}
	}
	slices.Sort(p.Orphans)
	return p, nil
}

// Apply carries the plan out in dir (Bad aside: the caller refuses those
// first), logging each step, and syncs the directory when anything
// changed. Empty swaps are removed.
func (p *Plan) Apply(fsys vfs.FS, dir string, logger *slog.Logger) error {
	changed := false
	remove := func(name string) error {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		changed = true
		return nil
	}
	rename := func(from, to string) error {
		if err := fsys.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			return fmt.Errorf("complete swap of %s: %w", from, err)
		}
		changed = true
		return nil
	}
	for _, name := range p.Remove {
		if strings.HasSuffix(name, segment.CleanedSuffix) || strings.HasSuffix(name, segment.SwapSuffix) {
			logger.Warn("partlog: removing what an unfinished compaction left", "dir", dir, "file", name)
		}
		if err := remove(name); err != nil {
			return err
		}
	}
	for _, name := range p.Empty {
		logger.Warn("partlog: removing an empty .swap file that may not replace a live segment", "dir", dir, "file", name)
		if err := remove(name); err != nil {
			return err
		}
	}
	for _, sw := range p.Swaps {
		for _, b := range sw.Replaces {
			for _, kind := range segmentKinds {
				if err := remove(segment.FileName(b, kind)); err != nil {
					return err
				}
			}
		}
		if err := rename(segment.FileName(sw.Base, segment.LogSuffix)+segment.SwapSuffix, segment.FileName(sw.Base, segment.LogSuffix)); err != nil {
			return err
		}
		logger.Info("partlog: completed a compaction swap", "dir", dir, "segment", sw.Base, "next", sw.Next, "replaced", sw.Replaces)
	}
	for _, name := range p.Orphans {
		logger.Warn("partlog: removing an index file whose segment has no .log", "dir", dir, "file", name)
		if err := remove(name); err != nil {
			return err
		}
	}
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, name := range names {
		present[name] = true
	}
	for _, name := range names {
		b, suffix, ok := segment.ParseFileName(name)
		if !ok || !strings.HasSuffix(suffix, segment.SwapSuffix) || suffix == segment.LogSuffix+segment.SwapSuffix {
			continue
		}
		if present[segment.FileName(b, segment.LogSuffix)] {
			if err := rename(name, strings.TrimSuffix(name, segment.SwapSuffix)); err != nil {
				return err
			}
			continue
		}
		if err := remove(name); err != nil {
			return err
		}
	}
	if changed {
		return checkpoint.SyncDir(fsys, dir)
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
