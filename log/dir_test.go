package log_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// copyTree copies testdata/<src> (files and one level of directories)
// into a fresh directory and returns it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "kafka-logs")
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(filepath.Join("testdata", src))
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			d := copyFixtureFrom(t, src, e.Name())
			require.NoError(t, os.Rename(d, filepath.Join(dst, e.Name())))
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	return dst
}

// logRecorder is a slog handler that keeps the records' messages and
// attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, m)
	l.mu.Unlock()
	return nil
}

// recoveredFrom returns, per partition directory base name, the first
// segment an unclean open recovered.
func (l *logRecorder) recoveredFrom() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	for _, r := range l.recs {
		if r["msg"] == "partlog/log: recovering after an unclean shutdown" {
			out[filepath.Base(r["dir"].(string))] = r["fromSegment"].(int64)
		}
	}
	return out
}

// TestOpenDirKafka opens the log directories Kafka brokers wrote, root
// checkpoints and all: every partition directory is found, each recovers
// only from the segment holding its recovery point in Kafka's
// recovery-point-offset-checkpoint, the high watermarks come from
// replication-offset-checkpoint and the cleaner offsets from
// cleaner-offset-checkpoint; meta.properties is left alone; Close leaves
// the clean-shutdown marker and root files holding the partitions the
// directory has, and the next OpenDir recovers nothing.
func TestOpenDirKafka(t *testing.T) {
	type part struct {
		name                string
		recoveredFrom       int64 // first segment recovered (Kafka's recovery point)
		logEnd, hw, cleaner int64 // cleaner -1: none
	}
	for _, tc := range []struct {
		set   string
		parts []part
	}{
		{"kafka-2.7.1", []part{
			{"__consumer_offsets-17", 1, 3, 3, 1},  // rp 1
			{"__consumer_offsets-28", 2, 3, 3, 2},  // rp 3, segments 0 and 2
			{"__consumer_offsets-33", 0, 3, 3, -1}, // rp 3, one segment
			{"__consumer_offsets-39", 18, 20, 20, 18},
			{"__consumer_offsets-8", 0, 3, 3, -1},
			{"myTopic-0", 38, 38, 38, -1},
		}},
		{"kafka-source-code", []part{
			{"__consumer_offsets-17", 58, 60, 0, 58}, // rp 60; no replication file: hw at the log start
		}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			dir := copyTree(t, tc.set)
			meta, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
			require.NoError(t, err)
			rec := &logRecorder{}
			cfg := plog.DirConfig{Config: plog.Config{DisableAutoHighWatermark: true, Logger: slog.New(rec)}}
			d, err := plog.OpenDir(dir, cfg)
			require.NoError(t, err)
			var names []string
			for _, tp := range d.Partitions() {
				names = append(names, tp.String())
			}
			var want []string
			for _, p := range tc.parts {
				want = append(want, p.name)
			}
			require.ElementsMatch(t, want, names)
			// Progress through the logger: the last report has them all.
			loaded := int64(-1)
			for _, r := range rec.recs {
				if r["msg"] == "partlog/log: loading log directory" && r["loaded"] != nil {
					loaded = r["loaded"].(int64)
					require.Equal(t, int64(len(tc.parts)), r["of"])
				}
			}
			require.Equal(t, int64(len(tc.parts)), loaded, "progress logged")
			from := rec.recoveredFrom()
			for _, want := range tc.parts {
				topic, n, ok := checkpoint.ParseDirName(want.name)
				require.True(t, ok)
				p := d.Partition(topic, n)
				require.NotNil(t, p, want.name)
				assert.Equal(t, want.recoveredFrom, from[want.name], "%s: first segment recovered", want.name)
				assert.Equal(t, want.logEnd, p.LogEndOffset(), want.name)
				assert.Equal(t, want.hw, p.HighWatermark(), "%s: high watermark", want.name)
				off, found, err := p.CleanerCheckpoint()
				require.NoError(t, err)
				if want.cleaner < 0 {
					assert.False(t, found, want.name)
				} else {
					assert.True(t, found, want.name)
					assert.Equal(t, want.cleaner, off, "%s: cleaner checkpoint", want.name)
				}
			}
			require.NoError(t, d.Close())

			got, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
			require.NoError(t, err)
			require.Equal(t, meta, got)
			_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
			require.NoError(t, err, "clean-shutdown marker")
			rps, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, checkpoint.RecoveryPointFile))
			require.NoError(t, err)
			require.Len(t, rps, len(tc.parts), "one recovery point per partition held")
			for _, e := range rps {
				topic, n, _ := checkpoint.ParseDirName(checkpoint.DirName(e.Topic, e.Partition))
				for _, want := range tc.parts {
					if want.name == checkpoint.DirName(topic, n) {
						assert.Equal(t, want.logEnd, e.Offset, "%s: recovery point after a clean close", want.name)
					}
				}
			}
			for _, p := range tc.parts {
				_, err := os.Stat(filepath.Join(dir, p.name, checkpoint.RecoveryPointFile))
				require.ErrorIs(t, err, os.ErrNotExist, "no per-partition checkpoint in a Dir")
			}

			rec2 := &logRecorder{}
			cfg.Config.Logger = slog.New(rec2)
			d, err = plog.OpenDir(dir, cfg)
			require.NoError(t, err)
			require.Empty(t, rec2.recoveredFrom(), "a clean open recovers nothing")
			for _, want := range tc.parts {
				topic, n, _ := checkpoint.ParseDirName(want.name)
				assert.Equal(t, want.logEnd, d.Partition(topic, n).LogEndOffset())
			}
			require.NoError(t, d.Close())
		})
	}
}

// TestOpenDirKafkaLogStart: a log start offset Kafka's DeleteRecords moved
// is recorded in the root log-start-offset-checkpoint; OpenDir honours it
// (the deleted records stay unreadable), where Open of the partition
// directory alone cannot see it.
func TestOpenDirKafkaLogStart(t *testing.T) {
	dir := copyTree(t, "kafka-2.7.1")
	// As Kafka writes it after DeleteRecords(__consumer_offsets-39, 17).
	require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.LogStartOffsetFile),
		[]byte("0\n2\n__consumer_offsets 39 17\nmyTopic 0 38\n"), 0o644))

	alone, err := plog.Open(filepath.Join(dir, "__consumer_offsets-39"), plog.Config{})
	require.NoError(t, err)
	require.Equal(t, int64(0), alone.LogStartOffset(), "Open alone does not read the root file")
	require.NoError(t, alone.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "__consumer_offsets-39", checkpoint.CleanShutdownFile)))

	d, err := plog.OpenDir(dir, plog.DirConfig{})
	require.NoError(t, err)
	p := d.Partition("__consumer_offsets", 39)
	require.Equal(t, int64(17), p.LogStartOffset())
	_, err = p.ReadFrom(4, 1<<20)
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "records Kafka deleted stay deleted")
	require.Equal(t, int64(38), d.Partition("myTopic", 0).LogStartOffset())
	require.NoError(t, p.DeleteRecordsBefore(18))
	require.NoError(t, d.Close())

	got, err := os.ReadFile(filepath.Join(dir, checkpoint.LogStartOffsetFile))
	require.NoError(t, err)
	require.Equal(t, "0\n2\n__consumer_offsets 39 18\nmyTopic 0 38\n", string(got))
}

// TestOpenDirKafkaCleanLogStartPastSegments: Kafka's DeleteRecords only
// moves the log start (UnifiedLog.maybeIncrementLogStartOffset); the
// segments wholly below it go at the broker's next retention pass, so a
// clean shutdown in between leaves log-start-offset-checkpoint past the
// second segment's base with the first segment still there. OpenDir keeps
// that log start, under every policy: StrictRecovery used to refuse the
// directory and DefaultRecovery to ignore the checkpoint, serving the
// records Kafka had deleted again. A retention pass then deletes the
// segment below it, and the log start survives the next OpenDir.
func TestOpenDirKafkaCleanLogStartPastSegments(t *testing.T) {
	for name, policy := range map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict": plog.StrictRecovery{}} {
		t.Run(name, func(t *testing.T) {
			dir := copyTree(t, "kafka-2.7.1")
			// As Kafka leaves it after DeleteRecords(__consumer_offsets-39,
			// 19) and a clean shutdown: segments 0 and 18 both there.
			require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.LogStartOffsetFile),
				[]byte("0\n1\n__consumer_offsets 39 19\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.CleanShutdownFile), nil, 0o644))
			cfg := plog.DirConfig{Config: plog.Config{Recovery: policy}}
			d, err := plog.OpenDir(dir, cfg)
			require.NoError(t, err, "a directory Kafka closed cleanly")
			p := d.Partition("__consumer_offsets", 39)
			require.Equal(t, int64(19), p.LogStartOffset())
			require.Len(t, p.SegmentInfos(), 2)
			_, err = p.ReadFrom(4, 1<<20)
			require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "records Kafka deleted stay deleted")
			recs, err := p.ReadFrom(19, 1<<20)
			require.NoError(t, err)
			require.NoError(t, recs.Close())
			require.NoError(t, p.Verify())

			_, err = p.DeleteExpired(context.Background(), belowLogStart{})
			require.NoError(t, err)
			require.Len(t, p.SegmentInfos(), 1, "the segment wholly below the log start")
			require.Equal(t, int64(19), p.LogStartOffset())
			require.NoError(t, d.Close())

			d, err = plog.OpenDir(dir, cfg)
			require.NoError(t, err)
			require.Equal(t, int64(19), d.Partition("__consumer_offsets", 39).LogStartOffset())
			require.NoError(t, d.Close())
		})
	}
}

// TestOpenDirLeavesKRaftMetadataLog: the first log directory of a KRaft
// broker holds the Raft layer's metadata log, __cluster_metadata-0,
// which Kafka's LogManager does not load as a partition, and Kafka refuses
// to create a topic of that name. OpenDir used to open it as a partition of
// the Dir (Partitions listed it, a DirRunner's retention would have
// deleted its segments) and wrote into it: index files, a producer
// snapshot, entries in the root checkpoints. It is now left alone, byte
// for byte, and CreatePartition refuses the name.
func TestOpenDirLeavesKRaftMetadataLog(t *testing.T) {
	dir := copyTree(t, "kafka-2.7.1")
	meta := filepath.Join(dir, "__cluster_metadata-0")
	require.NoError(t, os.Rename(copyFixtureFrom(t, "kafka-2.7.1", "__consumer_offsets-8"), meta))
	require.NoError(t, os.WriteFile(filepath.Join(meta, "quorum-state"),
		[]byte(`{"leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}`), 0o644))
	before := readTree(t, meta)

	d, err := plog.OpenDir(dir, plog.DirConfig{})
	require.NoError(t, err)
	for _, tp := range d.Partitions() {
		require.NotEqual(t, "__cluster_metadata", tp.Topic)
	}
	require.Len(t, d.Partitions(), 6)
	_, err = d.CreatePartition("__cluster_metadata", 0)
	require.ErrorIs(t, err, plog.ErrInvalidPartition)
	_, err = d.CreatePartition("__cluster_metadata", 1)
	require.ErrorIs(t, err, plog.ErrInvalidPartition)
	require.NoError(t, d.Close())

	require.Equal(t, before, readTree(t, meta), "the metadata log is the Raft layer's")
	for _, name := range []string{checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile, checkpoint.ReplicationFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotContains(t, string(b), "__cluster_metadata", name)
	}
}

// readTree returns the files of dir (no subdirectories) by name.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// belowLogStart is a retention policy that expires the segments lying
// wholly below the log start offset (Kafka's log start breach).
type belowLogStart struct{}

func (belowLogStart) Expired(v *plog.View) int {
	segs := v.Segments()
	n := 0
	for n+1 < len(segs) && segs[n+1].BaseOffset <= v.LogStartOffset() {
		n++
	}
	return n
}

// TestDirRootFilesGolden: the root files a Dir writes are Kafka's: version
// 0, the entry count, then "topic partition offset" lines (sorted here;
// Kafka's order is its hash map's), byte for byte.
func TestDirRootFilesGolden(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 1 << 10, SegmentIndexBytes: 1024}}
	cfg.TopicConfig = func(topic string) *plog.Config {
		if topic == "replicated" {
			return &plog.Config{DisableAutoHighWatermark: true, SegmentBytes: 1 << 10, SegmentIndexBytes: 1024}
		}
		return nil
	}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	for _, tp := range []plog.TopicPartition{{"orders", 1}, {"orders", 0}, {"__consumer_offsets", 7}, {"replicated", 0}} {
		p, err := d.CreatePartition(tp.Topic, tp.Partition)
		require.NoError(t, err)
		for i := range 3 {
			_, err := p.AppendBatch(logtest.MakeBatch(5, 10, 1700000000000+int64(i), byte(i)))
			require.NoError(t, err)
		}
	}
	require.NoError(t, d.Partition("orders", 1).DeleteRecordsBefore(7))
	require.NoError(t, d.Partition("replicated", 0).SetHighWatermark(12))
	require.NoError(t, d.Close())

	golden := map[string]string{
		checkpoint.RecoveryPointFile:  "0\n4\n__consumer_offsets 7 15\norders 0 15\norders 1 15\nreplicated 0 15\n",
		checkpoint.LogStartOffsetFile: "0\n4\n__consumer_offsets 7 0\norders 0 0\norders 1 7\nreplicated 0 0\n",
		checkpoint.ReplicationFile:    "0\n1\nreplicated 0 12\n",
		checkpoint.CleanerOffsetFile:  "0\n0\n",
	}
	for name, want := range golden {
		f, err := mem.Open(filepath.Join("/logs", name))
		require.NoError(t, err, name)
		b := make([]byte, 4096)
		n, _ := f.ReadAt(b, 0)
		require.NoError(t, f.Close())
		require.Equal(t, want, string(b[:n]), name)
	}
	names, err := mem.List("/logs")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{".kafka_cleanshutdown", ".lock", "__consumer_offsets-7", "cleaner-offset-checkpoint",
		"log-start-offset-checkpoint", "orders-0", "orders-1", "recovery-point-offset-checkpoint",
		"replicated-0", "replication-offset-checkpoint"}, names)
	names, err = mem.List("/logs/orders-1")
	require.NoError(t, err)
	// Close leaves the producer snapshot at the log end, as Kafka does.
	require.ElementsMatch(t, []string{"00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
		"00000000000000000015.snapshot"},
		names, "no per-partition checkpoint, lock or marker")
}

// TestOpenDirLocked: a second OpenDir of an open directory fails with
// ErrLocked and changes nothing; after Close it opens.
func TestOpenDirLocked(t *testing.T) {
	for name, fs := range map[string]vfs.FS{"os": vfs.Default, "mem": vfs.NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs")
			cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 1024}}
			d, err := plog.OpenDir(dir, cfg)
			require.NoError(t, err)
			_, err = d.CreatePartition("t", 0)
			require.NoError(t, err)
			_, err = plog.OpenDir(dir, cfg)
			require.ErrorIs(t, err, plog.ErrLocked)
			require.Contains(t, err.Error(), dir)
			require.NoError(t, d.Close())
			require.ErrorIs(t, d.Close(), plog.ErrClosed)
			d, err = plog.OpenDir(dir, cfg)
			require.NoError(t, err)
			require.NotNil(t, d.Partition("t", 0))
			require.NoError(t, d.Close())
		})
	}
}

// TestOpenAloneCrashInClosedDir: a partition of a Dir closed cleanly,
// opened on its own afterwards (the Dir closed, so Open may own it) and
// crashed there, is recovered by the next OpenDir. The Dir's
// clean-shutdown marker used to vouch for it all the same: OpenDir opened
// the crashed partition as clean, and refused the whole directory (a
// sealed segment torn or short, offsets missing) for about half of these
// crashes, or served a torn batch (seed 38). Open of a closed Dir's
// partition now removes the Dir's marker first; one closed cleanly on its
// own still opens clean, by its own marker.
func TestOpenAloneCrashInClosedDir(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 400, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	for i := range 2 {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		for range 3 {
			_, err = p.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
			require.NoError(t, err)
		}
	}
	require.NoError(t, d.Close())

	// The rolls' flushes left to the test: the crash states depend on
	// the seeds alone.
	q, err := plog.Open("/logs/t-0", plog.WithManualRollFlush(cfg.Config))
	require.NoError(t, err)
	for range 3 {
		_, err = q.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
		require.NoError(t, err)
	}
	require.NoError(t, q.Sync())
	synced := q.LogEndOffset()
	for range 4 { // a roll whose flush has not run
		_, err = q.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
		require.NoError(t, err)
	}
	for seed := range uint64(40) {
		c := cfg
		c.Config.FS = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: seed})
		d, err := plog.OpenDir("/logs", c)
		require.NoError(t, err, "seed %d", seed)
		p := d.Partition("t", 0)
		require.False(t, p.Stats().Recovery.Clean, "seed %d: the partition crashed", seed)
		require.GreaterOrEqual(t, p.LogEndOffset(), synced, "seed %d", seed)
		require.NoError(t, p.Verify(), "seed %d", seed)
		require.NoError(t, d.Close())
	}
	require.NoError(t, q.Close())

	d, err = plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.True(t, d.Partition("t", 0).Stats().Recovery.Clean, "closed cleanly on its own")
	require.Equal(t, q.LogEndOffset(), d.Partition("t", 0).LogEndOffset())
	require.NoError(t, d.Close())
}

// TestDirAndOpenAloneExcludeEachOther is the reliability issue's fourth
// case: a Dir and an Open of one of its partitions on its own, in one
// process or two, must not both own the partition (on 86b910c both
// appended: 6,000 batches acknowledged under FlushMessages 1, 204 stored).
// Whichever comes second gets ErrLocked and changes nothing; once the
// first owner closes, the other opens.
func TestDirAndOpenAloneExcludeEachOther(t *testing.T) {
	for name, fs := range map[string]vfs.FS{"os": vfs.Default, "mem": vfs.NewMem()} {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "logs")
			part := filepath.Join(root, "t-0")
			cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 1024}}
			d, err := plog.OpenDir(root, cfg)
			require.NoError(t, err)
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 0, 1))
			require.NoError(t, err)

			q, err := plog.Open(part, cfg.Config)
			require.ErrorIs(t, err, plog.ErrLocked, "Open alone of a Dir's partition")
			require.Nil(t, q)
			require.Contains(t, err.Error(), part)
			_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 0, 2))
			require.NoError(t, err, "the Dir's partition is untouched")
			require.NoError(t, d.Close())

			q, err = plog.Open(part, cfg.Config)
			require.NoError(t, err, "the Dir closed")
			require.Equal(t, int64(3), q.LogEndOffset())
			_, err = plog.OpenDir(root, cfg)
			require.ErrorIs(t, err, plog.ErrLocked, "OpenDir while a partition is open alone")
			require.Contains(t, err.Error(), part)
			require.NoError(t, q.Close())

			d, err = plog.OpenDir(root, cfg)
			require.NoError(t, err, "the partition closed")
			require.Equal(t, int64(3), d.Partition("t", 0).LogEndOffset())
			require.NoError(t, d.Close())
		})
	}
	t.Run("another process", func(t *testing.T) {
		if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
			t.Skip("without flock(2) the lock only excludes owners within one process")
		}
		root := filepath.Join(t.TempDir(), "logs")
		d, err := plog.OpenDir(root, plog.DirConfig{})
		require.NoError(t, err)
		p, err := d.CreatePartition("t", 0)
		require.NoError(t, err)
		_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 0, 1))
		require.NoError(t, err)
		require.Equal(t, "locked", runLockChild(t, filepath.Join(root, "t-0")))
		require.Equal(t, int64(2), p.LogEndOffset())
		require.NoError(t, d.Close())
		require.Equal(t, "opened", runLockChild(t, filepath.Join(root, "t-0")))
	})
}

// TestDirDeleteDirNames is the Kafka-semantics issue's fifth and sixth
// cases. DeletePartition of a topic of Kafka's longest legal name (249
// characters) works: the "-delete" name's topic part is cut so that the
// name fits 255 bytes, as Kafka's LocalLog.logDeleteDirName cuts it (on
// 86b910c the rename failed with ENAMETOOLONG from 214 characters on, and
// the partition came back after a reopen). OpenDir removes only the
// directories Kafka's DeleteDirPattern (^(\S+)-(\S+)\.(\S+)-delete$)
// matches: a user's "backup-to-delete" stays (86b910c removed it).
func TestDirDeleteDirNames(t *testing.T) {
	root := filepath.Join(t.TempDir(), "logs")
	cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: 1024}}
	long := strings.Repeat("t", 249)
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	for _, topic := range []string{long, "short"} {
		p, err := d.CreatePartition(topic, 7)
		require.NoError(t, err)
		_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 0, 1))
		require.NoError(t, err)
	}
	require.NoError(t, d.DeletePartition(long, 7))
	require.Nil(t, d.Partition(long, 7))
	require.NoError(t, d.Close())

	user := filepath.Join(root, "backup-to-delete")
	require.NoError(t, os.MkdirAll(user, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(user, "keep"), []byte("mine"), 0o644))
	crashed := filepath.Join(root, "short-3.0123456789abcdef0123456789abcdef-delete")
	require.NoError(t, os.MkdirAll(crashed, 0o755))

	d, err = plog.OpenDir(root, cfg)
	require.NoError(t, err)
	require.Nil(t, d.Partition(long, 7), "the deleted partition stays deleted")
	require.NotNil(t, d.Partition("short", 7))
	require.NoError(t, d.Close())
	_, err = os.Stat(filepath.Join(user, "keep"))
	require.NoError(t, err, "a directory that only ends in -delete is the user's")
	_, err = os.Stat(crashed)
	require.ErrorIs(t, err, fs.ErrNotExist, "a deletion a crash interrupted is finished")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		require.LessOrEqual(t, len(e.Name()), 255)
		require.False(t, strings.HasPrefix(e.Name(), long), "%s", e.Name())
	}
}

// TestDirCreateDelete: partitions are created (idempotently) and deleted
// Kafka's way; names Kafka refuses are refused; a "-delete" directory a
// crash left is removed by OpenDir, other entries are left alone.
func TestDirCreateDelete(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	_, err = d.CreatePartition("bad topic", 0)
	require.ErrorIs(t, err, plog.ErrInvalidPartition)
	_, err = d.CreatePartition("t", -1)
	require.ErrorIs(t, err, plog.ErrInvalidPartition)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	again, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	require.Same(t, p, again)
	_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 1, 1))
	require.NoError(t, err)
	require.NoError(t, p.DeleteRecordsBefore(2))
	require.NoError(t, d.DeletePartition("t", 0))
	require.ErrorIs(t, d.DeletePartition("t", 0), plog.ErrUnknownPartition)
	require.Nil(t, d.Partition("t", 0))
	names, err := mem.List("/logs")
	require.NoError(t, err)
	require.NotContains(t, names, "t-0")
	// A new partition of the same name starts afresh.
	p, err = d.CreatePartition("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.LogStartOffset())
	require.NoError(t, d.Close())

	// What a crash leaves: a renamed directory not yet removed, plus
	// entries a Dir does not own.
	require.NoError(t, mem.MkdirAll("/logs/gone-3.0123456789abcdef0123456789abcdef-delete", 0o755))
	f, err := mem.Create("/logs/gone-3.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, mem.MkdirAll("/logs/t-1.0123456789abcdef0123456789abcdef-future", 0o755))
	require.NoError(t, mem.MkdirAll("/logs/not a partition", 0o755))
	f, err = mem.Create("/logs/meta.properties")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	d, err = plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.Equal(t, []plog.TopicPartition{{"t", 0}}, d.Partitions())
	require.NoError(t, d.Close())
	names, err = mem.List("/logs")
	require.NoError(t, err)
	require.NotContains(t, names, "gone-3.0123456789abcdef0123456789abcdef-delete")
	require.Subset(t, names, []string{"t-1.0123456789abcdef0123456789abcdef-future", "not a partition", "meta.properties"})
}

// TestDirCreateFailureLeavesNoPartition: a CreatePartition whose root
// file write fails (the disk is full) returns the error and leaves no
// partition behind. It used to leave the new directory with its first
// segment: the Dir did not hold the partition, but the next OpenDir
// loaded it, so a topic whose creation had failed (a broker's
// CreateTopics answered with the error) came back after a restart.
func TestDirCreateFailureLeavesNoPartition(t *testing.T) {
	for _, file := range []string{plog.LogStartOffsetCheckpointFile, checkpoint.RecoveryPointFile} {
		t.Run(file, func(t *testing.T) {
			mem := vfs.NewMem()
			in := vfs.NewInjector(mem)
			cfg := plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: 1024}}
			d, err := plog.OpenDir("/logs", cfg)
			require.NoError(t, err)
			in.Add(vfs.Rule{Err: syscall.ENOSPC, Match: func(op vfs.Op) bool {
				return filepath.Base(op.Path) == file+checkpoint.TmpSuffix
			}, Times: -1})
			_, err = d.CreatePartition("t", 0)
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.Empty(t, d.Partitions())
			// A "-delete" directory may stay (the root files could not be
			// rewritten): the next OpenDir removes it.
			names, err := mem.List("/logs")
			require.NoError(t, err)
			require.NotContains(t, names, "t-0")
			in.Reset()
			require.NoError(t, d.Close())

			d, err = plog.OpenDir("/logs", cfg)
			require.NoError(t, err)
			require.Empty(t, d.Partitions(), "the partition whose creation failed")
			names, err = mem.List("/logs")
			require.NoError(t, err)
			for _, name := range names {
				require.False(t, strings.HasPrefix(name, "t-0"), "%s left by the failed create", name)
			}
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			_, err = p.AppendBatch(logtest.MakeBatch(2, 10, 0, 1))
			require.NoError(t, err)
			require.NoError(t, d.Close())
		})
	}
}

// TestDirRootCheckpointCorrupt: a root file that does not parse goes to
// the policy: DefaultRecovery opens without it (and rewrites it),
// StrictRecovery refuses and changes nothing.
func TestDirRootCheckpointCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	_, err = d.CreatePartition("t", 0)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	f, err := mem.Create("/logs/" + checkpoint.LogStartOffsetFile)
	require.NoError(t, err)
	_, err = f.Write([]byte("0\n1\nt 0 x\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	strict := cfg
	strict.Config.Recovery = plog.StrictRecovery{}
	_, err = plog.OpenDir("/logs", strict)
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)
	_, err = mem.Stat("/logs/" + checkpoint.CleanShutdownFile)
	require.NoError(t, err, "a refusal changes nothing")

	d, err = plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	entries, err := checkpoint.ReadOffsets(mem, "/logs/"+checkpoint.LogStartOffsetFile)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// dirSnapshot describes every partition of a Dir.
func dirSnapshot(d *plog.Dir) map[plog.TopicPartition][4]int64 {
	out := map[plog.TopicPartition][4]int64{}
	for _, tp := range d.Partitions() {
		p := d.Partition(tp.Topic, tp.Partition)
		out[tp] = [4]int64{p.LogStartOffset(), p.HighWatermark(), p.LogEndOffset(), int64(len(p.SegmentInfos()))}
	}
	return out
}

// TestOpenDirParallel: loading after a crash with 1 and with 2 recovery
// threads gives the same partitions (run with -race).
func TestOpenDirParallel(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 600, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	for i := range 24 {
		p, err := d.CreatePartition(fmt.Sprintf("topic%d", i%3), int32(i))
		require.NoError(t, err)
		for j := range 2 + i%5 {
			_, err := p.AppendBatch(logtest.MakeBatch(4, 40, int64(j), byte(i)))
			require.NoError(t, err)
		}
		if i%4 == 0 {
			require.NoError(t, p.Sync())
		}
		if i%6 == 0 {
			require.NoError(t, p.DeleteRecordsBefore(4))
		}
	}
	var snaps []map[plog.TopicPartition][4]int64
	// One crash (the rolls' background flushes may still be running: the
	// live directory changes), recovered twice from copies of it.
	state := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: 7})
	for _, threads := range []int{1, 2} {
		crashed := state.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
		c := cfg
		c.Config.FS = crashed
		c.RecoveryThreads = threads
		d2, err := plog.OpenDir("/logs", c)
		require.NoError(t, err)
		snaps = append(snaps, dirSnapshot(d2))
		require.NoError(t, d2.Close())
	}
	require.Len(t, snaps[0], 24)
	require.Equal(t, snaps[0], snaps[1])
	require.NoError(t, d.Close())
}

// TestDirCrashRootCheckpoints crashes a Dir's history at every filesystem
// operation (with a random share of the unsynced writes surviving) and
// reopens the directory from what survived: it must open, every
// acknowledged DeleteRecordsBefore must hold (no deleted record readable
// again) and no log start may pass what was asked, an acknowledged created
// partition is there and an acknowledged deleted one gone, and acknowledged
// synced batches are there.
func TestDirCrashRootCheckpoints(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	type acks struct {
		logStart map[plog.TopicPartition]int64 // acknowledged
		synced   map[plog.TopicPartition]int64
		created  map[plog.TopicPartition]string // "yes", "deleting", "no"
	}
	tps := []plog.TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}}
	// walkAcks are what a run acknowledged: cur all of it, atCrash what
	// it acknowledged before the crash.
	type walkAcks struct{ cur, atCrash acks }
	newAcks := func() acks {
		return acks{map[plog.TopicPartition]int64{}, map[plog.TopicPartition]int64{}, map[plog.TopicPartition]string{}}
	}
	points, _ := crashAtEveryOp(t, crashWalk[*walkAcks]{
		setup: func(*testing.T, vfs.FS) *walkAcks { return &walkAcks{newAcks(), newAcks()} },
		run: func(t *testing.T, fs vfs.FS, w *walkAcks, crashed func() bool) {
			ack := func(f func(*acks)) {
				f(&w.cur)
				if !crashed() {
					f(&w.atCrash)
				}
			}
			cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentBytes: 400, SegmentIndexBytes: 1024}, RecoveryThreads: 2}
			d, err := plog.OpenDir("/logs", cfg)
			require.NoError(t, err)
			for _, tp := range tps {
				_, err := d.CreatePartition(tp.Topic, tp.Partition)
				require.NoError(t, err)
				ack(func(a *acks) { a.created[tp] = "yes" })
			}
			for round := range 3 {
				for i, tp := range tps {
					p := d.Partition(tp.Topic, tp.Partition)
					for range 2 {
						_, err := p.AppendBatch(logtest.MakeBatch(3, 30, int64(round), byte(i)))
						require.NoError(t, err)
					}
					require.NoError(t, p.Sync())
					end := p.LogEndOffset()
					ack(func(a *acks) { a.synced[tp] = end })
					to := end - 2
					require.NoError(t, p.DeleteRecordsBefore(to))
					ack(func(a *acks) { a.logStart[tp] = to })
				}
			}
			a1 := plog.TopicPartition{Topic: "a", Partition: 1}
			ack(func(a *acks) { a.created[a1] = "deleting" })
			require.NoError(t, d.DeletePartition("a", 1))
			ack(func(a *acks) { a.created[a1] = "no" })
			require.NoError(t, d.Close())
		},
		options: randomCrash(rng),
		// The rolls' flushes run in the background.
		mayEndEarly: true,
		check: func(t *testing.T, w *walkAcks, clone *vfs.MemFS, at crashPoint) {
			where := at.String()
			d, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: clone, SegmentBytes: 400, SegmentIndexBytes: 1024}})
			require.NoError(t, err, where)
			for tp, state := range w.atCrash.created {
				p := d.Partition(tp.Topic, tp.Partition)
				switch {
				case state == "no":
					require.Nil(t, p, "%s: %s was deleted", where, tp)
					continue
				case state == "deleting" && p == nil:
					continue
				}
				require.NotNil(t, p, "%s: %s was created", where, tp)
				require.GreaterOrEqual(t, p.LogStartOffset(), w.atCrash.logStart[tp], "%s: %s log start", where, tp)
				require.LessOrEqual(t, p.LogStartOffset(), w.cur.logStart[tp], "%s: %s log start", where, tp)
				require.GreaterOrEqual(t, p.LogEndOffset(), w.atCrash.synced[tp], "%s: %s synced batches", where, tp)
				if start := p.LogStartOffset(); start > 0 {
					_, err := p.ReadFrom(start-1, 1)
					require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, where)
				}
			}
			require.NoError(t, d.Close(), where)
		},
	})
	require.Greater(t, points, 10)
}

// TestDirRollSyncsPartitionDir: a roll flushes the sealed segment and
// moves the recovery point to the new one; in a Dir the recovery point is
// at the root, so the roll must sync the partition directory itself, or a
// crash loses the entry of a flushed segment (a hole the next OpenDir
// refuses). Only synced state survives the crash here.
func TestDirRollSyncsPartitionDir(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 600, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	for i := range 7 { // 2 batches a segment: rolls at 8, 16, 24
		_, err := p.AppendBatch(logtest.MakeBatch(4, 40, int64(i), 1))
		require.NoError(t, err)
	}
	require.Len(t, p.SegmentInfos(), 4)
	// The rolls' flush runs in the background (on the Dir's flush
	// scheduler); once it ran, the sealed segments and their entries in
	// the partition directory are durable, and the recovery point (in the
	// root file, whose fsync does not cover the partition directory)
	// names the last of them.
	require.NoError(t, p.FlushRolled())
	crashed := mem.CrashClone(vfs.CrashOptions{})
	cfg.Config.FS = crashed
	cfg.Config.Recovery = plog.StrictRecovery{AllowTornTail: true}
	d2, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.GreaterOrEqual(t, d2.Partition("t", 0).LogEndOffset(), int64(24), "every sealed segment was flushed")
	require.NoError(t, d2.Close())
	require.NoError(t, d.Close())
}

// TestOpenDirAdoptsPartitionsOpenedAlone: a directory of partitions that
// were opened alone (partlog's layout before Dir, e.g. examples/broker's
// data directories) opens as a Dir with their own checkpoints: a log start
// DeleteRecordsBefore moved holds, and a partition its own Close marked
// clean is not recovered. The entries then live in the root files.
func TestOpenDirAdoptsPartitionsOpenedAlone(t *testing.T) {
	mem := vfs.NewMem()
	pcfg := plog.Config{FS: mem, SegmentIndexBytes: 1024}
	for i, clean := range []bool{true, false} {
		p, err := plog.Open(fmt.Sprintf("/logs/t-%d", i), pcfg)
		require.NoError(t, err)
		for j := range 4 {
			_, err := p.AppendBatch(logtest.MakeBatch(2, 10, int64(j), 1))
			require.NoError(t, err)
		}
		require.NoError(t, p.DeleteRecordsBefore(int64(3+i)))
		if clean {
			require.NoError(t, p.Close())
			continue
		}
		require.NoError(t, p.Sync())
		mem = mem.CrashClone(vfs.CrashOptions{}) // t-1 crashes; t-0 is closed
		pcfg.FS = mem
	}
	rec := &logRecorder{}
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentIndexBytes: 1024, Logger: slog.New(rec)}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.Equal(t, int64(3), d.Partition("t", 0).LogStartOffset())
	require.Equal(t, int64(4), d.Partition("t", 1).LogStartOffset())
	require.Equal(t, int64(8), d.Partition("t", 1).LogEndOffset())
	from := rec.recoveredFrom()
	require.NotContains(t, from, "t-0", "closed cleanly alone: not recovered")
	require.Contains(t, from, "t-1", "crashed: recovered")
	require.NoError(t, d.Close())
	entries, err := checkpoint.ReadOffsets(mem, "/logs/"+checkpoint.LogStartOffsetFile)
	require.NoError(t, err)
	require.Equal(t, []checkpoint.PartitionOffset{{Topic: "t", Partition: 0, Offset: 3}, {Topic: "t", Partition: 1, Offset: 4}}, entries)
}

// TestOpenDirRemovesPartitionMarker: a clean-shutdown marker an Open
// alone left in a partition directory is stale once the directory belongs
// to a Dir (whose marker is at its root): OpenDir removes it, after a clean
// shutdown of the Dir and after a crash, and a partition without one is
// opened without trying to remove it.
func TestOpenDirRemovesPartitionMarker(t *testing.T) {
	for _, dirClean := range []bool{true, false} {
		t.Run(fmt.Sprintf("dirClean=%v", dirClean), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentIndexBytes: 4096}}
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			for i := range 2 {
				p, err := d.CreatePartition("t", int32(i))
				require.NoError(t, err)
				_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 1, 1))
				require.NoError(t, err)
			}
			require.NoError(t, d.Close())
			// Partition 0 opened alone once: its own marker.
			alone, err := plog.Open("/data/t-0", plog.Config{FS: mem, SegmentIndexBytes: 4096})
			require.NoError(t, err)
			require.NoError(t, alone.Close())
			_, err = mem.Stat(filepath.Join("/data/t-0", checkpoint.CleanShutdownFile))
			require.NoError(t, err, "the marker Open alone wrote")
			// Open alone removed the Dir's marker (a crash of the
			// partition must not pass for clean); in the dirClean case it
			// is put back, as an Open alone of an older partlog left it.
			_, err = mem.Stat(filepath.Join("/data", checkpoint.CleanShutdownFile))
			require.ErrorIs(t, err, fs.ErrNotExist, "the Dir's marker, after Open alone")
			if dirClean {
				require.NoError(t, checkpoint.MarkCleanShutdown(mem, "/data"))
			}

			in := vfs.NewInjector(mem)
			var removes []string
			in.SetHook(func(op vfs.Op) error {
				if op.Kind == vfs.OpRemove && filepath.Base(op.Path) == checkpoint.CleanShutdownFile {
					removes = append(removes, op.Path)
				}
				return nil
			})
			cfg.Config.FS = in
			d, err = plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			in.SetHook(nil)
			_, err = mem.Stat(filepath.Join("/data/t-0", checkpoint.CleanShutdownFile))
			require.ErrorIs(t, err, fs.ErrNotExist, "the stale marker is gone")
			assert.NotContains(t, removes, filepath.Join("/data/t-1", checkpoint.CleanShutdownFile), "no remove of a marker the listing shows absent")
			assert.Equal(t, int64(3), d.Partition("t", 0).LogEndOffset())
			assert.Equal(t, int64(3), d.Partition("t", 1).LogEndOffset())
			require.NoError(t, d.Close())
		})
	}
}

// TestDirRecreateAfterFailedRootRemove: DeletePartition drops the
// partition's entries from the root files; when a rewrite fails there
// (here the high watermark file's), the file on disk still holds the old
// partition's entry. CreatePartition of the same name must still leave no
// entry of the old partition for the new one: it used to see none in
// memory and write nothing, so a crash before anything else rewrote the
// file gave the new partition the old one's high watermark, and records it
// never committed (its high watermark was 2) were served after the reopen.
func TestDirRecreateAfterFailedRootRemove(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := func(fs vfs.FS) plog.DirConfig {
		return plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 1024, DisableAutoHighWatermark: true}}
	}
	d, err := plog.OpenDir("/logs", cfg(in))
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(10, 10, 1, 1))
	require.NoError(t, err)
	require.NoError(t, p.SetHighWatermark(10))
	require.NoError(t, p.Sync()) // the root files hold 10 for t-0
	hwFile := filepath.Join("/logs", plog.HighWatermarkCheckpointFile)
	in.FailOnce(func(op vfs.Op) bool { return op.Kind == vfs.OpRename && op.NewPath == hwFile })
	require.ErrorIs(t, d.DeletePartition("t", 0), vfs.ErrInjected)
	require.Nil(t, d.Partition("t", 0))

	p, err = d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(6, 10, 1, 1))
	require.NoError(t, err)
	require.NoError(t, p.SetHighWatermark(2))
	require.NotContains(t, string(readFileT(t, mem, hwFile)), "t 0 10", "the old partition's entry")

	// A crash now, every write kept: the new partition's high watermark
	// is one it had, not the old partition's.
	d2, err := plog.OpenDir("/logs", cfg(mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})))
	require.NoError(t, err)
	p2 := d2.Partition("t", 0)
	require.NotNil(t, p2)
	require.Equal(t, int64(6), p2.LogEndOffset())
	require.LessOrEqual(t, p2.HighWatermark(), int64(2))
	require.NoError(t, d2.Close())
	require.NoError(t, d.Close())
}

// TestDirDeleteRenameFailsChangesNothing: a DeletePartition whose rename
// of the directory to its "-delete" name fails has deleted nothing, and
// must say so: the partition stays in the Dir (closed: OpenPartition
// reopens it with its records) and DeletePartition may be called again. It
// used to drop the partition from the Dir all the same, leaving its
// directory in place: DeletePartition could not be retried
// (ErrUnknownPartition), and a CreatePartition of the name opened the old
// directory, serving the records the user had asked to delete.
func TestDirDeleteRenameFailsChangesNothing(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	d, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: 1024}})
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = p.AppendBatch(logtest.MakeBatch(5, 10, 1, 1))
	require.NoError(t, err)
	in.FailOnce(func(op vfs.Op) bool { return op.Kind == vfs.OpRename && op.Path == "/logs/t-0" })
	require.ErrorIs(t, d.DeletePartition("t", 0), vfs.ErrInjected)

	_, err = d.Lookup("t", 0)
	require.ErrorIs(t, err, plog.ErrClosed, "still the Dir's, closed")
	p, err = d.OpenPartition("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), p.LogEndOffset(), "nothing was deleted")

	require.NoError(t, d.DeletePartition("t", 0), "retried")
	p, err = d.CreatePartition("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.LogEndOffset(), "a new partition, not the deleted one")
	require.NoError(t, d.Close())
}

// TestOpenAloneThenDirKeepsLogStart: a partition of a closed Dir opened on
// its own, whose log start moves there, keeps that log start at the next
// OpenDir. The Dir's root files used to keep the partition's entries from
// before, and OpenDir let them win over the partition's own files: with
// the first segment deleted alone, OpenDir refused the whole directory
// (offsets [0, 18) missing below the root's log start 0); with less
// deleted, it served the deleted records again. Open alone also ignored
// the root files, serving again the records the Dir had deleted (its log
// start was 4). Open alone now takes the root entries over as its own
// files and drops them from the root before it changes anything.
func TestOpenAloneThenDirKeepsLogStart(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{Config: plog.Config{FS: mem, SegmentBytes: 400, SegmentIndexBytes: 1024}}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	other, err := d.CreatePartition("t", 1)
	require.NoError(t, err)
	for range 8 {
		_, err = p.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
		require.NoError(t, err)
	}
	_, err = other.AppendBatch(logtest.MakeBatch(3, 30, 1, 1))
	require.NoError(t, err)
	require.NoError(t, p.DeleteRecordsBefore(4))
	require.NoError(t, other.DeleteRecordsBefore(2))
	require.NoError(t, d.Close())

	q, err := plog.Open("/logs/t-0", cfg.Config)
	require.NoError(t, err)
	require.Equal(t, int64(4), q.LogStartOffset(), "the Dir's log start")
	require.NoError(t, q.DeleteRecordsBefore(19))
	require.Greater(t, q.SegmentInfos()[0].BaseOffset, int64(0), "segment 0 deleted")
	require.NoError(t, q.Close())

	d, err = plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.Equal(t, int64(19), d.Partition("t", 0).LogStartOffset())
	require.Equal(t, int64(2), d.Partition("t", 1).LogStartOffset(), "the other partition's entry stays")
	require.Equal(t, int64(24), d.Partition("t", 0).LogEndOffset())
	require.NoError(t, d.Partition("t", 0).DeleteRecordsBefore(21))
	require.NoError(t, d.Close())

	// And back alone: the Dir's newer log start wins over the partition's
	// own file, which the Dir left as it was.
	q, err = plog.Open("/logs/t-0", cfg.Config)
	require.NoError(t, err)
	require.Equal(t, int64(21), q.LogStartOffset())
	require.NoError(t, q.Close())
	d, err = plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	require.Equal(t, int64(21), d.Partition("t", 0).LogStartOffset())
	require.NoError(t, d.Close())
}
