package log_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestProducerRetryAfterCrash: random histories of idempotent producers
// (appends, epoch bumps, rolls, syncs, truncations, retries) on the
// crash-simulating filesystem, crashed at random moments with a random
// share of the unsynced writes surviving (some torn: roll snapshots are
// never fsynced) and reopened from the clone. After every crash, the last
// batch of every producer that the recovered log holds (every batch
// acknowledged under flush.messages=1, every synced one otherwise, lies in
// it) is recognised as a retry with its original offsets; and a retry of
// any batch a history sent never changes the log.
func TestProducerRetryAfterCrash(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x1de))
	budget, minCrashes := 8*time.Second, 1500
	if testing.Short() {
		budget, minCrashes = 2*time.Second, 200
	}
	crashHistories(t, budget, minCrashes, func(id int) int { return producerCrashHistory(t, rng, id) })
}

func producerCrashHistory(t *testing.T, rng *rand.Rand, id int) int {
	t.Helper()
	flush := []int64{0, 1}[rng.IntN(2)]
	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, SegmentBytes: int64(250 + rng.IntN(1200)), SegmentIndexBytes: memIndexBytes, FlushMessages: flush}
	const dir = "/kafka/idem-0"
	where := func() string { return fmt.Sprintf("history %d (flush.messages %d)", id, flush) }
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err, "%s: open", where())
	defer func() { _ = p.Close() }()
	const producers = 4
	var (
		sent  []sentBatch // in log order, all in the log
		epoch [producers]int16
		next  [producers]int32
	)
	retry := func(b sentBatch, mustDup bool) {
		end := p.LogEndOffset()
		info, err := p.AppendBatchInfo(append([]byte(nil), b.bytes...))
		switch {
		case err == nil && info.Duplicate:
			require.False(t, info.Base != b.base || info.LastOffset != b.end-1, "%s: retry of [%d, %d) answered [%d, %d]", where(), b.base, b.end, info.Base, info.LastOffset)
		case mustDup:
			require.Failf(t, "a retry of a producer's last batch was not answered as a duplicate", "%s: producer %d, [%d, %d) (seq %d..%d): %+v, %v", where(), b.pid, b.base, b.end, b.first, b.last, info, err)
		case err == nil:
			require.Failf(t, "a retry was appended again", "%s: [%d, %d) again at %d", where(), b.base, b.end, info.Base)
		case !errors.Is(err, plog.ErrOutOfOrderSequence) && !errors.Is(err, plog.ErrInvalidProducerEpoch):
			require.Failf(t, "a retry failed with an unexpected error", "%s: %v", where(), err)
		}
		require.False(t, p.LogEndOffset() != end, "%s: a retry moved the log end from %d to %d", where(), end, p.LogEndOffset())
	}
	// forget drops the sent batches at or past end and rewinds each
	// producer to its last batch left.
	forget := func(end int64) {
		for len(sent) > 0 && sent[len(sent)-1].end > end {
			sent = sent[:len(sent)-1]
		}
		for pid := range producers {
			next[pid] = 0
		}
		for _, b := range sent {
			epoch[b.pid], next[b.pid] = b.epoch, b.last+1
		}
	}
	checkLast := func() {
		seen := map[int64]bool{}
		for i := len(sent) - 1; i >= 0; i-- {
			if b := sent[i]; !seen[b.pid] {
				seen[b.pid] = true
				retry(b, true)
			}
		}
	}
	crashes := 0
	ts := time.Now().UnixMilli()
	for step := 0; step < 50; step++ {
		switch r := rng.IntN(100); {
		case r < 55:
			pid := rng.IntN(producers)
			if rng.IntN(15) == 0 {
				epoch[pid]++
				next[pid] = 0
			}
			n := 1 + rng.IntN(4)
			bt := prodBatch(t, int64(pid), epoch[pid], next[pid], n, ts, false)
			base, err := p.AppendBatch(append([]byte(nil), bt...))
			require.NoError(t, err, "%s: append", where())
			sent = append(sent, sentBatch{pid: int64(pid), epoch: epoch[pid], first: next[pid], last: next[pid] + int32(n) - 1,
				base: base, end: base + int64(n), bytes: bt})
			next[pid] += int32(n)
		case r < 65 && len(sent) > 0:
			retry(sent[len(sent)-1-rng.IntN(min(len(sent), 8))], false)
		case r < 72:
			require.NoError(t, p.Roll(), "%s: roll", where())
		case r < 78:
			require.NoError(t, p.Sync(), "%s: sync", where())
		case r < 82 && len(sent) > 0:
			o := sent[rng.IntN(len(sent))].base
			require.NoError(t, p.TruncateTo(o), "%s: truncate to %d", where(), o)
			forget(p.LogEndOffset())
			checkLast()
		case r >= 82:
			opts := drawCrash(rng)
			clone := mem.CrashClone(opts)
			_ = p.Close()
			mem, cfg.FS = clone, clone
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err, "%s: reopen after crash %+v", where(), opts)
			forget(p.LogEndOffset())
			checkLast()
			for _, b := range sent {
				retry(b, false)
			}
			crashes++
		}
	}
	return crashes
}

// TestRollSnapshotsOutliveLogStartMoves: moving the log start
// (DeleteRecordsBefore, retention) removes the producer snapshots below
// it, and the roll snapshots taken and not yet written at or above it are
// still written by the next flush: the producer state they hold is still
// the partition's. A crash after that flush then loads the producer whose
// last batch lies in a deleted segment, as Kafka does (its snapshot at the
// later roll is on disk), and a retry of that batch is a duplicate, not
// written again. A roll snapshot below the new start is never written, and
// after a restart below the old start (TruncateFullyAndStartAt) a roll's
// snapshot is written again.
func TestRollSnapshotsOutliveLogStartMoves(t *testing.T) {
	const dir = "/kafka/rollsnap-0"
	mem := vfs.NewMem()
	p, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: mem}))
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	// Offsets 0-4 and 5-9; snapshots at 5 and 10, pending.
	appendRolled(t, p, []pb{{pid: 7, seq: 0, n: 5}, {pid: 9, seq: 0, n: 5}}, 5, 10)
	require.NoError(t, p.DeleteRecordsBefore(7))
	require.NoError(t, p.Sync())
	snaps, err := producer.ListSnapshots(mem, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{10}, snaps, "the roll snapshot below the log start is not written, the one above is")

	require.NoError(t, requireRetryKnownAfterCrash(t, mem, dir).Close())

	require.NoError(t, p.TruncateFullyAndStartAt(2))          // below the old log start
	_, err = p.AppendBatch(pb{pid: 8, seq: 0, n: 2}.bytes(t)) // offsets 2-3
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	require.NoError(t, p.Sync())
	snaps, err = producer.ListSnapshots(mem, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{4}, snaps, "a roll snapshot after a restart below the old log start")
}

// TestRollSnapshotsOutliveTruncation: a TruncateTo keeps the roll
// snapshots taken and not yet written at or below its new end (they
// describe batches the log still holds) and drops those past it; the next
// flush writes the kept ones. Once the log start then moves past a
// deleted segment, a crash loads the producer whose last batch lay there,
// as Kafka does (it removes only the snapshots past the cut), and a retry
// of that batch is a duplicate, not written again.
func TestRollSnapshotsOutliveTruncation(t *testing.T) {
	const dir = "/kafka/rollsnap-trunc-0"
	mem := vfs.NewMem()
	p, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: mem}))
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	// Offsets 0-4, 5-9, 10-11, 12-13 and 14-15; snapshots at 5, 10 and
	// 14, pending.
	appendRolled(t, p, []pb{{pid: 7, seq: 0, n: 5}, {pid: 9, seq: 0, n: 5}, {pid: 9, seq: 5, n: 2}, {pid: 9, seq: 7, n: 2}, {pid: 9, seq: 9, n: 2}}, 5, 10, 14)
	require.NoError(t, p.TruncateTo(12))
	require.NoError(t, p.Sync())
	snaps, err := producer.ListSnapshots(mem, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 10}, snaps, "the roll snapshots at or below the new end are written, the one past it is not")

	require.NoError(t, p.DeleteRecordsBefore(7)) // segment 0 goes
	crashed := requireRetryKnownAfterCrash(t, mem, dir)
	info, err := crashed.AppendBatchInfo(pb{pid: 9, seq: 7, n: 2}.bytes(t))
	require.NoError(t, err)
	assert.False(t, info.Duplicate, "producer 9's batch the truncation cut is new again")
	assert.Equal(t, int64(12), info.Base)
}

// TestDeletedSegmentsProducersSurviveCrash: DeleteRecordsBefore and
// retention delete the only segment holding two producers' batches, synced
// before a roll whose snapshot the background flush has not written yet;
// a crash right after must still know both producers: the idempotent one's
// retry gets its original offsets and the transaction stays open (laws 10
// and 11). Before, the deletion left their state in memory only (the roll
// snapshot pending), and the crash forgot both: the retry was written again
// and the transaction was no longer open.
func TestDeletedSegmentsProducersSurviveCrash(t *testing.T) {
	for _, how := range []string{"DeleteRecordsBefore", "retention"} {
		t.Run(how, func(t *testing.T) {
			const dir = "/kafka/deleted-producers-0"
			mem := vfs.NewMem()
			cfg := plog.WithManualRollFlush(plog.Config{FS: mem})
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer func() { _ = p.Close() }()
			plain := pb{pid: 7, seq: 0, n: 2}.bytes(t)
			_, err = p.AppendBatch(plain) // offsets 0-1
			require.NoError(t, err)
			_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 1, txn: true}.bytes(t)) // offset 2
			require.NoError(t, err)
			require.NoError(t, p.Sync())
			require.NoError(t, p.Roll()) // snapshot at 3, pending
			if how == "retention" {
				segs, err := p.Segments()
				require.NoError(t, err)
				err = p.DeleteSegments(segs[:1])
				for _, s := range segs {
					require.NoError(t, s.Unref())
				}
				require.NoError(t, err)
			} else {
				require.NoError(t, p.DeleteRecordsBefore(3))
			}

			cfg.FS = mem.CrashClone(vfs.CrashOptions{})
			crashed, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer func() { _ = crashed.Close() }()
			require.Equal(t, int64(3), crashed.LogStartOffset())
			requireOneOpenTxn(t, crashed, 9, 2)
			info, err := crashed.AppendBatchInfo(plain)
			require.NoError(t, err)
			assert.True(t, info.Duplicate, "producer 7's retry is known")
			assert.Equal(t, int64(0), info.Base)
			assert.Equal(t, int64(3), crashed.LogEndOffset())
		})
	}
}

// TestDeleteRecordsToEndProducersSurviveCrash: DeleteRecordsBefore up to
// the log end, then a roll whose background flush writes its snapshot
// (its directory entry left to the next flush); a crash keeps the new
// segment but not the snapshot's entry, and Open removes the old segment,
// wholly below the log start. The producers of its synced batches must
// survive: the transaction stays open and the retry is known (laws 10 and
// 11). Before, DeleteRecordsBefore left their state in memory only, and
// the crash forgot both.
func TestDeleteRecordsToEndProducersSurviveCrash(t *testing.T) {
	const dir = "/kafka/deleted-to-end-0"
	mem := vfs.NewMem()
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 1, txn: true}.bytes(t)) // offset 0
	require.NoError(t, err)
	plain := pb{pid: 7, seq: 0, n: 1}.bytes(t)
	_, err = p.AppendBatch(plain) // offset 1
	require.NoError(t, err)
	require.NoError(t, p.DeleteRecordsBefore(2))
	require.NoError(t, p.Sync())
	require.NoError(t, p.Roll())
	require.NoError(t, p.FlushRolled())

	cfg.FS = mem.CrashClone(vfs.CrashOptions{})
	crashed, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = crashed.Close() }()
	require.Equal(t, int64(2), crashed.LogStartOffset())
	requireOneOpenTxn(t, crashed, 9, 0)
	info, err := crashed.AppendBatchInfo(plain)
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "producer 7's retry is known")
	assert.Equal(t, int64(1), info.Base)
}

// TestDeleteRecordsInsideFirstSegmentKeepsProducers: a DeleteRecordsBefore
// that deletes the segment holding a transaction's first batch leaves its
// producer state in the roll snapshot at the next segment's base; a second
// DeleteRecordsBefore inside that segment removes that snapshot (it lies
// below the new log start). A crash after must still know the transaction
// from its first offset (law 11). Before, the recovered partition replayed
// the remaining segment only and reported the transaction open from the
// later batch's offset.
func TestDeleteRecordsInsideFirstSegmentKeepsProducers(t *testing.T) {
	const dir = "/kafka/deleted-inside-0"
	mem := vfs.NewMem()
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 2, txn: true}.bytes(t)) // offsets 0-1
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	require.NoError(t, p.FlushRolled()) // snapshot at 2 written
	require.NoError(t, p.DeleteRecordsBefore(2))
	_, err = p.AppendBatch(pb{pid: 9, seq: 2, n: 2, txn: true}.bytes(t)) // offsets 2-3
	require.NoError(t, err)
	require.NoError(t, p.DeleteRecordsBefore(3))
	require.NoError(t, p.Sync())

	cfg.FS = mem.CrashClone(vfs.CrashOptions{})
	crashed, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = crashed.Close() }()
	requireOneOpenTxn(t, crashed, 9, 0)
}

// TestTruncateToLogStartProducersSurviveCrash: a TruncateTo that cuts the
// log back to its log start offset leaves every record below it deleted,
// as a DeleteRecordsBefore up to the log end does: the next roll leaves
// the old segment wholly below the log start, and an Open after a crash
// removes it. A crash before the roll's snapshot reached the disk must
// still know the open transaction of its synced batch (law 11). Before,
// the truncation removed the snapshots past the new end and left the
// producer state in memory and in the old segment only, and the crash
// forgot the transaction (found by TestProducerStateMachine: truncate,
// roll, crash).
func TestTruncateToLogStartProducersSurviveCrash(t *testing.T) {
	const dir = "/kafka/truncated-to-start-0"
	mem := vfs.NewMem()
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 1, txn: true}.bytes(t)) // offset 0
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 7, seq: 0, n: 2}.bytes(t)) // offsets 1-2
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	require.NoError(t, p.FlushRolled()) // snapshot at 3 written
	require.NoError(t, p.DeleteRecordsBefore(1))
	require.NoError(t, p.TruncateTo(1)) // removes the snapshot at 3
	require.Equal(t, int64(1), p.LogStartOffset())
	require.Equal(t, int64(1), p.LogEndOffset())
	require.NoError(t, p.Roll()) // its snapshot at 1 not written

	// The crash keeps every unsynced change: the new segment's entry.
	cfg.FS = mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	crashed, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = crashed.Close() }()
	require.Equal(t, int64(1), crashed.LogStartOffset())
	require.Equal(t, int64(1), crashed.LogEndOffset())
	requireOneOpenTxn(t, crashed, 9, 0)
}

// requireOneOpenTxn checks that p has exactly one open transaction, of
// producer pid, begun at first.
func requireOneOpenTxn(t *testing.T, p *plog.Partition, pid, first int64) {
	t.Helper()
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	require.Len(t, open, 1, "producer %d's transaction is open", pid)
	assert.Equal(t, pid, open[0].ProducerID)
	assert.Equal(t, first, open[0].FirstOffset, "the transaction's first offset")
}
