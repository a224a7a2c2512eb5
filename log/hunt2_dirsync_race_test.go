package log_test

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestFlushUnderMuDuringGroupSyncSyncsDirectory: under FlushMessages 1 the
// group syncer takes the directory's dirty flag under mu, releases mu for
// its fdatasync and syncs the directory afterwards. A writer that flushes
// under mu alone meanwhile (TruncateTo, DeleteRecordsBefore, compaction's
// and retention's flush of sealed segments) must still sync the directory
// before it calls anything durable: the entries of the segment a roll made
// (created, or a spare's renames) are not durable yet. Here a TruncateTo
// runs while the first group sync after a roll holds its fdatasync; in a
// Dir (whose checkpoints are synced at the root, not in the partition's
// directory) nothing else syncs the partition directory, and a crash right
// after TruncateTo returned lost the new segment, the batch TruncateTo had
// flushed with it; DeleteRecordsBefore (whose flush covers what was
// appended before it) the same. With a created segment and an adopted
// spare.
func TestFlushUnderMuDuringGroupSyncSyncsDirectory(t *testing.T) {
	type writer struct {
		name string
		// run calls the writer; it returns the log end a crash right
		// after it must keep, given the roll's base.
		run func(p *plog.Partition, rollBase int64) (int64, error)
	}
	writers := []writer{
		{"TruncateTo", func(p *plog.Partition, rollBase int64) (int64, error) {
			// Writes the queued batch, cuts it away and flushes.
			return rollBase + 3, p.TruncateTo(rollBase + 3)
		}},
		{"DeleteRecordsBefore", func(p *plog.Partition, rollBase int64) (int64, error) {
			// Writes the queued batch and flushes both.
			return rollBase + 4, p.DeleteRecordsBefore(1)
		}},
	}
	for _, w := range writers {
		for _, spare := range []bool{false, true} {
			t.Run(w.name+"/"+map[bool]string{false: "created", true: "spare"}[spare], func(t *testing.T) {
				mem := vfs.NewMem()
				in := vfs.NewInjector(mem)
				// The rolls' background flush (which syncs the directory)
				// is left to the test, and never run.
				cfg := plog.WithManualRollFlush(plog.Config{FS: in, FlushMessages: 1, SegmentIndexBytes: 1024})
				d, err := plog.OpenDir("/logs", plog.DirConfig{Config: cfg})
				require.NoError(t, err)
				p, err := d.CreatePartition("t", 0)
				require.NoError(t, err)
				for i := range 3 {
					_, err := p.AppendBatch(logtest.MakeBatch(2, 40, int64(1+i), byte(i)))
					require.NoError(t, err)
				}
				if spare {
					p.PrepareSpare()
					require.True(t, p.HasSpare())
				}
				require.NoError(t, p.Roll())
				segs, err := p.Segments()
				require.NoError(t, err)
				require.Equal(t, spare, segs[len(segs)-1].AdoptionPending(), "the roll adopted the spare")
				for _, s := range segs {
					require.NoError(t, s.Unref())
				}
				rollBase := p.LogEndOffset()

				// The first group sync after the roll: hold its fdatasync of
				// the new segment's .log, after it took the dirty flag.
				var held atomic.Bool
				entered, release := make(chan struct{}), make(chan struct{})
				in.SetHook(func(op vfs.Op) error {
					if op.Kind == vfs.OpSync && strings.HasSuffix(op.Path, segment.LogSuffix) && held.CompareAndSwap(false, true) {
						close(entered)
						<-release
					}
					return nil
				})
				keep := logtest.MakeBatch(3, 40, 10, 7)
				var wg sync.WaitGroup
				var keepErr error
				wg.Go(func() { _, keepErr = p.AppendBatch(keep) })
				<-entered
				// Another appender queues behind the held sync; TruncateTo
				// writes it, cuts it away and flushes: the kept batch is
				// synced when TruncateTo returns.
				var cutErr error
				wg.Go(func() { _, cutErr = p.AppendBatch(logtest.MakeBatch(1, 40, 11, 8)) })
				for p.Stats().BatchesAppended < 5 {
					runtime.Gosched()
				}
				want, err := w.run(p, rollBase)
				require.NoError(t, err)
				clone := mem.CrashClone(vfs.CrashOptions{}) // synced state only
				close(release)
				wg.Wait()
				require.NoError(t, keepErr)
				_ = cutErr // TruncateTo cut it: its sync covers nothing of it
				require.NoError(t, d.Close())

				d2, err := plog.OpenDir("/logs", plog.DirConfig{Config: plog.Config{FS: clone, SegmentIndexBytes: 1024}})
				require.NoError(t, err)
				defer func() { require.NoError(t, d2.Close()) }()
				q := d2.Partition("t", 0)
				require.NotNil(t, q)
				require.Equal(t, want, q.LogEndOffset(), "batches %s flushed are lost: the new segment's directory entry was never synced", w.name)
			})
		}
	}
}
