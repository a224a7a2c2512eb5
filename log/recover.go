package log

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// Segment file kinds a swap may replace (Kafka's LogFileUtils suffixes).
var segmentKinds = []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix}

// cleanDir finishes or undoes what a crash interrupted in dir, with Kafka's
// rules (LogLoader.removeTempFilesAndCollectSwapFiles and
// completeSwapOperations), before Open lists the segments:
//
//  1. Files with the .deleted suffix are removed: their segments were
//     already gone from the log.
//  2. If any .cleaned file exists, compaction had not reached its commit
//     point: every .cleaned file, and every .swap file whose base offset is
//     at or above the lowest .cleaned base, is removed.
//  3. Each remaining NNN.log.swap is a compacted segment past the commit
//     point: it is opened to find its next offset N, the plain files of the
//     segments whose base lies in [NNN, N) (which it replaces) are removed,
//     and its files are renamed to their plain names.
//  4. A leftover index .swap whose .log has its plain name (the crash hit
//     between renames) is renamed too; any other stray .swap is removed.
//  5. The directory is synced when anything changed.
func cleanDir(fs vfs.FS, dir string, cfg segment.Config, logger *slog.Logger) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	changed := false
	remove := func(name string) error {
		if err := fs.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, errNotExist) {
			return err
		}
		changed = true
		return nil
	}
	type file struct {
		name   string
		base   int64
		suffix string // the whole suffix, ".log.swap"
	}
	var swaps []file
	present := map[string]bool{}
	minCleaned := int64(-1)
	for _, name := range names {
		present[name] = true
		base, suffix, ok := segment.ParseFileName(name)
		switch {
		case strings.HasSuffix(name, segment.DeletedSuffix):
			if err := remove(name); err != nil {
				return err
			}
		case !ok:
		case strings.HasSuffix(suffix, segment.CleanedSuffix):
			if minCleaned < 0 || base < minCleaned {
				minCleaned = base
			}
		case strings.HasSuffix(suffix, segment.SwapSuffix):
			swaps = append(swaps, file{name, base, suffix})
		}
	}
	if minCleaned >= 0 {
		logger.Warn("partlog/log: removing an unfinished compaction", "dir", dir, "from", minCleaned)
		for _, name := range names {
			base, suffix, ok := segment.ParseFileName(name)
			if !ok {
				continue
			}
			if strings.HasSuffix(suffix, segment.CleanedSuffix) ||
				(strings.HasSuffix(suffix, segment.SwapSuffix) && base >= minCleaned) {
				if err := remove(name); err != nil {
					return err
				}
				present[name] = false
			}
		}
	}
	// Plain .log files by base, to find the segments a swap replaces.
	var plain []int64
	for _, name := range names {
		if base, suffix, ok := segment.ParseFileName(name); ok && suffix == segment.LogSuffix && present[name] {
			plain = append(plain, base)
		}
	}
	for _, sw := range swaps {
		if !present[sw.name] || sw.suffix != segment.LogSuffix+segment.SwapSuffix {
			continue
		}
		seg, err := segment.OpenWithSuffix(fs, dir, sw.base, segment.SwapSuffix, cfg)
		if err != nil {
			return fmt.Errorf("open swap segment %s: %w", sw.name, err)
		}
		next := seg.NextOffset()
		if err := seg.Close(); err != nil {
			return fmt.Errorf("close swap segment %s: %w", sw.name, err)
		}
		for _, b := range plain {
			if b < sw.base || (b >= next && b != sw.base) {
				continue
			}
			for _, kind := range segmentKinds {
				if err := remove(segment.FileName(b, kind)); err != nil {
					return err
				}
			}
		}
		for _, kind := range segmentKinds {
			from := segment.FileName(sw.base, kind) + segment.SwapSuffix
			if !present[from] && kind != segment.LogSuffix {
				// OpenWithSuffix may have rebuilt a missing index.
				if _, err := fs.Stat(filepath.Join(dir, from)); err != nil {
					continue
				}
			}
			if err := fs.Rename(filepath.Join(dir, from), filepath.Join(dir, segment.FileName(sw.base, kind))); err != nil {
				return fmt.Errorf("complete swap of %s: %w", sw.name, err)
			}
			present[from] = false
			changed = true
		}
		logger.Info("partlog/log: completed a compaction swap", "dir", dir, "segment", sw.base, "next", next)
	}
	for _, sw := range swaps {
		if !present[sw.name] {
			continue
		}
		if present[segment.FileName(sw.base, segment.LogSuffix)] && sw.suffix != segment.LogSuffix+segment.SwapSuffix {
			to := strings.TrimSuffix(sw.name, segment.SwapSuffix)
			if err := fs.Rename(filepath.Join(dir, sw.name), filepath.Join(dir, to)); err != nil {
				return fmt.Errorf("complete swap of %s: %w", sw.name, err)
			}
			changed = true
			continue
		}
		if err := remove(sw.name); err != nil {
			return err
		}
	}
	if changed {
		return syncDir(fs, dir)
	}
	return nil
}
