package vfs

import "path/filepath"

// AtomicTmpSuffix is appended to a file's name while WriteFileAtomic writes
// it. A file of that name left behind by a crash holds nothing anyone
// reads; the next WriteFileAtomic of the same name replaces it.
const AtomicTmpSuffix = ".tmp"

// WriteFileAtomic replaces the file name with data so that a crash at any
// point leaves either the old content or the new one, never a mix, and the
// new one for certain once it returns nil: it writes name+AtomicTmpSuffix,
// syncs it, renames it over name and syncs the directory, which makes the
// rename durable. Kafka's checkpoint files are written this way, and so is
// any small state file that must change as one piece (a raft hard state, a
// membership list). On an error name holds the old or the new data.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + AtomicTmpSuffix
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
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	return SyncDir(fsys, filepath.Dir(name))
}

// SyncDir syncs the directory dir, making the names created, renamed and
// removed in it durable.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
