package compaction

// Retention of the active segment, the cleaning claim under concurrent
// rounds, and producer headers (issue 12, "Edges where partlog loses data", items
// 7 (retention never deleted the active segment), 12 (two compaction runs
// on one partition corrupted it) and 13 (compaction kept a header-only
// batch per producer id forever).

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// segBases returns the base offsets of p's segments.
func segBases(t testing.TB, p *plog.Partition) []int64 {
	t.Helper()
	segs := p.SegmentInfos()
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.BaseOffset
	}
	return out
}

// appendOld appends n one-record batches stamped ts to p.
func appendOld(t testing.TB, p *plog.Partition, n int, ts int64) {
	t.Helper()
	for i := range n {
		_, err := p.AppendBatch(buildBatch(t, batch.CompressionNone, nil, kv{key: k(fmt.Sprint(i)), value: make([]byte, 50), ts: ts}))
		require.NoError(t, err)
	}
}

// TestRetentionDeletesExpiredActiveSegment (issue 12, item 7): an idle
// partition whose only segment holds 30-day-old data kept it forever under
// a one-hour retention, because retention never touched the active segment.
// Now retention rolls and deletes it (Kafka's deleteSegments), never past
// the high watermark; the log end stays, the log start moves up to it, and
// appends continue at the same offset.
func TestRetentionDeletesExpiredActiveSegment(t *testing.T) {
	now := time.Now() // the fake clock; the data is 30 days older
	old := now.Add(-30 * 24 * time.Hour).UnixMilli()
	tests := []struct {
		name string
		// sealed is the number of sealed segments of 3 records below the
		// active one, which also holds 3.
		sealed int
		pcfg   plog.Config
		cfg    Config
		// hwBack lowers the high watermark that many offsets below the
		// log end (DisableAutoHighWatermark).
		hwBack int64
		// deleteToEnd calls DeleteRecordsBefore(log end) first.
		deleteToEnd bool
		// rolled is whether the active segment goes.
		rolled bool
		// wantBases are the segments left, as offsets.
		wantBases []int64
	}{
		{name: "only segment, time", cfg: Config{Retention: time.Hour}, rolled: true, wantBases: []int64{3}},
		{name: "sealed and active, time", sealed: 2, cfg: Config{Retention: time.Hour}, rolled: true, wantBases: []int64{9}},
		{name: "active holds the high watermark", sealed: 2, pcfg: plog.Config{DisableAutoHighWatermark: true},
			cfg: Config{Retention: time.Hour}, hwBack: 1, wantBases: []int64{6}},
		{name: "active not expired", sealed: 1, cfg: Config{Retention: 60 * 24 * time.Hour}, wantBases: []int64{0, 3}},
		{name: "size never takes the last segment", sealed: 2, cfg: Config{Retention: -1, RetentionBytes: 1}, wantBases: []int64{6}},
		{name: "log start needs a next segment", sealed: 1, cfg: Config{Retention: -1}, deleteToEnd: true, wantBases: []int64{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := "/p/topic-0"
			pcfg := tc.pcfg
			pcfg.FS = vfs.NewMem()
			p, err := plog.Open(dir, pcfg)
			require.NoError(t, err)
			defer p.Close()
			for range tc.sealed {
				appendOld(t, p, 3, old)
				require.NoError(t, p.Roll())
			}
			appendOld(t, p, 3, old)
			end := p.LogEndOffset()
			require.Equal(t, int64(3*(tc.sealed+1)), end)
			if tc.pcfg.DisableAutoHighWatermark {
				require.NoError(t, p.SetHighWatermark(end-tc.hwBack))
			}
			if tc.deleteToEnd {
				require.NoError(t, p.DeleteRecordsBefore(end))
			}
			cfg := tc.cfg
			cfg.Now = func() time.Time { return now }
			r, err := NewRetention(cfg)
			require.NoError(t, err)
			_, err = r.Apply(context.Background(), p)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBases, segBases(t, p))
			assert.Equal(t, end, p.LogEndOffset(), "log end moved")
			if tc.rolled {
				assert.Equal(t, end, p.LogStartOffset(), "log start")
				assert.Equal(t, end, p.HighWatermark(), "high watermark")
			}
			require.NoError(t, p.Verify())

			// A second round changes nothing (an empty active segment is
			// never due, so retention does not roll again and again).
			_, err = r.Apply(context.Background(), p)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBases, segBases(t, p))
			if !tc.rolled {
				return
			}
			// Nothing below the log start is readable; appends continue
			// at the same offset.
			_, err = p.ReadFrom(end-1, 1<<20)
			require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
			base, err := p.AppendBatch(buildBatch(t, batch.CompressionNone, nil, kv{key: k("new"), value: k("v"), ts: now.UnixMilli()}))
			require.NoError(t, err)
			assert.Equal(t, end, base)
			got := readPartition(t, p)
			require.Len(t, got, 1)
			assert.Equal(t, rec{Offset: end, Timestamp: now.UnixMilli(), Key: "new", Value: "v"}, got[0])
			require.NoError(t, p.Verify())
			// The log start survives a reopen.
			require.NoError(t, p.Close())
			p2, err := plog.Open(dir, pcfg)
			require.NoError(t, err)
			defer p2.Close()
			assert.Equal(t, end, p2.LogStartOffset())
			assert.Equal(t, end+1, p2.LogEndOffset())
			assert.Equal(t, got, readPartition(t, p2))
		})
	}
}

// appendBeforeRoll is retention's plan, which appends a batch right after
// the first plan that asks for the active segment, as an appender racing
// with retention between its plan and its roll would.
type appendBeforeRoll struct {
	retentionRound
	p    *plog.Partition
	t    testing.TB
	ts   int64
	done bool
}

func (a *appendBeforeRoll) Expired(v *plog.View) int {
	n := a.retentionRound.Expired(v)
	if !a.done && n == len(v.Segments()) {
		a.done = true
		_, err := a.p.AppendBatch(buildBatch(a.t, batch.CompressionNone, nil, kv{key: k("late"), value: k("v"), ts: a.ts}))
		require.NoError(a.t, err)
	}
	return n
}

// TestRetentionKeepsBatchAppendedBeforeRoll: retention decides to delete
// the expired active segment, then a fresh batch lands in it before the
// roll. The plan is made again over the sealed segment, so the fresh batch
// (and its segment) stay.
func TestRetentionKeepsBatchAppendedBeforeRoll(t *testing.T) {
	now := time.Now()
	// No time-based roll: the late batch must land in the expired segment.
	p, err := plog.Open("/p/topic-0", plog.Config{FS: vfs.NewMem(), SegmentTime: 365 * 24 * time.Hour})
	require.NoError(t, err)
	defer p.Close()
	appendOld(t, p, 3, now.Add(-30*24*time.Hour).UnixMilli())
	r, err := NewRetention(Config{Retention: time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	res, err := p.DeleteExpired(context.Background(), &appendBeforeRoll{retentionRound: retentionRound{r: r, now: now}, p: p, t: t, ts: now.UnixMilli()})
	require.NoError(t, err)
	assert.Equal(t, 0, res.SegmentsDeleted)
	assert.Equal(t, []int64{0, 4}, segBases(t, p))
	assert.Equal(t, int64(0), p.LogStartOffset())
	got := readPartition(t, p)
	require.Len(t, got, 4)
	assert.Equal(t, "late", got[3].Key)
}

// pausingCleaner is a Compactor whose round waits, at its first batch
// decision (its .cleaned segment created), until the test lets it go.
type pausingCleaner struct {
	*Compactor
	once   sync.Once
	paused chan struct{} // closed when the round reached its rewrite
	resume chan struct{} // closed by the test
}

func (c *pausingCleaner) Batch(b batch.Batch) plog.BatchDecision {
	c.once.Do(func() {
		close(c.paused)
		<-c.resume
	})
	return c.Compactor.Batch(b)
}

// newDirtyPartition opens a partition with many overwritten keys in
// sealed segments, so that a compaction round has work.
func newDirtyPartition(t testing.TB, fsys vfs.FS, dir string, ts int64) *plog.Partition {
	t.Helper()
	p, err := plog.Open(dir, plog.Config{FS: fsys, SegmentBytes: 700, SegmentIndexBytes: 4096, IndexIntervalBytes: 64})
	require.NoError(t, err)
	appendPartition(t, p, 40, 4, ts)
	require.NoError(t, p.Roll())
	return p
}

// TestTwoCompactionsOnOnePartition (issue 12, item 12): two rounds on one
// partition at once wrote the same .cleaned files; the partition then served
// "corrupt data: magic 0" for a segment it had committed. The partition's
// cleaning claim now lets one round run: the second, started while the first
// is paused before its swap, returns ErrCleaningInProgress and touches
// nothing; the first completes, and the partition verifies and reads back
// the same table.
func TestTwoCompactionsOnOnePartition(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := "/p/topic-0"
			if name == "os" {
				fsys, dir = vfs.Default, t.TempDir()+"/topic-0"
			}
			now := time.UnixMilli(1_700_000_000_000)
			p := newDirtyPartition(t, fsys, dir, now.UnixMilli())
			defer p.Close()
			before := readPartition(t, p)
			c1, err := NewCompactor(compactCfg(&now))
			require.NoError(t, err)
			l := &pausingCleaner{Compactor: c1, paused: make(chan struct{}), resume: make(chan struct{})}
			c2, err := NewCompactor(compactCfg(&now))
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				_, err := p.Compact(context.Background(), l)
				done <- err
			}()
			<-l.paused
			_, err = c2.Apply(context.Background(), p)
			require.ErrorIs(t, err, plog.ErrCleaningInProgress)
			close(l.resume)
			require.NoError(t, <-done)
			require.NoError(t, p.Verify())
			after := readPartition(t, p)
			assert.Less(t, len(after), len(before))
			assert.Equal(t, fold(before), fold(after))
			// The claim was released: the next round runs.
			appendPartition(t, p, 10, 4, now.UnixMilli())
			require.NoError(t, p.Roll())
			_, err = c2.Apply(context.Background(), p)
			require.NoError(t, err)
			require.NoError(t, p.Verify())
		})
	}
}

// TestTwoRunnersOnOnePartition runs two Runners, each with retention and
// compaction, concurrently and repeatedly over the same partitions while
// producers append (run it with -race). Every partition must verify and
// fold to the table that was written.
func TestTwoRunnersOnOnePartition(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	fsys := vfs.NewMem()
	const parts = 2
	var ps []*plog.Partition
	var logs []Partition
	for i := range parts {
		p := newDirtyPartition(t, fsys, fmt.Sprintf("/p/topic-%d", i), now.UnixMilli())
		defer p.Close()
		ps = append(ps, p)
		logs = append(logs, p)
	}
	cfg := compactCfg(&now)
	cfg.CleanupPolicy = "compact,delete"
	cfg.Retention = -1
	var runners []*Runner
	for range 2 {
		r, err := NewRunner(cfg, RunnerOptions{Workers: 2})
		require.NoError(t, err)
		runners = append(runners, r)
	}
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				_, errs, err := r.Run(context.Background(), logs)
				assert.NoError(t, err)
				for dir, err := range errs {
					assert.True(t, transient(err), "%s: %v", dir, err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 10 {
			for _, p := range ps {
				appendPartition(t, p, 3, 4, now.UnixMilli()+int64(i))
				assert.NoError(t, p.Roll())
			}
		}
	}()
	wg.Wait()
	for _, r := range runners {
		for _, l := range logs {
			require.NoError(t, r.Failed(l.Dir()))
		}
	}
	for _, p := range ps {
		require.NoError(t, p.Verify())
		got := fold(readPartition(t, p))
		want := map[string]string{}
		for i := range 4 {
			want[fmt.Sprintf("k%d", i)] = fmt.Sprintf("v%d-2", i)
		}
		assert.True(t, maps.Equal(want, got), "%s: %v", p.Dir(), got)
	}
}

// logBytes returns the total size of l's segments.
func logBytes(t testing.TB, l *testLog) int64 {
	t.Helper()
	var n int64
	for _, s := range l.SegmentInfos() {
		n += s.Size
	}
	return n
}

// emptyHeaders returns the producer ids of l's header-only batches.
func emptyHeaders(t testing.TB, l *testLog) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	for _, b := range rawBatches(t, l) {
		if b.RecordsCount() == 0 {
			out[b.ProducerID()] = true
		}
	}
	return out
}

// TestEmptyBatchesOfExpiredProducersGo (issue 12, item 13): compaction kept
// the emptied last batch of every producer id ever seen, so a compacted log
// written by ever new producers grew by a header per producer without
// bound. Now only live producers keep theirs (Config.ProducerIDExpiration,
// Kafka's producer.id.expiration.ms): the log's size stays bounded, and
// the producers of the last day keep their empty headers.
func TestEmptyBatchesOfExpiredProducersGo(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	now := time.UnixMilli(1_700_000_000_000)
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	require.Equal(t, defaultProducerIDExpiration, c.cfg.ProducerIDExpiration)
	const perRound, rounds = 10, 40
	pid := int64(1000)
	var sizes []int64
	for range rounds {
		// Every key is overwritten by a new producer: the previous
		// round's batches are emptied, each its producer's last.
		for i := range perRound {
			pid++
			_, err := l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: pid},
				kv{key: k(fmt.Sprint("k", i)), value: k(fmt.Sprint("v", pid)), ts: now.UnixMilli()}))
			require.NoError(t, err)
		}
		require.NoError(t, l.roll())
		_, err := c.Apply(context.Background(), l)
		require.NoError(t, err)
		sizes = append(sizes, logBytes(t, l))
		now = now.Add(6 * time.Hour)
	}
	t.Logf("log sizes after each round: %v", sizes)
	// Steady after a day of rounds: no growth from round 10 to round 40
	// (the old code added a header per producer, 61 bytes each).
	assert.LessOrEqual(t, sizes[rounds-1], sizes[9], "sizes %v", sizes)
	// The producers of the last three rounds (6, 12 and 18 hours before
	// the last one) are live and keep their empty headers; older ones
	// (24 hours and more: expired, as Kafka's now - last >= expiration)
	// do not.
	empty := emptyHeaders(t, l)
	last := pid
	for p := last - 4*perRound + 1; p <= last-perRound; p++ {
		assert.True(t, empty[p], "live producer %d lost its empty header", p)
	}
	for p := range empty {
		assert.Greater(t, p, last-4*perRound, "expired producer %d kept its empty header", p)
	}
	got := fold(l.readAll(t))
	for i := range perRound {
		assert.Equal(t, fmt.Sprint("v", last-perRound+1+int64(i)), got[fmt.Sprint("k", i)])
	}
}

// TestProducerLiveness checks the expiry rule at its edges: a producer's
// emptied last batch keeps its header while now minus its max timestamp is
// below ProducerIDExpiration. An open transaction's batch is never cleaned
// at all: it lies at or past the last stable offset (issue 11).
func TestProducerLiveness(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	exp := 2 * time.Hour
	tests := []struct {
		name          string
		age           time.Duration
		transactional bool
		kept          bool
	}{
		{name: "fresh", age: 0, kept: true},
		{name: "just live", age: exp - time.Millisecond, kept: true},
		{name: "just expired", age: exp, kept: false},
		{name: "long expired", age: 30 * 24 * time.Hour, kept: false},
		{name: "open transaction never cleaned", age: 30 * 24 * time.Hour, transactional: true, kept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newMemLog(t, 1<<20)
			bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: 42}, Transactional: tc.transactional})
			require.NoError(t, bld.Add(batch.Record{Key: k("a"), Value: k("1"), Timestamp: now.Add(-tc.age).UnixMilli()}))
			b, err := bld.Build()
			require.NoError(t, err)
			_, err = l.append(b)
			require.NoError(t, err)
			// Overwrite "a", then a batch that keeps the group's end.
			for _, r := range []kv{{key: k("a"), value: k("2")}, {key: k("z"), value: k("3")}} {
				r.ts = now.UnixMilli()
				_, err = l.append(buildBatch(t, batch.CompressionNone, nil, r))
				require.NoError(t, err)
			}
			require.NoError(t, l.roll())
			cfg := compactCfg(&now)
			cfg.ProducerIDExpiration = exp
			c, err := NewCompactor(cfg)
			require.NoError(t, err)
			_, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			got, ok := rawBatches(t, l)[0]
			assert.Equal(t, tc.kept, ok)
			if ok {
				want := int32(0)
				if tc.transactional {
					want = 1 // past the last stable offset: untouched
				}
				assert.Equal(t, want, got.RecordsCount())
				assert.Equal(t, int64(42), got.ProducerID())
				assert.Equal(t, tc.transactional, got.Attributes().IsTransactional())
			}
		})
	}
}

// TestProducerIDExpirationConfig: a ProducerIDExpiration that is negative
// or below 1 ms (which would expire every producer's last batch at once)
// is refused, as Kafka's producer.id.expiration.ms is.
func TestProducerIDExpirationConfig(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Nanosecond, 500 * time.Microsecond} {
		_, err := NewCompactor(Config{ProducerIDExpiration: d})
		require.ErrorIs(t, err, ErrInvalidConfig, "%v", d)
	}
	_, err := NewCompactor(Config{ProducerIDExpiration: time.Millisecond})
	require.NoError(t, err)
}

// TestRetentionOfActiveSegmentCrashAtEveryStep crashes the retention of an
// expired active segment (roll, log start checkpoint, delete) at every
// filesystem operation and reopens: the log end offset is the same, the log
// start is the old one (with every record) or the log end (with none), the
// partition verifies, and appends continue at the log end.
func TestRetentionOfActiveSegmentCrashAtEveryStep(t *testing.T) {
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour).UnixMilli()
	const dir = "/p/topic-0"
	r, err := NewRetention(Config{Retention: time.Hour, Now: func() time.Time { return now }})
	require.NoError(t, err)
	for step := int64(0); ; step++ {
		require.Less(t, step, int64(1000), "too many steps")
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		p, err := plog.Open(dir, plog.Config{FS: in, SegmentIndexBytes: 4096})
		require.NoError(t, err)
		appendOld(t, p, 3, old)
		require.NoError(t, p.Sync())
		mem.SyncAll()
		taken := crashAtOp(mem, in, step)
		_, err = r.Apply(context.Background(), p)
		in.SetHook(nil)
		_ = p.Close()
		clones := taken()
		if clones == nil {
			require.NoError(t, err)
			t.Logf("crashed at each of %d operations", step)
			return
		}
		for i, clone := range clones {
			p2, err := plog.Open(dir, plog.Config{FS: clone, SegmentIndexBytes: 4096})
			require.NoError(t, err, "step %d clone %d", step, i)
			assert.Equal(t, int64(3), p2.LogEndOffset(), "step %d clone %d: log end", step, i)
			recs := readPartition(t, p2)
			switch p2.LogStartOffset() {
			case 0:
				assert.Len(t, recs, 3, "step %d clone %d", step, i)
			case 3:
				assert.Empty(t, recs, "step %d clone %d", step, i)
			default:
				require.Failf(t, "unexpected log start", "step %d clone %d: log start %d", step, i, p2.LogStartOffset())
			}
			require.NoError(t, p2.Verify(), "step %d clone %d", step, i)
			base, err := p2.AppendBatch(buildBatch(t, batch.CompressionNone, nil, kv{key: k("new"), value: k("v"), ts: now.UnixMilli()}))
			require.NoError(t, err)
			assert.Equal(t, int64(3), base)
			require.NoError(t, p2.Close())
		}
	}
}
