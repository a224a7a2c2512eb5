package log_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// soakDiskFullParts is the partitions of the disk-full soak's Dir: topic
// "sync" (FlushMessages 1) and topic "lazy" (Kafka's default, no flush by
// count), two partitions each. Partition i of the soak is
// soakDiskFullParts[i].
var soakDiskFullParts = []plog.TopicPartition{{Topic: "lazy", Partition: 0}, {Topic: "lazy", Partition: 1}, {Topic: "sync", Partition: 0}, {Topic: "sync", Partition: 1}}

// soakDiskFullConfig is the disk-full soak's Dir over fsys: small segments
// and indexes, so that an episode rolls, preallocates and compacts often.
func soakDiskFullConfig(fsys vfs.FS) plog.DirConfig {
	cfg := plog.Config{SegmentBytes: 8 << 10, SegmentIndexBytes: 4096, IndexIntervalBytes: 512, FS: fsys,
		Logger: slog.New(slog.DiscardHandler)} // the failures' errors are logged too; the test checks them
	return plog.DirConfig{
		Config: cfg,
		TopicConfig: func(topic string) *plog.Config {
			if topic != "sync" {
				return nil
			}
			c := cfg
			c.FlushMessages = 1
			return &c
		},
		RecoveryThreads: 2,
	}
}

// soakDiskFull is the state of the disk-full soak: the filesystem, the
// Dir, and per partition what was acknowledged and what may have been
// deleted on purpose.
type soakDiskFull struct {
	t   *testing.T
	rng *rand.Rand
	mem *vfs.MemFS
	in  *vfs.Injector
	d   *plog.Dir
	// acked maps each acknowledged batch's base to its next offset.
	acked []map[int64]int64
	// mayStart is the highest log start offset a DeleteRecordsBefore or a
	// retention round may have set: the log may start there, not above.
	mayStart []int64
	// synced is where a lazy partition's log was last synced: a crash
	// keeps at least that much.
	synced []int64
	// Counts for the log.
	ops, failed, enospc, offline, reopened, crashes, checked int
}

// TestSoakDiskFull is issue 28's disk-full campaign as a test: a Dir of four
// partitions (two under FlushMessages 1, two under Kafka's default) on the
// in-memory filesystem, behind an Injector whose disk-full mode makes every
// write past a random budget fail with ENOSPC. Each round fills the disk at
// a random point and runs random operations: appends, rolls, syncs,
// DeleteRecordsBefore (root checkpoint writes), compaction rounds that
// rewrite every sealed segment, retention, and a Dir close and reopen. Then
// space comes back and the soak checks:
//   - every error wraps ENOSPC or ErrFailed (nothing untyped, no panic);
//   - each partition is usable (an append succeeds) or cleanly offline:
//     it reports ErrFailed, and Close plus Dir.OpenPartition bring it back;
//   - nothing acknowledged is lost: each partition's log is contiguous, its
//     batches are exactly the ones appended at those offsets, every
//     acknowledged batch above the log start the soak allowed is there, and
//     Verify passes;
//   - now and then a crash (MemFS.CrashClone, some unsynced writes kept,
//     some torn) and OpenDir of what it left, with the same checks (under
//     FlushMessages 1 every acknowledged batch; under the default every
//     batch synced).
func TestSoakDiskFull(t *testing.T) {
	seed := soakSeed(t)
	s := &soakDiskFull{t: t, rng: rand.New(rand.NewPCG(seed, 0xd15c)), mem: vfs.NewMem()}
	s.in = vfs.NewInjector(s.mem)
	n := len(soakDiskFullParts)
	s.acked, s.mayStart, s.synced = make([]map[int64]int64, n), make([]int64, n), make([]int64, n)
	for i := range n {
		s.acked[i] = map[int64]int64{}
	}
	s.openDir("start")
	rounds := 150
	if testing.Short() || raceEnabled {
		rounds = 40
	}
	ran := soakLoop(t, rounds, s.round)
	require.NoError(t, s.d.Close())
	t.Logf("soak disk full: %d rounds, %d operations, %d failed (%d with ENOSPC), %d partitions offline and reopened, %d Dir reopens, %d crashes, %d acknowledged batches checked",
		ran, s.ops, s.failed, s.enospc, s.offline, s.reopened, s.crashes, s.checked)
}

// openDir opens the Dir on the current filesystem and creates the
// partitions it lacks.
func (s *soakDiskFull) openDir(where string) {
	t := s.t
	d, err := plog.OpenDir("/data", soakDiskFullConfig(s.in))
	require.NoError(t, err, "%s: OpenDir", where)
	for _, tp := range soakDiskFullParts {
		_, err := d.CreatePartition(tp.Topic, tp.Partition)
		require.NoError(t, err, "%s: create %v", where, tp)
	}
	s.d = d
}

// part returns partition i of the open Dir (nil while the Dir is closed).
func (s *soakDiskFull) part(i int) *plog.Partition {
	if s.d == nil {
		return nil
	}
	return s.d.Partition(soakDiskFullParts[i].Topic, soakDiskFullParts[i].Partition)
}

// typed fails the test unless err, returned while the disk was full, is
// nil or wraps ENOSPC or ErrFailed.
func (s *soakDiskFull) typed(where string, err error) {
	s.ops++
	if err == nil {
		return
	}
	s.failed++
	if errors.Is(err, syscall.ENOSPC) {
		s.enospc++
	}
	require.True(s.t, errors.Is(err, syscall.ENOSPC) || errors.Is(err, plog.ErrFailed), "%s: error neither ENOSPC nor ErrFailed: %v", where, err)
	require.True(s.t, errors.Is(err, vfs.ErrInjected), "%s: a failure the disk did not cause: %v", where, err)
}

// round fills the disk, runs random operations, frees space, brings every
// partition back and checks it.
func (s *soakDiskFull) round(r int) {
	t, rng := s.t, s.rng
	// A budget from a few bytes to 256 KiB: the disk fills at any point of
	// the round, or not at all.
	s.in.SetDiskFull(int64(rng.IntN(1 << (8 + rng.IntN(11)))))
	for k := range 10 + rng.IntN(40) {
		where := fmt.Sprintf("round %d op %d", r, k)
		if s.d == nil {
			d, err := plog.OpenDir("/data", soakDiskFullConfig(s.in))
			s.typed(where+": OpenDir", err)
			if err != nil {
				continue
			}
			s.d = d
			s.reopened++
		}
		i := rng.IntN(len(soakDiskFullParts))
		p := s.part(i)
		if p == nil {
			continue
		}
		switch op := rng.IntN(100); {
		case op < 60:
			end := p.LogEndOffset()
			base, err := p.AppendBatch(soakPlainBatch(t, i, end))
			s.typed(where+": append", err)
			if err == nil {
				require.Equal(t, end, base, "%s: append", where)
				s.acked[i][base] = p.LogEndOffset()
			}
		case op < 68:
			s.typed(where+": roll", p.Roll())
		case op < 76:
			end := p.LogEndOffset()
			err := p.Sync()
			s.typed(where+": sync", err)
			if err == nil {
				s.synced[i] = end
			}
		case op < 82:
			to := p.LogStartOffset() + rng.Int64N(p.HighWatermark()-p.LogStartOffset()+1)
			s.mayStart[i] = max(s.mayStart[i], to)
			s.typed(where+": DeleteRecordsBefore", p.DeleteRecordsBefore(to))
		case op < 90:
			_, err := p.Compact(context.Background(), keepAllCleaner{})
			s.typed(where+": compact", err)
		case op < 96:
			// The round deletes the oldest segment (when more than two
			// are left); failing halfway it may have renamed it
			// .deleted, which the next Open finishes.
			if segs := p.SegmentInfos(); len(segs) > 2 {
				s.mayStart[i] = max(s.mayStart[i], segs[1].BaseOffset)
			}
			_, err := p.DeleteExpired(context.Background(), soakOldestSegment{})
			s.mayStart[i] = max(s.mayStart[i], p.LogStartOffset())
			s.typed(where+": retention", err)
		default:
			err := s.d.Close()
			s.d = nil
			// Close flushes: under either policy what was appended is
			// synced when it succeeds.
			if err == nil {
				for j := range soakDiskFullParts {
					s.synced[j] = s.maxAcked(j)
				}
			}
			s.typed(where+": Dir.Close", err)
		}
	}
	s.in.SetDiskFull(-1)
	where := fmt.Sprintf("round %d, space back", r)
	if s.d == nil {
		s.openDir(where)
		s.reopened++
	}
	for i := range soakDiskFullParts {
		s.revive(where, i)
	}
	switch rng.IntN(8) {
	case 0:
		require.NoError(t, s.d.Close(), where)
		for i := range soakDiskFullParts {
			s.synced[i] = s.maxAcked(i)
		}
		s.openDir(where + ", clean reopen")
		s.reopened++
	case 1:
		s.crash(where)
	}
	for i := range soakDiskFullParts {
		s.check(where, i, false)
	}
}

// revive makes partition i usable after the disk had space again: when an
// append fails (it must be ErrFailed: the partition is offline), Close and
// Dir.OpenPartition must bring it back, and the append then succeed.
func (s *soakDiskFull) revive(where string, i int) {
	t := s.t
	tp := soakDiskFullParts[i]
	p := s.part(i)
	end := p.LogEndOffset()
	base, err := p.AppendBatch(soakPlainBatch(t, i, end))
	if err != nil {
		require.ErrorIs(t, err, plog.ErrFailed, "%s: %v with space back: neither usable nor offline", where, tp)
		require.True(t, p.Stats().Failed, "%s: %v", where, tp)
		s.offline++
		_ = p.Close() // a failed partition's Close reports the failure again
		p, err = s.d.OpenPartition(tp.Topic, tp.Partition)
		require.NoError(t, err, "%s: reopen of offline %v", where, tp)
		s.check(where+", reopened", i, true)
		end = p.LogEndOffset()
		base, err = p.AppendBatch(soakPlainBatch(t, i, end))
		require.NoError(t, err, "%s: append to reopened %v", where, tp)
	}
	require.Equal(t, end, base, "%s: %v", where, tp)
	s.acked[i][base] = p.LogEndOffset()
}

// crash replaces the filesystem with what a crash now leaves and reopens
// the Dir from it.
func (s *soakDiskFull) crash(where string) {
	s.crashes++
	opts := vfs.CrashOptions{UnsyncedDataPercent: s.rng.IntN(101), TornPercent: s.rng.IntN(50), Seed: s.rng.Uint64()}
	s.mem = s.mem.CrashClone(opts)
	s.in = vfs.NewInjector(s.mem)
	s.d = nil // the old Dir's handles reach the old filesystem only
	s.openDir(fmt.Sprintf("%s, crash %+v", where, opts))
	for i := range soakDiskFullParts {
		s.check(where+", after the crash", i, true)
		// Under the default policy, what was appended after the last
		// sync may be gone: forget it.
		if p := s.part(i); soakDiskFullParts[i].Topic == "lazy" {
			for base, next := range s.acked[i] {
				if next > p.LogEndOffset() {
					delete(s.acked[i], base)
				}
			}
		}
	}
}

// maxAcked returns the end of partition i's last acknowledged batch.
func (s *soakDiskFull) maxAcked(i int) int64 {
	var end int64
	for _, next := range s.acked[i] {
		end = max(end, next)
	}
	return end
}

// check checks partition i: Verify, a contiguous log of the batches
// appended at those offsets, no log start above what the soak allowed,
// and every acknowledged batch past the log start present (after a crash,
// under the default policy, every one the last sync covered).
func (s *soakDiskFull) check(where string, i int, crashed bool) {
	t := s.t
	p := s.part(i)
	where = fmt.Sprintf("%s: %v", where, soakDiskFullParts[i])
	require.NoError(t, p.Verify(), where)
	start := p.LogStartOffset()
	require.LessOrEqual(t, start, max(s.mayStart[i], 0), "%s: the log starts past what was deleted", where)
	bound := int64(-1) // acknowledged batches ending past it must be there
	if crashed && soakDiskFullParts[i].Topic == "lazy" {
		require.GreaterOrEqual(t, p.LogEndOffset(), s.synced[i], "%s: a synced batch lost in the crash", where)
		bound = s.synced[i]
	}
	seen := map[int64]bool{}
	soakWalk(t, where, p, func(b batch.Batch) {
		require.True(t, soakSameBatch(b, soakPlainBatch(t, i, b.BaseOffset())), "%s: the batch at %d is not the one appended there", where, b.BaseOffset())
		if next, ok := s.acked[i][b.BaseOffset()]; ok {
			require.Equal(t, next, b.NextOffset(), "%s: batch at %d", where, b.BaseOffset())
		}
		seen[b.BaseOffset()] = true
	})
	for base, next := range s.acked[i] {
		if next <= start || (bound >= 0 && next > bound) {
			continue
		}
		require.True(t, seen[base], "%s: acknowledged batch [%d, %d) lost (log [%d, %d))", where, base, next, start, p.LogEndOffset())
		s.checked++
	}
}
