package log

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// TestWriteBehindIdleReleasesBuffer: the timer's write (writeBehindIdle)
// leaves an idle partition without a queue buffer, where a write for an
// observer (showBuffered) keeps it for the next appends.
// TestWriteBehindTimer checks that the timer runs it.
func TestWriteBehindIdleReleasesBuffer(t *testing.T) {
	p, err := Open(filepath.Join(t.TempDir(), "p-0"), Config{WriteBehind: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	ts := int64(1_700_000_000_000)
	appendOne := func() {
		t.Helper()
		_, err := p.AppendBatch(timedBatch(t, batch.BuilderOptions{}, ts))
		require.NoError(t, err)
		ts++
	}
	appendOne() // the empty segment's first batch: written at once
	appendOne() // buffered
	p.showBuffered()
	p.mu.Lock()
	require.Zero(t, p.dur.queue.n)
	require.NotNil(t, p.dur.queue.buf, "kept after an observer's write")
	p.mu.Unlock()

	appendOne() // buffered
	p.writeBehindIdle()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Zero(t, p.dur.queue.n)
	require.Nil(t, p.dur.queue.buf, "released after the timer's write")
	require.Equal(t, int64(3), p.mu.end.Offset)
}

// TestWriteBehindCloseStopsTimer: Close stops a pending timer, so a closed
// partition is not kept alive by it for up to WriteBehind.
func TestWriteBehindCloseStopsTimer(t *testing.T) {
	p, err := Open(filepath.Join(t.TempDir(), "p-0"), Config{WriteBehind: time.Hour})
	require.NoError(t, err)
	for ts := range int64(2) {
		_, err := p.AppendBatch(timedBatch(t, batch.BuilderOptions{}, 1_700_000_000_000+ts))
		require.NoError(t, err)
	}
	require.NotNil(t, p.wb.timer, "the buffered batch started it")
	require.NoError(t, p.Close())
	require.False(t, p.wb.timer.Stop(), "stopped by Close")
}
