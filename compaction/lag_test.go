package compaction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
)

// TestMinCompactionLagAgesSegmentsWithoutTimestampsByModTime: under
// MinCompactionLag a sealed segment none of whose records carries a
// timestamp (v2 records stamped -1, legacy magic 0 messages) ages by the
// modification time of its .log, as Kafka's LogSegment.largestTimestamp
// does: written a moment ago it is not compacted, and once the clock is
// past the lag it is. A segment whose records carry timestamps ages by
// them, however fresh its file.
func TestMinCompactionLagAgesSegmentsWithoutTimestampsByModTime(t *testing.T) {
	const lag = time.Hour
	keys := func(ts int64) []kv {
		var recs []kv
		for r := range 4 {
			for _, key := range []string{"a", "b"} {
				recs = append(recs, kv{key: k(key), value: k(fmt.Sprint(r)), ts: ts})
			}
		}
		return recs
	}
	// v2 writes the records one batch each into a new partition.
	v2 := func(ts int64) func(t *testing.T) *testLog {
		return func(t *testing.T) *testLog {
			l, _ := newMemLog(t, 1<<20)
			for _, r := range keys(ts) {
				_, err := l.append(buildBatch(t, batch.CompressionNone, nil, r))
				require.NoError(t, err)
			}
			return l
		}
	}
	// magic0 writes them as legacy magic 0 messages, which have no
	// timestamp field.
	magic0 := func(t *testing.T) *testLog {
		set := encodeLegacy(t, legacy.MagicV0, batch.CompressionNone, 0, keys(-1)...)
		return openLegacyLog(t, vfs.NewMem(), "/p/t-0", set, 1<<20)
	}
	tests := []struct {
		name  string
		write func(t *testing.T) *testLog
		// clock is how far past the wall clock the round's Now is.
		clock time.Duration
		want  bool
	}{
		{"v2 without timestamps, just written", v2(-1), 0, false},
		{"v2 without timestamps, written past the lag", v2(-1), 2 * lag, true},
		{"legacy magic 0, just written", magic0, 0, false},
		{"legacy magic 0, written past the lag", magic0, 2 * lag, true},
		{"v2 stamped past the lag, just written", v2(time.Now().Add(-2 * lag).UnixMilli()), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.write(t)
			defer l.close()
			require.NoError(t, l.roll())
			before := l.readAll(t)
			require.Len(t, before, 8)
			cfg := compactCfg(nil)
			cfg.MinCompactionLag = lag
			cfg.Now = func() time.Time { return time.Now().Add(tc.clock) }
			c, err := NewCompactor(cfg)
			require.NoError(t, err)
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Compacted, "%+v", res)
			if tc.want {
				require.Equal(t, int64(6), res.RecordsRemoved, "%+v", res)
				require.Equal(t, fold(before), fold(l.readAll(t)))
				return
			}
			require.Equal(t, before, l.readAll(t))
		})
	}
}

// TestMaxCompactionLagEarliestDirtySegment: MaxCompactionLag makes a round
// due, whatever the dirty ratio, when the earliest first-batch timestamp
// over every dirty sealed segment is older than the lag, as Kafka's
// LogCleanerManager.maxCompactionDelay takes it: not only the first dirty
// segment's, also a segment past the cleanable section (here younger than
// MinCompactionLag), and never a timestamp of 0. A round is still due only
// when the cleanable section holds dirty bytes.
func TestMaxCompactionLagEarliestDirtySegment(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	const day = 24 * time.Hour
	tests := []struct {
		name   string
		minLag time.Duration
		// dirty holds, for each sealed dirty segment, the timestamps of
		// its batches.
		dirty [][]int64
		want  bool
	}{
		{"the first dirty segment is past the lag", 0, [][]int64{{ago(2 * day)}, {ago(0)}}, true},
		{"a later dirty segment is past the lag", 0, [][]int64{{ago(0)}, {ago(2 * day)}}, true},
		{"a segment past the min lag bound is past the lag", time.Hour,
			[][]int64{{ago(2 * time.Hour)}, {ago(2 * day), ago(0)}}, true},
		{"no dirty segment is past the lag", 0, [][]int64{{ago(2 * time.Hour)}, {ago(0)}}, false},
		{"a first batch stamped 0 tells no age", 0, [][]int64{{0}, {ago(0)}}, false},
		{"past the lag with nothing cleanable", time.Hour, [][]int64{{ago(2 * day), ago(0)}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newMemLog(t, 1<<20)
			defer l.close()
			// A first round cleans a large section, so that the small
			// dirty segments stay far below MinCleanableDirtyRatio.
			for r := range 40 {
				_, err := l.append(buildBatch(t, batch.CompressionNone, nil,
					kv{key: k(fmt.Sprintf("c%d", r)), value: make([]byte, 200), ts: ago(4 * day)}))
				require.NoError(t, err)
			}
			require.NoError(t, l.roll())
			cfg := Config{CleanupPolicy: PolicyCompact, MinCleanableDirtyRatio: 0.9, OffsetMapBytes: 1 << 20,
				MinCompactionLag: tc.minLag, MaxCompactionLag: day, Now: func() time.Time { return now }}
			c, err := NewCompactor(cfg)
			require.NoError(t, err)
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Equal(t, int64(40), res.CleanedTo, "%+v", res)
			for _, seg := range tc.dirty {
				for _, ts := range seg {
					// AddAt keeps a timestamp of 0, which Add would take
					// for no timestamp and stamp with the wall clock.
					bld := batch.NewBuilder(batch.BuilderOptions{})
					require.NoError(t, bld.AddAt(batch.Record{Key: k("x"), Value: k("v"), Timestamp: ts}))
					b, err := bld.Build()
					require.NoError(t, err)
					require.Equal(t, ts, b.MaxTimestamp())
					_, err = l.append(b)
					require.NoError(t, err)
				}
				require.NoError(t, l.roll())
			}
			res, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Equal(t, tc.want, res.Compacted, "%+v", res)
		})
	}
}

// TestMinCompactionLagBoundsOnlyTheDirtySection: MinCompactionLag holds
// back only the dirty section, as Kafka's cleanableOffsets checks the lag
// on the segments from the first dirty offset on. A clean segment that is
// young by the lag rule (cleaned before the lag was raised, or stamped
// ahead of the clock by a skewed producer) used to end the cleanable
// section, so the old dirty segments after it were never cleaned, round
// after round; now they are, and the clean segment is rewritten with
// them, as Kafka rewrites every segment below the first uncleanable one.
func TestMinCompactionLagBoundsOnlyTheDirtySection(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	const lag = time.Hour
	tests := []struct {
		name string
		// clean stamps the segment the first round cleans.
		clean int64
	}{
		{"cleaned before the lag was raised", now.Add(-10 * time.Minute).UnixMilli()},
		{"stamped ahead of the clock", now.Add(24 * time.Hour).UnixMilli()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newMemLog(t, 1<<20)
			defer l.close()
			for _, key := range []string{"a", "b"} {
				_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k(key), value: k("clean"), ts: tc.clean}))
				require.NoError(t, err)
			}
			require.NoError(t, l.roll())
			// The first round runs without a lag and cleans that segment.
			c, err := NewCompactor(Config{CleanupPolicy: PolicyCompact, OffsetMapBytes: 1 << 20,
				Now: func() time.Time { return now }})
			require.NoError(t, err)
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Equal(t, int64(2), res.CleanedTo, "%+v", res)
			// Two dirty segments, both past the lag, rewrite every key
			// several times.
			old := now.Add(-2 * lag).UnixMilli()
			for s := range 2 {
				for r := range 4 {
					for _, key := range []string{"a", "b"} {
						_, err := l.append(buildBatch(t, batch.CompressionNone, nil,
							kv{key: k(key), value: k(fmt.Sprintf("%d-%d", s, r)), ts: old}))
						require.NoError(t, err)
					}
				}
				require.NoError(t, l.roll())
			}
			end := l.LogEndOffset()
			before := l.readAll(t)
			c, err = NewCompactor(Config{CleanupPolicy: PolicyCompact, OffsetMapBytes: 1 << 20,
				MinCompactionLag: lag, Now: func() time.Time { return now }})
			require.NoError(t, err)
			var cleaned bool
			for range 3 {
				res, err = c.Apply(context.Background(), l)
				require.NoError(t, err)
				if res.Compacted {
					cleaned = true
					require.Equal(t, end, res.CleanedTo, "%+v", res)
				}
			}
			require.True(t, cleaned, "no round cleaned the dirty segments past the young clean one")
			after := l.readAll(t)
			require.Equal(t, fold(before), fold(after))
			require.Len(t, after, 2)
		})
	}
}
