package compaction

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// segmentKinds are the per-segment files a swap replaces.
var segmentKinds = []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix}

// RecoverDir finishes or undoes, in partition directory dir, whatever a
// crash left of a segment swap or deletion, with Kafka's load passes. It
// must run before the partition is opened (the log package is asked to
// call it from Open; until then, call it yourself):
//
//  1. every *.deleted file is removed;
//  2. if a .cleaned file exists, the swap never reached its commit point:
//     every .cleaned file, and every .swap file at or above the lowest
//     .cleaned base offset, is removed (the old segments are intact);
//  3. every NNN.log.swap is a complete new segment (it was fsynced before
//     it was renamed): the segments it replaces, the plain files of every
//     base offset in [NNN, its next offset), are removed and its files
//     renamed to their plain names;
//  4. a leftover .index.swap or .timeindex.swap whose .log already has its
//     plain name is renamed too;
//  5. the directory is synced if anything changed.
//
// Indexes that went missing on the way are rebuilt by segment.Open. A nil
// fsys is the operating system's filesystem.
func RecoverDir(fsys segment.FS, dir string) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("partlog/compaction: recover %s: %w", dir, err)
	}
	changed := false
	remove := func(name string) error {
		err := fsys.Remove(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("partlog/compaction: recover %s: remove %s: %w", dir, name, err)
		}
		changed = true
		return nil
	}
	type file struct {
		name, kind string
		base       int64
	}
	var plain, cleaned, swaps []file
	for _, name := range names {
		base, suffix, ok := segment.ParseFileName(name)
		if !ok {
			if strings.HasSuffix(name, segment.DeletedSuffix) {
				if err := remove(name); err != nil {
					return err
				}
			}
			continue
		}
		kind, temp := suffix, ""
		if i := strings.LastIndexByte(suffix, '.'); i > 0 {
			kind, temp = suffix[:i], suffix[i:]
		}
		f := file{name: name, kind: kind, base: base}
		switch temp {
		case segment.DeletedSuffix:
			if err := remove(name); err != nil {
				return err
			}
		case segment.CleanedSuffix:
			cleaned = append(cleaned, f)
		case segment.SwapSuffix:
			swaps = append(swaps, f)
		default:
			plain = append(plain, f)
		}
	}
	if len(cleaned) > 0 {
		low := slices.MinFunc(cleaned, func(a, b file) int { return cmpInt(a.base, b.base) }).base
		for _, f := range cleaned {
			if err := remove(f.name); err != nil {
				return err
			}
		}
		kept := swaps[:0]
		for _, f := range swaps {
			if f.base >= low {
				if err := remove(f.name); err != nil {
					return err
				}
				continue
			}
			kept = append(kept, f)
		}
		swaps = kept
	}
	slices.SortFunc(swaps, func(a, b file) int { return cmpInt(a.base, b.base) })
	plainLog := make(map[int64]bool)
	for _, f := range plain {
		if f.kind == segment.LogSuffix {
			plainLog[f.base] = true
		}
	}
	for _, f := range swaps {
		if f.kind != segment.LogSuffix {
			continue
		}
		seg, err := segment.OpenWithSuffix(fsys, dir, f.base, segment.SwapSuffix, segment.Config{DisableMmap: true, MaxIndexBytes: 1 << 20})
		if err != nil {
			return fmt.Errorf("partlog/compaction: recover %s: open %s: %w", dir, f.name, err)
		}
		next := seg.NextOffset()
		if err := seg.Close(); err != nil {
			return fmt.Errorf("partlog/compaction: recover %s: close %s: %w", dir, f.name, err)
		}
		for _, p := range plain {
			if p.base >= f.base && (p.base < next || p.base == f.base) && slices.Contains(segmentKinds, p.kind) {
				if err := remove(p.name); err != nil {
					return err
				}
				delete(plainLog, p.base)
			}
		}
		plainLog[f.base] = true
	}
	// Rename every .swap file whose segment is now plain (opening a
	// .swap segment above may have rebuilt its indexes, so list again).
	names, err = fsys.List(dir)
	if err != nil {
		return fmt.Errorf("partlog/compaction: recover %s: %w", dir, err)
	}
	for _, name := range names {
		base, suffix, ok := segment.ParseFileName(name)
		if !ok || !strings.HasSuffix(suffix, segment.SwapSuffix) {
			continue
		}
		if !plainLog[base] {
			// An index .swap without any .log: nothing to attach to.
			if err := remove(name); err != nil {
				return err
			}
			continue
		}
		to := strings.TrimSuffix(name, segment.SwapSuffix)
		if err := fsys.Rename(filepath.Join(dir, name), filepath.Join(dir, to)); err != nil {
			return fmt.Errorf("partlog/compaction: recover %s: rename %s: %w", dir, name, err)
		}
		changed = true
	}
	if changed {
		if err := checkpoint.SyncDir(fsys, dir); err != nil {
			return fmt.Errorf("partlog/compaction: recover %s: %w", dir, err)
		}
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
