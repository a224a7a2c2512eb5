package checkpoint

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/vfs"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// TestKafkaFixtures parses the checkpoint files a Kafka 2.7.1 broker wrote
// and writes them back to identical bytes.
func TestKafkaFixtures(t *testing.T) {
	offsetFiles := []struct {
		file    string
		entries int
		want    map[string]int64 // a few "topic partition" -> offset
	}{
		{RecoveryPointFile, 53, map[string]int64{"__consumer_offsets 17": 1, "__consumer_offsets 13": 0}},
		{ReplicationFile, 53, map[string]int64{"__consumer_offsets 29": 0}},
		{LogStartOffsetFile, 0, nil},
		{CleanerOffsetFile, 3, map[string]int64{"__consumer_offsets 28": 2, "__consumer_offsets 17": 1, "__consumer_offsets 39": 18}},
	}
	for _, tt := range offsetFiles {
		t.Run(tt.file, func(t *testing.T) {
			b := readTestdata(t, tt.file)
			entries, err := ReadOffsets(vfs.Default, filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			require.Len(t, entries, tt.entries, "%d entries, want %d", len(entries), tt.entries)
			got := make(map[string]int64)
			for _, e := range entries {
				got[e.Topic+" "+DirName(e.Topic, e.Partition)[len(e.Topic)+1:]] = e.Offset
			}
			for k, v := range tt.want {
				off, ok := got[k]
				assert.True(t, ok, "%s = %d, %v; want %d", k, off, ok, v)
				assert.Equal(t, v, off, "%s = %d, %v; want %d", k, off, ok, v)
			}
			out := Append(nil, OffsetFormat, entries)
			require.Equal(t, string(b), string(out), "re-written bytes differ:\n%q\n%q", out, b)
			// And through the atomic writer.
			mem := vfs.NewMem()
			require.NoError(t, WriteOffsets(mem, "/"+tt.file, entries))
			out = memRead(t, mem, "/"+tt.file)
			require.Equal(t, string(b), string(out), "written file differs:\n%q\n%q", out, b)
		})
	}
	epochFiles := []struct {
		file string
		want []EpochEntry
	}{
		{"leader-epoch-checkpoint", []EpochEntry{{0, 0}}},
		{"myTopic-0/leader-epoch-checkpoint", []EpochEntry{{0, 38}}},
	}
	for _, tt := range epochFiles {
		t.Run(tt.file, func(t *testing.T) {
			b := readTestdata(t, tt.file)
			entries, err := ReadLeaderEpochs(vfs.Default, filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			require.Len(t, entries, len(tt.want), "entries %v, want %v", entries, tt.want)
			require.Equal(t, tt.want[0], entries[0], "entries %v, want %v", entries, tt.want)
			out := Append(nil, EpochFormat, entries)
			require.Equal(t, string(b), string(out), "re-written bytes differ: %q vs %q", out, b)
		})
	}
}

func memRead(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

func TestParseCorrupt(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		pos   int64
		field string
	}{
		{"no newline after version", "0", 0, "version"},
		{"no newline after count", "0\n0", 2, "count"},
		{"unknown version", "1\n0\n", 0, "version"},
		{"version not a number", "x\n0\n", 0, "version"},
		{"version with plus", "+0\n0\n", 0, "version"},
		{"count with leading zero", "0\n01\n0 5\n", 2, "count"},
		{"negative count", "0\n-1\n", 2, "count"},
		{"huge count", "0\n2000000000\n0 5\n", 2, "count"},
		{"fewer entries", "0\n2\n0 5\n", 8, "count"},
		{"more entries", "0\n1\n0 5\n1 6\n", 8, "entry[1]"},
		{"torn last line", "0\n2\n0 5\n1 6", 8, "entry[1]"},
		{"crlf", "0\r\n0\r\n", 0, "version"},
		{"crlf in entry", "0\n1\n0 5\r\n", 4, "entry[0]"},
		{"tab separator", "0\n1\n0\t5\n", 4, "entry[0]"},
		{"double space", "0\n1\n0  5\n", 4, "entry[0]"},
		{"trailing space", "0\n1\n0 5 \n", 4, "entry[0]"},
		{"leading space", "0\n1\n 0 5\n", 4, "entry[0]"},
		{"too few fields", "0\n1\n5\n", 4, "entry[0]"},
		{"too many fields", "0\n1\n0 5 7\n", 4, "entry[0]"},
		{"bad epoch", "0\n1\nx 5\n", 4, "entry[0].epoch"},
		{"bad offset", "0\n1\n0 5x\n", 4, "entry[0].startOffset"},
		{"negative epoch", "0\n1\n-1 5\n", 4, "entry[0].epoch"},
		{"negative offset", "0\n1\n0 -5\n", 4, "entry[0].startOffset"},
		{"offset overflow", "0\n1\n0 9223372036854775808\n", 4, "entry[0].startOffset"},
		{"epoch overflow", "0\n1\n2147483648 0\n", 4, "entry[0].epoch"},
		{"blank line", "0\n1\n\n", 4, "entry[0]"},
		{"epochs not increasing", "0\n2\n1 5\n1 6\n", -1, "entry"},
		{"offsets decreasing", "0\n2\n1 5\n2 4\n", -1, "entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			f, _ := mem.Create("/leader-epoch-checkpoint")
			f.Write([]byte(tt.in))
			f.Close()
			_, err := ReadLeaderEpochs(mem, "/leader-epoch-checkpoint")
			require.True(t, base.IsCorruption(err), "err = %v, want corruption", err)
			var ce *base.CorruptionError
			require.ErrorAs(t, err, &ce, "not a CorruptionError: %v", err)
			require.Equal(t, "/leader-epoch-checkpoint", ce.File, "got file %q pos %d field %q (%v); want pos %d field %q", ce.File, ce.Pos, ce.Field, err, tt.pos, tt.field)
			require.Equal(t, tt.pos, ce.Pos, "got file %q pos %d field %q (%v); want pos %d field %q", ce.File, ce.Pos, ce.Field, err, tt.pos, tt.field)
			require.Equal(t, tt.field, ce.Field, "got file %q pos %d field %q (%v); want pos %d field %q", ce.File, ce.Pos, ce.Field, err, tt.pos, tt.field)
		})
	}
}

func TestOffsetsCorrupt(t *testing.T) {
	tests := []struct {
		name, in, field string
	}{
		{"control character in topic", "0\n1\nmy\x01topic 0 5\n", "entry[0]"},
		{"negative partition", "0\n1\nt -1 5\n", "entry[0].partition"},
		{"negative offset", "0\n1\nt 0 -5\n", "entry[0].offset"},
		{"partition overflow", "0\n1\nt 2147483648 5\n", "entry[0].partition"},
		{"duplicate partition", "0\n2\nt 0 5\nt 0 6\n", "entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMem()
			f, _ := mem.Create("/cp")
			f.Write([]byte(tt.in))
			f.Close()
			_, err := ReadOffsets(mem, "/cp")
			var ce *base.CorruptionError
			require.ErrorAs(t, err, &ce, "err = %v, want field %q", err, tt.field)
			require.Equal(t, tt.field, ce.Field, "err = %v, want field %q", err, tt.field)
		})
	}
}

func TestOffsetRoundTrip(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/data/myTopic-0", 0o755))
	path := filepath.Join("/data/myTopic-0", RecoveryPointFile)
	_, _, err := ReadOffset(mem, path, "myTopic", 0)
	require.ErrorIs(t, err, fs.ErrNotExist, "missing file: %v", err)
	require.NoError(t, WriteOffset(mem, path, "myTopic", 0, 1234))
	gotFile := string(memRead(t, mem, path))
	require.Equal(t, "0\n1\nmyTopic 0 1234\n", gotFile, "file %q", gotFile)
	off, found, err := ReadOffset(mem, path, "myTopic", 0)
	require.NoError(t, err, "ReadOffset = %d %v %v", off, found, err)
	require.True(t, found, "ReadOffset = %d %v %v", off, found, err)
	require.Equal(t, int64(1234), off, "ReadOffset = %d %v %v", off, found, err)
	_, found, err = ReadOffset(mem, path, "myTopic", 1)
	require.NoError(t, err, "other partition: %v %v", found, err)
	require.False(t, found, "other partition: %v %v", found, err)
	require.NoError(t, WriteOffset(mem, path, "myTopic", 0, 99))
	off, _, _ = ReadOffset(mem, path, "myTopic", 0)
	require.Equal(t, int64(99), off, "after overwrite %d", off)
	names, _ := mem.List("/data/myTopic-0")
	require.Len(t, names, 1, "files %v (tmp left?)", names)
	require.Equal(t, RecoveryPointFile, names[0], "files %v (tmp left?)", names)

	epochs := []EpochEntry{{0, 0}, {3, 100}, {4, 100}, {7, 250}}
	epath := filepath.Join("/data/myTopic-0", LeaderEpochFile)
	require.NoError(t, WriteLeaderEpochs(mem, epath, epochs))
	got, err := ReadLeaderEpochs(mem, epath)
	require.NoError(t, err, "ReadLeaderEpochs = %v %v", got, err)
	require.Len(t, got, len(epochs), "ReadLeaderEpochs = %v %v", got, err)
	for i := range got {
		require.Equal(t, epochs[i], got[i], "entry %d = %v", i, got[i])
	}
	require.NoError(t, WriteLeaderEpochs(mem, epath, nil))
	gotFile = string(memRead(t, mem, epath))
	require.Equal(t, "0\n0\n", gotFile, "empty epochs file %q", gotFile)
}

func TestWriteInvalid(t *testing.T) {
	mem := vfs.NewMem()
	tests := []struct {
		name string
		run  func() error
	}{
		{"bad topic", func() error { return WriteOffset(mem, "/cp", "a b", 0, 1) }},
		{"newline in topic", func() error { return WriteOffset(mem, "/cp", "a\nb", 0, 1) }},
		{"empty topic", func() error { return WriteOffset(mem, "/cp", "", 0, 1) }},
		{"negative partition", func() error { return WriteOffset(mem, "/cp", "t", -1, 1) }},
		{"negative offset", func() error { return WriteOffset(mem, "/cp", "t", 0, -1) }},
		{"duplicate", func() error {
			return WriteOffsets(mem, "/cp", []PartitionOffset{{"t", 0, 1}, {"t", 0, 2}})
		}},
		{"epoch order", func() error { return WriteLeaderEpochs(mem, "/e", []EpochEntry{{2, 0}, {1, 5}}) }},
		{"negative epoch", func() error { return WriteLeaderEpochs(mem, "/e", []EpochEntry{{-1, 0}}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			require.ErrorIs(t, err, ErrInvalidEntry, "err = %v", err)
		})
	}
	names, _ := mem.List("/")
	require.Empty(t, names, "invalid writes left files: %v", names)
}

// TestWriteOps checks the exact durable sequence of an atomic write.
func TestWriteOps(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	var ops []string
	in.SetHook(func(op vfs.Op) error {
		ops = append(ops, op.String())
		return nil
	})
	require.NoError(t, WriteOffset(in, "/cp", "t", 0, 5))
	want := []string{
		"create /cp.tmp", "write /cp.tmp len=10", "sync /cp.tmp", "close /cp.tmp",
		"rename /cp.tmp -> /cp", "openDir /", "sync /", "close /",
	}
	require.Equal(t, strings.Join(want, "\n"), strings.Join(ops, "\n"), "ops:\n%s\nwant:\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
}

// TestWriteFaultsAndCrashes fails every operation of a checkpoint write in
// turn and crashes after each: the checkpoint always reads back, old or
// new, and a successful write is durable.
func TestWriteFaultsAndCrashes(t *testing.T) {
	for k := int64(0); ; k++ {
		mem := vfs.NewMem()
		require.NoError(t, WriteOffset(mem, "/cp", "t", 0, 1))
		in := vfs.NewInjector(mem)
		in.FailNth(k, vfs.AllOps)
		err := WriteOffset(in, "/cp", "t", 0, 2)
		injected := in.Injected() > 0
		if injected {
			require.ErrorIs(t, err, vfs.ErrInjected, "k=%d: err = %v", k, err)
		}
		if !injected {
			require.NoError(t, err, "k=%d: clean run: %v", k, err)
		}
		for seed := range uint64(20) {
			c := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: seed})
			off, found, rerr := ReadOffset(c, "/cp", "t", 0)
			require.NoError(t, rerr, "k=%d seed=%d: %d %v %v\n%s", k, seed, off, found, rerr, c)
			require.True(t, found, "k=%d seed=%d: %d %v %v\n%s", k, seed, off, found, rerr, c)
			if off != 1 {
				require.Equal(t, int64(2), off, "k=%d seed=%d: %d %v %v\n%s", k, seed, off, found, rerr, c)
			}
			if !injected {
				require.Equal(t, int64(2), off, "k=%d seed=%d: acknowledged write lost", k, seed)
			}
		}
		if !injected {
			break
		}
	}
}

func TestParseDirName(t *testing.T) {
	tests := []struct {
		in        string
		topic     string
		partition int32
		ok        bool
	}{
		{"myTopic-0", "myTopic", 0, true},
		{"__consumer_offsets-17", "__consumer_offsets", 17, true},
		{"a-b-c-12", "a-b-c", 12, true},
		{"noDash", "", 0, false},
		{"-1", "", 0, false},
		{"t-", "", 0, false},
		{"t-01", "", 0, false},
		{"t--1", "t-", 1, true},
		{"t-x", "", 0, false},
		{"bad topic-1", "", 0, false},
		{"t-2147483648", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			topic, p, ok := ParseDirName(tt.in)
			require.Equal(t, tt.topic, topic, "= %q %d %v", topic, p, ok)
			require.Equal(t, tt.partition, p, "= %q %d %v", topic, p, ok)
			require.Equal(t, tt.ok, ok, "= %q %d %v", topic, p, ok)
			if ok {
				require.Equal(t, tt.in, DirName(topic, p), "DirName = %q", DirName(topic, p))
			}
		})
	}
	require.True(t, FormatTopic("any/name.ü"), "FormatTopic")
	require.False(t, FormatTopic("a b"), "FormatTopic")
	require.False(t, FormatTopic(""), "FormatTopic")
	require.False(t, ValidTopic(strings.Repeat("a", MaxTopicLength+1)), "ValidTopic limits")
	require.True(t, ValidTopic(strings.Repeat("a", MaxTopicLength)), "ValidTopic limits")
	require.False(t, ValidTopic("."), "ValidTopic limits")
	require.False(t, ValidTopic(".."), "ValidTopic limits")
}

func TestCleanShutdown(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	mem.SyncAll()
	ok, err := HasCleanShutdown(mem, "/p")
	require.False(t, ok, "fresh dir: %v %v", ok, err)
	require.NoError(t, err, "fresh dir: %v %v", ok, err)
	require.NoError(t, RemoveCleanShutdown(mem, "/p"), "remove missing")
	require.NoError(t, MarkCleanShutdown(mem, "/p"))
	c := mem.CrashClone(vfs.CrashOptions{})
	ok, err = HasCleanShutdown(c, "/p")
	require.True(t, ok, "marker not durable: %v %v", ok, err)
	require.NoError(t, err, "marker not durable: %v %v", ok, err)
	require.NoError(t, RemoveCleanShutdown(mem, "/p"))
	c = mem.CrashClone(vfs.CrashOptions{})
	ok, err = HasCleanShutdown(c, "/p")
	require.False(t, ok, "removal not durable: %v %v", ok, err)
	require.NoError(t, err, "removal not durable: %v %v", ok, err)
	ok, err = HasCleanShutdown(mem, "/missing/dir/x")
	require.False(t, ok, "missing dir: %v %v", ok, err)
	require.NoError(t, err, "missing dir: %v %v", ok, err)
	in := vfs.NewInjector(mem)
	in.Add(vfs.Rule{Kinds: vfs.Kinds(vfs.OpStat)})
	_, err = HasCleanShutdown(in, "/p")
	require.ErrorIs(t, err, vfs.ErrInjected, "stat error swallowed: %v", err)
}

// FuzzParse: whatever the input, Parse never panics, and what it accepts
// re-encodes to the same bytes.
func FuzzParse(f *testing.F) {
	for _, name := range []string{RecoveryPointFile, ReplicationFile, LogStartOffsetFile, CleanerOffsetFile,
		"leader-epoch-checkpoint", "myTopic-0/leader-epoch-checkpoint"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte("0\n2\n0 5\n1 6\n"))
	f.Add([]byte(""))
	f.Add([]byte("0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Kafka's short files (empty, or the version line alone) read as
		// no entries and are written back whole.
		if string(b) == "" || string(b) == "0\n" {
			b = []byte("0\n0\n")
		}
		if es, err := Parse("f", b, EpochFormat); err == nil {
			out := Append(nil, EpochFormat, es)
			require.Equal(t, string(b), string(out), "epochs round trip: %q -> %q", b, out)
		} else {
			require.True(t, base.IsCorruption(err), "non-corruption error %v", err)
		}
		if os, err := Parse("f", b, OffsetFormat); err == nil {
			out := Append(nil, OffsetFormat, os)
			require.Equal(t, string(b), string(out), "offsets round trip: %q -> %q", b, out)
		} else {
			require.True(t, base.IsCorruption(err), "non-corruption error %v", err)
		}
	})
}

func TestEntryName(t *testing.T) {
	for _, tt := range []struct {
		dir, topic string
		partition  int32
	}{
		{"/data/myTopic-0", "myTopic", 0},
		{"/data/__consumer_offsets-17", "__consumer_offsets", 17},
		{"/data/plain", "plain", 0},
		{"/data/with space\tand tab", "with_space_and_tab", 0},
		{"/data/topic--1", "topic-", 1}, // split at the last dash, as Kafka does
		{"/data/-5", "-5", 0},           // no topic before the dash
	} {
		topic, partition := EntryName(tt.dir)
		assert.Equal(t, tt.topic, topic, "EntryName(%q) = %q, %d; want %q, %d", tt.dir, topic, partition, tt.topic, tt.partition)
		assert.Equal(t, tt.partition, partition, "EntryName(%q) = %q, %d; want %q, %d", tt.dir, topic, partition, tt.topic, tt.partition)
		assert.True(t, ValidTopic(topic), "EntryName(%q) gives the invalid topic field %q", tt.dir, topic)
	}
}

// TestParseKafkaShortFiles: an empty file (Kafka's CheckpointFile creates
// one before its first write) and a file that ends after its version line
// are no entries, as Kafka's CheckpointReadBuffer reads them, in every
// format; a version line without its newline is still refused.
func TestParseKafkaShortFiles(t *testing.T) {
	for _, in := range []string{"", "0\n"} {
		es, err := Parse("f", []byte(in), EpochFormat)
		require.NoError(t, err, "%q", in)
		require.Empty(t, es)
		os, err := Parse("f", []byte(in), OffsetFormat)
		require.NoError(t, err, "%q", in)
		require.Empty(t, os)
	}
	_, err := Parse("f", []byte("1\n"), EpochFormat)
	require.True(t, base.IsCorruption(err), "an unknown version is refused even with no count: %v", err)
}
