package vfs

import (
	"os"
	"sort"
)

// osFS is the operating system's filesystem.
type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := openFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := openFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := openFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return osDir{osFile{f}}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	f, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	cerr := f.Close()
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	sort.Strings(names)
	return names, nil
}

// osFile is an *os.File with the platform's data sync and preallocation.
type osFile struct{ *os.File }

func (f osFile) Sync() error                    { return datasync(f.File) }
func (f osFile) Preallocate(off, n int64) error { return preallocate(f.File, off, n) }
func (f osFile) Fd() uintptr                    { return f.File.Fd() }

// osDir is a directory handle: Sync uses fsync, not fdatasync, since a
// directory's entries are its metadata.
type osDir struct{ osFile }

func (d osDir) Sync() error { return d.File.Sync() }
