package compaction

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// testLog is a minimal partition over real segments, implementing Log the
// way log.Partition is asked to: one mutex for writers, owner references
// on the segments, RecoverDir at open.
type testLog struct {
	fs       vfs.FS
	dir      string
	cfg      segment.Config
	segBytes int64

	mu       sync.Mutex
	segs     []*segment.Segment
	logStart int64
	hw       int64 // -1: the log end
	closed   bool
	cleaning bool // a compaction round holds the claim
}

var errChanged = fmt.Errorf("test log: %w", ErrSegmentsChanged)

func openTestLog(fsys vfs.FS, dir string, cfg segment.Config, segBytes int64) (*testLog, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := RecoverDir(fsys, dir); err != nil {
		return nil, err
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, n := range names {
		if b, suf, ok := segment.ParseFileName(n); ok && suf == segment.LogSuffix {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	l := &testLog{fs: fsys, dir: dir, cfg: cfg, segBytes: segBytes, hw: -1}
	for i, b := range bases {
		s, err := segment.Open(fsys, dir, b, cfg)
		if err != nil {
			return nil, fmt.Errorf("open segment %d: %w", b, err)
		}
		if i == len(bases)-1 {
			if err := s.Unseal(); err != nil {
				return nil, err
			}
		}
		l.segs = append(l.segs, s)
	}
	if len(l.segs) == 0 {
		s, err := segment.Create(fsys, dir, 0, cfg)
		if err != nil {
			return nil, err
		}
		l.segs = append(l.segs, s)
	}
	for i := 1; i < len(l.segs); i++ {
		if l.segs[i-1].NextOffset() > l.segs[i].BaseOffset() {
			return nil, fmt.Errorf("overlapping segments %d and %d", l.segs[i-1].BaseOffset(), l.segs[i].BaseOffset())
		}
	}
	l.logStart = l.segs[0].BaseOffset()
	return l, nil
}

func (l *testLog) Dir() string                   { return l.dir }
func (l *testLog) FS() vfs.FS                    { return l.fs }
func (l *testLog) SegmentConfig() segment.Config { return l.cfg }
func (l *testLog) SegmentBytes() int64           { return l.segBytes }

func (l *testLog) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart
}

func (l *testLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hw >= 0 {
		return l.hw
	}
	return l.segs[len(l.segs)-1].NextOffset()
}

func (l *testLog) LogEnd() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segs[len(l.segs)-1].NextOffset()
}

func (l *testLog) Segments() ([]*segment.Segment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("test log closed")
	}
	out := slices.Clone(l.segs)
	for _, s := range out {
		s.Ref()
	}
	return out, nil
}

func (l *testLog) DeleteSegments(oldest []*segment.Segment) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(oldest)
	if n == 0 || n >= len(l.segs) {
		return errChanged
	}
	for i, s := range oldest {
		if l.segs[i] != s {
			return errChanged
		}
	}
	hw := l.hw
	if hw < 0 {
		hw = l.segs[len(l.segs)-1].NextOffset()
	}
	if l.segs[n].BaseOffset() > hw {
		return errChanged
	}
	l.logStart = max(l.logStart, l.segs[n].BaseOffset())
	l.segs = slices.Clone(l.segs[n:])
	var first error
	for _, s := range oldest {
		if err := s.MarkDeleted(); err != nil && first == nil {
			first = err
		}
		if err := s.Unref(); err != nil && first == nil {
			first = err
		}
	}
	if err := checkpoint.SyncDir(l.fs, l.dir); err != nil && first == nil {
		first = err
	}
	return first
}

func (l *testLog) ReplaceSegments(old, new []*segment.Segment, commit func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.segs, old[0])
	if i < 0 || i+len(old) >= len(l.segs) {
		return errChanged
	}
	for j, s := range old {
		if l.segs[i+j] != s {
			return errChanged
		}
	}
	if err := commit(); err != nil {
		return err
	}
	segs := slices.Clone(l.segs[:i])
	segs = append(segs, new...)
	segs = append(segs, l.segs[i+len(old):]...)
	l.segs = segs
	for _, s := range old {
		_ = s.Unref()
	}
	return nil
}

func (l *testLog) Roll() error { return l.roll() }

func (l *testLog) ClaimCleaning() (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cleaning {
		return nil, fmt.Errorf("test log: %w", ErrCleaningInProgress)
	}
	l.cleaning = true
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.cleaning = false
			l.mu.Unlock()
		})
	}, nil
}

// append assigns offsets to b (in place) and appends it, rolling when the
// active segment is full.
func (l *testLog) append(b batch.Batch) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	act := l.segs[len(l.segs)-1]
	next := act.NextOffset()
	b.SetBaseOffset(next)
	if act.Size() > 0 && act.Size()+int64(len(b)) > l.segBytes {
		if err := act.Seal(); err != nil {
			return 0, err
		}
		if err := act.Flush(); err != nil {
			return 0, err
		}
		s, err := segment.Create(l.fs, l.dir, next, l.cfg)
		if err != nil {
			return 0, err
		}
		l.segs = append(l.segs, s)
		act = s
	}
	_, err := act.Append(b)
	return next, err
}

// roll seals the active segment and starts a new one.
func (l *testLog) roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	act := l.segs[len(l.segs)-1]
	if act.Size() == 0 {
		return nil
	}
	if err := act.Seal(); err != nil {
		return err
	}
	s, err := segment.Create(l.fs, l.dir, act.NextOffset(), l.cfg)
	if err != nil {
		return err
	}
	l.segs = append(l.segs, s)
	return nil
}

func (l *testLog) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	return checkpoint.SyncDir(l.fs, l.dir)
}

func (l *testLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var first error
	for _, s := range l.segs {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
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

// readAll reads every record from the log start, checking that batches and
// records only grow in offset.
func (l *testLog) readAll(t testing.TB) []rec {
	t.Helper()
	segs, err := l.Segments()
	require.NoError(t, err)
	defer releaseAll(segs)
	var out []rec
	var sc scanner
	var dec batch.Decoder
	last := int64(-1)
	for _, s := range segs {
		err := sc.forEach(s, s.BaseOffset(), func(b batch.Batch, _ int64) error {
			if err := b.Validate(); err != nil {
				return err
			}
			if b.BaseOffset() <= last {
				return fmt.Errorf("batch at %d after offset %d", b.BaseOffset(), last)
			}
			last = b.LastOffset()
			if b.Attributes().IsControl() {
				return nil
			}
			for r, err := range b.All(&dec) {
				if err != nil {
					return err
				}
				out = append(out, rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: string(r.Key), Value: string(r.Value),
					Null: r.Value == nil, NoKey: r.Key == nil})
			}
			return nil
		})
		require.NoError(t, err, "read %s", s.LogPath())
	}
	for i := 1; i < len(out); i++ {
		require.Greater(t, out[i].Offset, out[i-1].Offset, "offsets not increasing: %d after %d", out[i].Offset, out[i-1].Offset)
	}
	return out
}

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
