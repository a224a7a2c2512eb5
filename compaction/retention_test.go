package compaction

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// fillSegments appends n one-batch segments with record timestamps ts(i).
func fillSegments(t testing.TB, l *testLog, n int, ts func(i int) int64) {
	t.Helper()
	for i := range n {
		_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint(i)), value: make([]byte, 100), ts: ts(i)}))
		require.NoError(t, err)
		require.NoError(t, l.roll())
	}
}

func bases(t testing.TB, l *testLog) []int64 {
	segs, err := l.Segments()
	require.NoError(t, err)
	defer releaseAll(segs)
	var out []int64
	for _, s := range segs {
		out = append(out, s.BaseOffset())
	}
	return out
}

func TestRetentionByTime(t *testing.T) {
	l := newOSLog(t, 1<<20)
	now := time.Now()
	// Segments 0-2 are 3 days old, 3 is 1 hour old, 4 is dated 10 years ahead.
	fillSegments(t, l, 5, func(i int) int64 {
		switch {
		case i < 3:
			return now.Add(-72 * time.Hour).UnixMilli()
		case i == 3:
			return now.Add(-time.Hour).UnixMilli()
		}
		return now.Add(10 * 365 * 24 * time.Hour).UnixMilli()
	})
	r, err := NewRetention(Config{Retention: 48 * time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	res, err := r.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, 3, res.SegmentsDeleted, "deleted %d, left %v, log start %d", res.SegmentsDeleted, bases(t, l), l.LogStartOffset())
	require.Equal(t, "[3 4 5]", fmt.Sprint(bases(t, l)), "deleted %d, left %v, log start %d", res.SegmentsDeleted, bases(t, l), l.LogStartOffset())
	require.Equal(t, int64(3), l.LogStartOffset(), "deleted %d, left %v, log start %d", res.SegmentsDeleted, bases(t, l), l.LogStartOffset())
	// Two days and a bit later, the future-dated segment goes too: its
	// retention timestamp is capped at its file's modification time.
	now = now.Add(49 * time.Hour)
	res, err = r.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[5]", fmt.Sprint(bases(t, l)), "future-dated segment pinned: left %v (%+v)", bases(t, l), res)
	// Never the active segment, even when everything is old.
	now = now.Add(1000 * time.Hour)
	_, err = r.Apply(context.Background(), l)
	require.NoError(t, err, "active segment touched: %v %v", bases(t, l), err)
	require.Equal(t, "[5]", fmt.Sprint(bases(t, l)), "active segment touched: %v %v", bases(t, l), err)
}

func TestRetentionBySizeAndLogStart(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	fillSegments(t, l, 6, func(int) int64 { return time.Now().UnixMilli() })
	segs, _ := l.Segments()
	one := segs[0].Size()
	releaseAll(segs)
	// 6 full segments + an empty active one; keep at least 2 segments' worth.
	r, _ := NewRetention(Config{Retention: -1, RetentionBytes: 2 * one})
	_, err := r.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[4 5 6]", fmt.Sprint(bases(t, l)), "size retention left %v", bases(t, l))
	// Log start offset raised inside segment 5: segment 4 lies wholly below.
	l.mu.Lock()
	l.logStart = 5
	l.mu.Unlock()
	r2, _ := NewRetention(Config{Retention: -1})
	_, err = r2.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[5 6]", fmt.Sprint(bases(t, l)), "log start retention left %v", bases(t, l))
}

func TestRetentionNeverPastHighWatermark(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	fillSegments(t, l, 4, func(int) int64 { return 1 })
	l.mu.Lock()
	l.hw = 2 // segments 0 and 1 are below it; segment 2 holds offset 2
	l.mu.Unlock()
	r, _ := NewRetention(Config{Retention: time.Millisecond})
	_, err := r.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[2 3 4]", fmt.Sprint(bases(t, l)), "left %v", bases(t, l))
}

func TestRetentionReadersKeepReading(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var l *testLog
			if name == "mem" {
				l, _ = newMemLog(t, 1<<20)
			} else {
				l = newOSLog(t, 1<<20)
			}
			fillSegments(t, l, 3, func(int) int64 { return 1 })
			segs, _ := l.Segments()
			held := segs[0]
			held.Ref()
			releaseAll(segs)
			r, _ := NewRetention(Config{Retention: time.Millisecond})
			res, err := r.Apply(context.Background(), l)
			require.NoError(t, err, "%+v %v", res, err)
			require.Equal(t, 3, res.SegmentsDeleted, "%+v %v", res, err)
			// The holder still reads valid bytes.
			var sc scanner
			n := 0
			err = sc.forEach(held, 0, func(b batch.Batch, _ int64) error { n++; return b.Validate() })
			require.NoError(t, err, "reading a deleted segment: %d batches", n)
			require.Equal(t, 1, n, "reading a deleted segment: %d batches, %v", n, err)
			_, err = l.fs.Stat(held.LogPath())
			require.NoError(t, err, "files gone while held")
			path := held.LogPath()
			require.NoError(t, held.Unref())
			_, err = l.fs.Stat(path)
			require.ErrorIs(t, err, fs.ErrNotExist, "files left after the last reader: %v", err)
		})
	}
}
