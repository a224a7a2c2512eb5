package raftlog

import (
	"path/filepath"

	"github.com/partlog/partlog/index/vfs"
)

// tmpSuffix is appended to a file's name while writeFileAtomic writes it.
const tmpSuffix = ".tmp"

// writeFileAtomic replaces the file at path with data so that a crash at
// any point leaves the old content or the new one, never a mix: it writes
// path+".tmp", fsyncs it, renames it over path and fsyncs the directory,
// which makes the rename durable. A partition's raft state and the record
// of a snapshot install go through it. When it fails, path holds
// the old or the new data, and a leftover path+".tmp" may remain; the next
// write replaces it.
func writeFileAtomic(fsys vfs.FS, path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := fsys.OpenDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := dir.Sync(); err != nil {
		dir.Close()
		return err
	}
	return dir.Close()
}
