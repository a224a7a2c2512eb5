package compaction

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/segment"
)

// TestCompactMediaError cuts a sealed segment's .log to 0 bytes behind the
// log's back (its mapped pages then raise SIGBUS when touched, as on a
// media error): the compaction returns an error wrapping segment.ErrFault
// that names the file, instead of killing the process, and changes no
// segment.
func TestCompactMediaError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SIGBUS on a page past the end of a mapped file is Linux behaviour")
	}
	l := newOSLog(t, 600)
	now := time.UnixMilli(1_700_000_000_000)
	fillLog(t, l, 20, 5, now.UnixMilli())
	segs, err := l.Segments()
	require.NoError(t, err)
	require.Greater(t, len(segs), 2)
	victim := segs[1].LogPath()
	bases := make([]int64, len(segs))
	for i, s := range segs {
		bases[i] = s.BaseOffset()
	}
	releaseAll(segs)
	require.NoError(t, os.Truncate(victim, 0))

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), l)
	require.ErrorIs(t, err, segment.ErrFault)
	var fe *segment.FaultError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, victim, fe.File)

	segs, err = l.Segments()
	require.NoError(t, err)
	defer releaseAll(segs)
	after := make([]int64, len(segs))
	for i, s := range segs {
		after[i] = s.BaseOffset()
	}
	assert.Equal(t, bases, after, "no segment replaced")
}
