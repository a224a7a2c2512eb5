//go:build linux

package segment

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

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
