package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// runDump runs the command and returns its exit status, stdout and stderr.
func runDump(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// copyTree copies src into a new temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	require.NoError(t, err)
	return dst
}

// snapshot records every file's bytes, size and modification time, to prove
// dumplog changed nothing.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[p] = fmt.Sprintf("%d %d %x", fi.Size(), fi.ModTime().UnixNano(), b)
		return nil
	})
	require.NoError(t, err)
	return m
}

func checkUnchanged(t *testing.T, root string, before map[string]string) {
	t.Helper()
	after := snapshot(t, root)
	assert.Len(t, after, len(before), "dumplog changed the file set: %d files, had %d", len(after), len(before))
	for p, v := range before {
		assert.Equal(t, v, after[p], "dumplog modified %s", p)
	}
}

// Kafka's own directories: everything verifies, compaction gaps are infos,
// the output shows what Kafka wrote, and nothing is modified.
func TestKafkaFixtures(t *testing.T) {
	k27 := copyTree(t, "testdata/kafka-2.7.1/kafka-logs")
	k21 := copyTree(t, "testdata/kafka-source-code/kafka-logs")
	before27, before21 := snapshot(t, k27), snapshot(t, k21)

	code, out, errs := runDump(t, "--verify", "--index", "--records", k27, k21)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	for _, want := range []string{
		"verify: 11 segments, 18 batches, 0 problems",
		"offset gap 5..15 before position 94 (compaction leaves gaps)",
		"first batch starts at offset 56, above the segment's base offset 0",
		"baseOffset: 18 lastOffset: 19 count: 2 position: 0 size: 148",
		"timestamp: 1640830085673 offset: 58", // Kafka 2.1: first record with the max timestamp
		"timestamp: 1685814551582 offset: 17", // Kafka 2.7: the batch's last offset
		"| offset: 19 CreateTime: 1686446865837 keySize: 26 valueSize: -1",
		"myTopic-0/00000000000000000038.log: empty segment",
	} {
		assert.Contains(t, out, want, "output lacks %q", want)
	}
	assert.NotContains(t, out, "PROBLEM", "problems reported:\n%s", out)
	checkUnchanged(t, k27, before27)
	checkUnchanged(t, k21, before21)

	// Kafka's own __consumer_offsets records decode with Kafka's schema.
	_, out, _ = runDump(t, "--records", "--offsets-decoder", filepath.Join(k21, "__consumer_offsets-17"))
	for _, want := range []string{
		`key: offset_commit::group="DemoConsumer",topic="topic1",partition=0 value: offset_commit_v3::offset=2705908,leaderEpoch=-1,metadata="",commitTimestamp=1640184196562`,
		`key: group_metadata::group="DemoConsumer" value: 0x0002`,
		`key: offset_commit::group="DemoConsumer",topic="topic1",partition=0 value: null (tombstone)`,
	} {
		assert.Contains(t, out, want, "--offsets-decoder output lacks %q", want)
	}

	// One file at a time works too.
	code, out, _ = runDump(t, filepath.Join(k21, "__consumer_offsets-17", "00000000000000000000.timeindex"), "--verify")
	require.Equal(t, 0, code, "time index alone: exit %d\n%s", code, out)
	require.Contains(t, out, "0 problems", "time index alone: exit %d\n%s", code, out)
}

// writePartition writes a partition with partlog: several segments, index
// entries for every batch, every codec, a transaction marker.
func writePartition(t *testing.T, dir string, closeIt bool) *plog.Partition {
	t.Helper()
	p, err := plog.Open(dir, plog.Config{SegmentBytes: 1500, IndexIntervalBytes: 1})
	require.NoError(t, err)
	ts := int64(1_700_000_000_000)
	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	for i := range 40 {
		bld := batch.NewBuilder(batch.BuilderOptions{Compression: codecs[i%len(codecs)]})
		for j := range 1 + i%7 {
			ts += 3
			rec := batch.Record{Key: fmt.Appendf(nil, "key-%d", j), Value: fmt.Appendf(nil, "value %d/%d", i, j), Timestamp: ts}
			if j == 0 {
				rec.Value = []byte{0, 1, 2, 0xff}
				rec.Headers = []batch.RecordHeader{{Key: []byte("trace"), Value: []byte("abc")}}
			}
			require.NoError(t, bld.Add(rec))
		}
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
	marker, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 7, BaseOffset: p.LogEndOffset(), Timestamp: ts + 1})
	require.NoError(t, err)
	_, err = p.AppendAssigned(marker)
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	if closeIt {
		require.NoError(t, p.Close())
		return nil
	}
	return p
}

// A directory partlog wrote, closed and still open (its active segment's
// indexes preallocated): both verify clean.
func TestPartlogDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders-0")
	writePartition(t, dir, true)
	before := snapshot(t, root)

	code, out, errs := runDump(t, "--verify", "--index", "--records", "--progress", root)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	segs := strings.Count(out, "Starting offset:")
	require.GreaterOrEqual(t, segs, 3, "only %d segments: SegmentBytes did not roll?", segs)
	for _, want := range []string{
		"codec: gzip", "codec: snappy", "codec: lz4", "codec: zstd", "codec: none",
		"control: COMMIT", "value: 0x000102ff", `headers: ["trace"="abc"]`, `key: "key-0"`,
		".index\noffset: ", ".timeindex\ntimestamp: ", // index entries
		" 0 problems",
	} {
		assert.Contains(t, out, want, "output lacks %q", want)
	}
	assert.Contains(t, errs, "segments", "no progress on stderr: %q", errs)
	checkUnchanged(t, root, before)

	// Open partition: the active segment's index files are preallocated.
	live := filepath.Join(t.TempDir(), "live-0")
	p := writePartition(t, live, false)
	defer p.Close()
	code, out, _ = runDump(t, "--verify", "--quiet", live)
	require.Equal(t, 0, code, "open partition: exit %d\n%s", code, out)
	assert.NotContains(t, out, "baseOffset:", "--quiet printed batches")
}

// Corruptions make --verify fail and name the file and the position.
func TestVerifyFindsCorruption(t *testing.T) {
	src := filepath.Join(t.TempDir(), "t-0")
	writePartition(t, src, true)
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	var logs []string
	for _, e := range ents {
		if _, suf, ok := segment.ParseFileName(e.Name()); ok && suf == segment.LogSuffix {
			logs = append(logs, e.Name())
		}
	}
	require.GreaterOrEqual(t, len(logs), 2, "want several segments, have %v", logs)
	victim := logs[1]

	// batchStart returns the position of the second batch of a .log.
	secondBatch := func(b []byte) int {
		return int(binary.BigEndian.Uint32(b[8:])) + batch.LogOverhead
	}
	cases := []struct {
		name    string
		corrupt func(t *testing.T, dir string) (file string, pos int)
		want    string
	}{
		{"flipped byte in a record", func(t *testing.T, dir string) (string, int) {
			p := filepath.Join(dir, victim)
			b, _ := os.ReadFile(p)
			at := secondBatch(b)
			b[at+batch.HeaderSize+2] ^= 0x55
			mustWrite(t, p, b)
			return p, at
		}, "crc"},
		{"torn tail", func(t *testing.T, dir string) (string, int) {
			p := filepath.Join(dir, logs[len(logs)-1])
			b, _ := os.ReadFile(p)
			// Cut the last batch in half: find its start first.
			pos, last := 0, 0
			for pos < len(b) {
				last = pos
				pos += int(binary.BigEndian.Uint32(b[pos+8:])) + batch.LogOverhead
			}
			mustWrite(t, p, b[:last+30])
			return p, last
		}, "overruns the file"},
		{"overlapping offsets", func(t *testing.T, dir string) (string, int) {
			p := filepath.Join(dir, victim)
			b, _ := os.ReadFile(p)
			at := secondBatch(b)
			binary.BigEndian.PutUint64(b[at:], binary.BigEndian.Uint64(b[0:])) // same base as the first batch
			mustWrite(t, p, b)
			return p, at
		}, "overlaps"},
		{"index entry off a batch start", func(t *testing.T, dir string) (string, int) {
			p := filepath.Join(dir, strings.TrimSuffix(victim, ".log")+".index")
			b, _ := os.ReadFile(p)
			require.GreaterOrEqual(t, len(b), 16, "index too small: %d", len(b))
			binary.BigEndian.PutUint32(b[8+4:], binary.BigEndian.Uint32(b[8+4:])+1)
			mustWrite(t, p, b)
			return p, 8
		}, "not the start of a batch"},
		{"time index timestamp", func(t *testing.T, dir string) (string, int) {
			p := filepath.Join(dir, strings.TrimSuffix(victim, ".log")+".timeindex")
			b, _ := os.ReadFile(p)
			binary.BigEndian.PutUint64(b[0:], binary.BigEndian.Uint64(b[0:])-1)
			mustWrite(t, p, b)
			return p, 0
		}, "has max timestamp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTree(t, src)
			file, pos := c.corrupt(t, dir)
			before := snapshot(t, dir)
			code, out, _ := runDump(t, "--verify", "--quiet", dir)
			require.Equal(t, 1, code, "exit %d, want 1\n%s", code, out)
			want := fmt.Sprintf("PROBLEM: %s position %d: ", file, pos)
			require.Contains(t, out, want, "output lacks %q ... %q:\n%s", want, c.want, out)
			require.Contains(t, out, c.want, "output lacks %q ... %q:\n%s", want, c.want, out)
			checkUnchanged(t, dir, before)
		})
	}
}

func mustWrite(t *testing.T, p string, b []byte) {
	t.Helper()
	// Keep the modification time moving so snapshots differ from the source.
	require.NoError(t, os.WriteFile(p, b, 0o644))
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

func TestUsage(t *testing.T) {
	code, _, _ := runDump(t)
	assert.Equal(t, 2, code, "no args: exit %d", code)
	code, _, _ = runDump(t, "--nope", "x")
	assert.Equal(t, 2, code, "bad flag: exit %d", code)
	code, _, errs := runDump(t, filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, 2, code, "missing path: exit %d %q", code, errs)
	assert.NotEqual(t, "", errs, "missing path: exit %d %q", code, errs)
	f := filepath.Join(t.TempDir(), "notes.txt")
	mustWrite(t, f, []byte("hi"))
	code, _, _ = runDump(t, f)
	assert.Equal(t, 2, code, "non-segment file: exit %d", code)
}

func TestUsedEntries(t *testing.T) {
	entry := func(b ...byte) []byte { return append(make([]byte, 8-len(b)), b...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	zero := make([]byte, 8)
	cases := []struct {
		name      string
		b         []byte
		n, unused int
		stale     bool
	}{
		{"empty file", nil, 0, 0, false},
		{"all preallocated", cat(zero, zero, zero), 0, 3, false},
		{"trimmed", cat(entry(1), entry(2)), 2, 0, false},
		{"entries then preallocated", cat(entry(1), entry(2), zero, zero), 2, 2, false},
		{"hole in the middle", cat(entry(1), zero, entry(3)), 3, 0, true},
		{"zero first slot then entries", cat(zero, entry(2)), 2, 0, false},
		{"one zero slot, trimmed", zero, 1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, unused, stale := usedEntries(c.b, 8)
			require.Equal(t, c.n, n, "got %d %d %t, want %d %d %t", n, unused, stale, c.n, c.unused, c.stale)
			require.Equal(t, c.unused, unused, "got %d %d %t, want %d %d %t", n, unused, stale, c.n, c.unused, c.stale)
			require.Equal(t, c.stale, stale, "got %d %d %t, want %d %d %t", n, unused, stale, c.n, c.unused, c.stale)
		})
	}
}

// A closed segment whose records all have timestamp 0 has a time index of
// one entry, timestamp 0 at its base offset: twelve zero bytes, which Kafka
// and partlog write and Kafka's tool prints. dumplog prints and checks it
// instead of taking it for a preallocated slot; the same twelve bytes
// beside a batch whose max timestamp is not 0 are a wrong entry.
func TestDumpTimeIndexEntryAtZero(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "z-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	bld := batch.NewBuilder(batch.BuilderOptions{})
	require.NoError(t, bld.AddAt(batch.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 0}))
	b, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(b)
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	require.NoError(t, p.Close())
	ti := filepath.Join(dir, segment.FileName(0, segment.TimeIndexSuffix))
	require.Equal(t, make([]byte, timeEntry), mustRead(t, ti), "partlog's time index of the segment")

	code, out, errs := runDump(t, "--verify", "--index", dir)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	assert.Contains(t, out, segment.FileName(0, segment.TimeIndexSuffix)+"\ntimestamp: 0 offset: 0\n", "the entry is not printed:\n%s", out)
	assert.NotContains(t, out, "preallocated", "the entry is taken for a preallocated slot:\n%s", out)

	// The same time index beside a batch stamped 1000: its entry is wrong.
	bld.Reset(batch.BuilderOptions{})
	require.NoError(t, bld.AddAt(batch.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000}))
	b, err = bld.Build()
	require.NoError(t, err)
	mustWrite(t, filepath.Join(dir, segment.FileName(0, segment.LogSuffix)), b)
	code, out, _ = runDump(t, "--verify", "--quiet", dir)
	want := fmt.Sprintf("PROBLEM: %s position 0: entry 0: timestamp 0, but the batch holding offset 0", ti)
	require.Equal(t, 1, code, "exit %d, want %q:\n%s", code, want, out)
	require.Contains(t, out, want, "exit %d, want %q:\n%s", code, want, out)
}

// Kafka before 4.0 adds at most one offset index entry per append: the
// append's largest offset at the position of its first batch. A follower
// appends what it fetched, many batches at once, and the cleaner a whole
// cleaned chunk, so their index entries name the last offset of a later
// batch than the one at the position. Lookups stay right (every offset at
// or past the entry's lies at or past its position); --verify takes such an
// entry for the sound one it is, and still reports one naming an offset
// before the batch at its position.
func TestVerifyFollowerIndexEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "f-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var log []byte
	var starts []int
	for i := range 4 {
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: int64(2 * i)})
		for j := range 2 {
			require.NoError(t, bld.Add(batch.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: int64(1000 + 2*i + j)}))
		}
		b, err := bld.Build()
		require.NoError(t, err)
		starts = append(starts, len(log))
		log = append(log, b...)
	}
	mustWrite(t, filepath.Join(dir, segment.FileName(0, segment.LogSuffix)), log)
	// One append of batches 1-3 (offsets 2..7): the entry (7, start of batch 1).
	offsetIndex := func(rel int32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(rel)), uint32(starts[1]))
	}
	ti := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 1007), 7)
	mustWrite(t, filepath.Join(dir, segment.FileName(0, segment.TimeIndexSuffix)), ti)
	idx := filepath.Join(dir, segment.FileName(0, segment.IndexSuffix))
	mustWrite(t, idx, offsetIndex(7))
	code, out, errs := runDump(t, "--verify", "--index", dir)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	require.Contains(t, out, fmt.Sprintf("offset: 7 position: %d\n", starts[1]), "exit %d\n%s", code, out)
	require.Contains(t, out, " 0 problems", "exit %d\n%s", code, out)

	// An entry naming offset 1, before the batch at its position (2..3):
	// a lookup of offset 1 would start past it.
	mustWrite(t, idx, offsetIndex(1))
	code, out, _ = runDump(t, "--verify", "--quiet", dir)
	want := fmt.Sprintf("PROBLEM: %s position 0: entry 0: offset 1 is before the batch at position %d", idx, starts[1])
	require.Equal(t, 1, code, "exit %d, want %q:\n%s", code, want, out)
	require.Contains(t, out, want, "exit %d, want %q:\n%s", code, want, out)
}

// --records prints a control record's coordinator epoch only for the
// transaction markers that carry one: a KRaft control record
// (LEADER_CHANGE, SNAPSHOT_HEADER, ...) has a value of its own, shown as
// it is, not read as a marker's epoch.
func TestDumpKRaftControlRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bld := batch.NewBuilder(batch.BuilderOptions{Control: true})
	key := []byte{0, 0, 0, byte(batch.ControlLeaderChange)}
	value := []byte{0, 0, 0, 0, 0, 7, 0, 0, 0, 0}
	require.NoError(t, bld.AddAt(batch.Record{Offset: 0, Key: key, Value: value, Timestamp: 1000}))
	b, err := bld.Build()
	require.NoError(t, err)
	mustWrite(t, filepath.Join(dir, segment.FileName(0, segment.LogSuffix)), b)
	code, out, errs := runDump(t, "--records", dir)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	require.Contains(t, out, "| offset: 0 CreateTime: 1000 control: LEADER_CHANGE value: 0x00000000000700000000\n", "%s", out)
	require.NotContains(t, out, "coordinatorEpoch", "%s", out)
}

// TestDumpLegacyMessages: magic 1 messages and gzip wrappers Kafka wrote
// among v2 batches are printed (fields, records) and verified (CRC-32,
// inner messages, offsets); a flipped byte in one is a PROBLEM naming the
// file and position.
func TestDumpLegacyMessages(t *testing.T) {
	dir := copyTree(t, filepath.Join("testdata", "legacy", "mixed-0"))
	before := snapshot(t, dir)
	code, out, errs := runDump(t, "--records", "--verify", dir)
	require.Equal(t, 0, code, "exit %d\n%s\n%s", code, out, errs)
	require.NotContains(t, out, "PROBLEM", "exit %d\n%s\n%s", code, out, errs)
	for _, want := range []string{
		"baseOffset: 0 lastOffset: 0 position: 0 size: 72 magic: 1 codec: none",
		"baseOffset: 18 lastOffset: 19 position: 1517 size: 130 magic: 1 codec: gzip crc: 3689980426 crcValid: true valid: true",
		`| offset: 18 timestamp: 1633374040551 keySize: 3 valueSize: 33 key: "eta"`,
		`| offset: 19 timestamp: 1633374040837 keySize: 5 valueSize: 33 key: "theta"`,
		"baseOffset: 4 lastOffset: 4 count: 1 position: 356 size: 106 magic: 2",
	} {
		assert.Contains(t, out, want, "output lacks %q:\n%s", want, out)
	}
	got := snapshot(t, dir)
	require.Equal(t, fmt.Sprint(before), fmt.Sprint(got), "dumplog changed a file")

	path := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[200] ^= 0x20 // inside the gzip wrapper at position 143
	require.NoError(t, os.WriteFile(path, data, 0o644))
	code, out, _ = runDump(t, "--verify", "--quiet", dir)
	want := fmt.Sprintf("PROBLEM: %s position 143: legacy message (magic 1) at offset 2:", path)
	require.Equal(t, 1, code, "exit %d, want a PROBLEM %q:\n%s", code, want, out)
	require.Contains(t, out, want, "exit %d, want a PROBLEM %q:\n%s", code, want, out)
	require.Contains(t, out, "crc", "exit %d, want a PROBLEM %q:\n%s", code, want, out)
}

// TestREADMEDumplogCommands runs every `go run ./examples/dumplog` line of
// dumplog's README (in-process, the same flags) against a log directory partlog
// wrote: DIR and /tmp/partlog-broker stand for that directory. Each must
// exit 0 and print the segments; a README line no test runs fails here.
func TestREADMEDumplogCommands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	root := t.TempDir()
	writePartition(t, filepath.Join(root, "orders-0"), true)
	const prog = "go run ./examples/dumplog"
	var lines int
	for _, line := range strings.Split(string(readme), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, prog+" ") {
			continue
		}
		lines++
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		var args []string
		for _, a := range strings.Fields(strings.TrimPrefix(line, prog)) {
			a = strings.Replace(a, "/tmp/partlog-broker", root, 1)
			if a == "DIR" {
				a = root
			}
			args = append(args, a)
		}
		code, out, errs := runDump(t, args...)
		require.Equal(t, 0, code, "%s: exit %d\n%s\n%s", line, code, out, errs)
		if !strings.Contains(line, "--quiet") {
			assert.Contains(t, out, "Starting offset:", "%s printed no segment", line)
		}
	}
	require.Equal(t, 3, lines, "the README's dumplog lines changed: run the new ones here")
}

// The dump walks a .log with the walk recovery uses (segment.Check): an
// entry that frames but fails its CRC is reported and the dump goes on
// after it; where the bytes stop framing, the damage is named as recovery
// classifies it: a torn tail at the end of the file, corruption when valid
// batches follow.
func TestDumpReportsDamageAsRecoveryDoes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "t-0")
	writePartition(t, src, true)
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	var logs []string
	for _, e := range ents {
		if _, suf, ok := segment.ParseFileName(e.Name()); ok && suf == segment.LogSuffix {
			logs = append(logs, e.Name())
		}
	}
	require.GreaterOrEqual(t, len(logs), 2)
	// starts returns the positions of the batches of a .log.
	starts := func(b []byte) []int {
		var out []int
		for pos := 0; pos < len(b); pos += int(binary.BigEndian.Uint32(b[pos+8:])) + batch.LogOverhead {
			out = append(out, pos)
		}
		return out
	}
	cases := []struct {
		name   string
		victim string
		damage func(b []byte) (int, []byte)
		want   []string
	}{
		{"crc failure in the middle: the dump goes on", logs[0], func(b []byte) (int, []byte) {
			s := starts(b)
			b[s[1]+21] ^= 0x40 // attributes: the first byte the CRC covers
			return s[1], b
		}, []string{"valid: false", fmt.Sprintf("position: %d", starts(mustRead(t, filepath.Join(src, logs[0])))[2])}},
		{"length damaged with batches after it", logs[0], func(b []byte) (int, []byte) {
			s := starts(b)
			binary.BigEndian.PutUint32(b[s[1]+8:], 1<<30)
			return s[1], b
		}, []string{"corruption (recovery would cut here", "valid batches follow"}},
		{"half a batch at the end of the active segment", logs[len(logs)-1], func(b []byte) (int, []byte) {
			s := starts(b)
			last := s[len(s)-1]
			return last, b[:last+30]
		}, []string{"torn tail (recovery would truncate it)", "overruns the file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTree(t, src)
			p := filepath.Join(dir, c.victim)
			pos, b := c.damage(mustRead(t, p))
			mustWrite(t, p, b)
			before := snapshot(t, dir)
			code, out, _ := runDump(t, "--verify", dir)
			require.Equal(t, 1, code, "exit %d, want 1\n%s", code, out)
			require.Contains(t, out, fmt.Sprintf("PROBLEM: %s position %d: ", p, pos), out)
			for _, w := range c.want {
				require.Contains(t, out, w, out)
			}
			checkUnchanged(t, dir, before)
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

// writeTxnPartition writes a partition with two aborted transactions of
// producer 1 and a committed one of producer 2, so its segment has a
// .txnindex, and closes it. It returns the .txnindex path and its entries.
func writeTxnPartition(t *testing.T, dir string) (string, []segment.AbortedTxn) {
	t.Helper()
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	seq := map[int64]int32{}
	txn := func(pid int64, n int) {
		bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: pid, BaseSequence: seq[pid]}, Transactional: true})
		for i := range n {
			require.NoError(t, bld.Add(batch.Record{Value: fmt.Appendf(nil, "txn %d/%d", pid, i), Timestamp: time.Now().UnixMilli()}))
		}
		seq[pid] += int32(n)
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
	end := func(typ batch.ControlType, pid int64) {
		_, err := p.AppendMarker(batch.TxnMarker{Type: typ, ProducerID: pid})
		require.NoError(t, err)
	}
	txn(1, 3)
	txn(2, 2)
	end(batch.ControlAbort, 1)
	end(batch.ControlCommit, 2)
	txn(1, 2)
	end(batch.ControlAbort, 1)
	require.NoError(t, p.Close())
	path := filepath.Join(dir, segment.FileName(0, segment.TxnIndexSuffix))
	es, err := segment.DecodeTxnIndex(path, mustRead(t, path))
	require.NoError(t, err)
	require.Len(t, es, 2)
	return path, es
}

// dumplog prints a .txnindex as Kafka's tool does and --verify checks it
// against the segment's transaction markers: each damage is a problem
// naming the file (and the entry's position); nothing is modified.
func TestTxnIndex(t *testing.T) {
	src := filepath.Join(t.TempDir(), "txn-0")
	txnPath, es := writeTxnPartition(t, src)

	before := snapshot(t, src)
	code, out, _ := runDump(t, "--index", "--verify", src)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Dumping "+txnPath)
	require.Contains(t, out, fmt.Sprintf("version: 0 producerId: 1 firstOffset: %d lastOffset: %d lastStableOffset: %d",
		es[0].FirstOffset, es[0].LastOffset, es[0].LastStableOffset))
	require.Contains(t, out, fmt.Sprintf("version: 0 producerId: 1 firstOffset: %d lastOffset: %d lastStableOffset: %d",
		es[1].FirstOffset, es[1].LastOffset, es[1].LastStableOffset))
	checkUnchanged(t, src, before)
	// The file alone.
	code, out, _ = runDump(t, "--index", "--verify", txnPath)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "0 problems")

	encode := func(es ...segment.AbortedTxn) []byte {
		var b []byte
		for _, e := range es {
			b = segment.AppendTxnIndexEntry(b, e)
		}
		return b
	}
	commit := es[0].LastOffset + 1 // producer 2's COMMIT follows the first ABORT
	cases := []struct {
		name   string
		data   func(es []segment.AbortedTxn) []byte
		pos    int64 // -1: no position
		reason string
	}{
		{"torn entry", func(es []segment.AbortedTxn) []byte { return encode(es...)[:40] }, 34, "after the last whole"},
		{"unknown version", func(es []segment.AbortedTxn) []byte {
			b := encode(es...)
			b[35] = 9
			return b
		}, 34, "version 9"},
		{"out of order", func(es []segment.AbortedTxn) []byte { return encode(es[1], es[0]) }, 34, "does not increase"},
		{"outside the segment", func(es []segment.AbortedTxn) []byte {
			es[1].LastOffset += 50
			return encode(es...)
		}, 34, "outside the segment's offsets"},
		{"at a COMMIT marker", func(es []segment.AbortedTxn) []byte {
			return encode(es[0], segment.AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: commit, LastStableOffset: commit + 1}, es[1])
		}, 34, "is not an ABORT marker of producer 2"},
		{"last stable offset past the marker", func(es []segment.AbortedTxn) []byte {
			es[0].LastStableOffset = es[0].LastOffset + 5
			return encode(es...)
		}, 0, "last stable offset"},
		{"missing entry", func(es []segment.AbortedTxn) []byte { return encode(es[0]) }, -1, "no entry for the transaction of producer 1 aborted at offset"},
		{"first offset past the transaction's first batch", func(es []segment.AbortedTxn) []byte {
			es[0].FirstOffset++
			return encode(es...)
		}, 0, "the transaction's first batch is at"},
		{"file removed", nil, -1, "missing, but the segment's batches show 2 aborted transactions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyTree(t, src)
			p := filepath.Join(dir, filepath.Base(txnPath))
			if c.data == nil {
				require.NoError(t, os.Remove(p))
			} else {
				mustWrite(t, p, c.data(slices.Clone(es)))
			}
			before := snapshot(t, dir)
			code, out, _ := runDump(t, "--verify", "--quiet", dir)
			require.Equal(t, 1, code, out)
			want := fmt.Sprintf("PROBLEM: %s: ", p)
			if c.pos >= 0 {
				want = fmt.Sprintf("PROBLEM: %s position %d: ", p, c.pos)
			}
			require.Contains(t, out, want, out)
			require.Contains(t, out, c.reason, out)
			checkUnchanged(t, dir, before)
		})
	}
}
