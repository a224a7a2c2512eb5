package compaction

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/segment"
)

// TestCompactMediaError cuts a sealed segment's .log to 0 bytes behind the
// log's back (its mapped pages then raise SIGBUS when touched, and reads
// fail, as on a media error): the compaction returns an error that names
// the file, instead of killing the process, and changes no segment. (The
// walk compaction reads through, segment.Segment.Batches, reads the file
// with pread, never through the mapping.)
func TestCompactMediaError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	l := newOSLog(t, 600)
	now := time.UnixMilli(1_700_000_000_000)
	fillLog(t, l, 20, 5, now.UnixMilli())
	segs := l.SegmentInfos()
	require.Greater(t, len(segs), 2)
	victim := filepath.Join(l.dir, segment.FileName(segs[1].BaseOffset, ".log"))
	bases := make([]int64, len(segs))
	for i, s := range segs {
		bases[i] = s.BaseOffset
	}
	// A segment a roll adopted carries the spare's names until its
	// renames run after the roll (in the background); a sync settles
	// them, so that the victim is under its base's name.
	require.NoError(t, l.sync())
	require.NoError(t, os.Truncate(victim, 0))

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), victim)

	after := make([]int64, 0, len(segs))
	for _, s := range l.SegmentInfos() {
		after = append(after, s.BaseOffset)
	}
	assert.Equal(t, bases, after, "no segment replaced")
}
