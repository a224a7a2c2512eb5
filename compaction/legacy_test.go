package compaction

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// legacyEntries walks a record set and returns its legacy messages (magic
// 0/1) by the offset of their last record.
func legacyEntries(t *testing.T, set []byte) map[int64][]byte {
	t.Helper()
	var d batch.Decoder
	out := map[int64][]byte{}
	for len(set) > 0 {
		n, magic, next, err := batchaccess.FrameEntry(set)
		require.NoError(t, err)
		if legacy.IsMagic(magic) {
			require.NoError(t, d.ValidateLegacy(set[:n]))
			out[next-1] = bytes.Clone(set[:n])
		}
		set = set[n:]
	}
	return out
}

// readSet returns the log's bytes from its start to its end.
func readSet(t *testing.T, l *testLog) []byte {
	t.Helper()
	var all []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rs, err := l.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		all = append(all, rs.Bytes()...)
		off = rs.NextOffset()
		require.NoError(t, rs.Close())
	}
	return all
}

// TestCompactionLegacyFixtureMatchesKafkaCleaner is issue 27 case 1 on the
// repository's Kafka fixture (testdata/legacy/mixed-0: magic 1 messages
// and gzip magic 1 wrappers among v2 batches, keys alpha beta alpha beta,
// then gamma to theta, offsets 0-19) with a v2 tombstone for alpha at 20.
// Kafka's cleaner maps every record of the dirty section, legacy inner
// messages included, at its absolute offset (Cleaner.buildOffsetMap) and
// retains a record only when it is the latest for its key and not a
// tombstone past its delete horizon (Cleaner.shouldRetainRecord): once
// the horizon has passed the log holds the latest value of every key and
// nothing of alpha. On the old code the magic 1 values of alpha at 0 and
// 2 stayed (legacy messages were copied and never mapped) while the
// tombstone went: alpha was alive again.
func TestCompactionLegacyFixtureMatchesKafkaCleaner(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "legacy", "mixed-0", "00000000000000000000.log"))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "t-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), src, 0o644))
	l, err := openTestLog(vfs.Default, dir, segment.Config{MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}, 1<<20)
	require.NoError(t, err)
	defer l.close()
	before := l.readAll(t)
	require.Len(t, before, 20)
	require.Equal(t, "alpha", before[0].Key)
	require.Equal(t, "alpha", before[2].Key)
	fixtureLegacy := legacyEntries(t, src)

	now := time.Now()
	ts := now.UnixMilli()
	_, err = l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("alpha"), ts: ts}))
	require.NoError(t, err)
	require.NoError(t, l.roll())
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)
	// Before the horizon the tombstone stays and shadows alpha's values.
	var alpha []rec
	for _, r := range l.readAll(t) {
		if r.Key == "alpha" {
			alpha = append(alpha, r)
		}
	}
	require.Len(t, alpha, 1, "alpha's tombstone is not its only record: %v", alpha)
	require.True(t, alpha[0].Null)
	require.Equal(t, int64(20), alpha[0].Offset)

	// Past the horizon (one hour), the next round drops the tombstone.
	now = now.Add(2 * time.Hour)
	_, err = l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("omega"), value: k("last"), ts: ts}))
	require.NoError(t, err)
	require.NoError(t, l.roll())
	_, err = c.Apply(context.Background(), l)
	require.NoError(t, err)

	got := l.readAll(t)
	byOff := map[int64]rec{}
	for _, r := range before {
		byOff[r.Offset] = r
	}
	var offsets []int64
	table := map[string]string{}
	for _, r := range got {
		offsets = append(offsets, r.Offset)
		table[r.Key] = r.Value
		if r.Offset < 20 {
			require.Equal(t, byOff[r.Offset], r, "record at %d changed", r.Offset)
		}
	}
	// Kafka's answer: the latest record of every key, alpha gone.
	require.Equal(t, []int64{3, 6, 7, 10, 11, 18, 19, 21}, offsets, "records left: %v", got)
	require.NotContains(t, table, "alpha")
	for _, key := range []string{"beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "omega"} {
		require.Contains(t, table, key)
	}
	// The legacy messages that stay whole are copied byte for byte.
	after := legacyEntries(t, readSet(t, l))
	require.Len(t, after, 2, "legacy messages left: %v", after)
	for off, e := range after {
		require.Equal(t, fixtureLegacy[off], e, "legacy message ending at %d changed", off)
	}
}

// encodeLegacy encodes recs as Kafka's producer and broker write them at
// offsets from base: one plain message each for CompressionNone, else one
// wrapper (inner offsets relative from 0 under magic 1, absolute under
// magic 0; the wrapper at the last offset with the largest timestamp; a
// magic 0 LZ4 frame with Kafka's header checksum, KAFKA-3160). Magic 1
// messages carry rec.ts, magic 0 ones no timestamp.
func encodeLegacy(t testing.TB, magic int8, codec batch.Compression, base int64, recs ...kv) []byte {
	t.Helper()
	var set []byte
	maxTS := int64(-1)
	for i, r := range recs {
		off := base + int64(i)
		if magic == legacy.MagicV1 && codec != batch.CompressionNone {
			off = int64(i)
		}
		var err error
		set, err = legacy.AppendMessage(set, legacy.Message{Offset: off, Magic: magic, Timestamp: r.ts, Key: r.key, Value: r.value})
		require.NoError(t, err)
		maxTS = max(maxTS, r.ts)
	}
	if codec == batch.CompressionNone {
		return set
	}
	var value []byte
	switch codec {
	case batch.CompressionGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, err := w.Write(set)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		value = buf.Bytes()
	case batch.CompressionSnappy:
		value = snappy.Encode(nil, set) // one raw block, as librdkafka writes it
	case batch.CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		require.NoError(t, w.Apply(lz4.BlockChecksumOption(false), lz4.ChecksumOption(false)))
		_, err := w.Write(set)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		value = buf.Bytes()
		require.NoError(t, legacy.SetLZ4HeaderChecksum(value, magic))
	default:
		t.Fatalf("no legacy wrapper with %s", codec)
	}
	e, err := legacy.AppendMessage(nil, legacy.Message{Offset: base + int64(len(recs)) - 1, Magic: magic,
		Attributes: int8(codec), Timestamp: maxTS, Value: value})
	require.NoError(t, err)
	return e
}

// openLegacyLog writes set as the partition's first segment, as a log
// Kafka wrote before 0.11 holds it, and opens the partition.
func openLegacyLog(t testing.TB, fsys vfs.FS, dir string, set []byte, segBytes int64) *testLog {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	f, err := fsys.Create(filepath.Join(dir, "00000000000000000000.log"))
	require.NoError(t, err)
	_, err = f.Write(set)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	l, err := openTestLog(fsys, dir, smallCfg(), segBytes)
	require.NoError(t, err)
	return l
}

// legacyCodecs are the codecs Kafka writes legacy messages with.
var legacyCodecs = []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4}

// TestCompactionRewritesLegacyLikeKafka: legacy messages of each magic and
// codec whose records later v2 records shadow in part, in whole or not at
// all compact as Kafka's cleaner compacts them (Cleaner.shouldRetainRecord
// through MemoryRecords.filterTo): a record is retained only when it is
// the latest for its key; an entry from which nothing goes is copied byte
// for byte; a plain message that is not the latest goes whole; a wrapper
// from which some records go is written again with the others, with its
// magic and codec, at their offsets; a wrapper from which all go is
// dropped. A legacy tombstone that is the latest of its key stays (the
// first round has no clean segment, so no legacy horizon). The result
// survives a reopen and validates.
func TestCompactionRewritesLegacyLikeKafka(t *testing.T) {
	recs := []kv{
		{key: k("a"), value: k("1"), ts: 1_700_000_000_001},
		{key: k("b"), value: k("2"), ts: 1_700_000_000_004},
		{key: k("c"), ts: 1_700_000_000_002},
		{key: k("d"), value: k("4"), ts: 1_700_000_000_003},
	}
	shadows := map[string][]string{"none": {"e"}, "some": {"b", "d"}, "all": {"a", "b", "c", "d"}}
	for _, magic := range []int8{legacy.MagicV0, legacy.MagicV1} {
		for _, codec := range legacyCodecs {
			for name, shadow := range shadows {
				t.Run(fmt.Sprintf("v%d/%s/%s", magic, codec, name), func(t *testing.T) {
					src := encodeLegacy(t, magic, codec, 0, recs...)
					mem := vfs.NewMem()
					l := openLegacyLog(t, mem, "/p/t-0", src, 1<<20)
					defer l.close()
					require.NoError(t, l.roll())
					var later []kv
					for _, key := range shadow {
						later = append(later, kv{key: k(key), value: k("new"), ts: 1_800_000_000_000})
					}
					_, err := l.append(buildBatch(t, batch.CompressionNone, nil, later...))
					require.NoError(t, err)
					require.NoError(t, l.roll())
					before := l.readAll(t)
					now := time.UnixMilli(1_800_000_000_000)
					c, err := NewCompactor(compactCfg(&now))
					require.NoError(t, err)
					res, err := c.Apply(context.Background(), l)
					require.NoError(t, err)
					require.Equal(t, map[string]int64{"none": 0, "some": 2, "all": 4}[name], res.RecordsRemoved)

					shadowed := map[string]bool{}
					for _, key := range shadow {
						shadowed[key] = true
					}
					var want []rec
					for _, r := range before {
						if r.Offset < 4 && shadowed[r.Key] {
							continue
						}
						want = append(want, r)
					}
					check := func() {
						require.Equal(t, want, l.readAll(t))
						got := legacyEntries(t, readSet(t, l))
						switch {
						case name == "none":
							require.Equal(t, legacyEntries(t, src), got, "nothing went: copied byte for byte")
						case name == "all":
							require.Empty(t, got)
						case codec == batch.CompressionNone:
							all := legacyEntries(t, src)
							require.Equal(t, map[int64][]byte{0: all[0], 2: all[2]}, got, "plain messages kept whole")
						default:
							require.Len(t, got, 1)
							e := legacy.Entry(got[2])
							require.Equal(t, magic, e.Magic())
							require.Equal(t, uint8(codec), e.Compression())
							require.Equal(t, int64(2), e.Offset(), "the wrapper sits at its last record")
						}
					}
					check()
					require.NoError(t, l.Verify())
					require.NoError(t, l.close())
					l, err = openTestLog(mem, "/p/t-0", smallCfg(), 1<<20)
					require.NoError(t, err)
					check()
				})
			}
		}
	}
}

// TestCompactionEmptiedLegacyEntryEndsRun: when the last records of the
// last entry of a rewritten run go, a legacy wrapper or plain message, a
// header-only v2 batch at its offset takes their place (a legacy message
// cannot be empty), after what stays of a wrapper, so the new segment
// ends where the old one did and the log reopens with the same segments.
func TestCompactionEmptiedLegacyEntryEndsRun(t *testing.T) {
	for _, codec := range legacyCodecs {
		for _, shadow := range [][]string{{"c"}, {"c", "d"}, {"d"}} {
			t.Run(fmt.Sprintf("%s/%v", codec, shadow), func(t *testing.T) {
				src := encodeLegacy(t, legacy.MagicV1, batch.CompressionGzip, 0, kv{key: k("a"), value: k("1"), ts: 5}, kv{key: k("b"), value: k("2"), ts: 6})
				src = append(src, encodeLegacy(t, legacy.MagicV1, codec, 2, kv{key: k("c"), value: k("3"), ts: 7}, kv{key: k("d"), value: k("4"), ts: 7})...)
				mem := vfs.NewMem()
				// Segments too small to be cleaned into one.
				segBytes := int64(len(src) + 16)
				l := openLegacyLog(t, mem, "/p/t-0", src, segBytes)
				defer l.close()
				require.NoError(t, l.roll())
				var later []kv
				for _, key := range shadow {
					later = append(later, kv{key: k(key), value: k("new"), ts: 8})
				}
				_, err := l.append(buildBatch(t, batch.CompressionNone, nil, later...))
				require.NoError(t, err)
				require.NoError(t, l.roll())
				now := time.UnixMilli(1_800_000_000_000)
				c, err := NewCompactor(compactCfg(&now))
				require.NoError(t, err)
				res, err := c.Apply(context.Background(), l)
				require.NoError(t, err)
				require.Equal(t, int64(len(shadow)), res.RecordsRemoved)
				segs := l.segInfos()
				require.Equal(t, int64(0), segs[0].BaseOffset)
				require.Equal(t, int64(4), segs[0].NextOffset, "the rewritten segment ends where it did")
				got := l.readAll(t)
				var keys []string
				for _, r := range got {
					keys = append(keys, fmt.Sprint(r.Key, r.Offset))
				}
				want := map[string][]string{"c": {"a0", "b1", "d3", "c4"}, "c,d": {"a0", "b1", "c4", "d5"}, "d": {"a0", "b1", "c2", "d4"}}
				require.Equal(t, want[strings.Join(shadow, ",")], keys)
				if shadow[len(shadow)-1] == "d" {
					var empty batch.Batch
					for set := readSet(t, l); len(set) > 0; {
						n, magic, next, err := batchaccess.FrameEntry(set)
						require.NoError(t, err)
						if next == 4 {
							require.Equal(t, int8(batch.Magic), magic, "a v2 batch stands in for the end of the entry")
							empty = batch.Batch(set[:n])
						}
						set = set[n:]
					}
					require.NoError(t, empty.Validate())
					require.Equal(t, int32(0), empty.RecordsCount())
					require.Equal(t, int64(3), empty.BaseOffset())
				}
				require.NoError(t, l.close())
				l, err = openTestLog(mem, "/p/t-0", smallCfg(), segBytes)
				require.NoError(t, err)
				require.Equal(t, segs, l.segInfos())
				require.Equal(t, got, l.readAll(t))
			})
		}
	}
}

// TestCompactionLegacyTombstoneHorizon: a legacy tombstone carries no
// delete horizon; Kafka's cleaner drops one when its segment was last
// modified at or before the last clean segment's modification time minus
// delete.retention.ms (Cleaner.doClean's legacyDeleteHorizonMs and
// cleanSegments' retainLegacyDeletesAndTxnMarkers), and keeps it
// otherwise. On the old code a legacy tombstone stayed forever.
func TestCompactionLegacyTombstoneHorizon(t *testing.T) {
	for _, tc := range []struct {
		name    string
		age     time.Duration // of the tombstone's segment, before the last clean one
		dropped bool
	}{
		{"past the horizon", 3 * time.Hour, true},
		{"before the horizon", 30 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := encodeLegacy(t, legacy.MagicV1, batch.CompressionNone, 0, kv{key: k("x"), ts: 5}, kv{key: k("y"), value: k("1"), ts: 6})
			dir := filepath.Join(t.TempDir(), "t-0")
			segBytes := int64(len(src) + 16)
			l := openLegacyLog(t, vfs.Default, dir, src, segBytes)
			defer l.close()
			require.NoError(t, l.roll())
			_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("z"), value: k("2"), ts: 7}))
			require.NoError(t, err)
			require.NoError(t, l.roll())
			now := time.UnixMilli(1_800_000_000_000)
			c, err := NewCompactor(compactCfg(&now)) // DeleteRetention: an hour
			require.NoError(t, err)
			_, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Len(t, l.readAll(t), 3, "the first round has no clean segment: the tombstone stays")
			require.Len(t, l.segInfos(), 3)

			// Round two: the segment of z is the last clean one.
			_, err = l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("w"), value: k("3"), ts: 8}))
			require.NoError(t, err)
			require.NoError(t, l.roll())
			clean := time.Now().Truncate(time.Second)
			require.NoError(t, os.Chtimes(filepath.Join(dir, "00000000000000000002.log"), clean, clean))
			old := clean.Add(-tc.age)
			require.NoError(t, os.Chtimes(filepath.Join(dir, "00000000000000000000.log"), old, old))
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			var keys []string
			for _, r := range l.readAll(t) {
				keys = append(keys, r.Key)
			}
			if tc.dropped {
				require.Equal(t, []string{"y", "z", "w"}, keys)
				require.Equal(t, int64(1), res.TombstonesRemoved)
			} else {
				require.Equal(t, []string{"x", "y", "z", "w"}, keys)
				require.Zero(t, res.TombstonesRemoved)
			}
		})
	}
}

// TestCompactionDropsKeylessLegacyRecords: a legacy record without a key
// goes, a wrapper's inner one or a plain message, as in Kafka's cleaner,
// which has always counted a keyless record of a compacted log as invalid
// and not retained it (LogCleaner.shouldRetainMessage in 0.9 and 0.10,
// Cleaner.shouldRetainRecord today: stats.invalidMessage(), false); the
// keyed record beside it stays.
func TestCompactionDropsKeylessLegacyRecords(t *testing.T) {
	for _, magic := range []int8{legacy.MagicV0, legacy.MagicV1} {
		t.Run(fmt.Sprint("v", magic), func(t *testing.T) {
			src := encodeLegacy(t, magic, batch.CompressionSnappy, 0, kv{value: k("x"), ts: 5}, kv{key: k("a"), value: k("1"), ts: 6})
			src = append(src, encodeLegacy(t, magic, batch.CompressionNone, 2, kv{value: k("y"), ts: 7})...)
			l := openLegacyLog(t, vfs.NewMem(), "/p/t-0", src, 1<<20)
			defer l.close()
			require.NoError(t, l.roll())
			_, err := l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("b"), value: k("2"), ts: 8}))
			require.NoError(t, err)
			require.NoError(t, l.roll())
			now := time.UnixMilli(1_800_000_000_000)
			c, err := NewCompactor(compactCfg(&now))
			require.NoError(t, err)
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err)
			require.Equal(t, int64(2), res.RecordsRemoved)
			var got []string
			for _, r := range l.readAll(t) {
				got = append(got, fmt.Sprint(r.Key, r.Offset))
			}
			require.Equal(t, []string{"a1", "b3"}, got)
		})
	}
}
