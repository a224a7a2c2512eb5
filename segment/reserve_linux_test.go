//go:build linux

// The disk reservations of a segment's .log on Linux (fallocate): what a
// spare holds past its length, and how Open, the index trim after Seal and
// Close release it.

package segment

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// allocated returns the bytes of disk the named file holds (st_blocks).
func allocated(t *testing.T, path string) int64 {
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Blocks * 512
}

// reservedSegment creates a spare in a new directory on the operating
// system's filesystem (skipping the test where it does not preallocate),
// adopts it at base 500 and appends n batches of 3 records to it: a
// segment whose .log holds its reservation past its length. It returns
// the segment, its directory and configuration, and its next offset.
func reservedSegment(t *testing.T, n int) (s *Segment, dir string, cfg Config, next int64) {
	t.Helper()
	dir = t.TempDir()
	cfg = Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20}
	s, err := CreateSpare(vfs.Default, dir, cfg)
	require.NoError(t, err)
	if allocated(t, s.LogPath()) < 1<<20 {
		require.NoError(t, s.Discard())
		t.Skip("the filesystem does not preallocate (no fallocate)")
	}
	require.NoError(t, s.AdoptAs(500))
	next = 500
	for i := range n {
		b := simpleBatch(t, next, 3, int64(1000+i), 100)
		mustAppend(t, s, b)
		next = b.NextOffset()
	}
	return s, dir, cfg, next
}

// assertReleased asserts that the file at path holds no more disk than its
// size bytes need (with the margin reservedPastEnd leaves).
func assertReleased(t *testing.T, path string, size int64, msg string) {
	t.Helper()
	assert.LessOrEqual(t, allocated(t, path), (size+4095)&^4095+64<<10, msg)
}

// TestSpareReservationOnDisk: on the operating system's filesystem the
// spare's .log holds its reservation past its length; the files as a
// crash leaves them (the adopted segment's, read by another Open while
// the writer still holds them, so that nothing was closed or trimmed)
// open and recover to exactly the appended batches, whatever is
// allocated past the end; Open releases such a reservation; and Close
// releases one made anew, without changing the length or the bytes
// (TestTrimReleasesReservation: the index trim after Seal).
func TestSpareReservationOnDisk(t *testing.T) {
	s, dir, cfg, next := reservedSegment(t, 20)
	want := checkSegment(t, s)
	logBytes := readAll(t, vfs.Default, s.LogPath())
	assert.Greater(t, allocated(t, s.LogPath()), s.Size()+64<<10, "reserved past the end")

	// The files as they are: open and recover another segment over them.
	crashed, err := Open(vfs.Default, dir, 500, cfg)
	require.NoError(t, err)
	assertReleased(t, s.LogPath(), s.Size(), "released by Open")
	require.NoError(t, crashed.Unseal())
	res, err := crashed.Recover(1 << 20)
	require.NoError(t, err)
	assert.Equal(t, s.Size(), res.ValidBytes)
	assert.Equal(t, want, checkSegment(t, crashed))
	assert.Equal(t, next, crashed.NextOffset())
	require.NoError(t, crashed.Seal())
	require.NoError(t, crashed.TrimSealedIndexes())
	assert.False(t, crashed.reserved.Load())
	assertReleased(t, s.LogPath(), s.Size(), "released by the trim")
	assert.Equal(t, logBytes, readAll(t, vfs.Default, s.LogPath()), "the bytes are unchanged")
	mustClose(t, crashed)

	// A reservation made anew is released by Close of the active segment.
	require.NoError(t, s.logFile.Preallocate(0, 1<<20))
	s.reserved.Store(true)
	size := s.Size()
	mustClose(t, s)
	assertReleased(t, segPath(dir, 500, LogSuffix), size, "released by Close")
	assert.Equal(t, logBytes, readAll(t, vfs.Default, segPath(dir, 500, LogSuffix)))
}

// TestOpenReleasesReservationACrashLeft: a crash after a roll sealed a
// segment adopted from a spare, and before the background index trim
// released the .log's reservation, leaves that segment's blocks reserved
// past its length. After the restart the segment is not the last one (no
// Unseal notices it, no trim is pending, nothing would ever cut it): Open
// releases the reservation, without changing the length or the bytes.
func TestOpenReleasesReservationACrashLeft(t *testing.T) {
	s, dir, cfg, next := reservedSegment(t, 10)
	require.NoError(t, s.Seal()) // the roll; the crash comes before TrimSealedIndexes
	require.True(t, s.TrimPending())
	logBytes := readAll(t, vfs.Default, s.LogPath())
	require.Greater(t, allocated(t, s.LogPath()), s.Size()+64<<10, "reserved past the end")

	// The restart opens the files as the crash left them, as a sealed
	// segment below the last one.
	reopened, err := Open(vfs.Default, dir, 500, cfg)
	require.NoError(t, err)
	assertReleased(t, s.LogPath(), s.Size(), "Open released the reservation")
	assert.Equal(t, logBytes, readAll(t, vfs.Default, s.LogPath()), "the bytes are unchanged")
	assert.Equal(t, next, reopened.NextOffset())
	mustClose(t, reopened)
	mustClose(t, s)
}

// TestTrimReleasesReservation: the index trim after Seal releases the
// reservation of a segment adopted from a spare, without changing the
// length or the bytes.
func TestTrimReleasesReservation(t *testing.T) {
	s, _, _, _ := reservedSegment(t, 1)
	require.NoError(t, s.Seal())
	logBytes := readAll(t, vfs.Default, s.LogPath())
	require.Greater(t, allocated(t, s.LogPath()), s.Size()+64<<10, "reserved past the end")
	require.NoError(t, s.TrimSealedIndexes())
	assert.False(t, s.reserved.Load())
	assertReleased(t, s.LogPath(), s.Size(), "released by the trim")
	assert.Equal(t, logBytes, readAll(t, vfs.Default, s.LogPath()))
	mustClose(t, s)
}

// TestReleaseKeepsModTime: releasing a reservation (the index trim after
// Seal, Close of the active segment, Open of one a crash left) keeps the
// .log's modification time, which retention ages a segment without
// usable timestamps by; Linux's ftruncate to the same length sets it to
// now.
func TestReleaseKeepsModTime(t *testing.T) {
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Microsecond)
	tests := []struct {
		name    string
		release func(t *testing.T, s *Segment, dir string, cfg Config)
	}{
		{"trim", func(t *testing.T, s *Segment, _ string, _ Config) {
			require.NoError(t, s.Seal())
			require.NoError(t, s.TrimSealedIndexes())
		}},
		{"close", func(t *testing.T, s *Segment, _ string, _ Config) {
			mustClose(t, s)
		}},
		{"open after a crash", func(t *testing.T, s *Segment, dir string, cfg Config) {
			reopened, err := Open(vfs.Default, dir, 500, cfg)
			require.NoError(t, err)
			mustClose(t, reopened)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir, cfg, _ := reservedSegment(t, 1)
			path := s.LogPath()
			require.NoError(t, os.Chtimes(path, old, old))
			tt.release(t, s, dir, cfg)
			assertReleased(t, path, s.Size(), "released")
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.True(t, fi.ModTime().Equal(old), "modification time %v, was %v", fi.ModTime(), old)
			if !s.closed.Load() {
				mustClose(t, s)
			}
		})
	}
}
