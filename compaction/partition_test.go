package compaction

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// readPartition reads every record of p from its log start through
// ReadFrom, as a consumer would.
func readPartition(t testing.TB, p *plog.Partition) []rec {
	t.Helper()
	var out []rec
	var dec batch.Decoder
	off := p.LogStartOffset()
	for off < p.HighWatermark() {
		rs, err := p.ReadFrom(off, 1<<20)
		require.NoError(t, err, "ReadFrom(%d)", off)
		b := rs.Bytes()
		next := rs.NextOffset()
		for len(b) > 0 {
			bt, rest, err := batch.Parse(b)
			require.NoError(t, err)
			b = rest
			require.NoError(t, bt.Validate())
			for r, err := range bt.All(&dec) {
				require.NoError(t, err)
				if r.Offset < off {
					continue
				}
				out = append(out, rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: string(r.Key), Value: string(r.Value),
					Null: r.Value == nil, NoKey: r.Key == nil})
			}
		}
		rs.Close()
		require.Greater(t, next, off, "ReadFrom(%d) made no progress", off)
		off = next
	}
	return out
}

func appendPartition(t testing.TB, p *plog.Partition, rounds, keys int, ts int64) {
	codecs := []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLZ4, batch.CompressionZstd}
	seq := int32(0) // producer 7's sequences follow on: partitions check them
	if st, ok, err := p.ProducerState(7); err == nil && ok && len(st.Batches) > 0 {
		seq = st.Batches[len(st.Batches)-1].LastSequence + 1
	}
	for r := range rounds {
		var recs []kv
		for i := range keys {
			recs = append(recs, kv{key: k(fmt.Sprintf("k%d", i)), value: k(fmt.Sprintf("v%d-%d", i, r)), ts: ts + int64(r)})
		}
		if r%4 == 1 {
			recs = append(recs, kv{key: k("k0"), ts: ts + int64(r)})
		}
		_, err := p.AppendBatch(buildBatch(t, codecs[r%len(codecs)], &batch.Producer{ID: 7, BaseSequence: seq}, recs...))
		require.NoError(t, err)
		seq += int32(len(recs))
	}
}

func TestPartitionEndToEnd(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := "/p/topic-3"
			if name == "os" {
				fsys, dir = vfs.Default, t.TempDir()+"/topic-3"
			}
			pcfg := plog.Config{FS: fsys, SegmentBytes: 700, SegmentIndexBytes: 4096, IndexIntervalBytes: 64}
			p, err := plog.Open(dir, pcfg)
			require.NoError(t, err)
			now := time.UnixMilli(1_700_000_000_000)
			appendPartition(t, p, 30, 4, now.UnixMilli())
			before := readPartition(t, p)
			cfg := compactCfg(&now)
			cfg.CleanupPolicy = "compact,delete"
			cfg.Retention = -1
			ps, err := Policies(cfg)
			require.NoError(t, err)
			for _, pol := range ps {
				_, err := pol.Apply(context.Background(), p)
				require.NoError(t, err, "%s", pol.Name())
			}
			after := readPartition(t, p)
			require.True(t, maps.Equal(fold(before), fold(after)), "compaction through the partition: %d -> %d records\n%v\n%v", len(before), len(after), fold(before), fold(after))
			require.Less(t, len(after), len(before), "compaction through the partition: %d -> %d records\n%v\n%v", len(before), len(after), fold(before), fold(after))
			byOff := map[int64]rec{}
			for _, r := range before {
				byOff[r.Offset] = r
			}
			for _, r := range after {
				require.Equal(t, r, byOff[r.Offset], "record at %d changed", r.Offset)
			}
			end := p.LogEndOffset()
			// Appends go on, and a reopen reads the same.
			appendPartition(t, p, 3, 2, now.UnixMilli())
			want := readPartition(t, p)
			require.NoError(t, p.Close())
			p, err = plog.Open(dir, pcfg)
			require.NoError(t, err)
			defer p.Close()
			got := readPartition(t, p)
			require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "after reopen:\n%v\nwant\n%v", got, want)
			require.Greater(t, p.LogEndOffset(), end, "after reopen:\n%v\nwant\n%v", got, want)
			// Retention by size through the partition: everything but the
			// newest segments goes, the log start offset moves up.
			r, _ := NewRetention(Config{Retention: -1, RetentionBytes: 1})
			res, err := r.Apply(context.Background(), p)
			require.NoError(t, err, "retention: %+v %v, log start %d", res, err, p.LogStartOffset())
			require.NotEqual(t, 0, res.SegmentsDeleted, "retention: %+v %v, log start %d", res, err, p.LogStartOffset())
			require.NotEqual(t, int64(0), p.LogStartOffset(), "retention: %+v %v, log start %d", res, err, p.LogStartOffset())
			readPartition(t, p)
		})
	}
}

// TestPartitionCrashAtEveryStep crashes a compaction of a log.Partition at
// every filesystem operation and reopens it with log.Open, whose own swap
// recovery must leave the old records or the new ones, group by group.
func TestPartitionCrashAtEveryStep(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	const dir = "/p/topic-1"
	open := func(fsys vfs.FS) *plog.Partition {
		p, err := plog.Open(dir, plog.Config{FS: fsys, SegmentBytes: 600, SegmentIndexBytes: 4096, IndexIntervalBytes: 64})
		require.NoError(t, err)
		return p
	}
	setup := func() (*vfs.MemFS, *vfs.Injector, *plog.Partition) {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		p := open(in)
		appendPartition(t, p, 16, 3, now.UnixMilli())
		// Close ends the appends' background work (the rolls' flushes,
		// the next segment's spare), so the walk below counts the
		// compaction's filesystem operations alone, the same every run.
		require.NoError(t, p.Close())
		p = open(in)
		mem.SyncAll()
		return mem, in, p
	}
	_, _, ref := setup()
	oldRecs := readPartition(t, ref)
	c, _ := NewCompactor(compactCfg(&now))
	res, err := c.Apply(context.Background(), ref)
	require.NoError(t, err, "reference: %+v %v", res, err)
	require.GreaterOrEqual(t, res.SegmentsWritten, 2, "reference: %+v %v", res, err)
	newList := readPartition(t, ref)
	var newBases []int64
	for _, s := range ref.SegmentInfos() {
		newBases = append(newBases, s.BaseOffset)
	}
	allowed := map[string]bool{fmt.Sprint(oldRecs): true, fmt.Sprint(newList): true}
	for _, b := range newBases {
		var mixed []rec
		for _, r := range newList {
			if r.Offset < b {
				mixed = append(mixed, r)
			}
		}
		for _, r := range oldRecs {
			if r.Offset >= b {
				mixed = append(mixed, r)
			}
		}
		allowed[fmt.Sprint(mixed)] = true
	}
	for k := int64(0); ; k++ {
		mem, in, p := setup()
		taken := crashAtOp(mem, in, k)
		c, _ := NewCompactor(compactCfg(&now))
		_, err := c.Apply(context.Background(), p)
		in.SetHook(nil)
		clones := taken()
		if clones == nil {
			require.NoError(t, err, "k=%d", k)
			t.Logf("crashed at each of %d operations", k)
			break
		}
		for i, clone := range clones {
			p2 := open(clone)
			got := fmt.Sprint(readPartition(t, p2))
			require.True(t, allowed[got], "k=%d clone %d: not old, new or a group-wise swap:\n%s\n%s", k, i, got, clone)
			p2.Close()
		}
		require.LessOrEqual(t, k, int64(5000), "too many steps")
	}
}
