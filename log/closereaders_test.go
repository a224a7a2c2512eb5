package log_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// rewriteFrom truncates p to offset 5 and appends batches larger than the
// ones readRecordsToKeep appended (so that the .log grows past every byte
// a reader of the old batches maps): what a second owner of the
// directory would do to the files an old Records maps.
func rewriteFrom(t *testing.T, p *plog.Partition) {
	t.Helper()
	require.NoError(t, p.TruncateTo(5))
	for i := range 20 {
		_, err := p.AppendBatch(logtest.MakeBatch(8, 200, 1_700_000_100_000+int64(i), byte(100+i)))
		require.NoError(t, err)
	}
}

// readRecordsToKeep appends 20 batches to p and returns a Records of all
// of them, which the test keeps open across p's Close, with a copy of its
// bytes.
func readRecordsToKeep(t *testing.T, p *plog.Partition) (plog.Records, []byte) {
	t.Helper()
	for i := range 20 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 100, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, int64(80), r.NextOffset())
	return r, bytes.Clone(r.Bytes())
}

// sameBytes reports whether a Records' bytes are still want, naming the
// first byte that changed (a diff of whole record sets is unreadable).
func sameBytes(t *testing.T, want []byte, r plog.Records, msg string) bool {
	t.Helper()
	got := r.Bytes()
	if bytes.Equal(want, got) {
		return true
	}
	at := 0
	for at < min(len(want), len(got)) && want[at] == got[at] {
		at++
	}
	return assert.Fail(t, msg, "%d bytes, want %d; the first difference is at byte %d", len(got), len(want), at)
}

// TestRecordsOutliveCloseKeepTheLock: a Records kept open across Close
// keeps the directory's lock, so that nobody reopens the directory and
// truncates or rewrites the files it maps (DESIGN.md law 9). The reopen is
// refused with ErrLocked while it is open (the error says why), succeeds
// once it is closed, and the Records' bytes never change. Before, Close
// released the lock at once: a second Open truncated the same inode and
// the old Records showed the new owner's bytes (and reading past the cut
// would fault).
func TestRecordsOutliveCloseKeepTheLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	r, want := readRecordsToKeep(t, p)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = r.Close()
		}
	})
	require.NoError(t, p.Close())

	q, err := plog.Open(dir, plog.Config{})
	if err == nil {
		// The bug: a second owner while the Records maps the files.
		rewriteFrom(t, q)
		sameBytes(t, want, r, "the old Records shows the new owner's bytes")
		require.NoError(t, q.Close())
	}
	require.ErrorIs(t, err, plog.ErrLocked)
	require.ErrorContains(t, err, "readers of the closed partition")
	require.True(t, sameBytes(t, want, r, "the Records' bytes changed"))
	// Still refused: a refused Open takes nothing over.
	_, err = plog.Open(dir, plog.Config{})
	require.ErrorIs(t, err, plog.ErrLocked)
	require.True(t, sameBytes(t, want, r, "the Records' bytes changed"))

	closed = true
	require.NoError(t, r.Close())
	q, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	rewriteFrom(t, q)
	require.NoError(t, q.Close())
}

// TestDirRecordsOutliveCloseKeepTheLock is TestRecordsOutliveCloseKeepTheLock
// for a Dir: a Records of one of its partitions, kept open across
// Dir.Close, keeps the log directory's lock (OpenDir, and Open of the
// partition's directory, are refused with ErrLocked) until it is closed;
// and within an open Dir a partition closed while its Records is open is
// not reopened (OpenPartition) until that Records is closed. Before,
// both reopens succeeded and truncated the files the Records maps.
func TestDirRecordsOutliveCloseKeepTheLock(t *testing.T) {
	root := t.TempDir()
	d, err := plog.OpenDir(root, plog.DirConfig{})
	require.NoError(t, err)
	p, err := d.CreatePartition("orders", 0)
	require.NoError(t, err)
	r, want := readRecordsToKeep(t, p)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = r.Close()
		}
	})

	// A partition closed in the open Dir.
	require.NoError(t, p.Close())
	np, err := d.OpenPartition("orders", 0)
	if err == nil {
		rewriteFrom(t, np)
		sameBytes(t, want, r, "the old Records shows the reopened partition's bytes")
		require.NoError(t, d.Close())
	}
	require.ErrorIs(t, err, plog.ErrLocked)
	require.ErrorContains(t, err, "readers of the closed partition")
	require.True(t, sameBytes(t, want, r, "the Records' bytes changed"))

	// The Dir closed.
	require.NoError(t, d.Close())
	d2, err := plog.OpenDir(root, plog.DirConfig{})
	if err == nil {
		rewriteFrom(t, d2.Partition("orders", 0))
		sameBytes(t, want, r, "the old Records shows the new Dir's bytes")
		require.NoError(t, d2.Close())
	}
	require.ErrorIs(t, err, plog.ErrLocked)
	require.ErrorContains(t, err, "readers of the closed Dir's partitions")
	_, err = plog.Open(filepath.Join(root, "orders-0"), plog.Config{})
	require.ErrorIs(t, err, plog.ErrLocked)
	require.ErrorContains(t, err, "readers of the closed Dir's partitions")
	require.True(t, sameBytes(t, want, r, "the Records' bytes changed"))

	closed = true
	require.NoError(t, r.Close())
	d2, err = plog.OpenDir(root, plog.DirConfig{})
	require.NoError(t, err)
	rewriteFrom(t, d2.Partition("orders", 0))
	require.NoError(t, d2.Close())
}
