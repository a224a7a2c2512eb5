package checkpoint

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/partlog/partlog/index/vfs"
)

// CleanShutdownFile is the marker Kafka writes after every log closed
// cleanly and deletes at startup before loading, so that a crash during
// loading counts as unclean. Frozen: part of the on-disk format.
const CleanShutdownFile = ".kafka_cleanshutdown"

// MarkCleanShutdown creates the empty clean-shutdown marker in dir and
// makes it durable (file fsync, then directory fsync). Call it after
// everything else in dir is synced and closed.
func MarkCleanShutdown(fsys vfs.FS, dir string) error {
	f, err := fsys.Create(filepath.Join(dir, CleanShutdownFile))
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SyncDir(fsys, dir)
}

// HasCleanShutdown reports whether dir holds the clean-shutdown marker.
func HasCleanShutdown(fsys vfs.FS, dir string) (bool, error) {
	_, err := fsys.Stat(filepath.Join(dir, CleanShutdownFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// RemoveCleanShutdown removes the clean-shutdown marker from dir, if there,
// and makes the removal durable with a directory fsync, so that a crash
// from now on is seen as unclean. Call it at open, before loading.
func RemoveCleanShutdown(fsys vfs.FS, dir string) error {
	err := fsys.Remove(filepath.Join(dir, CleanShutdownFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		return nil
	}
	return SyncDir(fsys, dir)
}
