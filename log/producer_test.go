package log_test

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestProducerSequenceRules is Kafka's ProducerAppendInfo on the leader
// path, case by case: after the setup batches (all accepted), the probe is
// accepted, recognised as a retry of setup batch dupOf (original offsets,
// nothing written), or refused with the sentinel (nothing written, no
// offset consumed: the next good batch gets the same base).
func TestProducerSequenceRules(t *testing.T) {
	const maxSeq = math.MaxInt32
	tests := []struct {
		name  string
		setup []pb
		probe pb
		dupOf int // index into setup, or -1
		err   error
	}{
		{"unknown producer, any sequence", nil, pb{seq: 42}, -1, nil},
		{"unknown producer, sequence 0", nil, pb{seq: 0}, -1, nil},
		{"unknown producer, no epoch", nil, pb{epoch: -1, seq: 5}, -1, nil},
		{"unknown producer, epoch below no epoch", nil, pb{epoch: -2, seq: 0}, -1, plog.ErrInvalidProducerEpoch},
		{"next sequence", []pb{{seq: 0, n: 3}}, pb{seq: 3}, -1, nil},
		{"retry of the last batch", []pb{{seq: 0, n: 3}, {seq: 3, n: 2}}, pb{seq: 3, n: 2}, 1, nil},
		{"retry of the fifth-last batch", []pb{{seq: 0}, {seq: 1}, {seq: 2}, {seq: 3}, {seq: 4}}, pb{seq: 0}, 0, nil},
		{"retry of the sixth-last batch is out of order", []pb{{seq: 0}, {seq: 1}, {seq: 2}, {seq: 3}, {seq: 4}, {seq: 5}}, pb{seq: 0}, -1, plog.ErrOutOfOrderSequence},
		{"gap", []pb{{seq: 0, n: 2}}, pb{seq: 3}, -1, plog.ErrOutOfOrderSequence},
		{"same first sequence, other last sequence", []pb{{seq: 0, n: 3}}, pb{seq: 0, n: 2}, -1, plog.ErrOutOfOrderSequence},
		{"sequence from the past inside a batch", []pb{{seq: 0, n: 3}}, pb{seq: 1, n: 2}, -1, plog.ErrOutOfOrderSequence},
		{"repeated last sequence", []pb{{seq: 0, n: 3}}, pb{seq: 2}, -1, plog.ErrOutOfOrderSequence},
		{"older epoch", []pb{{epoch: 2, seq: 0}}, pb{epoch: 1, seq: 1}, -1, plog.ErrInvalidProducerEpoch},
		{"retry from an older epoch is fenced", []pb{{epoch: 1, seq: 0}, {epoch: 2, seq: 0}}, pb{epoch: 1, seq: 0}, -1, plog.ErrInvalidProducerEpoch},
		{"new epoch at sequence 0", []pb{{epoch: 1, seq: 0, n: 5}}, pb{epoch: 2, seq: 0}, -1, nil},
		{"new epoch not at sequence 0", []pb{{epoch: 1, seq: 0, n: 5}}, pb{epoch: 2, seq: 5}, -1, plog.ErrOutOfOrderSequence},
		{"new epoch forgets the old batches", []pb{{epoch: 1, seq: 0}, {epoch: 2, seq: 0}}, pb{epoch: 2, seq: 0}, 1, nil},
		{"wrap: MaxInt32 then 0", []pb{{seq: maxSeq - 1, n: 2}}, pb{seq: 0}, -1, nil},
		{"wrap inside a batch", []pb{{seq: maxSeq - 1, n: 3}}, pb{seq: 1}, -1, nil},
		{"retry of a wrapping batch", []pb{{seq: maxSeq - 1, n: 3}}, pb{seq: maxSeq - 1, n: 3}, 0, nil},
		{"no wrap before MaxInt32", []pb{{seq: maxSeq - 3, n: 2}}, pb{seq: 0}, -1, plog.ErrOutOfOrderSequence},
		{"base sequence -1 with a producer id", nil, pb{seq: -1}, -1, plog.ErrInvalidBatch},
		{"base sequence -5 with a producer id", []pb{{seq: 0}}, pb{seq: -5}, -1, plog.ErrInvalidBatch},
		{"other producers do not interfere", []pb{{pid: 8, seq: 0}, {pid: 9, seq: 10}}, pb{seq: 3}, -1, nil},
		{"non-transactional batch during a transaction", []pb{{seq: 0, txn: true}}, pb{seq: 1}, -1, plog.ErrInvalidTxnState},
		{"transactional batches in a row", []pb{{seq: 0, txn: true}}, pb{seq: 1, txn: true}, -1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openT(t, plog.Config{})
			var bases []int64
			for _, s := range tc.setup {
				base, err := p.AppendBatch(s.bytes(t))
				require.NoError(t, err)
				bases = append(bases, base)
			}
			end := p.LogEndOffset()
			probe := tc.probe.bytes(t)
			info, err := p.AppendBatchInfo(probe)
			switch {
			case tc.err != nil:
				require.ErrorIs(t, err, tc.err)
				assert.Equal(t, int64(-1), info.Base)
				assert.Equal(t, end, p.LogEndOffset(), "a refused batch changed the log")
			case tc.dupOf >= 0:
				require.NoError(t, err)
				assert.True(t, info.Duplicate)
				assert.Equal(t, bases[tc.dupOf], info.Base)
				n := max(tc.setup[tc.dupOf].n, 1)
				assert.Equal(t, bases[tc.dupOf]+int64(n)-1, info.LastOffset)
				assert.Equal(t, end, p.LogEndOffset(), "a retry changed the log")
				base, err := p.AppendBatch(probe) // the plain API says the same
				require.NoError(t, err)
				assert.Equal(t, bases[tc.dupOf], base)
			default:
				require.NoError(t, err)
				assert.False(t, info.Duplicate)
				assert.Equal(t, end, info.Base)
				assert.Greater(t, p.LogEndOffset(), end)
			}
			if tc.err != nil {
				// Nothing consumed: an unrelated producer's batch gets the
				// old log end.
				base, err := p.AppendBatch(pb{pid: 1000, seq: 0}.bytes(t))
				require.NoError(t, err)
				assert.Equal(t, end, base)
			}
		})
	}
}

// TestProducerErrorsName checks that a refusal names the producer id, the
// epochs and the sequences.
func TestProducerErrorsName(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(pb{pid: 4242, epoch: 3, seq: 0, n: 2}.bytes(t))
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 4242, epoch: 3, seq: 9}.bytes(t))
	require.ErrorIs(t, err, plog.ErrOutOfOrderSequence)
	assert.Contains(t, err.Error(), "producer 4242 epoch 3")
	assert.Contains(t, err.Error(), "after last sequence 1")
	_, err = p.AppendBatch(pb{pid: 4242, epoch: 2, seq: 2}.bytes(t))
	require.ErrorIs(t, err, plog.ErrInvalidProducerEpoch)
	assert.Contains(t, err.Error(), "epoch 2 is older than its current epoch 3")
}

// TestProducerWithoutID: batches without a producer id are never checked;
// the same bytes twice are stored twice.
func TestProducerWithoutID(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	b := prodBatch(t, batch.NoProducerID, batch.NoProducerEpoch, batch.NoSequence, 2, 1000, false)
	b0, err := p.AppendBatch(append([]byte(nil), b...))
	require.NoError(t, err)
	b1, err := p.AppendBatch(append([]byte(nil), b...))
	require.NoError(t, err)
	assert.Equal(t, b0+2, b1)
	ps, err := p.Producers()
	require.NoError(t, err)
	assert.Empty(t, ps)
}

// TestProducerFollowerPathUpdatesWithoutChecks: AppendAssigned stores what
// the leader sent, stale epochs and gaps included (Kafka's replica path),
// and the state it leaves is what a leader checks next.
func TestProducerFollowerPathUpdatesWithoutChecks(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	assigned := func(b []byte) {
		batch.Batch(b).SetBaseOffset(p.LogEndOffset())
		_, err := p.AppendAssigned(b)
		require.NoError(t, err)
	}
	assigned(pb{epoch: 2, seq: 0, n: 2}.bytes(t))
	assigned(pb{epoch: 2, seq: 10, n: 1}.bytes(t)) // a gap: not checked
	assigned(pb{epoch: 1, seq: 0, n: 1}.bytes(t))  // an older epoch: not checked, becomes current
	st, ok, err := p.ProducerState(7)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int16(1), st.Epoch)
	require.Len(t, st.Batches, 1)
	assert.Equal(t, plog.ProducerBatch{FirstSequence: 0, LastSequence: 0, FirstOffset: 3, LastOffset: 3, MaxTimestamp: st.Batches[0].MaxTimestamp}, st.Batches[0])
	info, err := p.AppendBatchInfo(pb{epoch: 1, seq: 0}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate)
	assert.Equal(t, int64(3), info.Base)
}

// TestProducerTransactionMarker: a transactional batch opens a
// transaction (CurrentTxnFirstOffset); a COMMIT marker written through
// AppendAssigned ends it and records the coordinator epoch.
func TestProducerTransactionMarker(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(pb{epoch: 4, seq: 0, txn: true}.bytes(t))
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{epoch: 4, seq: 1, txn: true}.bytes(t))
	require.NoError(t, err)
	st, _, err := p.ProducerState(7)
	require.NoError(t, err)
	assert.Equal(t, int64(0), st.CurrentTxnFirstOffset)
	m, err := batch.AppendControlBatch(nil, batch.TxnMarker{ProducerID: 7, ProducerEpoch: 4, Type: batch.ControlCommit, CoordinatorEpoch: 9, BaseOffset: p.LogEndOffset(), Timestamp: time.Now().UnixMilli()})
	require.NoError(t, err)
	_, err = p.AppendAssigned(m)
	require.NoError(t, err)
	st, _, err = p.ProducerState(7)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), st.CurrentTxnFirstOffset)
	assert.Equal(t, int32(9), st.CoordinatorEpoch)
	_, err = p.AppendBatch(pb{epoch: 4, seq: 2}.bytes(t))
	require.NoError(t, err, "a non-transactional batch after the commit")
}

// TestProducerStateAcrossReopen: Close writes the snapshot at the log end
// and Open loads it (no replay after a clean close); a retry of each
// producer's last batch is recognised. The snapshot keeps one batch per
// producer (Kafka's format), so an older retry is out of order.
func TestProducerStateAcrossReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	var last [3]int64
	for i := range 4 {
		for pid := range int64(3) {
			last[pid], err = p.AppendBatch(pb{pid: 100 + pid, epoch: 1, seq: int32(2 * i), n: 2}.bytes(t))
			require.NoError(t, err)
		}
	}
	end := p.LogEndOffset()
	require.NoError(t, p.Close())
	_, err = os.Stat(filepath.Join(dir, producer.SnapshotFileName(end)))
	require.NoError(t, err, "Close writes the snapshot at the log end")

	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	ps, err := p.Producers()
	require.NoError(t, err)
	require.Len(t, ps, 3)
	for pid := range int64(3) {
		info, err := p.AppendBatchInfo(pb{pid: 100 + pid, epoch: 1, seq: 6, n: 2}.bytes(t))
		require.NoError(t, err)
		assert.True(t, info.Duplicate)
		assert.Equal(t, last[pid], info.Base)
	}
	_, err = p.AppendBatch(pb{pid: 100, epoch: 1, seq: 4, n: 2}.bytes(t))
	require.ErrorIs(t, err, plog.ErrOutOfOrderSequence, "only the last batch before the snapshot is known")
	_, err = p.AppendBatch(pb{pid: 100, epoch: 1, seq: 8, n: 2}.bytes(t))
	require.NoError(t, err)
	assert.Equal(t, end+2, p.LogEndOffset())
}

// snapshotsIn lists the snapshot offsets in dir.
func snapshotsIn(t *testing.T, dir string) []int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []int64
	for _, e := range es {
		var off int64
		if n, _ := fmtSscan(e.Name(), &off); n == 1 {
			out = append(out, off)
		}
	}
	return out
}

// TestProducerSnapshotLifecycle: a roll writes the snapshot of the new
// segment's base; retention removes those below the log start; TruncateTo
// removes those past the new end and reloads the state from what remains
// (a retry of a cut batch is appended again, in sequence); an unclean
// open replays from the newest snapshot and writes one at the end.
func TestProducerSnapshotLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	cfg := plog.Config{SegmentBytes: 200}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	seq := int32(0)
	var bases []int64
	for range 12 {
		b, err := p.AppendBatch(pb{epoch: 0, seq: seq, n: 2}.bytes(t))
		require.NoError(t, err)
		bases = append(bases, b)
		seq += 2
	}
	segs, err := p.Segments()
	require.NoError(t, err)
	require.Greater(t, len(segs), 3)
	var segBases []int64
	for _, s := range segs {
		segBases = append(segBases, s.BaseOffset())
		require.NoError(t, s.Unref())
	}
	require.NoError(t, p.FlushRolled()) // the rolls' flush writes their snapshots
	assert.Equal(t, segBases[1:], snapshotsIn(t, dir), "one snapshot per roll, at the new segment's base")

	// Retention: snapshots below the new log start go with the segments.
	require.NoError(t, p.DeleteRecordsBefore(segBases[2]))
	assert.Equal(t, segBases[2:], snapshotsIn(t, dir))

	// Truncation into the last sealed segment: later snapshots go, and
	// the state is rebuilt: batch 9 onwards no longer exist.
	cut := bases[9]
	require.NoError(t, p.TruncateTo(cut))
	for _, off := range snapshotsIn(t, dir) {
		assert.LessOrEqual(t, off, cut)
	}
	st, ok, err := p.ProducerState(7)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, bases[8], st.Batches[len(st.Batches)-1].FirstOffset)
	info, err := p.AppendBatchInfo(pb{epoch: 0, seq: 18, n: 2}.bytes(t)) // batch 9's sequences
	require.NoError(t, err)
	assert.False(t, info.Duplicate, "the cut batch is appended again")
	assert.Equal(t, cut, info.Base)
	info, err = p.AppendBatchInfo(pb{epoch: 0, seq: 16, n: 2}.bytes(t)) // batch 8
	require.NoError(t, err)
	assert.True(t, info.Duplicate)
	assert.Equal(t, bases[8], info.Base)

	// Truncating everything (DeleteRecordsBefore inside a batch, then
	// TruncateTo into that batch: Kafka's truncateFullyAndStartAt): every
	// snapshot goes, and so does the state.
	require.NoError(t, p.Roll())
	require.NotEmpty(t, snapshotsIn(t, dir))
	inside := bases[8] + 1
	require.NoError(t, p.DeleteRecordsBefore(inside))
	require.NoError(t, p.TruncateTo(inside))
	assert.Equal(t, inside, p.LogEndOffset())
	assert.Empty(t, snapshotsIn(t, dir))
	ps, err := p.Producers()
	require.NoError(t, err)
	assert.Empty(t, ps)
	require.NoError(t, p.Close())
}

// TestProducerSnapshotPastTheEnd: a snapshot past the log end (left by a
// crash after a truncation, or copied in) describes batches the log does
// not hold: Open removes it and rebuilds the state from the log.
func TestProducerSnapshotPastTheEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	b0, err := p.AppendBatch(pb{seq: 0, n: 2}.bytes(t))
	require.NoError(t, err)
	end := p.LogEndOffset()
	require.NoError(t, p.Close())
	// A snapshot at 1000 claiming producer 7 is at sequence 500.
	fake := producer.AppendSnapshot(nil, []producer.Entry{{ProducerID: 7, LastSequence: 500, LastOffset: 999,
		Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, producer.SnapshotFileName(1000)), fake, 0o644))
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, []int64{end}, snapshotsIn(t, dir))
	info, err := p.AppendBatchInfo(pb{seq: 0, n: 2}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate)
	assert.Equal(t, b0, info.Base)
}

// TestProducerSnapshotCorruptIsSkipped: a snapshot that does not decode is
// skipped with a warning; Open uses an older one (or replays from the
// first segment) and never fails or panics.
func TestProducerSnapshotCorruptIsSkipped(t *testing.T) {
	for _, damage := range []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-7] }},
		{"empty", func([]byte) []byte { return nil }},
		{"version 2", func(b []byte) []byte { b[1] = 2; return b }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p-0")
			p, err := plog.Open(dir, plog.Config{SegmentBytes: 400})
			require.NoError(t, err)
			var bases []int64
			for i := range 10 {
				b, err := p.AppendBatch(pb{seq: int32(2 * i), n: 2}.bytes(t))
				require.NoError(t, err)
				bases = append(bases, b)
			}
			end := p.LogEndOffset()
			require.NoError(t, p.Close())
			for _, off := range snapshotsIn(t, dir) {
				path := filepath.Join(dir, producer.SnapshotFileName(off))
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, damage.fn(b), 0o644))
			}
			var logs bytes.Buffer
			p, err = plog.Open(dir, plog.Config{SegmentBytes: 400, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.NoError(t, err)
			defer p.Close()
			assert.Contains(t, logs.String(), "skipping a producer snapshot")
			info, err := p.AppendBatchInfo(pb{seq: 18, n: 2}.bytes(t))
			require.NoError(t, err)
			assert.True(t, info.Duplicate)
			assert.Equal(t, bases[9], info.Base)
			info, err = p.AppendBatchInfo(pb{seq: 10, n: 2}.bytes(t)) // replayed: still among the last five
			require.NoError(t, err)
			assert.True(t, info.Duplicate)
			assert.Equal(t, bases[5], info.Base)
			assert.Equal(t, end, p.LogEndOffset())
			_, err = os.Stat(filepath.Join(dir, producer.SnapshotFileName(end)))
			require.NoError(t, err, "a fresh snapshot at the end after the replay")
		})
	}
}

// TestProducerExpiry: producers idle for producer.id.expiration.ms (by
// Config.Now against their last batch's max timestamp) are removed by
// ExpireProducers (and at a roll, and when a new producer appears, at most
// every 10 minutes); an expired producer is unknown again (any sequence)
// from the moment it expires, whoever looks first.
func TestProducerExpiry(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	pbTime = now.UnixMilli()
	t.Cleanup(func() { pbTime = 0 })
	p, _ := openT(t, plog.Config{Now: clock, ProducerIDExpiration: time.Hour})
	_, err := p.AppendBatch(pb{pid: 1, seq: 0}.bytes(t)) // max timestamp 1_700_000_000_000
	require.NoError(t, err)
	now = now.Add(59 * time.Minute)
	n, err := p.ExpireProducers()
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	_, ok, err := p.ProducerState(1)
	require.NoError(t, err)
	assert.True(t, ok, "idle 59 minutes")
	now = now.Add(time.Minute)
	// No sweep since ExpireProducers (a new producer sweeps 10 minutes
	// after it at the earliest), yet producer 1 is expired.
	_, err = p.AppendBatch(pb{pid: 2, seq: 0}.bytes(t))
	require.NoError(t, err)
	_, ok, err = p.ProducerState(1)
	require.NoError(t, err)
	assert.False(t, ok, "idle one hour: expired")
	// Producer 1 is unknown now: any sequence is accepted.
	_, err = p.AppendBatch(pb{pid: 1, seq: 77}.bytes(t))
	require.NoError(t, err)
	n, err = p.ExpireProducers()
	require.NoError(t, err)
	assert.Equal(t, 2, n, "producers 1 and 2 (timestamps 1_700_000_000_000)")
}

// TestExpiredProducerNewAtAnySequence is issue 27 case 7. Kafka removes
// an expired producer on a timer (producer.id.expiration.check.interval.ms,
// 10 minutes), so 48 hours after its last batch (producer.id.expiration.ms
// 24 hours) its next batch starts a new producer, at any sequence. The
// partition used to forget it only when a new producer id appeared, at a
// roll or on ExpireProducers, and refused that batch as out of order.
func TestExpiredProducerNewAtAnySequence(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	pbTime = now.UnixMilli()
	t.Cleanup(func() { pbTime = 0 })
	p, _ := openT(t, plog.Config{Now: clock})
	_, err := p.AppendBatch(pb{pid: 1, seq: 0, n: 5}.bytes(t))
	require.NoError(t, err)
	now = now.Add(48 * time.Hour)
	pbTime = now.UnixMilli()
	_, err = p.AppendBatch(pb{pid: 1, seq: 9}.bytes(t))
	require.NoError(t, err, "Kafka: the expired producer's batch is a new producer's")
	st, ok, err := p.ProducerState(1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, st.Batches, 1)
	assert.Equal(t, int32(9), st.Batches[0].FirstSequence)
}

// TestProducerIDExpirationConfig: an expiration that is negative or below
// 1 ms is refused, as Kafka's producer.id.expiration.ms (milliseconds, at
// least 1) refuses it. Below 1 ms used to be accepted and counted as 0 ms,
// which forgot every producer at once: a retry in the same millisecond
// was written twice (law 10).
func TestProducerIDExpirationConfig(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Nanosecond, 500 * time.Microsecond} {
		_, err := plog.Open(t.TempDir(), plog.Config{ProducerIDExpiration: d})
		require.ErrorIs(t, err, plog.ErrInvalidConfig, "%v", d)
	}
	p, err := plog.Open(t.TempDir(), plog.Config{ProducerIDExpiration: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, p.Close())
}

// TestProducerSnapshotOnMemFS checks the snapshot files' names through
// the vfs (Open, roll, Close on the in-memory filesystem).
func TestProducerSnapshotOnMemFS(t *testing.T) {
	mem := vfs.NewMem()
	p, err := plog.Open("/d/p-0", plog.Config{FS: mem})
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{seq: 0, n: 3}.bytes(t))
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	require.NoError(t, p.Close())
	names, err := mem.List("/d/p-0")
	require.NoError(t, err)
	assert.Contains(t, names, "00000000000000000003.snapshot")
}

// TestRollSnapshotDurableAfterSync: a roll only takes its snapshot in
// memory; the file is written (fsynced, its directory entry synced) once
// the segments below it are durable: by the roll's background flush or by
// the next Sync, whichever comes first. Before that no file exists, so a
// snapshot is never on disk ahead of the batches (and .txnindex entries)
// it describes.
func TestRollSnapshotDurableAfterSync(t *testing.T) {
	for _, flush := range []string{"none", "sync", "background"} {
		t.Run(flush, func(t *testing.T) {
			mem := vfs.NewMem()
			p, err := plog.Open("/d/p-0", plog.WithManualRollFlush(plog.Config{FS: mem}))
			require.NoError(t, err)
			_, err = p.AppendBatch(pb{seq: 0, n: 3}.bytes(t))
			require.NoError(t, err)
			require.NoError(t, p.Roll())
			switch flush {
			case "sync":
				require.NoError(t, p.Sync())
			case "background":
				require.NoError(t, p.FlushRolled())
			}
			clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 0})
			require.NoError(t, p.Close())
			names, err := clone.List("/d/p-0")
			require.NoError(t, err)
			if flush == "none" {
				assert.NotContains(t, names, "00000000000000000003.snapshot", "written before the segment below it was flushed")
				return
			}
			f, err := clone.Open("/d/p-0/00000000000000000003.snapshot")
			require.NoError(t, err, "%v", names)
			st, err := f.Stat()
			require.NoError(t, err)
			assert.Equal(t, int64(10+46), st.Size())
			require.NoError(t, f.Close())
		})
	}
}
