package log_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// soakRacePartitions is how many partitions the race soak's Dir holds:
// partition i is topic "ret" (retention by size) or "cmp" (compaction) by
// parity, number i/2.
const soakRacePartitions = 8

func soakRaceName(i int) (string, int32) {
	if i%2 == 0 {
		return "ret", int32(i / 2)
	}
	return "cmp", int32(i / 2)
}

// soakRaceAllowed reports whether err is an error a call of the race soak
// may get: the partition was closed or deleted under it, retention moved
// the log start past the offset read, or a cleanup round met another.
func soakRaceAllowed(err error) bool {
	for _, s := range []error{plog.ErrClosed, plog.ErrUnknownPartition, plog.ErrOffsetOutOfRange, plog.ErrCleaningInProgress, plog.ErrSegmentsChanged} {
		if errors.Is(err, s) {
			return true
		}
	}
	return err == nil
}

// soakRace is the race soak's shared state: the Dir, and per partition a
// generation (bumped by each deletion) and the batches acknowledged in it.
type soakRace struct {
	t  *testing.T
	d  *plog.Dir
	mu [soakRacePartitions]sync.Mutex
	// compacting is held by each DirRunner pass, and by a close or deletion
	// of a compacted partition: a Compact round whose partition is closed
	// under it goes on with the files the reopened (or recreated) partition
	// now owns, and fails on them (Close neither waits for nor stops the
	// round; reported with issue 28's soak, not fixed here).
	compacting sync.Mutex
	gen        [soakRacePartitions]int
	// acked maps each acknowledged batch's base to its next offset, for
	// the partition's current generation.
	acked [soakRacePartitions]map[int64]int64
	// Counts for the log.
	appends, reads, batchesRead, deletes, creates, reopens, cleanups atomic.Int64
	errs                                                             atomic.Pointer[error]
}

// fail records an unexpected error; the test fails with it after the
// goroutines end.
func (s *soakRace) fail(err error) {
	s.errs.CompareAndSwap(nil, &err)
}

// TestSoakRace is issue 28's -race soak of mixed Dir operations as a test:
// goroutines append to the eight partitions of a Dir on the in-memory
// filesystem, read them (checking every batch is the one appended at its
// offset), delete and create partitions, close and reopen them
// (OpenPartition), and run retention and compaction over the whole Dir with
// compaction.DirRunner, all at once, for a fixed number of operations each.
// Every call returns nil or an error its race explains (ErrClosed,
// ErrUnknownPartition, ErrOffsetOutOfRange after retention,
// ErrCleaningInProgress, ErrSegmentsChanged). Then the Dir is closed and
// reopened: every partition passes Verify, its log is contiguous and holds
// only the batches appended at those offsets, and every batch acknowledged
// since the partition was last created, past its log start, is there. Run it
// with -race (CI's race pass does).
func TestSoakRace(t *testing.T) {
	seed := soakSeed(t)
	rounds, ops := 10, 600
	if testing.Short() || raceEnabled {
		rounds, ops = 4, 300
	}
	var total struct{ appends, reads, batches, deletes, creates, reopens, cleanups int64 }
	ran := soakLoop(t, rounds, func(round int) {
		s := soakRaceRound(t, seed+uint64(round), ops)
		total.appends += s.appends.Load()
		total.reads += s.reads.Load()
		total.batches += s.batchesRead.Load()
		total.deletes += s.deletes.Load()
		total.creates += s.creates.Load()
		total.reopens += s.reopens.Load()
		total.cleanups += s.cleanups.Load()
	})
	t.Logf("soak race: %d rounds: %d appends acknowledged, %d reads (%d batches checked), %d partitions deleted, %d created, %d closed and reopened, %d DirRunner passes",
		ran, total.appends, total.reads, total.batches, total.deletes, total.creates, total.reopens, total.cleanups)
}

// soakRaceRound runs one round of the race soak on a new Dir.
func soakRaceRound(t *testing.T, seed uint64, ops int) *soakRace {
	mem := vfs.NewMem()
	cfg := plog.DirConfig{
		Config:          plog.Config{SegmentBytes: 4 << 10, SegmentIndexBytes: 4096, IndexIntervalBytes: 256, FS: mem, Logger: slog.New(slog.DiscardHandler)},
		RecoveryThreads: 2,
	}
	d, err := plog.OpenDir("/d", cfg)
	require.NoError(t, err)
	s := &soakRace{t: t, d: d}
	for i := range soakRacePartitions {
		s.acked[i] = map[int64]int64{}
		_, err := d.CreatePartition(soakRaceName(i))
		require.NoError(t, err)
	}
	runner, err := compaction.NewDirRunner(d, compaction.DirRunnerOptions{
		Config: compaction.Config{CleanupPolicy: "delete", RetentionBytes: 12 << 10},
		TopicConfig: func(topic string) *compaction.Config {
			if topic == "cmp" {
				return &compaction.Config{CleanupPolicy: "compact", MinCleanableDirtyRatio: 0.01}
			}
			return nil
		},
		Workers: 2,
	})
	require.NoError(t, err)

	var wg sync.WaitGroup
	worker := func(id int, body func(rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(id)))
			for range ops {
				if s.errs.Load() != nil {
					return
				}
				body(rng)
			}
		}()
	}
	for g := range 2 { // appenders: g owns the partitions of its parity
		worker(g, func(rng *rand.Rand) { s.append(2*rng.IntN(soakRacePartitions/2) + g) })
	}
	for g := range 2 {
		worker(10+g, func(rng *rand.Rand) { s.read(rng) })
	}
	worker(20, func(rng *rand.Rand) {
		i := rng.IntN(soakRacePartitions)
		switch rng.IntN(10) {
		case 0:
			s.deleteCreate(i)
		case 1, 2:
			s.closeReopen(i)
		}
	})
	worker(30, func(*rand.Rand) {
		s.compacting.Lock()
		defer s.compacting.Unlock()
		if _, errs, err := runner.Run(context.Background()); err != nil {
			s.fail(fmt.Errorf("DirRunner: %w", err))
		} else {
			for dir, err := range errs {
				if !soakRaceAllowed(err) {
					s.fail(fmt.Errorf("DirRunner %s: %w", dir, err))
				}
			}
		}
		s.cleanups.Add(1)
	})
	wg.Wait()
	if p := s.errs.Load(); p != nil {
		require.NoError(t, *p)
	}

	require.NoError(t, d.Close())
	d, err = plog.OpenDir("/d", cfg)
	require.NoError(t, err)
	for i := range soakRacePartitions {
		topic, n := soakRaceName(i)
		p := d.Partition(topic, n)
		if p == nil {
			require.Empty(t, s.acked[i], "%s-%d lost with acknowledged batches", topic, n)
			continue
		}
		where := fmt.Sprintf("%s-%d after the race", topic, n)
		require.NoError(t, p.Verify(), where)
		seen := map[int64]bool{}
		soakWalk(t, where, p, func(b batch.Batch) {
			require.True(t, soakSameBatch(b, soakPlainBatch(t, i, b.BaseOffset())), "%s: the batch at %d is not the one appended there", where, b.BaseOffset())
			seen[b.BaseOffset()] = true
		})
		for base, next := range s.acked[i] {
			if next > p.LogStartOffset() {
				require.True(t, seen[base], "%s: acknowledged batch [%d, %d) lost", where, base, next)
			}
		}
	}
	require.NoError(t, d.Close())
	return s
}

// append appends the next batch to partition i, opening or creating it
// when a race closed or deleted it.
func (s *soakRace) append(i int) {
	topic, n := soakRaceName(i)
	s.mu[i].Lock()
	gen := s.gen[i]
	p, err := s.d.Lookup(topic, n)
	s.mu[i].Unlock()
	if err != nil {
		if !soakRaceAllowed(err) {
			s.fail(fmt.Errorf("lookup %s-%d: %w", topic, n, err))
		}
		return
	}
	end := p.LogEndOffset()
	base, err := p.AppendBatch(soakPlainBatch(s.t, i, end))
	if err != nil {
		if !soakRaceAllowed(err) {
			s.fail(fmt.Errorf("append %s-%d: %w", topic, n, err))
		}
		return
	}
	if base != end {
		s.fail(fmt.Errorf("append %s-%d: base %d, the log ended at %d (one appender per partition)", topic, n, base, end))
		return
	}
	s.mu[i].Lock()
	if s.gen[i] == gen {
		s.acked[i][base] = base + int64(batch.Batch(soakPlainBatch(s.t, i, end)).LastOffsetDelta()) + 1
	}
	s.mu[i].Unlock()
	s.appends.Add(1)
}

// read reads a random partition from a random offset and checks each
// batch it returns.
func (s *soakRace) read(rng *rand.Rand) {
	i := rng.IntN(soakRacePartitions)
	topic, n := soakRaceName(i)
	p, err := s.d.Lookup(topic, n)
	if err != nil {
		if !soakRaceAllowed(err) {
			s.fail(fmt.Errorf("lookup %s-%d: %w", topic, n, err))
		}
		return
	}
	start, end := p.LogStartOffset(), p.LogEndOffset()
	recs, err := p.ReadFrom(start+rng.Int64N(end-start+1), 1+rng.IntN(8<<10))
	s.reads.Add(1)
	if err != nil {
		if !soakRaceAllowed(err) {
			s.fail(fmt.Errorf("read %s-%d: %w", topic, n, err))
		}
		return
	}
	defer recs.Close()
	for b, err := range recs.Batches() {
		if err != nil {
			s.fail(fmt.Errorf("read %s-%d: %w", topic, n, err))
			return
		}
		if !soakSameBatch(b, soakPlainBatch(s.t, i, b.BaseOffset())) {
			s.fail(fmt.Errorf("read %s-%d: the batch at %d is not the one appended there", topic, n, b.BaseOffset()))
			return
		}
		s.batchesRead.Add(1)
	}
}

// deleteCreate deletes partition i and creates it again, empty.
func (s *soakRace) deleteCreate(i int) {
	topic, n := soakRaceName(i)
	if topic == "cmp" {
		s.compacting.Lock()
		defer s.compacting.Unlock()
	}
	s.mu[i].Lock()
	defer s.mu[i].Unlock()
	s.gen[i]++
	clear(s.acked[i])
	if err := s.d.DeletePartition(topic, n); err != nil {
		if !soakRaceAllowed(err) {
			s.fail(fmt.Errorf("delete %s-%d: %w", topic, n, err))
		}
	} else {
		s.deletes.Add(1)
	}
	if _, err := s.d.CreatePartition(topic, n); err != nil {
		s.fail(fmt.Errorf("create %s-%d: %w", topic, n, err))
		return
	}
	s.creates.Add(1)
}

// closeReopen closes partition i on its own and reopens it with
// OpenPartition. The reopen is refused with ErrLocked while a reader still
// holds Records of the closed partition (the new one would cut the files
// they map): the partition then stays closed until a later closeReopen
// (whose Close returns ErrClosed) reopens it.
func (s *soakRace) closeReopen(i int) {
	topic, n := soakRaceName(i)
	if topic == "cmp" {
		s.compacting.Lock()
		defer s.compacting.Unlock()
	}
	s.mu[i].Lock()
	defer s.mu[i].Unlock()
	p := s.d.Partition(topic, n)
	if p == nil {
		return
	}
	if err := p.Close(); !soakRaceAllowed(err) {
		s.fail(fmt.Errorf("close %s-%d: %w", topic, n, err))
		return
	}
	if _, err := s.d.OpenPartition(topic, n); err != nil {
		if errors.Is(err, plog.ErrLocked) {
			return
		}
		s.fail(fmt.Errorf("reopen %s-%d: %w", topic, n, err))
		return
	}
	s.reopens.Add(1)
}
