package compaction

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// compactCfg compacts whatever is dirty.
func compactCfg(now *time.Time) Config {
	return Config{CleanupPolicy: PolicyCompact, MinCleanableDirtyRatio: 0.0001, OffsetMapBytes: 1 << 20,
		DeleteRetention: time.Hour, Now: func() time.Time { return *now }}
}

// fillLog appends n rounds of updates to keys k0..k(keys-1) with several
// codecs, a tombstone for k1 and a keyless record, then rolls.
func fillLog(t testing.TB, l *testLog, rounds, keys int, ts int64) {
	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	for r := 0; r < rounds; r++ {
		var recs []kv
		for i := 0; i < keys; i++ {
			recs = append(recs, kv{key: k(fmt.Sprintf("k%d", i)), value: k(fmt.Sprintf("v%d-%d", i, r)), ts: ts + int64(r)})
		}
		if r == rounds/2 {
			recs = append(recs, kv{key: k("k1"), ts: ts + int64(r)}, kv{value: k("keyless"), ts: ts})
		}
		_, err := l.append(buildBatch(t, codecs[r%len(codecs)], nil, recs...))
		require.NoError(t, err)
	}
	require.NoError(t, l.roll())
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var l *testLog
			if fsName == "mem" {
				l, _ = newMemLog(t, 600)
			} else {
				l = newOSLog(t, 600)
			}
			now := time.UnixMilli(1_700_000_000_000)
			fillLog(t, l, 20, 5, now.UnixMilli())
			before := l.readAll(t)
			byOff := map[int64]rec{}
			for _, r := range before {
				byOff[r.Offset] = r
			}
			c, err := NewCompactor(compactCfg(&now))
			require.NoError(t, err)
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.True(t, res.Compacted, "nothing compacted: %+v", res)
			require.NotEqual(t, int64(0), res.RecordsRemoved, "nothing compacted: %+v", res)
			after := l.readAll(t)
			require.True(t, maps.Equal(fold(before), fold(after)), "table changed:\n%v\n%v", fold(before), fold(after))
			latest := map[string]int64{}
			for _, r := range before {
				if !r.NoKey {
					latest[r.Key] = r.Offset
				}
			}
			seen := map[string]bool{}
			for _, r := range after {
				require.False(t, r.NoKey, "keyless record survived at %d", r.Offset)
				require.Equal(t, r, byOff[r.Offset], "record at %d changed: %+v vs %+v", r.Offset, r, byOff[r.Offset])
				seen[r.Key] = true
			}
			for key, off := range latest {
				require.True(t, seen[key], "key %s lost (latest at %d)", key, off)
			}
			require.Less(t, len(after), len(before), "no record removed: %d -> %d", len(before), len(after))
			// A second round has nothing dirty.
			res, err = c.Apply(context.Background(), l)
			require.NoError(t, err, "second round: %+v %v", res, err)
			require.False(t, res.Compacted, "second round: %+v %v", res, err)
			require.NoError(t, l.close())
			l2, err := openTestLog(l.fs, l.dir, l.cfg, l.segBytes)
			require.NoError(t, err)
			defer l2.close()
			got := l2.readAll(t)
			require.True(t, maps.Equal(fold(got), fold(before)), "after reopen: %d records", len(got))
			require.Len(t, got, len(after), "after reopen: %d records", len(got))
		})
	}
}

func TestHashCollisionsLoseNothing(t *testing.T) {
	l, _ := newMemLog(t, 400)
	now := time.UnixMilli(1_700_000_000_000)
	fillLog(t, l, 12, 7, now.UnixMilli())
	before := l.readAll(t)
	cfg := compactCfg(&now)
	cfg.KeyHash = func([]byte) uint64 { return 42 } // every key collides
	c, err := NewCompactor(cfg)
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)
	after := l.readAll(t)
	require.True(t, maps.Equal(fold(before), fold(after)), "collisions changed the table:\n%v\n%v", fold(before), fold(after))
	// Exactly the latest per key survives (plus nothing else).
	keys := map[string]int{}
	for _, r := range after {
		keys[r.Key]++
	}
	for key, n := range keys {
		require.Equal(t, 1, n, "key %s has %d records", key, n)
	}
}

func TestOffsetMapCollisions(t *testing.T) {
	m := newOffsetMap(minOffsetMapBytes*4, func(b []byte) uint64 { return uint64(len(b)) })
	for i := range 100 {
		require.True(t, m.Put(k(fmt.Sprintf("key%03d", i)), int64(i)), "full at %d", i)
	}
	for i := range 100 {
		off, ok := m.Get(k(fmt.Sprintf("key%03d", i)))
		require.True(t, ok, "key%03d: %d %v", i, off, ok)
		require.Equal(t, int64(i), off, "key%03d: %d %v", i, off, ok)
	}
	_, ok := m.Get(k("other!"))
	require.False(t, ok, "found a key never put")
	// Memory stays within the budget when it fills.
	n := 0
	for m.Put(k(fmt.Sprintf("filler-%06d", n)), int64(1000+n)) {
		n++
	}
	require.LessOrEqual(t, m.memory(), minOffsetMapBytes*4, "memory %d over budget", m.memory())
}

func TestMapFullCleansInRounds(t *testing.T) {
	l, _ := newMemLog(t, 2000)
	now := time.UnixMilli(1_700_000_000_000)
	for r := range 60 {
		var recs []kv
		for i := range 40 {
			recs = append(recs, kv{key: k(fmt.Sprintf("key-%04d", (r*25+i)%900)), value: k(fmt.Sprint(r)), ts: now.UnixMilli()})
		}
		l.append(buildBatch(t, batch.CompressionLZ4, nil, recs...))
	}
	l.roll()
	before := l.readAll(t)
	cfg := compactCfg(&now)
	cfg.OffsetMapBytes = minOffsetMapBytes * 4
	c, err := NewCompactor(cfg)
	require.NoError(t, err)
	rounds := 0
	var last int64 = -1
	for ; rounds < 100; rounds++ {
		res, err := c.Apply(context.Background(), l)
		require.NoError(t, err)
		if !res.Compacted {
			break
		}
		require.Greater(t, res.CleanedTo, last, "checkpoint did not advance: %d after %d", res.CleanedTo, last)
		last = res.CleanedTo
		got := l.readAll(t)
		require.True(t, maps.Equal(fold(got), fold(before)), "round %d changed the table", rounds)
	}
	require.GreaterOrEqual(t, rounds, 2, "expected several rounds with a small map, got %d", rounds)
}

func TestMapTooSmall(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	now := time.UnixMilli(1_700_000_000_000)
	big := make([]byte, 200<<10)
	var recs []kv
	for i := range 3 {
		recs = append(recs, kv{key: append([]byte{byte(i)}, big...), value: k("v")})
	}
	l.append(buildBatch(t, batch.CompressionNone, nil, recs...))
	l.roll()
	cfg := compactCfg(&now)
	cfg.OffsetMapBytes = minOffsetMapBytes * 16
	c, _ := NewCompactor(cfg)
	_, err := c.Apply(context.Background(), l)
	require.ErrorIs(t, err, ErrMapTooSmall, "got %v", err)
}

func TestTombstoneHorizon(t *testing.T) {
	for _, codec := range []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			l, _ := newMemLog(t, 1<<20)
			now := time.UnixMilli(1_700_000_000_000)
			ts := now.UnixMilli() - 1000
			l.append(buildBatch(t, codec, nil, kv{key: k("a"), value: k("1"), ts: ts}, kv{key: k("b"), value: k("2"), ts: ts}))
			l.append(buildBatch(t, codec, nil, kv{key: k("a"), ts: ts + 1}, kv{key: k("c"), value: k("3"), ts: ts + 2}))
			l.roll()
			c, _ := NewCompactor(compactCfg(&now))
			_, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			got := l.readAll(t)
			want := []rec{{Offset: 1, Timestamp: ts, Key: "b", Value: "2"}, {Offset: 2, Timestamp: ts + 1, Key: "a", Null: true}, {Offset: 3, Timestamp: ts + 2, Key: "c", Value: "3"}}
			require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "after round 1:\n%v\nwant\n%v", got, want)
			// The tombstone's batch carries the horizon.
			b2, ok := rawBatches(t, l)[2]
			require.True(t, ok, "the tombstone's batch is gone")
			assert.True(t, b2.Attributes().HasDeleteHorizon(), "no delete horizon bit: %v", b2.Attributes())
			horizon := b2.BaseTimestamp()
			assert.Equal(t, codec, b2.Attributes().Compression(), "codec changed to %v", b2.Attributes().Compression())
			require.Equal(t, now.Add(time.Hour).UnixMilli(), horizon, "horizon %d", horizon)
			// Before the horizon, another round keeps it.
			now = now.Add(30 * time.Minute)
			l.append(buildBatch(t, codec, nil, kv{key: k("d"), value: k("4"), ts: ts}))
			l.roll()
			_, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			got = l.readAll(t)
			require.Len(t, got, 4, "tombstone gone before its horizon: %v", got)
			require.True(t, got[1].Null, "tombstone gone before its horizon: %v", got)
			// After it, the next round drops it.
			now = now.Add(time.Hour)
			l.append(buildBatch(t, codec, nil, kv{key: k("e"), value: k("5"), ts: ts}))
			l.roll()
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			got = l.readAll(t)
			for _, r := range got {
				require.False(t, r.Null, "tombstone survived its horizon: %v (%+v)", got, res)
			}
			require.Equal(t, int64(1), res.TombstonesRemoved, "result %+v", res)
		})
	}
}

// TestTansuFixture compacts a real producer's batch of 11 records
// k1..k6 (tansu, Apache-2.0; see testdata/PROVENANCE.md).
func TestTansuFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/tansu/produce_request_v9_001.bin")
	require.NoError(t, err)
	l, _ := newMemLog(t, 1<<20)
	b := batch.Batch(append([]byte(nil), raw...))
	require.NoError(t, b.Validate())
	_, err = l.append(b)
	require.NoError(t, err)
	l.roll()
	now := time.UnixMilli(1_800_000_000_000)
	c, _ := NewCompactor(compactCfg(&now))
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)
	got := l.readAll(t)
	want := map[string]struct {
		v   string
		off int64
	}{"k1": {"v4", 3}, "k3": {"v5", 4}, "k4": {"v7", 6}, "k5": {"v9", 8}, "k2": {"v10", 9}, "k6": {"v11", 10}}
	require.Len(t, got, len(want), "got %v", got)
	for _, r := range got {
		w := want[r.Key]
		require.Equal(t, r.Value, w.v, "%s: got %s@%d, want %s@%d", r.Key, r.Value, r.Offset, w.v, w.off)
		require.Equal(t, r.Offset, w.off, "%s: got %s@%d, want %s@%d", r.Key, r.Value, r.Offset, w.v, w.off)
	}
	nb, ok := rawBatches(t, l)[0]
	require.True(t, ok, "the batch at offset 0 is gone")
	assert.Equal(t, int64(0), nb.BaseOffset(), "header changed: %+v vs %+v", nb.Header(), b.Header())
	assert.Equal(t, int32(10), nb.LastOffsetDelta(), "header changed: %+v vs %+v", nb.Header(), b.Header())
	assert.Equal(t, b.ProducerID(), nb.ProducerID(), "header changed: %+v vs %+v", nb.Header(), b.Header())
	assert.Equal(t, b.BaseSequence(), nb.BaseSequence(), "header changed: %+v vs %+v", nb.Header(), b.Header())
	assert.Equal(t, b.Attributes().Compression(), nb.Attributes().Compression(), "header changed: %+v vs %+v", nb.Header(), b.Header())
}
