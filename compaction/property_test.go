package compaction

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
)

// tombstoneHorizons returns, for every tombstone in a batch carrying a
// delete horizon, that horizon.
func tombstoneHorizons(t testing.TB, l *testLog) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	var dec batch.Decoder
	for _, b := range rawBatches(t, l) {
		if !b.Attributes().HasDeleteHorizon() {
			continue
		}
		for r, err := range b.All(&dec) {
			require.NoError(t, err)
			if r.Value == nil {
				out[r.Offset] = b.BaseTimestamp()
			}
		}
	}
	return out
}

// drawLegacy draws legacy messages from offset 0 on, each of magic 0 or
// 1, plain or a wrapper of a codec Kafka wrote, holding records of the
// keys the test appends (some keyless, some tombstones), and returns their
// bytes and records (timestamp ts under magic 1, none under magic 0).
func drawLegacy(t testing.TB, rt *rapid.T, ts int64) ([]byte, []rec) {
	var set []byte
	var recs []rec
	for range rapid.IntRange(1, 6).Draw(rt, "legacyEntries") {
		magic := int8(rapid.IntRange(0, 1).Draw(rt, "magic"))
		codec := rapid.SampledFrom(legacyCodecs).Draw(rt, "legacyCodec")
		n := 1
		if codec != batch.CompressionNone {
			n = rapid.IntRange(1, 4).Draw(rt, "inner")
		}
		var kvs []kv
		for range n {
			r := kv{ts: ts}
			switch x := rapid.IntRange(0, 9).Draw(rt, "kind"); {
			case x == 0:
				r.value = k("keyless")
			default:
				r.key = k(fmt.Sprintf("key%d", rapid.IntRange(0, 7).Draw(rt, "key")))
				if x > 1 {
					r.value = k(fmt.Sprintf("old%d", rapid.IntRange(0, 1000).Draw(rt, "v")))
				}
			}
			x := rec{Offset: int64(len(recs)), Timestamp: ts, Key: string(r.key), Value: string(r.value), Null: r.value == nil, NoKey: r.key == nil}
			if magic == legacy.MagicV0 {
				x.Timestamp = batch.NoTimestamp
			}
			kvs = append(kvs, r)
			recs = append(recs, x)
		}
		set = append(set, encodeLegacy(t, magic, codec, int64(len(recs)-n), kvs...)...)
	}
	return set, recs
}

func TestCompactionProperties(t *testing.T) {
	compactions := 0
	defer func() { t.Logf("%d compaction rounds rewrote segments", compactions) }()
	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	rapid.Check(t, func(rt *rapid.T) {
		now := time.UnixMilli(1_700_000_000_000)
		segBytes := int64(rapid.IntRange(200, 2000).Draw(rt, "segBytes"))
		// Some logs start with legacy messages, as a log Kafka wrote
		// before 0.11 does.
		var old []rec
		var l *testLog
		if rapid.Bool().Draw(rt, "legacy") {
			var set []byte
			set, old = drawLegacy(t, rt, now.UnixMilli())
			l = openLegacyLog(t, vfs.NewMem(), "/p/topic-0", set, segBytes)
		} else {
			l, _ = newMemLog(t, segBytes)
		}
		defer l.close()
		cfg := compactCfg(&now)
		cfg.OffsetMapBytes = rapid.SampledFrom([]int{minOffsetMapBytes, 1 << 20}).Draw(rt, "map")
		if rapid.Bool().Draw(rt, "collide") {
			cfg.KeyHash = func(b []byte) uint64 { return uint64(len(b)) }
		}
		c, err := NewCompactor(cfg)
		require.NoError(rt, err)
		appended := map[int64]rec{}
		model := old
		for _, r := range old {
			appended[r.Offset] = r
		}
		seenHorizon := map[int64]int64{}
		lastEnd := int64(0)
		seqs := map[int64]int32{}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2, 3, 4, 5:
				n := rapid.IntRange(1, 6).Draw(rt, "n")
				var recs []kv
				for range n {
					r := kv{ts: now.UnixMilli()}
					switch x := rapid.IntRange(0, 9).Draw(rt, "kind"); {
					case x == 0:
						r.value = k("keyless")
					default:
						r.key = k(fmt.Sprintf("key%d", rapid.IntRange(0, 7).Draw(rt, "key")))
						if x > 1 {
							r.value = k(fmt.Sprintf("v%d", rapid.IntRange(0, 1000).Draw(rt, "v")))
						}
					}
					recs = append(recs, r)
				}
				var prod *batch.Producer
				if rapid.Bool().Draw(rt, "idempotent") {
					pid := int64(rapid.IntRange(1, 3).Draw(rt, "pid"))
					prod = &batch.Producer{ID: pid, Epoch: 0, BaseSequence: seqs[pid]}
					seqs[pid] += int32(len(recs)) // the partition checks sequences
				}
				b := buildBatch(t, rapid.SampledFrom(codecs).Draw(rt, "codec"), prod, recs...)
				base, err := l.append(b)
				require.NoError(rt, err)
				for i, r := range recs {
					x := rec{Offset: base + int64(i), Timestamp: r.ts, Key: string(r.key), Value: string(r.value), Null: r.value == nil, NoKey: r.key == nil}
					appended[x.Offset] = x
					model = append(model, x)
				}
			case 6:
				require.NoError(rt, l.roll())
			case 7, 8, 9:
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "minutes")) * time.Minute)
				res, err := c.Apply(context.Background(), l)
				require.NoError(rt, err)
				if res.Compacted {
					compactions++
				}
				got := l.readAll(t)
				require.True(rt, maps.Equal(fold(got), fold(model)), "table:\n%v\nmodel:\n%v", fold(got), fold(model))
				present := map[int64]bool{}
				for _, r := range got {
					require.Equal(rt, r, appended[r.Offset], "record at %d is %+v, appended %+v", r.Offset, r, appended[r.Offset])
					present[r.Offset] = true
				}
				// Latest tombstones stay until their horizon.
				latest := map[string]int64{}
				for _, r := range model {
					if !r.NoKey {
						latest[r.Key] = r.Offset
					}
				}
				for _, off := range latest {
					r := appended[off]
					if !r.Null || present[off] {
						continue
					}
					h, ok := seenHorizon[off]
					require.True(rt, ok, "tombstone at %d removed at %d before its horizon (%d, seen %v)", off, now.UnixMilli(), h, ok)
					require.GreaterOrEqual(rt, now.UnixMilli(), h, "tombstone at %d removed at %d before its horizon (%d, seen %v)", off, now.UnixMilli(), h, ok)
				}
				maps.Copy(seenHorizon, tombstoneHorizons(t, l))
				end := l.LogEndOffset()
				require.GreaterOrEqual(rt, end, lastEnd, "log end went back: %d < %d", end, lastEnd)
				lastEnd = l.LogEndOffset()
			}
		}
	})
}
