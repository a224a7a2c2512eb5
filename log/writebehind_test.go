package log_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/killtest"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// logWrites counts the write operations on .log files that in sees (a
// vectored write of a header and records counts one a part).
func logWrites(in *vfs.Injector) *atomic.Int64 {
	var n atomic.Int64
	in.SetHook(func(op vfs.Op) error {
		if (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) && strings.HasSuffix(op.Path, ".log") {
			n.Add(1)
		}
		return nil
	})
	return &n
}

// oneRecord is a one-record batch whose value names i.
func oneRecord(i int) []byte {
	return logtest.MakeBatch(1, 100, 1_700_000_000_000+int64(i), byte(i))
}

// TestWriteBehindFewerWrites: under WriteBehind one-record appends reach
// the .log in a few writes of 16 KiB, where without it each append is a
// write of its own (which shows the count sees them); either way the
// partition assigns the same offsets and returns the same records.
func TestWriteBehindFewerWrites(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name      string
		delay     time.Duration
		maxWrites int64
	}{
		{"off", 0, n},
		{"on", time.Hour, n / 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, in := openMem(t, plog.Config{WriteBehind: tc.delay, SegmentIndexBytes: memIndexBytes})
			writes := logWrites(in)
			for i := range n {
				base, err := p.AppendBatch(oneRecord(i))
				require.NoError(t, err)
				require.Equal(t, int64(i), base)
			}
			if tc.delay == 0 {
				require.GreaterOrEqual(t, writes.Load(), int64(n))
			} else {
				require.LessOrEqual(t, writes.Load(), tc.maxWrites)
			}
			require.Equal(t, int64(n), p.LogEndOffset())
			recs := readRecords(t, p)
			require.Len(t, recs, n)
			for i, r := range recs {
				require.Equal(t, int64(i), r.Offset)
				require.Equal(t, int64(1_700_000_000_000+i), r.Timestamp)
			}
		})
	}
}

// readRecords returns every record of p from its log start, copied.
func readRecords(t *testing.T, p *plog.Partition) []batch.Record {
	t.Helper()
	var out []batch.Record
	r, err := p.ReadFrom(p.LogStartOffset(), 1<<30)
	require.NoError(t, err)
	defer r.Close()
	for rec, err := range r.All(nil) {
		require.NoError(t, err)
		rec.Key, rec.Value, rec.Headers = append([]byte(nil), rec.Key...), append([]byte(nil), rec.Value...), nil
		out = append(out, rec)
	}
	return out
}

// TestWriteBehindObservers: every call that observes the log answers as if
// the buffered batch had been written by its append, and the write it
// makes for that is the buffer's only one.
func TestWriteBehindObservers(t *testing.T) {
	const ts = 1_700_000_000_000
	for _, tc := range []struct {
		name    string
		manual  bool // DisableAutoHighWatermark
		observe func(t *testing.T, p *plog.Partition)
	}{
		{"LogEndOffset", false, func(t *testing.T, p *plog.Partition) { require.Equal(t, int64(4), p.LogEndOffset()) }},
		{"HighWatermark", false, func(t *testing.T, p *plog.Partition) { require.Equal(t, int64(4), p.HighWatermark()) }},
		{"LastStableOffset", false, func(t *testing.T, p *plog.Partition) { require.Equal(t, int64(4), p.LastStableOffset()) }},
		{"ReadFrom", false, func(t *testing.T, p *plog.Partition) {
			r, err := p.ReadFrom(1, 1<<20)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, int64(1), batch.Batch(r.Bytes()).BaseOffset())
			require.Equal(t, int64(4), r.NextOffset())
		}},
		{"ReadFromFollower", true, func(t *testing.T, p *plog.Partition) {
			r, err := p.ReadFromFollower(1, 1<<20)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, int64(4), r.NextOffset())
		}},
		{"Wait", false, func(t *testing.T, p *plog.Partition) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // it must not need to wait
			require.NoError(t, p.Wait(ctx, 3))
		}},
		{"WaitFollower", true, func(t *testing.T, p *plog.Partition) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			require.NoError(t, p.WaitFollower(ctx, 3))
		}},
		{"OffsetForTimestamp", false, func(t *testing.T, p *plog.Partition) {
			to, found, err := p.OffsetForTimestamp(ts + 10)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(1), to.Offset)
		}},
		{"EndOffsetForEpoch", false, func(t *testing.T, p *plog.Partition) {
			_, end, err := p.EndOffsetForEpoch(0) // the latest epoch: its end is the log end
			require.NoError(t, err)
			require.Equal(t, int64(4), end)
		}},
		{"SetHighWatermark", true, func(t *testing.T, p *plog.Partition) {
			require.NoError(t, p.SetHighWatermark(4))
			require.Equal(t, int64(4), p.HighWatermark())
		}},
		{"Stats", false, func(t *testing.T, p *plog.Partition) { require.Equal(t, int64(4), p.Stats().LogEndOffset) }},
		{"SegmentInfos", false, func(t *testing.T, p *plog.Partition) {
			infos := p.SegmentInfos()
			require.Len(t, infos, 1)
			require.Equal(t, int64(4), infos[0].NextOffset)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, in := openMem(t, plog.Config{WriteBehind: time.Hour, DisableAutoHighWatermark: tc.manual, SegmentIndexBytes: memIndexBytes})
			writes := logWrites(in)
			require.NoError(t, p.AssignEpochStartOffset(0, 0))
			_, err := p.AppendBatch(logtest.MakeBatch(1, 10, ts, 1)) // an empty segment's first batch is written at once
			require.NoError(t, err)
			first := writes.Load()
			require.Positive(t, first)
			base, err := p.AppendBatch(logtest.MakeBatch(3, 10, ts+10, 2))
			require.NoError(t, err)
			require.Equal(t, int64(1), base)
			require.Equal(t, first, writes.Load(), "the second batch is buffered")
			tc.observe(t, p)
			require.Equal(t, first+1, writes.Load(), "the observer wrote the buffer, with one write")
		})
	}
}

// TestWriteBehindTimer: with no other call, the timer writes the buffer,
// once for each batch that starts it: the test watches the filesystem, not
// the partition (any observer would write the buffer itself). Then a
// reader parked in Wait sees a buffered batch when the timer writes it.
func TestWriteBehindTimer(t *testing.T) {
	p, in := openMem(t, plog.Config{WriteBehind: time.Millisecond, SegmentIndexBytes: memIndexBytes})
	writes := logWrites(in)
	_, err := p.AppendBatch(oneRecord(0)) // written at once
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		before := writes.Load()
		_, err = p.AppendBatch(oneRecord(i)) // buffered
		require.NoError(t, err)
		require.Eventually(t, func() bool { return writes.Load() > before }, time.Minute, time.Millisecond,
			"the timer writes batch %d", i)
	}
	require.Equal(t, int64(3), p.HighWatermark())

	parked := make(chan error, 1)
	go func() { parked <- p.Wait(context.Background(), 3) }()
	_, err = p.AppendBatch(oneRecord(3))
	require.NoError(t, err)
	require.NoError(t, <-parked)
}

// TestWriteBehindThreshold: the append that brings the buffer to 16 KiB
// writes it, with no observer; when that write fails, that append
// returns the failure (its batch was in it), and so does every later call.
func TestWriteBehindThreshold(t *testing.T) {
	p, in := openMem(t, plog.Config{WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes})
	writes := logWrites(in)
	_, err := p.AppendBatch(oneRecord(0))
	require.NoError(t, err)
	first := writes.Load()
	i := 1
	for ; writes.Load() == first; i++ {
		require.Less(t, i, 200, "16 KiB of one-record batches written by the appends themselves")
		_, err := p.AppendBatch(oneRecord(i))
		require.NoError(t, err)
	}
	require.Greater(t, i, 16<<10/200, "not before the buffer held about 16 KiB")

	before := writes.Load()
	in.FailOnce(func(op vfs.Op) bool {
		return (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) && strings.HasSuffix(op.Path, ".log")
	})
	for ; ; i++ {
		_, err := p.AppendBatch(oneRecord(i))
		if err != nil {
			require.ErrorIs(t, err, plog.ErrFailed)
			require.ErrorIs(t, err, vfs.ErrInjected)
			break
		}
		require.Equal(t, before, writes.Load())
		require.Zero(t, in.Injected(), "append %d returned success, but its write failed", i)
	}
	_, err = p.AppendBatch(oneRecord(i + 1))
	require.ErrorIs(t, err, plog.ErrFailed)
}

// TestWriteBehindCrash: a crash loses what the buffer held, keeps a
// prefix of the acknowledged appends, and keeps everything Sync covered.
func TestWriteBehindCrash(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes}
	p, err := plog.Open("/p-0", cfg)
	require.NoError(t, err)
	for i := range 10 {
		_, err := p.AppendBatch(oneRecord(i))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync())
	for i := 10; i < 15; i++ {
		_, err := p.AppendBatch(oneRecord(i))
		require.NoError(t, err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())

	cfg.FS = crashed
	p, err = plog.Open("/p-0", cfg)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(10), p.LogEndOffset(), "the synced appends, not the buffered ones")
	require.NoError(t, p.Verify())
	recs := readRecords(t, p)
	require.Len(t, recs, 10)
	for i, r := range recs {
		require.Equal(t, int64(1_700_000_000_000+i), r.Timestamp)
	}
}

// TestWriteBehindFailedWrite: a failed write of the buffer fails the
// partition (its batches were acknowledged), and a reopen finds the
// batches written before it.
func TestWriteBehindFailedWrite(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	cfg := plog.Config{FS: in, WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes}
	p, err := plog.Open("/p-0", cfg)
	require.NoError(t, err)
	_, err = p.AppendBatch(oneRecord(0))
	require.NoError(t, err)
	_, err = p.AppendBatch(oneRecord(1)) // buffered
	require.NoError(t, err)
	in.FailOnce(func(op vfs.Op) bool {
		return (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) && strings.HasSuffix(op.Path, ".log")
	})
	err = p.Sync() // writes the buffer first
	require.ErrorIs(t, err, plog.ErrFailed)
	require.ErrorIs(t, err, vfs.ErrInjected)
	_, err = p.AppendBatch(oneRecord(2))
	require.ErrorIs(t, err, plog.ErrFailed, "sticky")
	require.Equal(t, int64(1), p.LogEndOffset())
	_ = p.Close()

	cfg.FS = mem
	p, err = plog.Open("/p-0", cfg)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(1), p.LogEndOffset())
	require.NoError(t, p.Verify())
}

// TestWriteBehindSetHighWatermarkFailedWrite: SetHighWatermark writes the
// buffer first; when that write fails it returns the failure and moves
// nothing.
func TestWriteBehindSetHighWatermarkFailedWrite(t *testing.T) {
	p, in := openMem(t, plog.Config{WriteBehind: time.Hour, DisableAutoHighWatermark: true, SegmentIndexBytes: memIndexBytes})
	_, err := p.AppendBatch(oneRecord(0))
	require.NoError(t, err)
	_, err = p.AppendBatch(oneRecord(1)) // buffered
	require.NoError(t, err)
	in.FailOnce(func(op vfs.Op) bool {
		return (op.Kind == vfs.OpWrite || op.Kind == vfs.OpWriteAt) && strings.HasSuffix(op.Path, ".log")
	})
	require.ErrorIs(t, p.SetHighWatermark(1), plog.ErrFailed)
	require.Equal(t, int64(0), p.HighWatermark())
	require.ErrorIs(t, p.SetHighWatermark(2), plog.ErrFailed)
}

// TestWriteBehindOffline: a partition that goes offline (a fault reading
// a mapped file) still writes the acknowledged batches its buffer holds
// when it closes: the .log's writes do not go through the mapping.
func TestWriteBehindOffline(t *testing.T) {
	skipUnlessSIGBUS(t)
	p, dir := openT(t, plog.Config{WriteBehind: time.Hour, SegmentBytes: 1 << 20})
	for i := range 200 {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 1000, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	_, err := p.AppendBatch(oneRecord(800)) // the new segment's first batch: written at once
	require.NoError(t, err)
	seg0 := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
	saved, err := os.ReadFile(seg0)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var iterErr error
	first := true
	for _, err := range p.Records(ctx, 0) {
		if err != nil {
			iterErr = err
			break
		}
		if first {
			first = false
			// Buffered while the iteration holds its read: the body may
			// not call the partition, a goroutine may.
			done := make(chan error, 1)
			go func() {
				_, err := p.AppendBatch(oneRecord(801))
				done <- err
			}()
			require.NoError(t, <-done)
			require.NoError(t, os.Truncate(seg0, 0))
		}
	}
	require.ErrorIs(t, iterErr, index.ErrFault)
	_ = p.Close() // reports the fault; writes the buffer

	require.NoError(t, os.WriteFile(seg0, saved, 0o644))
	p, err = plog.Open(dir, plog.Config{SegmentBytes: 1 << 20})
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(802), p.LogEndOffset(), "every acknowledged batch")
}

// TestWriteBehindDirBudget: in a Dir under MaxOpenSegments, a sweep
// writes a partition's buffered batches and rests its active segment,
// rather than keep it awake until its timer fires.
func TestWriteBehindDirBudget(t *testing.T) {
	const parts, budget = 24, 4
	d, err := plog.OpenDir(filepath.Join(t.TempDir(), "data"), plog.DirConfig{MaxOpenSegments: budget,
		Config: plog.Config{WriteBehind: time.Hour}})
	require.NoError(t, err)
	defer d.Close()
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		for j := range 3 {
			_, err := p.AppendBatch(oneRecord(j))
			require.NoError(t, err)
		}
		st := d.SegmentBudget()
		require.LessOrEqual(t, st.Open+st.Active, budget+1, "after partition %d", i)
	}
	for i := range parts {
		require.Equal(t, int64(3), d.Partition("t", int32(i)).LogEndOffset())
	}
}

// TestWriteBehindProducerRetry: a retry of a buffered idempotent batch is
// answered with the original's offsets and stored once.
func TestWriteBehindProducerRetry(t *testing.T) {
	p, _ := openMem(t, plog.Config{WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes})
	_, err := p.AppendBatch(pb{seq: 0, n: 2}.bytes(t))
	require.NoError(t, err)
	second := pb{seq: 2, n: 3}.bytes(t)
	base, err := p.AppendBatch(second) // buffered
	require.NoError(t, err)
	require.Equal(t, int64(2), base)
	again, err := p.AppendBatch(second)
	require.NoError(t, err)
	require.Equal(t, int64(2), again)
	require.Equal(t, int64(5), p.LogEndOffset())
	require.Len(t, readRecords(t, p), 5)
}

// TestWriteBehindConfig: a negative WriteBehind is refused, and under
// FlushMessages 1 it changes nothing: an append returns after the
// fdatasync that covers it, so a crash right after keeps it.
func TestWriteBehindConfig(t *testing.T) {
	_, err := plog.Open(t.TempDir(), plog.Config{WriteBehind: -time.Second})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)

	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, WriteBehind: time.Hour, FlushMessages: 1, SegmentIndexBytes: memIndexBytes}
	p, err := plog.Open("/p-0", cfg)
	require.NoError(t, err)
	for i := range 3 {
		_, err := p.AppendBatch(oneRecord(i))
		require.NoError(t, err)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())
	cfg.FS = crashed
	p, err = plog.Open("/p-0", cfg)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(3), p.LogEndOffset())
}

// writeBehindKillConfig is the configuration of TestKillWriteBehind's
// parent and child.
func writeBehindKillConfig() plog.Config {
	return plog.Config{WriteBehind: 2 * time.Millisecond, SegmentBytes: 256 << 10, IndexIntervalBytes: 1024}
}

// TestKillWriteBehindHelperProcess is not a test: TestKillWriteBehind runs
// the test binary again with it selected. It appends small batches from
// one goroutine under WriteBehind until it is killed, printing "ack <base>
// <next>" for every acknowledged batch, and every 64 batches calls Sync
// and prints "synced <end>".
func TestKillWriteBehindHelperProcess(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("helper process for TestKillWriteBehind")
	}
	p, err := plog.Open(dir, writeBehindKillConfig())
	if err != nil {
		fmt.Fprintf(os.Stdout, "error open: %v\n", err)
		os.Exit(3)
	}
	stop := time.Now().Add(20 * time.Second) // never outlive a lost parent
	for i := 0; time.Now().Before(stop); i++ {
		b := logtest.MakeBatch(1+i%3, 10+(i*37)%200, time.Now().UnixMilli(), byte(i))
		base, err := p.AppendBatch(b)
		if err != nil {
			fmt.Fprintf(os.Stdout, "error append: %v\n", err)
			os.Exit(3)
		}
		next := base + int64(batch.Batch(b).LastOffsetDelta()) + 1
		_, _ = fmt.Fprintf(os.Stdout, "ack %d %d\n", base, next)
		if i%64 == 63 {
			if err := p.Sync(); err != nil {
				fmt.Fprintf(os.Stdout, "error sync: %v\n", err)
				os.Exit(3)
			}
			_, _ = fmt.Fprintf(os.Stdout, "synced %d\n", next)
		}
	}
	_ = p.Close()
}

// TestKillWriteBehind is TestKill under WriteBehind: a child appends and
// is killed with SIGKILL at a random moment. The reopened log must be a
// clean prefix of what was acknowledged (Verify passes, the batches are
// contiguous, each one that is there is the acknowledged one) that
// reaches at least the last end a Sync covered. The acknowledged batches
// past the log end are the buffer the kill lost; the next child appends
// other batches at their offsets.
func TestKillWriteBehind(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the helper process")
	}
	rng := rand.New(rand.NewPCG(crashSeed(t), 13))
	dir := t.TempDir() + "/kill-wb"
	kills := 12
	if testing.Short() {
		kills = 4
	}
	lost := 0
	for round := 0; round < kills; round++ {
		acked := map[int64]int64{} // this round's acknowledged batches: base -> next
		var synced int64
		child := killtest.Start(t, "TestKillWriteBehindHelperProcess", killChildEnv+"="+dir)
		delay := time.Duration(20+rng.IntN(200)) * time.Millisecond
		child.KillAfter(delay, func(line string) {
			var end int64
			if _, err := fmt.Sscanf(line, "synced %d", &end); err == nil {
				synced = end
				return
			}
			killtest.RecordAck(t, round, line, acked)
		})

		p, err := plog.Open(dir, writeBehindKillConfig())
		require.NoError(t, err)
		require.NoError(t, p.Verify())
		end := p.LogEndOffset()
		require.GreaterOrEqual(t, end, synced, "round %d: the log ends before what Sync covered", round)
		seen := map[int64]bool{}
		killWalk(t, p, round, func(b batch.Batch) {
			if want, ok := acked[b.BaseOffset()]; ok {
				require.Equal(t, want, b.NextOffset(), "round %d: batch at %d", round, b.BaseOffset())
				seen[b.BaseOffset()] = true
			}
		})
		for base, next := range acked {
			if next <= end {
				require.True(t, seen[base], "round %d: acknowledged batch [%d, %d) below the log end %d is missing", round, base, next, end)
				continue
			}
			require.GreaterOrEqual(t, base, end, "round %d: acknowledged batch [%d, %d) cut in the middle at %d", round, base, next, end)
			lost++
		}
		require.NoError(t, p.Close())
	}
	t.Logf("%d kills, %d acknowledged batches lost from the buffer", kills, lost)
	if lost == 0 {
		t.Log("no kill met a full buffer (the prefix checks ran anyway)")
	}
}

// TestWriteBehindDir: in a Dir, Dir.Close writes every partition's buffer
// before its single filesystem sync, so a reopen finds every
// acknowledged batch; a crash before it keeps, in each partition, a
// prefix that holds the batch written at once.
func TestWriteBehindDir(t *testing.T) {
	const parts = 8
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := plog.DirConfig{Config: plog.Config{FS: mem, WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes}}
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			for i := range parts {
				p, err := d.CreatePartition("t", int32(i))
				require.NoError(t, err)
				for j := range 1 + i {
					_, err := p.AppendBatch(oneRecord(j))
					require.NoError(t, err)
				}
			}
			fs := mem
			if crash {
				fs = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
			}
			require.NoError(t, d.Close())

			cfg.Config.FS = fs
			d, err = plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			defer d.Close()
			for i := range parts {
				p := d.Partition("t", int32(i))
				require.NotNil(t, p)
				require.NoError(t, p.Verify())
				want := int64(1 + i)
				if crash {
					// The first batch of the empty segment was written at
					// once (the page cache a crash of the machine may
					// lose too); the rest sat in the buffer.
					require.LessOrEqual(t, p.LogEndOffset(), want)
					continue
				}
				require.Equal(t, want, p.LogEndOffset(), "partition %d", i)
				require.Len(t, readRecords(t, p), int(want))
			}
		})
	}
}

// TestWriteBehindLargeBatchWrittenAtOnce: a batch of 16 KiB or more does
// not join the buffer (one write saves nothing): its append writes what
// the buffer holds, then itself, before it returns.
func TestWriteBehindLargeBatchWrittenAtOnce(t *testing.T) {
	p, in := openMem(t, plog.Config{WriteBehind: time.Hour, SegmentIndexBytes: memIndexBytes})
	writes := logWrites(in)
	_, err := p.AppendBatch(oneRecord(0))
	require.NoError(t, err)
	_, err = p.AppendBatch(oneRecord(1)) // buffered
	require.NoError(t, err)
	before := writes.Load()
	big := logtest.MakeBatch(16, 1100, 1_700_000_000_000, 9)
	require.GreaterOrEqual(t, len(big), 16<<10)
	_, err = p.AppendBatch(big)
	require.NoError(t, err)
	require.Greater(t, writes.Load(), before+1, "the buffer, then the batch")
	after := writes.Load()
	require.Equal(t, int64(18), p.LogEndOffset())
	require.Equal(t, after, writes.Load(), "nothing left buffered")
}
