package compaction

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
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
	var out []int64
	for _, s := range l.SegmentInfos() {
		out = append(out, s.BaseOffset)
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
	one := l.SegmentInfos()[0].Size
	// 6 full segments + an empty active one; keep at least 2 segments' worth.
	r, _ := NewRetention(Config{Retention: -1, RetentionBytes: 2 * one})
	_, err := r.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[4 5 6]", fmt.Sprint(bases(t, l)), "size retention left %v", bases(t, l))
	// Log start offset raised inside segment 5: segment 4 lies wholly below.
	require.NoError(t, l.DeleteRecordsBefore(5))
	r2, _ := NewRetention(Config{Retention: -1})
	_, err = r2.Apply(context.Background(), l)
	require.NoError(t, err)
	require.Equal(t, "[5 6]", fmt.Sprint(bases(t, l)), "log start retention left %v", bases(t, l))
}

func TestRetentionNeverPastHighWatermark(t *testing.T) {
	l, err := openTestLogConfig(vfs.NewMem(), "/p/topic-0", smallCfg(), 1<<20, true)
	require.NoError(t, err)
	defer l.close()
	fillSegments(t, l, 4, func(int) int64 { return 1 })
	require.NoError(t, l.SetHighWatermark(2)) // segments 0 and 1 are below it; segment 2 holds offset 2
	r, _ := NewRetention(Config{Retention: time.Millisecond})
	_, err = r.Apply(context.Background(), l)
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
			// A read result taken before the round holds the first
			// segment.
			held, err := l.ReadFromFollower(0, 1<<20)
			require.NoError(t, err)
			path := filepath.Join(l.dir, segment.FileName(0, ".log")+".deleted") // the partition's crash-protocol suffix (Kafka's)
			r, _ := NewRetention(Config{Retention: time.Millisecond})
			res, err := r.Apply(context.Background(), l)
			require.NoError(t, err, "%+v %v", res, err)
			require.Equal(t, 3, res.SegmentsDeleted, "%+v %v", res, err)
			// The holder still reads valid bytes.
			n := 0
			for b, err := range held.Batches() {
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				n++
			}
			require.Equal(t, 1, n, "reading a deleted segment: %d batches", n)
			_, err = l.fs.Stat(path)
			require.NoError(t, err, "files gone while held")
			require.NoError(t, held.Close())
			_, err = l.fs.Stat(path)
			require.ErrorIs(t, err, fs.ErrNotExist, "files left after the last reader: %v", err)
		})
	}
}
