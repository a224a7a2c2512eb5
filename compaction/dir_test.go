package compaction

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/segment"
)

// TestDirRunner: one DirRunner cleans every partition of a Dir with its
// topic's configuration (a compacted topic is compacted, a topic under
// retention.bytes loses its old segments, a topic with the default
// delete policy and no limit is untouched). Workers bounds the partitions
// cleaned at once by construction: the topics run one after another, each
// through its Runner of Workers goroutines.
func TestDirRunner(t *testing.T) {
	d := openRunnerDir(t, vfs.NewMem())
	now := time.UnixMilli(1_700_000_000_000)
	topics := []string{"compacted", "retained", "kept"}
	before := map[string][]rec{}
	for _, topic := range topics {
		for i := range 3 {
			p, err := d.CreatePartition(topic, int32(i))
			require.NoError(t, err)
			appendPartition(t, p, 30, 4, now.UnixMilli())
			before[p.Dir()] = readPartition(t, p)
		}
	}
	compact := compactCfg(&now)
	retain := Config{CleanupPolicy: PolicyDelete, Retention: -1, RetentionBytes: 1, Now: compact.Now}
	var mu sync.Mutex
	policies := map[string]map[string]bool{}
	const workers = 2
	r, err := NewDirRunner(d, DirRunnerOptions{
		Config: Config{Retention: -1, Now: compact.Now},
		TopicConfig: func(topic string) *Config {
			switch topic {
			case "compacted":
				return &compact
			case "retained":
				return &retain
			}
			return nil
		},
		Workers: workers,
		Progress: func(pr Progress) {
			mu.Lock()
			if policies[pr.Dir] == nil {
				policies[pr.Dir] = map[string]bool{}
			}
			policies[pr.Dir][pr.Policy] = true
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	_, errs, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, errs)
	for _, tp := range d.Partitions() {
		p := d.Partition(tp.Topic, tp.Partition)
		after := readPartition(t, p)
		switch tp.Topic {
		case "compacted":
			require.True(t, maps.Equal(fold(before[p.Dir()]), fold(after)), "%s", p.Dir())
			require.Less(t, len(after), len(before[p.Dir()]), "%s compacted", p.Dir())
			require.NotEmpty(t, policies[p.Dir()], "%s: Progress reported", p.Dir())
		case "retained":
			require.Positive(t, p.LogStartOffset(), "%s: retention.bytes deleted old segments", p.Dir())
		case "kept":
			require.Equal(t, before[p.Dir()], after, "%s untouched", p.Dir())
			require.Zero(t, p.LogStartOffset())
		}
	}
	_, err = NewDirRunner(d, DirRunnerOptions{Config: Config{CleanupPolicy: "bogus"}})
	require.Error(t, err)
}

// TestDirRunnerLoop: Loop runs the policies once per interval until its
// context ends (testing/synctest's clock).
func TestDirRunnerLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := vfs.NewMem()
		d, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: fs, SegmentBytes: 700, SegmentIndexBytes: 4096}})
		require.NoError(t, err)
		p, err := d.CreatePartition("t", 0)
		require.NoError(t, err)
		// Uncompressed: a codec's pooled encoders made inside the bubble
		// would be used outside it by later tests.
		for i := range 30 {
			_, err := p.AppendBatch(buildBatch(t, batch.CompressionNone, nil,
				kv{key: k(fmt.Sprintf("k%d", i%4)), value: k("v"), ts: time.Now().UnixMilli()}))
			require.NoError(t, err)
		}
		r, err := NewDirRunner(d, DirRunnerOptions{Config: Config{Retention: -1, RetentionBytes: 1}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Loop(ctx, time.Minute) }()
		synctest.Wait()
		require.Zero(t, p.LogStartOffset(), "nothing before the first interval")
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Positive(t, p.LogStartOffset(), "retention ran after one interval")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.NoError(t, d.Close())
	})
}

// TestDirRunnerLoopRefusesNonPositiveInterval: Loop with an interval of 0
// or below returns an error wrapping ErrInvalidConfig and runs nothing;
// it used to panic in time.NewTicker.
func TestDirRunnerLoopRefusesNonPositiveInterval(t *testing.T) {
	d, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: vfs.NewMem()}})
	require.NoError(t, err)
	defer d.Close()
	r, err := NewDirRunner(d, DirRunnerOptions{Config: Config{Retention: -1, RetentionBytes: 1}})
	require.NoError(t, err)
	for _, interval := range []time.Duration{0, -time.Second} {
		require.ErrorIs(t, r.Loop(t.Context(), interval), ErrInvalidConfig, "interval %v", interval)
	}
}

// corruptFirstSegment flips a byte inside the first batch of p's first
// segment, behind the partition's back: a compaction round reading it
// fails with batch.ErrCorrupt.
func corruptFirstSegment(t *testing.T, fs vfs.FS, p *plog.Partition) {
	t.Helper()
	// A segment a roll adopted carries the spare's names until a sync
	// settles them.
	require.NoError(t, p.Sync())
	segs := p.SegmentInfos()
	require.Greater(t, len(segs), 1)
	f, err := fs.OpenReadWrite(filepath.Join(p.Dir(), segment.FileName(segs[0].BaseOffset, ".log")))
	require.NoError(t, err)
	defer f.Close()
	const at = batch.HeaderSize + 4 // inside the first record
	b := make([]byte, 1)
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}

// TestDirRunnerDropsMarksOfGonePartitions: a DirRunner keeps a partition
// it failed on skipped only while its Dir holds that partition. Four
// partitions fail on a damaged segment and are marked; then one is left
// alone (it stays skipped), one is deleted (its mark goes, as Kafka's
// maintainUncleanablePartitions drops those of deleted logs), one is
// deleted and created again (the new partition is cleaned) and one is
// closed and opened again (it is tried again, fails again and is marked
// again).
func TestDirRunnerDropsMarksOfGonePartitions(t *testing.T) {
	fs := vfs.NewMem()
	d := openRunnerDir(t, fs)
	now := time.UnixMilli(1_700_000_000_000)
	const (
		kept = iota
		deleted
		recreated
		reopened
		parts
	)
	dirs := make([]string, parts)
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		appendPartition(t, p, 30, 4, now.UnixMilli())
		corruptFirstSegment(t, fs, p)
		dirs[i] = p.Dir()
	}
	r, err := NewDirRunner(d, DirRunnerOptions{Config: compactCfg(&now)})
	require.NoError(t, err)
	_, errs, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Len(t, errs, parts)
	run, _, err := r.runner("t")
	require.NoError(t, err)
	for _, dir := range dirs {
		require.ErrorIs(t, errs[dir], batch.ErrCorrupt, "%s: %v", dir, errs[dir])
		require.ErrorIs(t, run.Failed(dir), batch.ErrCorrupt, "%s not marked", dir)
	}

	require.NoError(t, d.DeletePartition("t", deleted))
	require.NoError(t, d.DeletePartition("t", recreated))
	p, err := d.CreatePartition("t", recreated)
	require.NoError(t, err)
	appendPartition(t, p, 30, 4, now.UnixMilli())
	before := readPartition(t, p)
	require.NoError(t, d.Partition("t", reopened).Close())
	_, err = d.OpenPartition("t", reopened)
	require.NoError(t, err)

	_, errs, err = r.Run(context.Background())
	require.NoError(t, err)
	require.ErrorIs(t, errs[dirs[kept]], ErrPartitionFailed, "%v", errs)
	require.ErrorIs(t, run.Failed(dirs[kept]), batch.ErrCorrupt)
	require.NotContains(t, errs, dirs[deleted])
	require.NoError(t, run.Failed(dirs[deleted]), "the deleted partition's mark stayed")
	require.NotContains(t, errs, dirs[recreated], "the partition created again was skipped")
	require.NoError(t, run.Failed(dirs[recreated]))
	after := readPartition(t, p)
	require.Less(t, len(after), len(before), "the partition created again was not compacted")
	require.Equal(t, fold(before), fold(after))
	require.ErrorIs(t, errs[dirs[reopened]], batch.ErrCorrupt, "the reopened partition was not tried again: %v", errs)
	require.NotErrorIs(t, errs[dirs[reopened]], ErrPartitionFailed)
	require.ErrorIs(t, run.Failed(dirs[reopened]), batch.ErrCorrupt)
}

// TestDirRunnerPartitionDeletedDuringRun: a partition deleted while the
// DirRunner works on it (between its retention and its compaction) is not
// marked failed, and the partition created again under its name gets both
// policies at the next run.
func TestDirRunnerPartitionDeletedDuringRun(t *testing.T) {
	d := openRunnerDir(t, vfs.NewMem())
	now := time.UnixMilli(1_700_000_000_000)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendPartition(t, p, 30, 4, now.UnixMilli())
	cfg := compactCfg(&now)
	cfg.CleanupPolicy = "delete,compact"
	cfg.Retention = -1
	cfg.RetentionBytes = 1
	deleted := false
	var ran []Progress // the second run's reports
	r, err := NewDirRunner(d, DirRunnerOptions{Config: cfg, Progress: func(pr Progress) {
		if deleted {
			ran = append(ran, pr)
			return
		}
		if pr.Policy == "retention" {
			deleted = true
			assert.NoError(t, d.DeletePartition("t", 0))
		}
	}})
	require.NoError(t, err)
	_, errs, err := r.Run(context.Background())
	require.NoError(t, err)
	require.True(t, deleted)
	require.ErrorIs(t, errs[p.Dir()], plog.ErrClosed, "%v", errs)
	run, _, err := r.runner("t")
	require.NoError(t, err)
	require.NoError(t, run.Failed(p.Dir()), "the deleted partition was marked failed")
	ran = nil

	p2, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendPartition(t, p2, 30, 4, now.UnixMilli())
	_, errs, err = r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, errs, "the partition created again was skipped")
	require.Len(t, ran, 2, "%+v", ran)
	for _, pr := range ran {
		require.NoError(t, pr.Err, "%s", pr.Policy)
	}
	require.Positive(t, p2.LogStartOffset(), "retention did not run on the partition created again")
}

// TestDirRunnerFollowsTopicConfigChanges: TopicConfig is asked on every
// Run, so a topic's changed settings (a retention lowered, a topic created
// again with another policy) apply from the next Run. The first
// configuration a topic had used to stay for the DirRunner's life: the
// lowered retention.bytes never deleted anything, and the topic created
// again as compacted kept the old topic's retention, which deleted its
// segments.
func TestDirRunnerFollowsTopicConfigChanges(t *testing.T) {
	d := openRunnerDir(t, vfs.NewMem())
	now := time.UnixMilli(1_700_000_000_000)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendPartition(t, p, 30, 4, now.UnixMilli())
	require.Greater(t, len(p.SegmentInfos()), 2)

	cfg := Config{CleanupPolicy: PolicyDelete, Retention: -1, RetentionBytes: -1, Now: func() time.Time { return now }}
	r, err := NewDirRunner(d, DirRunnerOptions{TopicConfig: func(string) *Config { c := cfg; return &c }})
	require.NoError(t, err)
	_, errs, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, errs)
	require.Zero(t, p.LogStartOffset(), "no limit: nothing deleted")

	cfg.RetentionBytes = 1 // lowered: the sealed segments go
	_, errs, err = r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, errs)
	start := p.LogStartOffset()
	require.Positive(t, start, "the lowered retention.bytes applied")

	// The topic is deleted and created again, compacted and with no size
	// limit: the old topic's retention must not delete its segments.
	require.NoError(t, d.DeletePartition("t", 0))
	p, err = d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendPartition(t, p, 30, 4, now.UnixMilli())
	before := readPartition(t, p)
	cfg = compactCfg(&now)
	_, errs, err = r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, errs)
	require.Zero(t, p.LogStartOffset(), "the old topic's retention.bytes deleted segments")
	after := readPartition(t, p)
	require.True(t, maps.Equal(fold(before), fold(after)))
	require.Less(t, len(after), len(before), "compacted with the new policy")
}

// openRunnerDir opens a Dir of 700-byte segments at /logs on fs, closed
// when the test ends.
func openRunnerDir(t *testing.T, fs vfs.FS) *plog.Dir {
	t.Helper()
	d, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: fs, SegmentBytes: 700, SegmentIndexBytes: 4096, IndexIntervalBytes: 64}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}
