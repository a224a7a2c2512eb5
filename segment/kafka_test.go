package segment

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
)

// kafkaSegment is one segment of testdata/kafka.
type kafkaSegment struct {
	dir  string // testdata directory
	base int64
}

func kafkaSegments(t *testing.T) []kafkaSegment {
	t.Helper()
	logs, err := filepath.Glob("testdata/kafka/*/*/*.log")
	require.NoError(t, err, "no fixtures: %v", err)
	require.NotEmpty(t, logs, "no fixtures: %v", err)
	var segs []kafkaSegment
	for _, p := range logs {
		base, suffix, ok := ParseFileName(filepath.Base(p))
		require.True(t, ok, "unexpected fixture %s", p)
		require.Equal(t, LogSuffix, suffix, "unexpected fixture %s", p)
		segs = append(segs, kafkaSegment{filepath.Dir(p), base})
	}
	return segs
}

// copySegment copies a fixture segment's files into a fresh directory of
// fsys (Open may rewrite index files).
func copySegment(t *testing.T, ks kafkaSegment, fsys vfs.FS, dir string, withIndexes bool) {
	t.Helper()
	mustMkdir(t, fsys, dir)
	suffixes := []string{LogSuffix}
	if withIndexes {
		suffixes = append(suffixes, IndexSuffix, TimeIndexSuffix)
	}
	for _, suffix := range suffixes {
		data, err := os.ReadFile(segPath(ks.dir, ks.base, suffix))
		if err != nil {
			continue // not every fixture has indexes
		}
		f, err := fsys.Create(segPath(dir, ks.base, suffix))
		require.NoError(t, err)
		_, err = f.Write(data)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

func TestKafkaFixtures(t *testing.T) {
	for _, ks := range kafkaSegments(t) {
		name := strings.TrimPrefix(ks.dir, "testdata/kafka/") + "/" + FileName(ks.base, "")
		t.Run(name, func(t *testing.T) {
			for _, k := range fsKinds {
				t.Run(k.name, func(t *testing.T) {
					fsys, dir := k.fs(t)
					copySegment(t, ks, fsys, dir, true)
					s, err := Open(fsys, dir, ks.base, k.cfg)
					require.NoError(t, err)
					defer mustClose(t, s)
					raw, _ := os.ReadFile(segPath(ks.dir, ks.base, LogSuffix))
					require.Equal(t, int64(len(raw)), s.Size(), "size %d, file has %d", s.Size(), len(raw))
					m := checkSegment(t, s)
					checkLookups(t, s, m)
					if len(m.batches) > 0 && m.batches[0].BaseOffset() > ks.base {
						t.Logf("first batch at %d, above the file name's %d", m.batches[0].BaseOffset(), ks.base)
					}
					// Recover finds everything valid.
					res, err := s.Recover(0)
					require.NoError(t, err, "Recover = %+v, %v", res, err)
					require.NoError(t, res.Cause, "Recover = %+v, %v", res, err)
					require.Equal(t, int64(0), res.TruncatedBytes, "Recover = %+v, %v", res, err)
					require.Equal(t, int64(len(raw)), res.ValidBytes, "Recover = %+v, %v", res, err)
					require.Equal(t, s.NextOffset(), res.NextOffset, "Recover = %+v, %v", res, err)
					checkLookups(t, s, checkSegment(t, s))

					// Rebuilt from the log alone: same answers, and
					// the same entries as Kafka's where comparable.
					fsys2, dir2 := k.fs(t)
					copySegment(t, ks, fsys2, dir2+"-rebuilt", false)
					r, err := Open(fsys2, dir2+"-rebuilt", ks.base, k.cfg)
					require.NoError(t, err)
					defer mustClose(t, r)
					checkLookups(t, r, checkSegment(t, r))
					compareKafkaIndexes(t, ks, r, m)
				})
			}
		})
	}
}

// compareKafkaIndexes compares the indexes r rebuilt with Kafka's files.
// Offset entries must be equal. Time entries must have equal timestamps
// and offsets in the same batch; Kafka 2.7.1 segments must match exactly
// (Kafka 2.1 pointed at the first record with the max timestamp, see
// testdata/kafka/PROVENANCE.md).
func compareKafkaIndexes(t *testing.T, ks kafkaSegment, r *Segment, m *model) {
	t.Helper()
	gotOff, gotTime := indexEntries(r)
	if data, err := os.ReadFile(segPath(ks.dir, ks.base, IndexSuffix)); err == nil {
		want := decodeOffsetIndex(data, ks.base)
		require.True(t, equalEntries(gotOff, want), "rebuilt offset index %v, Kafka's %v", gotOff, want)
	}
	data, err := os.ReadFile(segPath(ks.dir, ks.base, TimeIndexSuffix))
	if err != nil {
		return
	}
	want := decodeTimeIndex(data, ks.base)
	require.Len(t, gotTime, len(want), "rebuilt time index %v, Kafka's %v", gotTime, want)
	exact := strings.Contains(ks.dir, "kafka-2.7.1")
	for i := range want {
		g, w := gotTime[i], want[i]
		require.Equal(t, w[0], g[0], "time entry %d: rebuilt %v, Kafka's %v", i, g, w)
		require.Equal(t, m.translate(w[1]), m.translate(g[1]), "time entry %d: rebuilt %v, Kafka's %v", i, g, w)
		if exact {
			require.Equal(t, w[1], g[1], "time entry %d: rebuilt %v, Kafka's %v", i, g, w)
		}
		if g[1] != w[1] {
			t.Logf("time entry %d: rebuilt offset %d, Kafka 2.1 wrote %d (same batch)", i, g[1], w[1])
		}
	}
}

func decodeOffsetIndex(b []byte, base int64) [][2]int64 {
	var out [][2]int64
	for ; len(b) >= 8; b = b[8:] {
		out = append(out, [2]int64{base + int64(int32(be32(b))), int64(int32(be32(b[4:])))})
	}
	return out
}

func decodeTimeIndex(b []byte, base int64) [][2]int64 {
	var out [][2]int64
	for ; len(b) >= 12; b = b[12:] {
		out = append(out, [2]int64{int64(uint64(be32(b))<<32 | uint64(be32(b[4:]))), base + int64(int32(be32(b[8:])))})
	}
	return out
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// TestKafkaFixtureCases names the special cases the fixtures cover, so that
// losing a fixture fails loudly.
func TestKafkaFixtureCases(t *testing.T) {
	segs := kafkaSegments(t)
	has := func(dir string, base int64) bool {
		return slices.ContainsFunc(segs, func(k kafkaSegment) bool { return strings.HasSuffix(k.dir, dir) && k.base == base })
	}
	for _, c := range []struct {
		dir  string
		base int64
		why  string
	}{
		{"kafka-2.7.1/__consumer_offsets-28", 0, "starts above its file name"},
		{"kafka-2.7.1/__consumer_offsets-39", 0, "offset gaps"},
		{"kafka-2.7.1/myTopic-0", 38, "empty log"},
		{"kafka-2.7.1/__consumer_offsets-17", 0, "0-byte index"},
		{"kafka-source-code/__consumer_offsets-17", 0, "first batch far above the base"},
	} {
		assert.True(t, has(c.dir, c.base), "fixture for %q missing: %s %d", c.why, c.dir, c.base)
	}
}

// TestKafkaPre30OffsetIndex: before Kafka 3.0 one append could write
// several batches and the offset index entry then held the last offset of
// the last batch with the position of the first. Such an index is valid:
// Open keeps it and lookups are right.
func TestKafkaPre30OffsetIndex(t *testing.T) {
	mem := vfs_NewMemForTest(t)
	var data, idx []byte
	next := int64(0)
	var pos []int64
	var last []int64
	for i := range 12 {
		b := simpleBatch(t, next, 2, int64(100+i), 100)
		pos = append(pos, int64(len(data)))
		last = append(last, b.LastOffset())
		data = append(data, b...)
		next = b.NextOffset()
	}
	// Appends of three batches each; an entry for the 2nd, 3rd and 4th.
	for a := 1; a < 4; a++ {
		first, lastOfAppend := a*3, a*3+2
		idx = append(idx, byte(last[lastOfAppend]>>24), byte(last[lastOfAppend]>>16), byte(last[lastOfAppend]>>8), byte(last[lastOfAppend]),
			byte(pos[first]>>24), byte(pos[first]>>16), byte(pos[first]>>8), byte(pos[first]))
	}
	for name, b := range map[string][]byte{FileName(0, LogSuffix): data, FileName(0, IndexSuffix): idx} {
		f, err := mem.Create(filepath.Join("/x", name))
		require.NoError(t, err)
		f.Write(b)
		f.Close()
	}
	s, err := Open(mem, "/x", 0, Config{})
	require.NoError(t, err)
	defer mustClose(t, s)
	require.Equal(t, 3, s.offIdx.Entries(), "Kafka's index was not kept: %d entries, suspect %v", s.offIdx.Entries(), s.indexSuspect.Load())
	require.False(t, s.indexSuspect.Load(), "Kafka's index was not kept: %d entries, suspect %v", s.offIdx.Entries(), s.indexSuspect.Load())
	checkLookups(t, s, parseLog(t, data))
	require.False(t, s.indexSuspect.Load(), "a valid pre-3.0 entry was taken for damage")
}

// TestOpenIndexPastLog: the .log lost its end (a copy, a crash on a
// filesystem that kept the index pages) while the index still points past
// it: Open rebuilds and lookups are right.
func TestOpenIndexPastLog(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			cfg := k.cfg
			cfg.IndexIntervalBytes = 64
			s, err := Create(fsys, dir, 0, cfg)
			require.NoError(t, err)
			next := int64(0)
			for i := range 30 {
				b := simpleBatch(t, next, 2, int64(i), 100)
				mustAppend(t, s, b)
				next = b.NextOffset()
			}
			m := segmentModel(t, s)
			mustClose(t, s)
			cut := m.pos[len(m.pos)/2]
			f, err := fsys.OpenReadWrite(segPath(dir, 0, LogSuffix))
			require.NoError(t, err)
			// half a batch too
			require.NoError(t, f.Truncate(cut+30))
			f.Close()
			r, err := Open(fsys, dir, 0, cfg)
			require.NoError(t, err)
			defer mustClose(t, r)
			require.Equal(t, cut, r.Size(), "size %d, want %d", r.Size(), cut)
			checkLookups(t, r, checkSegment(t, r))
		})
	}
}
