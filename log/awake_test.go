package log_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestDirWrittenPartitionsWithinBudget writes to far more partitions of
// one open Dir than its MaxOpenSegments holds, creating each and appending
// to it (with and without per-append fsync): a written partition's active
// segment counts against the budget and the coldest return to rest, so
// after every append the Dir holds at most three descriptors and three
// mappings per segment the budget allows (the segments open at rest and
// the active ones counted), not three per written partition. Every
// partition then reads back as the model says, before and after a clean
// reopen, and takes appends again in another order.
func TestDirWrittenPartitionsWithinBudget(t *testing.T) {
	for _, flush := range []int64{0, 1} {
		t.Run(fmt.Sprintf("FlushMessages=%d", flush), func(t *testing.T) {
			const parts, budget = 48, 4
			root := t.TempDir()
			bt := logtest.MakeBatch(2, 100, 1_700_000_000_000, 1)
			cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: 4096, IndexIntervalBytes: 1, FlushMessages: flush},
				MaxOpenSegments: budget}
			d, err := plog.OpenDir(root, cfg)
			require.NoError(t, err)
			models := make([]*logtest.Model, parts)
			// The budget's segments, three files each, and the Dir's own
			// files (its lock, the files Close writes); under
			// FlushMessages 1 the group syncer's handle on each awake
			// partition's .log. A segment woken from rest keeps the
			// mappings its wake replaced (readers may hold their bytes)
			// until it is closed: up to two a file.
			fdLimit := 3*budget + 4 + int(flush)*budget
			mapLimit := 2*3*budget + 4
			var peakFds, peakMaps int
			defer func() { t.Logf("at most %d descriptors and %d mappings for %d partitions", peakFds, peakMaps, parts) }()
			within := func(step string) {
				t.Helper()
				st := d.SegmentBudget()
				require.LessOrEqual(t, st.Open+st.Active, budget, "%s: %+v", step, st)
				if fds, maps, ok := openFiles(t, root); ok {
					require.LessOrEqual(t, fds, fdLimit, "%s: descriptors; %+v", step, st)
					require.LessOrEqual(t, maps, mapLimit, "%s: mappings; %+v", step, st)
					peakFds, peakMaps = max(peakFds, fds), max(peakMaps, maps)
				}
			}
			appendTo := func(i int) {
				t.Helper()
				base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
				require.NoError(t, err)
				require.NoError(t, models[i].AppendBatch(bt, base))
				within(fmt.Sprintf("after an append to partition %d", i))
			}
			for i := range parts {
				_, err := d.CreatePartition("t", int32(i))
				require.NoError(t, err)
				models[i] = logtest.NewModel(0, false)
				appendTo(i)
				appendTo(i)
			}
			st := d.SegmentBudget()
			assert.Equal(t, budget, st.Active, "the partitions written last are awake: %+v", st)
			assert.Positive(t, st.Closes, "rested active segments were closed: %+v", st)
			for i := range parts {
				require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
			}
			within("after reading every partition")
			require.NoError(t, d.Close())

			for _, m := range models {
				m.Reopen()
			}
			d, err = plog.OpenDir(root, cfg)
			require.NoError(t, err)
			for i := parts - 1; i >= 0; i-- {
				require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
				appendTo(i)
			}
			for i := range parts {
				require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
			}
			require.NoError(t, d.Close())
		})
	}
}

// TestDirRestedActiveCrash crashes, at every filesystem operation, a
// history of two partitions of a Dir whose budget holds one open segment:
// each append to one partition returns the other's active segment to rest
// and the budget closes its files, with its last batches not yet flushed.
// Sync of the rested partition then reopens and flushes that segment,
// appends wake it again, and Sync flushes it once more; the crash state
// must reopen holding every batch Sync acknowledged before the crash,
// each partition as a clean prefix of what was appended.
func TestDirRestedActiveCrash(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 30))
	const root = "/logs"
	cfg := func(fs vfs.FS) plog.DirConfig {
		return plog.DirConfig{Config: plog.Config{FS: fs, SegmentIndexBytes: 1024, IndexIntervalBytes: 1}, MaxOpenSegments: 1}
	}
	type walk struct {
		models [2]*logtest.Model
		acked  [2]int64 // the log end Sync acknowledged before the crash
	}
	crashAtEveryOp(t, crashWalk[*walk]{
		setup: func(*testing.T, vfs.FS) *walk {
			return &walk{models: [2]*logtest.Model{logtest.NewModel(0, false), logtest.NewModel(0, false)}}
		},
		run: func(t *testing.T, fs vfs.FS, w *walk, crashed func() bool) {
			d, err := plog.OpenDir(root, cfg(fs))
			require.NoError(t, err)
			parts := make([]*plog.Partition, 2)
			for i := range parts {
				parts[i], err = d.CreatePartition("t", int32(i))
				require.NoError(t, err)
			}
			ts := int64(1_700_000_000_000)
			appendTo := func(i int) {
				ts++
				bt := logtest.MakeBatch(2, 40, ts, byte(i))
				base, err := parts[i].AppendBatch(append([]byte(nil), bt...))
				require.NoError(t, err)
				require.NoError(t, w.models[i].AppendBatch(bt, base))
			}
			syncPart := func(i int) {
				require.NoError(t, parts[i].Sync())
				if !crashed() {
					w.models[i].Sync()
					w.acked[i] = w.models[i].LogEndOffset()
				}
			}
			appendTo(0)
			appendTo(0)
			syncPart(0)
			appendTo(0) // not yet flushed when it rests
			appendTo(1) // partition 0 rests, its files closed
			require.Equal(t, 1, d.SegmentBudget().Active)
			syncPart(0) // reopens the rested segment and flushes it
			appendTo(0) // wakes it; partition 1 rests
			appendTo(0)
			syncPart(0)
			syncPart(1)
			appendTo(1)
			appendTo(0)
			require.NoError(t, d.Close())
			if !crashed() {
				for i, m := range w.models {
					m.Sync()
					w.acked[i] = m.LogEndOffset()
				}
			}
		},
		options: randomCrash(rng),
		// The Dir's goroutines do some operations in the background (one
		// run in a few did 441 of the counted 442).
		mayEndEarly: true,
		check: func(t *testing.T, w *walk, state *vfs.MemFS, at crashPoint) {
			d, err := plog.OpenDir(root, cfg(state))
			require.NoError(t, err, "%s: reopen", at)
			for i, m := range w.models {
				p := d.Partition("t", int32(i))
				if p == nil {
					require.Zero(t, w.acked[i], "%s: partition %d is gone", at, i)
					continue
				}
				require.GreaterOrEqual(t, p.LogEndOffset(), w.acked[i], "%s: partition %d lost synced batches", at, i)
				m = m.Clone()
				require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()), "%s: partition %d", at, i)
				m.Reopen()
				require.NoError(t, logtest.Check(p, m), "%s: partition %d", at, i)
			}
			require.NoError(t, d.Close(), at)
		},
	})
}

// TestDirRestConcurrentWriters: goroutines append to many partitions of a
// Dir whose budget holds a few open segments, each its own partitions,
// while others read every partition and one syncs them: appends rest
// other writers' partitions and wake their own under the race detector.
// Every partition then reads back as appended, before and after a reopen.
func TestDirRestConcurrentWriters(t *testing.T) {
	// With FlushMessages 1 the appends go through the group syncer's
	// queue, which asks a rested segment for its index room.
	for _, flush := range []int64{0, 1} {
		t.Run(fmt.Sprintf("FlushMessages=%d", flush), func(t *testing.T) { restConcurrentWriters(t, flush) })
	}
}

func restConcurrentWriters(t *testing.T, flushMessages int64) {
	const parts, writers, rounds, budget = 24, 6, 8, 3
	root := t.TempDir()
	cfg := plog.DirConfig{Config: plog.Config{SegmentIndexBytes: 4096, IndexIntervalBytes: 1, FlushMessages: flushMessages}, MaxOpenSegments: budget}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	for i := range parts {
		_, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
	}
	bt := logtest.MakeBatch(3, 60, 1_700_000_000_000, 2)
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				for i := w; i < parts; i += writers {
					base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
					if err == nil {
						err = models[i].AppendBatch(bt, base)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range parts {
				p := d.Partition("t", int32(i))
				r, err := p.ReadFrom(p.LogStartOffset(), 1<<20)
				if err != nil && !errors.Is(err, plog.ErrOffsetOutOfRange) {
					errs <- err
					return
				}
				if err == nil {
					_ = r.Close() // an open Records keeps the Dir locked after Close
				}
			}
		}
	})
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range parts {
				if err := d.Partition("t", int32(i)).Sync(); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := d.SegmentBudget()
	require.LessOrEqual(t, st.Active, budget, "%+v", st)
	require.Positive(t, st.Closes, "%+v", st)
	for i := range parts {
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
	}
	requireDirMatchesAfterReopen(t, d, root, cfg, models)
}

// TestDirTruncationsWithinBudget: a truncation of a partition whose active
// segment rests (the awake set returned it to rest) opens that segment's
// files for writing again, as TruncateFullyAndStartAt does with the new
// segment it creates: the partition joins the awake set, so that the Dir
// still holds at most three descriptors per segment its budget allows.
// It used to stay outside the budget until its next append: 38 descriptors
// for 12 partitions under a budget of 2.
func TestDirTruncationsWithinBudget(t *testing.T) {
	for _, how := range []string{"TruncateTo", "TruncateFullyAndStartAt"} {
		t.Run(how, func(t *testing.T) {
			const parts = 12
			root := t.TempDir()
			d := budgetDirOfPartitions(t, root, plog.Config{SegmentIndexBytes: 4096, IndexIntervalBytes: 1}, parts)
			for i := range parts {
				p := d.Partition("t", int32(i))
				if how == "TruncateTo" {
					require.NoError(t, p.TruncateTo(2))
				} else {
					require.NoError(t, p.TruncateFullyAndStartAt(1))
				}
				requireWithinBudget(t, d, root, "after %d truncations", i+1)
			}
		})
	}
}

// TestDirRestedPartitionsDropSpares writes many partitions of a Dir past
// half a segment, each making the spare segment for its next roll, under
// a budget of two open segments: a partition the awake set returns to
// rest drops its spare (three descriptors and three mappings outside the
// budget), and a spare finished after the rest is dropped as it is
// installed, so the Dir holds the budget's segments and the awake
// partitions' spares only. Rested partitions kept their spares: 44
// descriptors for 12 partitions. The partitions then roll and read back
// as appended.
func TestDirRestedPartitionsDropSpares(t *testing.T) {
	const parts, budget = 12, 2
	root := t.TempDir()
	bt := logtest.MakeBatch(4, 200, 1_700_000_000_000, 1)
	cfg := plog.DirConfig{Config: plog.WithManualRollFlush(plog.Config{SegmentBytes: int64(4 * len(bt)), SegmentIndexBytes: 4096}),
		MaxOpenSegments: budget}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	appendTo := func(i int) {
		t.Helper()
		base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
		require.NoError(t, err)
		require.NoError(t, models[i].AppendBatch(bt, base))
	}
	// The budget's segments and the awake partitions' spares, three files
	// each, the Dir's lock and its filesystem sync handle.
	limit := 3*budget + 3*budget + 2
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		for range 3 {
			appendTo(i)
		}
		p.PrepareSpare() // what the goroutine the third append started does
		require.True(t, p.HasSpare())
		if fds, maps, ok := openFiles(t, root); ok {
			require.LessOrEqual(t, fds, limit, "descriptors after %d partitions; %+v", i+1, d.SegmentBudget())
			require.LessOrEqual(t, maps, limit, "mappings after %d partitions; %+v", i+1, d.SegmentBudget())
		}
	}
	rested := 0
	for i := range parts {
		if p := d.Partition("t", int32(i)); !p.HasSpare() {
			rested++
			// A spare made while the partition went to rest is not kept.
			p.PrepareSpare()
			require.False(t, p.HasSpare(), "partition %d", i)
		}
	}
	require.GreaterOrEqual(t, rested, parts-budget)
	for i := range parts {
		appendTo(i) // wakes and rolls
		appendTo(i)
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
	}
	requireDirMatchesAfterReopen(t, d, root, cfg, models)
}

// expireAll is a retention policy that deletes every segment, the active
// one included: the partition rolls first (Partition.DeleteExpired).
type expireAll struct{}

func (expireAll) Expired(v *plog.View) int { return len(v.Segments()) }

// TestDirRollsWithinBudget: a roll of a partition whose active segment
// rests (Roll, or retention that expires the whole log and rolls first)
// creates a new active segment holding its files open for writing: the
// partition joins the awake set, so that the Dir still holds at most
// three descriptors per segment its budget allows. It used to stay outside
// the budget until its next append: 38 descriptors for 12 partitions
// under a budget of 2 after retention emptied them.
func TestDirRollsWithinBudget(t *testing.T) {
	for _, how := range []string{"Roll", "DeleteExpired"} {
		t.Run(how, func(t *testing.T) {
			const parts = 12
			root := t.TempDir()
			// The roll's flush and the spare it starts are left to the
			// test: their goroutines would hold files for a while.
			cfg := plog.WithManualRollFlush(plog.Config{SegmentIndexBytes: 4096, IndexIntervalBytes: 1})
			d := budgetDirOfPartitions(t, root, cfg, parts)
			for i := range parts {
				p := d.Partition("t", int32(i))
				if how == "Roll" {
					require.NoError(t, p.Roll())
				} else {
					res, err := p.DeleteExpired(context.Background(), expireAll{})
					require.NoError(t, err)
					require.Equal(t, 1, res.SegmentsDeleted)
				}
				require.NoError(t, p.FlushRolled())
				require.Equal(t, int64(4), p.LogEndOffset())
				requireWithinBudget(t, d, root, "after %d rolls", i+1)
			}
			for i := range parts {
				_, err := d.Partition("t", int32(i)).AppendBatch(logtest.MakeBatch(2, 100, 1_700_000_000_000, 1))
				require.NoError(t, err)
			}
		})
	}
}

// TestDirFailedAppendsWithinBudget: an append to a partition whose active
// segment rests reopens and unseals the segment before it writes; when the
// write then fails (the disk is full) the segment stays open for writing,
// so the partition joins the awake set as a successful append would, and
// the Dir still holds at most three descriptors per segment its budget
// allows. A full disk used to leave every partition appended to outside
// the budget: 38 descriptors for 12 partitions under a budget of 2. With
// room again, every partition takes its appends and reads back as
// appended.
func TestDirFailedAppendsWithinBudget(t *testing.T) {
	const parts = 12
	root := t.TempDir()
	in := vfs.NewInjector(vfs.Default)
	d, err := plog.OpenDir(root, plog.DirConfig{Config: plog.Config{FS: in, SegmentIndexBytes: 4096, IndexIntervalBytes: 1},
		MaxOpenSegments: withinBudget})
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	bt := logtest.MakeBatch(2, 100, 1_700_000_000_000, 1)
	appendTo := func(i int) error {
		base, err := d.Partition("t", int32(i)).AppendBatch(append([]byte(nil), bt...))
		if err != nil {
			return err
		}
		return models[i].AppendBatch(bt, base)
	}
	for i := range parts {
		_, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		require.NoError(t, appendTo(i))
	}
	in.SetDiskFull(0)
	for i := range parts {
		require.ErrorIs(t, appendTo(i), vfs.ErrInjected, "partition %d", i)
		requireWithinBudget(t, d, root, "after %d failed appends", i+1)
	}
	in.Reset()
	for i := range parts {
		require.NoError(t, appendTo(i))
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "partition %d", i)
	}
	require.NoError(t, d.Close())
}

// withinBudget is the open-segment budget of the tests that count a Dir's
// descriptors (requireWithinBudget).
const withinBudget = 2

// budgetDirOfPartitions opens a Dir at root with cfg under a budget of
// withinBudget open segments and creates n partitions of topic t with two
// batches each (offsets 0-3): the awake set has rested all but the last
// ones written. The Dir is closed when the test ends.
func budgetDirOfPartitions(t *testing.T, root string, cfg plog.Config, n int) *plog.Dir {
	t.Helper()
	d, err := plog.OpenDir(root, plog.DirConfig{Config: cfg, MaxOpenSegments: withinBudget})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	for i := range n {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		for range 2 {
			_, err = p.AppendBatch(logtest.MakeBatch(2, 100, 1_700_000_000_000, 1))
			require.NoError(t, err)
		}
	}
	return d
}

// requireWithinBudget requires d, whose files lie under root, to hold at
// most withinBudget awake segments and, where /proc shows them, three
// descriptors for each (and the Dir's lock and sync handle); msgAndArgs
// say after what.
func requireWithinBudget(t *testing.T, d *plog.Dir, root string, msgAndArgs ...any) {
	t.Helper()
	require.LessOrEqual(t, d.SegmentBudget().Active, withinBudget, msgAndArgs...)
	if fds, _, ok := openFiles(t, root); ok {
		require.LessOrEqual(t, fds, 3*withinBudget+2, msgAndArgs...)
	}
}

// requireDirMatchesAfterReopen closes d, opens the Dir at root again with
// cfg and requires partition i of topic t to hold what models[i] says
// (reopened: what a clean close keeps), then closes it.
func requireDirMatchesAfterReopen(t *testing.T, d *plog.Dir, root string, cfg plog.DirConfig, models []*logtest.Model) {
	t.Helper()
	require.NoError(t, d.Close())
	for _, m := range models {
		m.Reopen()
	}
	d, err := plog.OpenDir(root, cfg)
	require.NoError(t, err)
	for i, m := range models {
		require.NoError(t, logtest.Check(d.Partition("t", int32(i)), m), "partition %d", i)
	}
	require.NoError(t, d.Close())
}
