package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/partlog/partlog/index/vfs"
)

// DirRemoteStorage is a RemoteStorage in a directory: a mounted network
// file system, a second disk, or a local directory in tests and
// benchmarks. Each copy is a directory "<topic>-<partition>/<id>" below the
// root holding the segment and one file per RemoteIndexKind. A copy is
// written under "<id>.copying" and renamed into place once every file is
// synced, so a copy interrupted by a crash is never read as complete.
//
// Errors of the filesystem other than a missing copy wrap
// ErrRemoteUnavailable, so the log retries them.
type DirRemoteStorage struct {
	root string
	fs   vfs.FS
}

// NewDirRemoteStorage returns a DirRemoteStorage storing copies below root
// through fsys (nil means vfs.Default). root is created on the first copy.
func NewDirRemoteStorage(root string, fsys vfs.FS) *DirRemoteStorage {
	if fsys == nil {
		fsys = vfs.Default
	}
	return &DirRemoteStorage{root: root, fs: fsys}
}

const (
	remoteDirSegmentFile = "segment"
	remoteDirCopyingExt  = ".copying"
	remoteDirCopyChunk   = 1 << 20
)

var _ RemoteStorage = (*DirRemoteStorage)(nil)

func (s *DirRemoteStorage) partitionDir(tp TopicPartition) string {
	return filepath.Join(s.root, tp.String())
}

func (s *DirRemoteStorage) copyDir(id RemoteSegmentID) string {
	return filepath.Join(s.partitionDir(id.TopicPartition), id.ID)
}

// remoteDirErr wraps a filesystem error of op on id in ErrRemoteUnavailable.
func remoteDirErr(op string, id RemoteSegmentID, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrRemoteUnavailable, op, id, err)
}

func checkRemoteID(id RemoteSegmentID) error {
	if !id.Valid() {
		return fmt.Errorf("%w: %q in %q-%d", ErrRemoteInvalidID, id.ID, id.TopicPartition.Topic, id.TopicPartition.Partition)
	}
	return nil
}

// syncDir makes the entries of dir durable.
func (s *DirRemoteStorage) syncDir(dir string) error {
	d, err := s.fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// ensureDir creates dir and its missing parents durably (each new
// directory's parent is synced).
func (s *DirRemoteStorage) ensureDir(dir string) error {
	if _, err := s.fs.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.ensureDir(parent); err != nil {
			return err
		}
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return s.syncDir(parent)
}

// CopySegment implements RemoteStorage.
func (s *DirRemoteStorage) CopySegment(ctx context.Context, md RemoteSegmentMetadata, data RemoteSegmentData) error {
	id := md.ID
	if err := checkRemoteID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("partlog/log: copy %s: %w", id, err)
	}
	pdir := s.partitionDir(id.TopicPartition)
	tmp := s.copyDir(id) + remoteDirCopyingExt
	if err := s.ensureDir(pdir); err != nil {
		return remoteDirErr("copy", id, err)
	}
	if err := s.fs.RemoveAll(tmp); err != nil {
		return remoteDirErr("copy", id, err)
	}
	if err := s.fs.MkdirAll(tmp, 0o755); err != nil {
		return remoteDirErr("copy", id, err)
	}
	if err := s.writeSegment(ctx, filepath.Join(tmp, remoteDirSegmentFile), md, data.Segment); err != nil {
		return err
	}
	for _, k := range RemoteIndexKinds {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("partlog/log: copy %s: %w", id, err)
		}
		if err := s.writeFile(filepath.Join(tmp, k.String()), data.Index(k)); err != nil {
			return remoteDirErr("copy "+k.String()+" index of", id, err)
		}
	}
	if err := s.syncDir(tmp); err != nil {
		return remoteDirErr("copy", id, err)
	}
	// A re-copy replaces the earlier one: a directory cannot be renamed
	// over a non-empty one.
	final := s.copyDir(id)
	if err := s.fs.RemoveAll(final); err != nil {
		return remoteDirErr("copy", id, err)
	}
	if err := s.fs.Rename(tmp, final); err != nil {
		return remoteDirErr("copy", id, err)
	}
	if err := s.syncDir(pdir); err != nil {
		return remoteDirErr("copy", id, err)
	}
	return nil
}

func (s *DirRemoteStorage) writeSegment(ctx context.Context, name string, md RemoteSegmentMetadata, r io.Reader) (err error) {
	f, err := s.fs.Create(name)
	if err != nil {
		return remoteDirErr("copy", md.ID, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = remoteDirErr("copy", md.ID, cerr)
		}
	}()
	var n int64
	if r != nil {
		buf := make([]byte, min(max(md.Size, 1), remoteDirCopyChunk))
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("partlog/log: copy %s: %w", md.ID, err)
			}
			m, rerr := r.Read(buf)
			if m > 0 {
				if n+int64(m) > md.Size {
					return fmt.Errorf("partlog/log: copy %s: segment reader holds more than its size %d", md.ID, md.Size)
				}
				if _, err := f.Write(buf[:m]); err != nil {
					return remoteDirErr("copy", md.ID, err)
				}
				n += int64(m)
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return fmt.Errorf("partlog/log: copy %s: reading the segment: %w", md.ID, rerr)
			}
		}
	}
	if n != md.Size {
		return fmt.Errorf("partlog/log: copy %s: segment reader held %d bytes, not its size %d", md.ID, n, md.Size)
	}
	if err := f.Sync(); err != nil {
		return remoteDirErr("copy", md.ID, err)
	}
	return nil
}

func (s *DirRemoteStorage) writeFile(name string, b []byte) error {
	f, err := s.fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// openCopyFile opens a file of a complete copy.
func (s *DirRemoteStorage) openCopyFile(ctx context.Context, op string, id RemoteSegmentID, name string) (vfs.File, int64, error) {
	if err := checkRemoteID(id); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("partlog/log: %s %s: %w", op, id, err)
	}
	f, err := s.fs.Open(filepath.Join(s.copyDir(id), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrRemoteSegmentNotFound, id)
	}
	if err != nil {
		return nil, 0, remoteDirErr(op, id, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, remoteDirErr(op, id, err)
	}
	return f, fi.Size(), nil
}

// sectionReadCloser reads a section of a file and closes the file.
type sectionReadCloser struct {
	*io.SectionReader
	f vfs.File
}

func (r sectionReadCloser) Close() error { return r.f.Close() }

// FetchSegment implements RemoteStorage.
func (s *DirRemoteStorage) FetchSegment(ctx context.Context, id RemoteSegmentID, start, end int64) (io.ReadCloser, error) {
	f, size, err := s.openCopyFile(ctx, "fetch", id, remoteDirSegmentFile)
	if err != nil {
		return nil, err
	}
	if end < 0 {
		end = size
	}
	if start < 0 || start > size || end < start || end > size {
		_ = f.Close()
		return nil, fmt.Errorf("%w: [%d, %d) of %s holding %d bytes", ErrRemoteInvalidRange, start, end, id, size)
	}
	return sectionReadCloser{io.NewSectionReader(f, start, end-start), f}, nil
}

// FetchIndex implements RemoteStorage.
func (s *DirRemoteStorage) FetchIndex(ctx context.Context, id RemoteSegmentID, k RemoteIndexKind) (io.ReadCloser, error) {
	if !slices.Contains(RemoteIndexKinds, k) {
		return nil, fmt.Errorf("partlog/log: fetch %s of %s: unknown index kind", k, id)
	}
	f, size, err := s.openCopyFile(ctx, "fetch "+k.String()+" index of", id, k.String())
	if err != nil {
		return nil, err
	}
	return sectionReadCloser{io.NewSectionReader(f, 0, size), f}, nil
}

// DeleteSegment implements RemoteStorage.
func (s *DirRemoteStorage) DeleteSegment(ctx context.Context, id RemoteSegmentID) error {
	if err := checkRemoteID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("partlog/log: delete %s: %w", id, err)
	}
	pdir := s.partitionDir(id.TopicPartition)
	if _, err := s.fs.Stat(pdir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, name := range []string{s.copyDir(id), s.copyDir(id) + remoteDirCopyingExt} {
		if err := s.fs.RemoveAll(name); err != nil {
			return remoteDirErr("delete", id, err)
		}
	}
	if err := s.syncDir(pdir); err != nil {
		return remoteDirErr("delete", id, err)
	}
	return nil
}

// ListSegments implements RemoteStorage.
func (s *DirRemoteStorage) ListSegments(ctx context.Context, tp TopicPartition) ([]RemoteSegmentID, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("partlog/log: list %s: %w", tp, err)
	}
	names, err := s.fs.List(s.partitionDir(tp))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: list %s: %w", ErrRemoteUnavailable, tp, err)
	}
	var ids []RemoteSegmentID
	for _, name := range names {
		id := RemoteSegmentID{TopicPartition: tp, ID: strings.TrimSuffix(name, remoteDirCopyingExt)}
		if !id.Valid() || slices.Contains(ids, id) {
			continue
		}
		ids = append(ids, id)
	}
	return ids, nil
}
