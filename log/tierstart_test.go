package log_test

import (
	"bytes"
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// earliest returns the OffsetForTimestamp(EarliestTimestamp) answer.
func earliest(t *testing.T, p *plog.Partition) int64 {
	t.Helper()
	to, found, err := p.OffsetForTimestamp(plog.EarliestTimestamp)
	require.NoError(t, err)
	require.True(t, found)
	return to.Offset
}

// requireOutOfRange checks that a read of offset fails with
// ErrOffsetOutOfRange.
func requireOutOfRange(t *testing.T, p *plog.Partition, offset int64) {
	t.Helper()
	r, err := p.ReadFrom(offset, 100)
	if err == nil {
		defer r.Close()
		t.Fatalf("ReadFrom(%d) returned offsets %d..%d, want ErrOffsetOutOfRange", offset, r.FirstOffset(), r.NextOffset()-1)
	}
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange, "ReadFrom(%d)", offset)
}

// requireStoreHoldsRecorded checks that the store holds exactly the copies
// the partition records.
func requireStoreHoldsRecorded(t *testing.T, st plog.RemoteStorage, p *plog.Partition) {
	t.Helper()
	ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	require.Len(t, ids, p.Stats().Remote.Segments, "the store holds exactly the recorded copies")
}

// rangeStore remembers the offsets of every copy made, and runs hook (once)
// before the copy number hookAt.
type rangeStore struct {
	plog.RemoteStorage
	mu     sync.Mutex
	ranges map[plog.RemoteSegmentID][2]int64
	copies int
	hookAt int
	hook   func() error
	err    error
}

func newRangeStore(st plog.RemoteStorage) *rangeStore {
	return &rangeStore{RemoteStorage: st, ranges: map[plog.RemoteSegmentID][2]int64{}}
}

func (s *rangeStore) CopySegment(ctx context.Context, md plog.RemoteSegmentMetadata, d plog.RemoteSegmentData) error {
	s.mu.Lock()
	s.copies++
	s.ranges[md.ID] = [2]int64{md.BaseOffset, md.EndOffset}
	run := s.copies == s.hookAt && s.hook != nil
	s.mu.Unlock()
	if run {
		s.err = s.hook()
	}
	return s.RemoteStorage.CopySegment(ctx, md, d)
}

// requireNoCopyBelow checks that the store holds no copy wholly below
// offset.
func requireNoCopyBelow(t *testing.T, st *rangeStore, offset int64) {
	t.Helper()
	ids, err := st.ListSegments(context.Background(), plog.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, id := range ids {
		r, ok := st.ranges[id]
		require.True(t, ok, "a copy the test did not see made: %s", id)
		require.GreaterOrEqual(t, r[1], offset, "copy %s of offsets %d..%d is wholly below the log start", id, r[0], r[1])
	}
}

// TestTierDeleteRecordsBeforeMovesWholeStart: DeleteRecordsBefore moves the
// start of the whole log, copies included, as Kafka's DeleteRecords moves
// its logStartOffset below the local log start: whether the offset lies
// below the local start (only copies hold it) or above it, before the
// segments are copied or after, the records below it never read back
// again (not from the copies either, not after the next pass, not after a
// reopen), Earliest and Stats().Remote.LogStartOffset answer the offset, a
// time lookup never answers an offset below it, and the next pass deletes
// the copies wholly below it from the store.
func TestTierDeleteRecordsBeforeMovesWholeStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// local is the local retention in bytes (0: everything stays
		// local); passFirst runs a pass before DeleteRecordsBefore.
		local     int64
		passFirst bool
		at        int64
	}{
		{"below the local start", 1, true, 30},
		{"above the local start, before the copies", 0, false, 5},
		{"above the local start, after the copies", 0, true, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			st := newRangeStore(plog.NewDirRemoteStorage("/remote", mem))
			_, d, p := tieredPartition(t, mem, st, tc.local)
			require.Greater(t, p.Stats().Segments, 5)
			want := readAllBatches(t, p, tc.at)
			if tc.passFirst {
				d.RunTierPass()
				require.Positive(t, p.Stats().Remote.Segments)
			}
			if tc.local > 0 {
				require.Greater(t, p.LogStartOffset(), tc.at, "only copies hold the offset")
			}

			require.NoError(t, p.DeleteRecordsBefore(tc.at))
			check := func(when string) {
				t.Helper()
				require.Equal(t, tc.at, earliest(t, p), "%s: Earliest", when)
				if r := p.Stats().Remote; r.Segments > 0 && p.LogStartOffset() > tc.at {
					require.Equal(t, tc.at, r.LogStartOffset, "%s: the whole log's start", when)
				}
				requireOutOfRange(t, p, 0)
				requireOutOfRange(t, p, tc.at-1)
				to, found, err := p.OffsetForTimestamp(1000) // offset 0's timestamp
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, tc.at, to.Offset, "%s: the first record at or after the timestamp", when)
				require.Equal(t, want, readAllBatches(t, p, tc.at), "%s: the log from the new start", when)
			}
			check("before the pass")
			d.RunTierPass()
			require.Positive(t, p.Stats().Remote.Segments)
			check("after the pass")
			requireStoreHoldsRecorded(t, st, p)
			requireNoCopyBelow(t, st, tc.at)
			require.NoError(t, d.Close())

			// Reopened with a local retention of one byte: the copies
			// serve what is below the local start, from the new start on.
			d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
			require.NoError(t, err)
			defer d.Close()
			p = d.Partition("t", 0)
			d.RunTierPass()
			require.Greater(t, p.LogStartOffset(), tc.at)
			check("after a reopen")
			requireStoreHoldsRecorded(t, st, p)
			requireNoCopyBelow(t, st, tc.at)
		})
	}
}

// TestTierEarliestEpochInsideCopy: after DeleteRecordsBefore moved the
// whole log's start inside a copy that holds two leader epochs, Earliest
// answers the epoch of the start, not the copy's first one, as the local
// log's answer is the leader epoch cache's first entry once
// DeleteRecordsBefore moved it up.
func TestTierEarliestEpochInsideCopy(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendTwoEpochs(t, p)
	require.NoError(t, p.Sync())
	d.RunTierPass()
	require.Greater(t, p.LogStartOffset(), int64(30))
	to, _, err := p.OffsetForTimestamp(plog.EarliestTimestamp)
	require.NoError(t, err)
	require.Equal(t, plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: 0, LeaderEpoch: 2}, to)

	require.NoError(t, p.DeleteRecordsBefore(30))
	to, _, err = p.OffsetForTimestamp(plog.EarliestTimestamp)
	require.NoError(t, err)
	require.Equal(t, plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: 30, LeaderEpoch: 3}, to)
}

// TestTierDeleteRecordsBeforeDuringCopy: DeleteRecordsBefore moves the
// whole log's start past a segment while a pass copies it, after the
// pass recorded the copy of the segment before: neither copy stays
// recorded (copies of deleted records), the store ends up holding no copy
// below the start and exactly the recorded copies, and the next pass
// copies the rest.
func TestTierDeleteRecordsBeforeDuringCopy(t *testing.T) {
	mem := vfs.NewMem()
	st := newRangeStore(plog.NewDirRemoteStorage("/remote", mem))
	_, d, p := tieredPartition(t, mem, st, 0)
	defer d.Close()
	const at = 30
	want := readAllBatches(t, p, at)
	st.hookAt = 2 // the second segment, wholly below at
	st.hook = func() error { return p.DeleteRecordsBefore(at) }
	d.RunTierPass()
	require.NoError(t, st.err)
	require.Positive(t, p.Stats().Remote.CopyFailures, "the copy the move overtook")
	d.RunTierPass()
	require.Positive(t, p.Stats().Remote.Segments)
	require.Equal(t, int64(at), earliest(t, p))
	requireStoreHoldsRecorded(t, st, p)
	requireNoCopyBelow(t, st, at)
	require.NoError(t, d.Close())

	d, err := plog.OpenDir("/data", tierDirConfig(mem, st)) // local retention of one byte
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	d.RunTierPass()
	require.Greater(t, p.LogStartOffset(), int64(at))
	require.Equal(t, int64(at), earliest(t, p))
	requireOutOfRange(t, p, at-1)
	require.Equal(t, want, readAllBatches(t, p, at))
}

// TestTierRestartDropsEveryCopy: a truncation that restarts the whole log
// (TruncateFullyAndStartAt above or below the log end, TruncateTo below the
// local log start, where only copies hold the offset) drops every copy, as
// Kafka's truncateFullyAndStartAt sets logStartOffset to the new offset:
// the log starts at the offset, Earliest answers it, nothing below it
// reads back (the old log's copies below the cut included: no hole under
// a readable range), the next pass deletes the copies from the store, and
// the batches appended after the restart are copied and read back.
func TestTierRestartDropsEveryCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64
		cut  func(p *plog.Partition, at int64) error
		// deleted, when positive, is a DeleteRecordsBefore before the cut.
		deleted int64
	}{
		{"TruncateFullyAndStartAt past the end", 1000, (*plog.Partition).TruncateFullyAndStartAt, 0},
		{"TruncateFullyAndStartAt below the end", 50, (*plog.Partition).TruncateFullyAndStartAt, 0},
		{"TruncateTo below the local start", 50, (*plog.Partition).TruncateTo, 0},
		{"TruncateTo below the whole log's start", 50, (*plog.Partition).TruncateTo, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			st := plog.NewDirRemoteStorage("/remote", mem)
			_, d, p := tieredPartition(t, mem, st, 1)
			defer d.Close()
			d.RunTierPass()
			require.Positive(t, p.Stats().Remote.Segments)
			require.Greater(t, p.LogStartOffset(), int64(60), "only copies hold offsets 50 and 60")
			if tc.deleted > 0 {
				require.NoError(t, p.DeleteRecordsBefore(tc.deleted))
				require.Equal(t, tc.deleted, earliest(t, p))
			}

			require.NoError(t, tc.cut(p, tc.at))
			require.Equal(t, tc.at, p.LogStartOffset())
			require.Equal(t, tc.at, p.LogEndOffset())
			require.Equal(t, tc.at, earliest(t, p))
			r := p.Stats().Remote
			require.Zero(t, r.Segments, "no copy is in use")
			require.Equal(t, int64(-1), r.LogStartOffset)
			requireOutOfRange(t, p, 0)
			requireOutOfRange(t, p, tc.at-1)
			_, found, err := p.OffsetForTimestamp(1000)
			require.NoError(t, err)
			require.False(t, found, "the old log's records are not found by time")
			d.RunTierPass()
			requireStoreHoldsRecorded(t, st, p)

			appendN(t, p, 60)
			require.NoError(t, p.Sync())
			want := readAllBatches(t, p, tc.at)
			d.RunTierPass()
			require.Greater(t, p.LogStartOffset(), tc.at, "the restarted log's segments were copied and deleted locally")
			require.Equal(t, tc.at, p.Stats().Remote.LogStartOffset)
			require.Equal(t, tc.at, earliest(t, p))
			require.Equal(t, want, readAllBatches(t, p, tc.at))
			requireOutOfRange(t, p, tc.at-1)
			requireStoreHoldsRecorded(t, st, p)
		})
	}
}

// TestTierTruncateToLocalStartKeepsCopiesBelow: a TruncateTo that empties
// the local log at its start (a follower's local log starts in the offset
// gap before its first batch, and the cut falls in that batch) leaves the
// copies below the local log start part of the log, as Kafka's truncateTo
// of an offset at or above the first local segment keeps logStartOffset
// and the remote segments: only a cut below the local log start restarts
// the whole log.
func TestTierTruncateToLocalStartKeepsCopiesBelow(t *testing.T) {
	const huge = int64(math.MaxInt32) + 5
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	d, err := plog.OpenDir("/data", tierDirConfig(mem, st))
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = p.AppendAssigned(recordSet(t, 3, assigned{base: 0, n: 2}, assigned{base: 2 + huge, n: 3}))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	r, err := p.ReadFromFollower(0, 100)
	require.NoError(t, err)
	first := append([]byte(nil), r.Bytes()...)
	require.NoError(t, r.Close())
	d.RunTierPass()
	start := p.LogStartOffset()
	require.Positive(t, p.Stats().Remote.Segments)
	require.Less(t, start, 2+huge, "the local log starts in the gap before its first batch")

	require.NoError(t, p.TruncateTo(3+huge))
	require.Equal(t, start, p.LogStartOffset())
	require.Equal(t, start, p.LogEndOffset())
	require.Equal(t, int64(0), earliest(t, p), "the copy below the local log start stays")
	require.Equal(t, int64(0), p.Stats().Remote.LogStartOffset)
	r, err = p.ReadFromFollower(0, 100)
	require.NoError(t, err)
	require.Equal(t, first, r.Bytes())
	require.Equal(t, [][2]int64{{0, 1}}, batchesIn(t, r.Bytes()))
	require.NoError(t, r.Close())
}

// oddBaseCleaner keeps the batches whose base offset is odd and drops the
// others.
type oddBaseCleaner struct{}

func (oddBaseCleaner) Plan(_ context.Context, v *plog.View) (int64, error) {
	return v.HighWatermark(), nil
}

func (oddBaseCleaner) Batch(b batch.Batch) plog.BatchDecision {
	if b.BaseOffset()%2 != 0 {
		return plog.BatchDecision{Action: plog.BatchCopy}
	}
	return plog.BatchDecision{Action: plog.BatchDrop}
}

func (oddBaseCleaner) Keep(batch.Batch, batch.Record) plog.RecordVerdict { return plog.RecordKeep }

// TestTierCompactRefused: Compact of a partition its Dir tiers returns
// ErrTieredCompaction and changes nothing (Kafka refuses compaction with
// remote storage): once the local retention deleted the segments, the
// reads below the local log start answer what the local segments did.
func TestTierCompactRefused(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	_, d, p := tieredPartition(t, mem, st, 0)
	d.RunTierPass()
	require.Positive(t, p.Stats().Remote.Segments)
	want := readAllBatches(t, p, 0)

	res, err := p.Compact(context.Background(), oddBaseCleaner{})
	require.ErrorIs(t, err, plog.ErrTieredCompaction)
	require.Equal(t, plog.CleanResult{CleanedTo: -1}, res)
	require.Equal(t, want, readAllBatches(t, p, 0), "nothing was compacted")
	require.NoError(t, d.Close())

	d, err = plog.OpenDir("/data", tierDirConfig(mem, st)) // local retention of one byte
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	d.RunTierPass()
	require.Positive(t, p.LogStartOffset())
	require.Equal(t, want, readAllBatches(t, p, 0))
}

// TestTierCompactedUntieredNotTrimmed: copies made, then the partition
// compacted while its Dir did not tier it, then tiered again: the local
// retention deletes none of the compacted segments (their copies hold the
// records the round removed) and nothing more is copied, so reads answer
// what the compacted log answers.
func TestTierCompactedUntieredNotTrimmed(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	cfg, d, p := tieredPartition(t, mem, st, 0)
	d.RunTierPass()
	copied := p.Stats().Remote.Segments
	require.Positive(t, copied)
	require.NoError(t, d.Close())

	untiered := cfg
	untiered.Remote = nil
	d, err := plog.OpenDir("/data", untiered)
	require.NoError(t, err)
	p = d.Partition("t", 0)
	_, err = p.Compact(context.Background(), oddBaseCleaner{})
	require.NoError(t, err)
	want := readAllBatches(t, p, 0)
	r, err := p.ReadFrom(10, 1)
	require.NoError(t, err)
	require.Equal(t, int64(11), r.FirstOffset(), "offset 10 was compacted away")
	require.NoError(t, r.Close())
	require.NoError(t, d.Close())

	d, err = plog.OpenDir("/data", tierDirConfig(mem, st)) // local retention of one byte
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	d.RunTierPass()
	require.Zero(t, p.LogStartOffset(), "the local retention deletes no compacted segment")
	require.Equal(t, copied, p.Stats().Remote.Segments, "nothing more is copied")
	require.Equal(t, want, readAllBatches(t, p, 0))
}

// offsetPositions returns where each offset's batch starts in b, a run of
// whole batches: the byte position of the batch holding each offset from
// the first batch's base to the last batch's last offset.
func offsetPositions(t *testing.T, b []byte) map[int64]int {
	t.Helper()
	pos := map[int64]int{}
	for at := 0; at < len(b); {
		bt, _, err := batch.Parse(b[at:])
		require.NoError(t, err)
		for o := bt.BaseOffset(); o <= bt.LastOffset(); o++ {
			pos[o] = at
		}
		at += len(bt)
	}
	return pos
}

// TestTierLogStartCrashAtEveryStep crashes the machine at every filesystem
// operation of a call that moves the whole log's start (DeleteRecordsBefore
// below and above the local log start, TruncateTo below it,
// TruncateFullyAndStartAt past the end) and of the pass after it that
// deletes the copies, with the store a directory on the same crashing
// filesystem. After a restart, and again after the next pass: Earliest is
// the old start or the new one (the new one once the call returned before
// the crash; a restart the crash interrupted may also leave the old log
// without its copies, from its local start), nothing below it reads back,
// the log reads from it without a hole as a prefix of the old log
// (DeleteRecordsBefore cuts nothing: all of it), and the store holds
// exactly the recorded copies.
func TestTierLogStartCrashAtEveryStep(t *testing.T) {
	tp := plog.TopicPartition{Topic: "t", Partition: 0}
	config := func(fs vfs.FS, local int64) plog.DirConfig {
		cfg := tierDirConfig(fs, plog.NewDirRemoteStorage("/remote", fs))
		cfg.Config = plog.WithManualRollFlush(cfg.Config)
		cfg.Remote.LocalRetentionBytes = local
		return cfg
	}
	for _, tc := range []struct {
		name string
		// local is the local retention in bytes of the first run.
		local int64
		at    int64
		op    func(p *plog.Partition, at int64) error
		// restart says that the call restarts the whole log (the old
		// log may be cut, or stay without its copies).
		restart bool
	}{
		{"DeleteRecordsBefore below the local start", 1, 10, (*plog.Partition).DeleteRecordsBefore, false},
		{"DeleteRecordsBefore above the local start", 0, 25, (*plog.Partition).DeleteRecordsBefore, false},
		{"TruncateTo below the local start", 1, 10, (*plog.Partition).TruncateTo, true},
		{"TruncateFullyAndStartAt past the end", 1, 1000, (*plog.Partition).TruncateFullyAndStartAt, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := func(fs vfs.FS) (*plog.Dir, *plog.Partition, []byte) {
				d, err := plog.OpenDir("/data", config(fs, tc.local))
				require.NoError(t, err)
				p, err := d.CreatePartition(tp.Topic, tp.Partition)
				require.NoError(t, err)
				appendN(t, p, 40)
				require.NoError(t, p.Sync())
				d.RunTierPass()
				return d, p, readAllBatches(t, p, 0)
			}
			count := logtest.NewCrashFS(-1, vfs.CrashOptions{})
			d, p, want := setup(count)
			localStart := p.LogStartOffset()
			require.Positive(t, p.Stats().Remote.Segments)
			if tc.local > 0 && tc.at < p.LogEndOffset() {
				require.Greater(t, localStart, tc.at, "only copies hold the offset")
			}
			pos := offsetPositions(t, want)
			from := count.Ops()
			require.NoError(t, tc.op(p, tc.at))
			d.RunTierPass()
			require.NoError(t, d.Close())
			to := count.Ops()
			t.Logf("crash points %d..%d", from, to)

			allowed := []int64{0, tc.at}
			if tc.restart {
				allowed = append(allowed, localStart)
			}
			step := max((to-from)/300, 1)
			for k := from; k < to; k += step {
				fs := logtest.NewCrashFS(k, vfs.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: uint64(k)})
				d, p, _ := setup(fs)
				err := tc.op(p, tc.at)
				acked := err == nil && !fs.Crashed()
				d.RunTierPass()
				_ = d.Close()
				state := fs.State()
				require.NotNil(t, state, "crash point %d: the run ended before it (the walk is deterministic)", k)
				st := plog.NewDirRemoteStorage("/remote", state)
				d, err = plog.OpenDir("/data", tierDirConfig(state, st))
				require.NoError(t, err, "crash point %d", k)
				p = d.Partition(tp.Topic, tp.Partition)
				check := func(when string) {
					t.Helper()
					e := earliest(t, p)
					require.Contains(t, allowed, e, "crash point %d, %s: Earliest", k, when)
					if acked {
						require.Equal(t, tc.at, e, "crash point %d, %s: Earliest after the call returned", k, when)
					}
					if e > 0 {
						requireOutOfRange(t, p, e-1)
					}
					got := readAllBatches(t, p, e)
					rest := []byte{}
					if at, ok := pos[e]; ok {
						rest = want[at:]
					}
					if tc.restart {
						require.True(t, bytes.HasPrefix(rest, got), "crash point %d, %s: the log from %d is a prefix of the old one", k, when, e)
					} else {
						require.Equal(t, rest, got, "crash point %d, %s: the log from %d", k, when, e)
					}
				}
				check("after the restart")
				d.RunTierPass()
				check("after the next pass")
				requireStoreHoldsRecorded(t, st, p)
				require.NoError(t, d.Close())
			}
		})
	}
}

// tieredPartition opens a Dir at /data on mem that tiers to st with a
// local retention of localBytes, and creates partition t-0 in it holding
// 120 synced batches.
func tieredPartition(t *testing.T, mem vfs.FS, st plog.RemoteStorage, localBytes int64) (plog.DirConfig, *plog.Dir, *plog.Partition) {
	t.Helper()
	cfg := tierDirConfig(mem, st)
	cfg.Remote.LocalRetentionBytes = localBytes
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendN(t, p, 120)
	require.NoError(t, p.Sync())
	return cfg, d, p
}

// TestTierLocalRetentionKeepsEpochs: in a tiered partition local
// retention moves only the local log start; the copies below it are still
// the log's (reads serve them, law 14). The leader epoch cache is cut at
// the whole log's start, as Kafka's is (its local retention moves the
// local log start offset only; the cache follows logStartOffset). It used
// to be cut at the local start: after a pass copied and removed the
// segments of epoch 2 (offsets 0-27), LeaderEpochs was [{3 108}] and
// EndOffsetForEpoch(2) answered (2, 108), so that a follower holding
// batches of epoch 2 past offset 28 (a leader that lost them) kept them,
// and its log stopped being a prefix of this one. A reopen of the Dir cut
// it there again. DeleteRecordsBefore still moves the first entry up.
func TestTierLocalRetentionKeepsEpochs(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	cfg := tierDirConfig(mem, st)
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	appendTwoEpochs(t, p)
	require.NoError(t, p.Sync())
	want := []plog.EpochStart{{Epoch: 2, StartOffset: 0}, {Epoch: 3, StartOffset: 28}}
	require.Equal(t, want, p.LeaderEpochs())
	d.RunTierPass()
	localStart := p.LogStartOffset()
	require.Greater(t, localStart, int64(30), "local retention ran")
	check := func(p *plog.Partition, want []plog.EpochStart, epoch2End int64) {
		t.Helper()
		require.Equal(t, want, p.LeaderEpochs())
		e, off, err := p.EndOffsetForEpoch(2)
		require.NoError(t, err)
		require.Equal(t, [2]int64{2, epoch2End}, [2]int64{int64(e), off})
		// The local start's epoch is the one of its batch.
		to, _, err := p.OffsetForTimestamp(plog.EarliestLocalTimestamp)
		require.NoError(t, err)
		require.Equal(t, plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: localStart, LeaderEpoch: 3}, to)
	}
	check(p, want, 28)

	require.NoError(t, d.Close())
	d, err = plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p = d.Partition("t", 0)
	require.NotNil(t, p)
	require.Equal(t, localStart, p.LogStartOffset())
	check(p, want, 28)

	require.NoError(t, p.DeleteRecordsBefore(10))
	check(p, []plog.EpochStart{{Epoch: 2, StartOffset: 10}, {Epoch: 3, StartOffset: 28}}, 28)
	require.NoError(t, p.DeleteRecordsBefore(30))
	check(p, []plog.EpochStart{{Epoch: 3, StartOffset: 30}}, 30)
}

// appendTwoEpochs copies one-record batches to p as a follower does:
// offsets 0 to 27 in leader epoch 2, then 28 to 119 in epoch 3.
func appendTwoEpochs(t *testing.T, p *plog.Partition) {
	t.Helper()
	for _, run := range []struct {
		epoch       int32
		first, last int64
	}{{2, 0, 27}, {3, 28, 119}} {
		var set []assigned
		for o := run.first; o <= run.last; o++ {
			set = append(set, assigned{base: o, n: 1})
		}
		_, err := p.AppendAssigned(recordSet(t, run.epoch, set...))
		require.NoError(t, err)
	}
}
