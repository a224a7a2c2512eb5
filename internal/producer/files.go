package producer

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/partlog/partlog/index/vfs"
)

// Snapshot files of a directory. The partition owns its directory and
// decides when a snapshot is written or removed; these functions only
// name, list, read and write the files. Their errors are the filesystem's,
// which name the file; callers add their context.

// MaxSnapshotBytes bounds how much of a snapshot file ReadSnapshotFile
// reads (2 GiB, a count of 46-byte entries that fits an int32): a longer
// file is read that far and then fails to decode.
const MaxSnapshotBytes = 1 << 31

// ListSnapshots returns the offsets of the snapshot files in dir,
// ascending; other names are ignored.
func ListSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	return SnapshotOffsets(names), nil
}

// SnapshotOffsets returns the offsets of the snapshot file names among
// names (ParseSnapshotFileName), ascending: ListSnapshots of a listing
// already read.
func SnapshotOffsets(names []string) []int64 {
	var out []int64
	for _, n := range names {
		if off, ok := ParseSnapshotFileName(n); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out
}

// SnapshotPath returns the path of the snapshot file at offset in dir.
func SnapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, SnapshotFileName(offset))
}

// ReadSnapshotFile returns the bytes of the snapshot file at offset in dir
// (at most MaxSnapshotBytes), undecoded. A missing file gives an error
// wrapping fs.ErrNotExist.
func ReadSnapshotFile(fsys vfs.FS, dir string, offset int64) ([]byte, error) {
	f, err := fsys.Open(SnapshotPath(dir, offset))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxSnapshotBytes))
}

// WriteSnapshotFile writes data as the snapshot file at offset in dir,
// replacing one that is there, and fsyncs it when sync is set. The
// directory entry is the caller's to sync. A crash may leave a torn file:
// its CRC then fails to decode, and a partition falls back to an older
// snapshot.
func WriteSnapshotFile(fsys vfs.FS, dir string, offset int64, data []byte, sync bool) error {
	f, err := fsys.Create(SnapshotPath(dir, offset))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RemoveSnapshotFile removes the snapshot file at offset in dir; a file
// already gone is not an error. The directory entry is the caller's to
// sync.
func RemoveSnapshotFile(fsys vfs.FS, dir string, offset int64) error {
	if err := fsys.Remove(SnapshotPath(dir, offset)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
