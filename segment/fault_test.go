package segment

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// faultSegment creates a segment on the OS filesystem with 64 batches of
// about 1 KiB (one index entry per batch), sealed or active.
func faultSegment(t *testing.T, sealed bool) *Segment {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	dir := t.TempDir()
	s, err := Create(vfs.Default, dir, 0, Config{IndexIntervalBytes: 1, MaxSegmentBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { mustClose(t, s) })
	require.True(t, s.Mapped())
	for i := range int64(64) {
		mustAppend(t, s, simpleBatch(t, i, 1, 1000+i, 1000))
	}
	if sealed {
		require.NoError(t, s.Seal())
	}
	return s
}

// TestFaultOnMappedReadIsAnError maps a segment, cuts its .log (or index)
// to 0 bytes behind its back with os.Truncate, so that every mapped page
// lies past the end of the file and touching one raises SIGBUS, as a media
// error does; then reads through the segment. Each read must return an
// error wrapping ErrFault that names the file, and the process must live.
func TestFaultOnMappedReadIsAnError(t *testing.T) {
	ops := []struct {
		name string
		op   func(s *Segment) error
	}{
		{"Translate", func(s *Segment) error {
			_, _, _, err := s.Translate(40, 0)
			return err
		}},
		{"Read", func(s *Segment) error {
			_, err := s.Read(10, 1<<20, s.Size(), true)
			return err
		}},
		{"FindOffsetByTimestamp", func(s *Segment) error {
			_, _, _, err := s.FindOffsetByTimestamp(1030, 0)
			return err
		}},
		{"WriteTo a buffer", func(s *Segment) error {
			var buf bytes.Buffer
			_, err := s.WriteTo(&buf, 0, s.Size())
			return err
		}},
		{"TruncateTo", func(s *Segment) error {
			_, err := s.TruncateTo(20)
			return err
		}},
	}
	for _, kind := range []string{LogSuffix, IndexSuffix} {
		for _, sealed := range []bool{true, false} {
			for _, tc := range ops {
				if kind == IndexSuffix && tc.name == "WriteTo a buffer" {
					continue // reads no index
				}
				name := kind + "/active/" + tc.name
				if sealed {
					name = kind + "/sealed/" + tc.name
				}
				t.Run(name, func(t *testing.T) {
					s := faultSegment(t, sealed)
					path := segPath(s.dir, 0, kind)
					require.NoError(t, os.Truncate(path, 0))
					err := tc.op(s)
					require.ErrorIs(t, err, ErrFault)
					var fe *FaultError
					require.ErrorAs(t, err, &fe)
					assert.Equal(t, path, fe.File)
					assert.GreaterOrEqual(t, fe.Off, int64(0))
					// The segment still answers (with the same error)
					// and closes.
					require.ErrorIs(t, tc.op(s), ErrFault)
				})
			}
		}
	}
}

// TestFaultErrorNamesRenamedLog: after ChangeSuffix the fault names the
// file's new path.
func TestFaultErrorNamesRenamedLog(t *testing.T) {
	s := faultSegment(t, true)
	require.NoError(t, s.ChangeSuffix("", DeletedSuffix))
	require.NoError(t, os.Truncate(s.LogPath(), 0))
	_, err := s.Read(0, 1<<20, s.Size(), true)
	var fe *FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, s.LogPath(), fe.File)
	assert.True(t, strings.HasSuffix(fe.File, LogSuffix+DeletedSuffix))
}

// mappedBytes returns the bytes of the process's address space that map
// path, from /proc/self/maps.
func mappedBytes(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != path {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		require.True(t, ok)
		a, err := strconv.ParseUint(lo, 16, 64)
		require.NoError(t, err)
		b, err := strconv.ParseUint(hi, 16, 64)
		require.NoError(t, err)
		total += int64(b - a)
	}
	require.NoError(t, sc.Err())
	return total
}

// TestSealedMappingIsTheFileLength checks the address space a segment's
// .log takes (from /proc/self/maps): the whole window (MaxSegmentBytes)
// while it is active, the file's length rounded up to pages once sealed or
// opened sealed, the window again after Unseal (the sealed mapping is kept
// for readers until the segment is released), nothing after Close.
func TestSealedMappingIsTheFileLength(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	const window = 64 << 20
	page := int64(os.Getpagesize())
	pages := func(n int64) int64 { return (n + page - 1) / page * page }
	dir := t.TempDir()
	cfg := Config{MaxSegmentBytes: window}
	s, err := Create(vfs.Default, dir, 0, cfg)
	require.NoError(t, err)
	for i := range int64(10) {
		mustAppend(t, s, simpleBatch(t, i, 1, 1000+i, 1000))
	}
	path := s.LogPath()
	size := s.Size()
	assert.Equal(t, int64(window), mappedBytes(t, path), "active")
	require.NoError(t, s.Seal())
	assert.Equal(t, pages(size), mappedBytes(t, path), "sealed")
	assert.Len(t, s.mapping(), int(size))
	checkSegment(t, s)
	require.NoError(t, s.Close())
	assert.Zero(t, mappedBytes(t, path), "closed")

	s, err = Open(vfs.Default, dir, 0, cfg)
	require.NoError(t, err)
	assert.Equal(t, pages(size), mappedBytes(t, path), "opened")
	checkSegment(t, s)
	require.NoError(t, s.Unseal())
	assert.Equal(t, window+pages(size), mappedBytes(t, path), "unsealed: window + the retired sealed mapping")
	mustAppend(t, s, simpleBatch(t, 10, 1, 1010, 1000))
	checkSegment(t, s)
	require.NoError(t, s.Close())
	assert.Zero(t, mappedBytes(t, path), "closed")
}

// TestRecoverCutShrinksSealedMapping: a sealed segment whose .log Recover
// cuts is no longer mapped past the cut.
func TestRecoverCutShrinksSealedMapping(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	dir := t.TempDir()
	s, err := Create(vfs.Default, dir, 0, Config{MaxSegmentBytes: 1 << 20})
	require.NoError(t, err)
	for i := range int64(20) {
		mustAppend(t, s, simpleBatch(t, i, 1, 1000+i, 1000))
	}
	require.NoError(t, s.Close())
	// Garbage after 5 valid pages' worth of batches.
	f, err := os.OpenFile(segPath(dir, 0, LogSuffix), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xff}, 100), 10000)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s, err = Open(vfs.Default, dir, 0, Config{MaxSegmentBytes: 1 << 20})
	require.NoError(t, err)
	defer mustClose(t, s)
	res, err := s.Recover(0)
	require.NoError(t, err)
	require.NotNil(t, res.Cause)
	page := int64(os.Getpagesize())
	assert.Equal(t, (res.ValidBytes+page-1)/page*page, mappedBytes(t, s.LogPath()))
	assert.Len(t, s.mapping(), int(res.ValidBytes))
	checkSegment(t, s)
}
