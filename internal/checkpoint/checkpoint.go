// Package checkpoint reads and writes Kafka's text checkpoint files, byte
// for byte as Apache Kafka does (CheckpointFile), and the clean-shutdown
// marker.
//
// # Format
//
// A checkpoint is text, every line ended by "\n":
//
//	0                      <- version (always 0 for these files)
//	3                      <- number of entries
//	__consumer_offsets 28 2  <- entries, fields separated by one space
//	__consumer_offsets 17 1
//	__consumer_offsets 39 18
//
// Kafka keeps recovery-point-offset-checkpoint, replication-offset-checkpoint
// (high watermarks), log-start-offset-checkpoint and cleaner-offset-checkpoint
// per log directory with "topic partition offset" entries ([OffsetFormat]);
// partlog keeps them per partition directory in the same format, with the one
// entry of its own partition ([ReadOffset], [WriteOffset]). Each partition
// also has a leader-epoch-checkpoint of "epoch startOffset" entries
// ([EpochFormat]). [Format] is generic, so other line formats reuse the
// reader and the atomic writer.
//
// Reading is strict: the version must be the expected one, the count must
// match the entries, every field must parse and numbers must be written the
// canonical way (so that a file re-written from what was read is identical
// to the bytes read, but for Kafka's two short files below, which are
// written back with their count line), and no "\r", tab or extra space is
// accepted. Any
// problem is a *base.CorruptionError (wrapping base.ErrCorrupt) naming the
// file, the byte position of the line and the field. Two files that stop
// early are read as Kafka reads them, as no entries: an empty file, which
// Kafka's CheckpointFile creates before its first write (a partition that
// never had a leader epoch holds one), and a file that ends after its
// version line.
//
// Writing is atomic: the bytes go to "name.tmp", which is fsynced, renamed
// over "name", and then the directory is fsynced, all through a vfs.FS.
// After a crash the file holds the old or the new entries, never a mix.
//
// Example:
//
//	err := checkpoint.WriteOffset(fs, filepath.Join(dir, checkpoint.RecoveryPointFile),
//		"myTopic", 0, recoveryPoint)
//	...
//	off, found, err := checkpoint.ReadOffset(fs, filepath.Join(dir, checkpoint.RecoveryPointFile),
//		"myTopic", 0)
//	switch {
//	case errors.Is(err, fs.ErrNotExist), base.IsCorruption(err), !found:
//		off = 0 // recover the whole log
//	case err != nil:
//		return err
//	}
//
// The functions here are safe for concurrent use on different files; two
// writers of one file must be serialized by the caller (both use name.tmp).
package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/internal/base"
)

// File names Kafka uses, frozen: they are part of the on-disk format.
const (
	// RecoveryPointFile holds the recovery point: the offset below which
	// the log is known to be flushed.
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	// ReplicationFile holds the high watermark.
	ReplicationFile = "replication-offset-checkpoint"
	// LogStartOffsetFile holds the log start offset.
	LogStartOffsetFile = "log-start-offset-checkpoint"
	// CleanerOffsetFile holds the offset up to which compaction has cleaned.
	CleanerOffsetFile = "cleaner-offset-checkpoint"
	// LeaderEpochFile holds the leader epoch cache of a partition.
	LeaderEpochFile = "leader-epoch-checkpoint"
	// TmpSuffix is appended to a checkpoint's name while it is written.
	TmpSuffix = vfs.AtomicTmpSuffix
)

// CurrentVersion is the version line of every checkpoint format above.
const CurrentVersion = 0

// MaxFileSize bounds what Read accepts (a larger file is reported as
// corrupt rather than read into memory): 64 MiB, far above any real
// checkpoint.
const MaxFileSize = 64 << 20

// ErrTooManyEntries is returned by writers for a count that does not fit
// Kafka's int32 count line.
var ErrTooManyEntries = errors.New("partlog/checkpoint: too many entries")

// Format says how entries of type T are written as lines.
type Format[T any] struct {
	// Version is the expected and written version line.
	Version int
	// Fields is the number of space-separated fields of each entry line.
	Fields int
	// Append appends e's line to dst, without the "\n". It must write
	// exactly Fields fields separated by single spaces.
	Append func(dst []byte, e T) []byte
	// Parse decodes one line's fields (len(fields) == Fields). A returned
	// *FieldError names the bad field; any error makes the file corrupt.
	Parse func(fields []string) (T, error)
}

// FieldError is what Format.Parse returns for a bad field.
type FieldError struct {
	// Field names the field, e.g. "offset".
	Field string
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// ParseInt parses a field as a canonical base-10 integer of the given bit
// size: an optional "-" then digits, no "+" and no leading zeros, so that
// formatting the value gives the field back.
func ParseInt(field, s string, bitSize int) (int64, error) {
	v, err := strconv.ParseInt(s, 10, bitSize)
	if err != nil {
		return 0, &FieldError{Field: field, Err: fmt.Errorf("not an int%d: %q", bitSize, s)}
	}
	if strconv.FormatInt(v, 10) != s {
		return 0, &FieldError{Field: field, Err: fmt.Errorf("not in canonical form: %q", s)}
	}
	return v, nil
}

// Parse decodes a whole checkpoint file's bytes. name is used in errors.
func Parse[T any](name string, b []byte, f Format[T]) ([]T, error) {
	if len(b) == 0 {
		return nil, nil // Kafka's empty file: no entries
	}
	var pos int64
	line := func(field string) ([]byte, error) {
		if len(b) == 0 {
			return nil, base.CorruptionErrorf(name, pos, field, "missing line")
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, base.CorruptionErrorf(name, pos, field, "line not terminated by a newline")
		}
		l := b[:i]
		b = b[i+1:]
		return l, nil
	}
	header := func(field string) (int64, error) {
		at := pos
		l, err := line(field)
		if err != nil {
			return 0, err
		}
		pos += int64(len(l)) + 1
		v, err := ParseInt(field, string(l), 32)
		if err != nil {
			return 0, base.CorruptionErrorf(name, at, field, "%v", err)
		}
		return v, nil
	}
	version, err := header("version")
	if err != nil {
		return nil, err
	}
	if version != int64(f.Version) {
		return nil, base.CorruptionErrorf(name, 0, "version", "unsupported version %d (want %d)", version, f.Version)
	}
	if len(b) == 0 {
		return nil, nil // Kafka reads a file that ends here as no entries
	}
	countPos := pos
	count, err := header("count")
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, base.CorruptionErrorf(name, countPos, "count", "negative entry count %d", count)
	}
	// Every entry line has at least Fields-1 spaces, Fields characters and
	// a newline: bound the allocation by what the bytes can hold.
	if minLine := int64(2 * max(f.Fields, 1)); count > int64(len(b))/minLine+1 {
		return nil, base.CorruptionErrorf(name, countPos, "count",
			"%d entries announced, %d bytes left", count, len(b))
	}
	entries := make([]T, 0, count)
	fields := make([]string, f.Fields)
	for i := int64(0); len(b) > 0; i++ {
		at := pos
		entry := fmt.Sprintf("entry[%d]", i)
		if i >= count {
			return nil, base.CorruptionErrorf(name, at, entry, "more entries than the count %d", count)
		}
		l, err := line(entry)
		if err != nil {
			return nil, err
		}
		pos += int64(len(l)) + 1
		if err := splitFields(l, fields); err != nil {
			return nil, base.CorruptionErrorf(name, at, entry, "%v", err)
		}
		e, err := f.Parse(fields)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				entry += "." + fe.Field
			}
			return nil, base.CorruptionErrorf(name, at, entry, "%v", err)
		}
		entries = append(entries, e)
	}
	if int64(len(entries)) != count {
		return nil, base.CorruptionErrorf(name, pos, "count", "%d entries announced, %d found", count, len(entries))
	}
	return entries, nil
}

// splitFields splits a line into exactly len(out) non-empty fields
// separated by single spaces; control characters (tab, "\r", NUL, DEL...)
// are rejected.
func splitFields(l []byte, out []string) error {
	for i, c := range l {
		if c <= ' ' && c != ' ' || c == 0x7f {
			return fmt.Errorf("control character %#x at column %d", c, i)
		}
	}
	rest := l
	for i := range out {
		j := bytes.IndexByte(rest, ' ')
		if i == len(out)-1 {
			if j >= 0 {
				return fmt.Errorf("more than %d fields", len(out))
			}
			j = len(rest)
		} else if j < 0 {
			return fmt.Errorf("%d fields, want %d", i+1, len(out))
		}
		if j == 0 {
			return fmt.Errorf("empty field %d (extra space)", i)
		}
		out[i] = string(rest[:j])
		if j < len(rest) {
			rest = rest[j+1:]
		} else {
			rest = nil
		}
	}
	return nil
}

// Append appends the checkpoint file's bytes for entries to dst.
func Append[T any](dst []byte, f Format[T], entries []T) []byte {
	dst = strconv.AppendInt(dst, int64(f.Version), 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(entries)), 10)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = f.Append(dst, e)
		dst = append(dst, '\n')
	}
	return dst
}

// Read reads and parses the checkpoint file at path. A missing file is an
// error that matches fs.ErrNotExist; a malformed one is a
// *base.CorruptionError.
func Read[T any](fs vfs.FS, path string, f Format[T]) ([]T, error) {
	b, err := readAll(fs, path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b, f)
}

func readAll(fs vfs.FS, path string) (b []byte, err error) {
	file, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := file.Close(); err == nil && cerr != nil {
			b, err = nil, cerr
		}
	}()
	fi, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxFileSize {
		return nil, base.CorruptionErrorf(path, -1, "", "file is %d bytes, more than %d", fi.Size(), MaxFileSize)
	}
	b = make([]byte, fi.Size())
	n, err := file.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// Write atomically replaces the checkpoint file at path with entries:
// write path+".tmp", fsync it, rename it over path, fsync the directory.
// When it fails, path holds the old or the new entries (after a crash too),
// and a leftover path+".tmp" may remain; it is overwritten next time.
func Write[T any](fs vfs.FS, path string, f Format[T], entries []T) error {
	if int64(len(entries)) > int64(^uint32(0)>>1) {
		return fmt.Errorf("%w: %d", ErrTooManyEntries, len(entries))
	}
	return WriteAtomic(fs, path, Append(nil, f, entries))
}

// WriteAtomic atomically replaces the file at path with data, the way Write
// does (vfs.WriteFileAtomic: tmp file, fsync, rename, directory fsync).
func WriteAtomic(fs vfs.FS, path string, data []byte) error {
	return vfs.WriteFileAtomic(fs, path, data)
}

// SyncDir fsyncs the directory dir, making its entries durable.
func SyncDir(fs vfs.FS, dir string) error { return vfs.SyncDir(fs, dir) }
