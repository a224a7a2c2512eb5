package compaction

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// testLog is a partition the tests append to and compact: a
// *log.Partition (the only owner of the files; the policies hand it their
// plans) with the settings it was opened with.
type testLog struct {
	*plog.Partition
	fs       vfs.FS
	dir      string
	cfg      segment.Config
	segBytes int64
}

// openTestLog opens (or creates) the partition in dir: log.Open finishes
// or undoes what a crash left of a swap or a deletion.
func openTestLog(fsys vfs.FS, dir string, cfg segment.Config, segBytes int64) (*testLog, error) {
	return openTestLogConfig(fsys, dir, cfg, segBytes, false)
}

// openTestLogConfig is openTestLog; manualHW leaves the high watermark to
// SetHighWatermark.
func openTestLogConfig(fsys vfs.FS, dir string, cfg segment.Config, segBytes int64, manualHW bool) (*testLog, error) {
	p, err := plog.Open(dir, plog.Config{FS: fsys, SegmentBytes: segBytes, SegmentIndexBytes: cfg.MaxIndexBytes,
		IndexIntervalBytes: cfg.IndexIntervalBytes, DisableAutoHighWatermark: manualHW,
		// The tests date records freely (years back, years ahead).
		MessageTimestampBeforeMax: plog.NoTimestampLimit, MessageTimestampAfterMax: plog.NoTimestampLimit})
	if err != nil {
		return nil, err
	}
	return &testLog{Partition: p, fs: fsys, dir: dir, cfg: cfg, segBytes: segBytes}, nil
}

// append appends b, rolling when the active segment is full.
func (l *testLog) append(b batch.Batch) (int64, error) { return l.AppendBatch(b) }

// roll seals the active segment and starts a new one.
func (l *testLog) roll() error { return l.Roll() }

func (l *testLog) sync() error { return l.Sync() }

func (l *testLog) close() error {
	if err := l.Close(); err != nil && !errors.Is(err, plog.ErrClosed) {
		return err
	}
	return nil
}

// rec is one record read back.
type rec struct {
	Offset    int64
	Timestamp int64
	Key       string
	Value     string
	Null      bool // value is null (a tombstone)
	NoKey     bool
}

// readAll reads every record from the log start to the log end,
// checking each batch (and legacy message) and that batches and records
// only grow in offset; control batches (transaction markers) are skipped.
func (l *testLog) readAll(t testing.TB) []rec {
	t.Helper()
	var out []rec
	var dec batch.Decoder
	last := int64(-1)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rs, err := l.ReadFromFollower(off, 1<<20)
		require.NoError(t, err, "ReadFromFollower(%d)", off)
		next := rs.NextOffset()
		for b, err := range rs.Batches() {
			if le, ok := errors.AsType[*plog.LegacyEntryError](err); ok {
				require.NoError(t, dec.ValidateLegacy(le.Entry))
				recs, err := dec.AppendLegacyRecords(nil, le.Entry, true)
				require.NoError(t, err)
				require.Greater(t, recs[0].Offset, last, "legacy message at %d after offset %d", recs[0].Offset, last)
				last = le.NextOffset - 1
				for _, r := range recs {
					if r.Offset >= off {
						out = append(out, rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: string(r.Key), Value: string(r.Value),
							Null: r.Value == nil, NoKey: r.Key == nil})
					}
				}
				continue
			}
			require.NoError(t, err)
			require.NoError(t, b.Validate())
			require.Greater(t, b.BaseOffset(), last, "batch at %d after offset %d", b.BaseOffset(), last)
			last = b.LastOffset()
			if b.Attributes().IsControl() {
				continue
			}
			for r, err := range b.All(&dec) {
				require.NoError(t, err)
				if r.Offset < off {
					continue
				}
				out = append(out, rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: string(r.Key), Value: string(r.Value),
					Null: r.Value == nil, NoKey: r.Key == nil})
			}
		}
		require.NoError(t, rs.Close())
		require.Greater(t, next, off, "ReadFromFollower(%d) made no progress", off)
		off = next
	}
	for i := 1; i < len(out); i++ {
		require.Greater(t, out[i].Offset, out[i-1].Offset, "offsets not increasing: %d after %d", out[i].Offset, out[i-1].Offset)
	}
	return out
}

// segInfos returns the partition's segments.
func (l *testLog) segInfos() []plog.SegmentInfo { return l.SegmentInfos() }

// fold folds records into the table a consumer of a compacted topic
// builds: the latest value per key, tombstones deleting.
func fold(recs []rec) map[string]string {
	m := make(map[string]string)
	for _, r := range recs {
		if r.NoKey {
			continue
		}
		if r.Null {
			delete(m, r.Key)
		} else {
			m[r.Key] = r.Value
		}
	}
	return m
}

// kv is a record to append; a "" value with null set is a tombstone; a nil
// key is keyless.
type kv struct {
	key   []byte
	value []byte
	ts    int64
}

func buildBatch(t testing.TB, codec batch.Compression, prod *batch.Producer, recs ...kv) batch.Batch {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: codec, Producer: prod})
	for _, r := range recs {
		require.NoError(t, bld.Add(batch.Record{Key: r.key, Value: r.value, Timestamp: r.ts}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return b
}

func k(s string) []byte { return []byte(s) }

// smallCfg is a segment config for small test segments.
func smallCfg() segment.Config {
	return segment.Config{IndexIntervalBytes: 64, MaxIndexBytes: 4096, MaxSegmentBytes: 1 << 20}
}

func newMemLog(t testing.TB, segBytes int64) (*testLog, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	l, err := openTestLog(mem, "/p/topic-0", smallCfg(), segBytes)
	require.NoError(t, err)
	return l, mem
}

func newOSLog(t testing.TB, segBytes int64) *testLog {
	t.Helper()
	l, err := openTestLog(vfs.Default, filepath.Join(t.TempDir(), "topic-0"), smallCfg(), segBytes)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.close() })
	return l
}
