package log_test

import (
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestDirFlushScheduler: a Dir runs the FlushInterval flushes of all its
// partitions with one scheduler and BackgroundThreads workers, not a
// goroutine per partition: 40 partitions with flush.ms add a fixed number
// of goroutines (before: 40), each partition with unsynced appends is
// flushed once per interval, one without appends is not, and Close stops
// the scheduler. Per-topic configs decide which partitions are flushed.
func TestDirFlushScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, workers = 40, 2
		fs := vfs.NewMem()
		topicCfg := plog.Config{FS: fs, FlushInterval: time.Second, SegmentIndexBytes: 1024}
		cfg := plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 1024},
			TopicConfig: func(topic string) *plog.Config {
				if topic == "flushed" {
					return &topicCfg
				}
				return nil
			},
			BackgroundThreads: workers}
		before := bubbleGoroutines()
		require.Positive(t, before, "this goroutine at least: the stack dump marks the bubble's goroutines")
		d, err := plog.OpenDir("/logs", cfg)
		require.NoError(t, err)
		var parts []*plog.Partition
		for i := range n {
			p, err := d.CreatePartition("flushed", int32(i))
			require.NoError(t, err)
			parts = append(parts, p)
		}
		other, err := d.CreatePartition("other", 0)
		require.NoError(t, err)
		synctest.Wait() // the Dir's goroutines have started
		require.Equal(t, workers+1, bubbleGoroutines()-before, "goroutines of the Dir: the scheduler and its workers")

		bt := logtest.MakeBatch(2, 10, time.Now().UnixMilli(), 1) // the bubble's clock
		syncs := func(p *plog.Partition) int64 { return p.Stats().Syncs }
		appendAll := func() {
			for _, p := range append(parts, other) {
				_, err := p.AppendBatch(append([]byte(nil), bt...))
				require.NoError(t, err)
			}
		}
		appendAll()
		base := make([]int64, n)
		for i, p := range parts {
			base[i] = syncs(p)
		}
		otherBase := syncs(other)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		for i, p := range parts {
			require.Equal(t, base[i]+1, syncs(p), "partition %d flushed once in the first interval", i)
		}
		require.Equal(t, otherBase, syncs(other), "no flush.ms, no periodic flush")

		// Nothing new: the next interval flushes nothing.
		time.Sleep(time.Second)
		synctest.Wait()
		for i, p := range parts {
			require.Equal(t, base[i]+1, syncs(p), "partition %d: nothing to flush", i)
		}
		appendAll()
		time.Sleep(time.Second)
		synctest.Wait()
		for i, p := range parts {
			require.Equal(t, base[i]+2, syncs(p), "partition %d flushed after new appends", i)
		}
		require.NoError(t, d.DeletePartition("flushed", 0))
		require.NoError(t, d.Close())
		synctest.Wait()
		require.Equal(t, before, bubbleGoroutines(), "the scheduler ended")
	})
}

// bubbleGoroutines counts the goroutines of the calling goroutine's
// synctest bubble, the caller included, from a dump of every goroutine's
// stack (the runtime marks theirs "synctest bubble"). Not
// runtime.NumGoroutine: goroutines of the tests before, outside the
// bubble, may start or end while this one runs (a timer's callback, a
// background flush finishing after its Close returned), and CI once saw
// one more after Close.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "synctest bubble") {
			count++
		}
	}
	return count
}
