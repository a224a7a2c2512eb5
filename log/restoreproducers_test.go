package log_test

import (
	"io/fs"
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

// A log restarted above its end takes another replica's producer state:
// a retry of the producer's last batch below the restart point is a
// duplicate (with its original offsets), before and after a reopen, and
// the next sequence is accepted; a log that ends past the point, or
// entries at or past it, are refused and change nothing.
func TestRestoreProducers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	src, err := plog.Open(filepath.Join(t.TempDir(), "src-0"), plog.Config{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := src.AppendBatch(pb{pid: 7, epoch: 2, seq: int32(4 * i), n: 4}.bytes(t))
		require.NoError(t, err)
	}
	srcEnd := src.LogEndOffset()
	states, err := src.Producers()
	require.NoError(t, err)
	require.NoError(t, src.Close())
	var entries []producer.Entry
	for _, st := range states {
		last := st.Batches[len(st.Batches)-1]
		entries = append(entries, producer.Entry{ProducerID: st.ProducerID, ProducerEpoch: st.Epoch,
			LastSequence: last.LastSequence, LastOffset: last.LastOffset, OffsetDelta: int32(last.LastOffset - last.FirstOffset),
			Timestamp: st.LastTimestamp, CoordinatorEpoch: st.CoordinatorEpoch, CurrentTxnFirstOffset: st.CurrentTxnFirstOffset})
	}

	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 9, epoch: 0, seq: 0, n: 1}.bytes(t))
	require.NoError(t, err)
	require.ErrorIs(t, p.RestoreProducers(0, snap(entries)), plog.ErrUnexpectedOffset, "the log ends past the point")
	require.NoError(t, p.TruncateFullyAndStartAt(srcEnd))
	bad := append([]producer.Entry(nil), entries...)
	bad[0].LastOffset = srcEnd
	require.ErrorIs(t, p.RestoreProducers(srcEnd, snap(bad)), plog.ErrInvalidBatch)
	corrupt := snap(entries)
	corrupt[len(corrupt)-1] ^= 1
	require.ErrorIs(t, p.RestoreProducers(srcEnd, corrupt), batch.ErrCorrupt, "a snapshot whose checksum fails")
	_, ok, err := p.ProducerState(7)
	require.NoError(t, err)
	require.False(t, ok, "a refused restore changes nothing")
	require.NoError(t, p.RestoreProducers(srcEnd, snap(entries)))

	check := func(p *plog.Partition) {
		t.Helper()
		info, err := p.AppendBatchInfo(pb{pid: 7, epoch: 2, seq: 8, n: 4}.bytes(t))
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "a retry of the last batch below the restart point")
		assert.Equal(t, srcEnd-4, info.Base)
		assert.Equal(t, srcEnd, p.LogEndOffset(), "nothing written")
	}
	check(p)
	require.NoError(t, p.Close())
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	check(p)
	_, err = p.AppendBatch(pb{pid: 7, epoch: 2, seq: 12, n: 1}.bytes(t))
	require.NoError(t, err, "the next sequence follows the restored state")
	_, err = p.AppendBatch(pb{pid: 7, epoch: 2, seq: 20, n: 1}.bytes(t))
	require.ErrorIs(t, err, plog.ErrOutOfOrderSequence)
}

// A follower that copied a compacted leader's batches below the point
// keeps them and takes the leader's producer state at the point, also
// when its log ends below the point (the leader's last batches there
// were compacted away): the state replaces what the copied batches
// taught it, a retry of a batch between the log end and the point is a
// duplicate, before and after a reopen, and the records stay.
func TestRestoreProducersBelowPoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 9, epoch: 0, seq: 0, n: 2}.bytes(t)) // offsets 0-1
	require.NoError(t, err)
	const point = 10
	// Producer 7's last batch, offsets 6-8, sequences 3-5: compacted away
	// on the leader, so not in this log (it ends at 2).
	entries := []producer.Entry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: 5, LastOffset: 8, OffsetDelta: 2, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 9, ProducerEpoch: 0, LastSequence: 1, LastOffset: 1, OffsetDelta: 1, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}
	bad := append([]producer.Entry(nil), entries...)
	bad[0].LastOffset = point
	require.ErrorIs(t, p.RestoreProducers(point, snap(bad)), plog.ErrInvalidBatch, "an entry at the point")
	require.ErrorIs(t, p.RestoreProducers(1, snap(entries[1:])), plog.ErrUnexpectedOffset, "the log ends past the point")
	require.NoError(t, p.RestoreProducers(point, snap(entries)))

	check := func(p *plog.Partition) {
		t.Helper()
		info, err := p.AppendBatchInfo(pb{pid: 7, epoch: 1, seq: 3, n: 3}.bytes(t))
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "a retry of producer 7's last batch below the point")
		assert.Equal(t, int64(6), info.Base)
		info, err = p.AppendBatchInfo(pb{pid: 9, epoch: 0, seq: 0, n: 2}.bytes(t))
		require.NoError(t, err)
		assert.True(t, info.Duplicate, "producer 9's batch in the log")
		assert.Equal(t, int64(0), p.LogStartOffset())
		assert.Equal(t, int64(2), p.LogEndOffset(), "the records stay, nothing written")
	}
	check(p)
	require.NoError(t, p.Close())
	p, err = plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	check(p)
	_, err = p.AppendBatch(pb{pid: 7, epoch: 1, seq: 6, n: 1}.bytes(t))
	require.NoError(t, err, "the next sequence follows the restored state")
}

// A roll takes the producer state at the new segment's base in memory and
// leaves its snapshot file to the roll's flush (the background one, or the
// next full flush). RestoreProducers replaces that state: a snapshot the
// roll took before must never be written over the restored one. Here the
// roll leaves an empty active segment, so the roll's snapshot and the
// restored one share the log end offset; after the flush (by the rolls'
// background flush or by Sync) and a crash, the restored state must be
// what Open loads.
func TestRestoreProducersAfterRollSurvivesCrash(t *testing.T) {
	const point = 10
	entries := []producer.Entry{
		{ProducerID: 7, ProducerEpoch: 1, LastSequence: 5, LastOffset: 8, OffsetDelta: 2, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 9, ProducerEpoch: 0, LastSequence: 1, LastOffset: 1, OffsetDelta: 1, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}
	for _, tc := range []struct {
		name  string
		flush func(*plog.Partition) error
	}{
		{"roll flush", (*plog.Partition).FlushRolled},
		{"sync", (*plog.Partition).Sync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const dir = "/kafka/restore-roll-0"
			mem := vfs.NewMem()
			p, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: mem}))
			require.NoError(t, err)
			_, err = p.AppendBatch(pb{pid: 9, epoch: 0, seq: 0, n: 2}.bytes(t)) // offsets 0-1
			require.NoError(t, err)
			require.NoError(t, p.Roll()) // the roll's snapshot at 2: producer 9 only
			require.NoError(t, p.RestoreProducers(point, snap(entries)))
			require.NoError(t, tc.flush(p))
			clone := mem.CrashClone(vfs.CrashOptions{})
			require.NoError(t, p.Close())

			p, err = plog.Open(dir, plog.Config{FS: clone})
			require.NoError(t, err)
			defer p.Close()
			st, ok, err := p.ProducerState(7)
			require.NoError(t, err)
			require.True(t, ok, "the restored producer survives the crash")
			assert.Equal(t, int64(8), st.Batches[len(st.Batches)-1].LastOffset)
			info, err := p.AppendBatchInfo(pb{pid: 7, epoch: 1, seq: 3, n: 3}.bytes(t))
			require.NoError(t, err)
			assert.True(t, info.Duplicate, "a retry of producer 7's last batch below the point")
		})
	}
}

// ProducerSnapshot hands a replica the producer state at a roll's base:
// from memory while the roll's background flush has not written the
// file, from the file afterwards (the same bytes), refused for an offset
// with no snapshot; another partition restarted there and restored from
// it answers a retry of a batch below the point as a duplicate.
func TestProducerSnapshotAtRoll(t *testing.T) {
	p, err := plog.Open(filepath.Join(t.TempDir(), "p-0"), plog.WithManualRollFlush(plog.Config{}))
	require.NoError(t, err)
	defer p.Close()
	_, err = p.AppendBatch(pb{pid: 7, epoch: 1, seq: 0, n: 3}.bytes(t))
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	point := p.LogEndOffset()

	fromMemory, err := p.ProducerSnapshot(point)
	require.NoError(t, err, "the roll's snapshot before its flush")
	require.NoError(t, p.FlushRolled())
	fromFile, err := p.ProducerSnapshot(point)
	require.NoError(t, err, "the snapshot file after the flush")
	assert.Equal(t, fromMemory, fromFile)
	_, err = p.ProducerSnapshot(point + 1)
	require.ErrorIs(t, err, fs.ErrNotExist)

	q, err := plog.Open(filepath.Join(t.TempDir(), "q-0"), plog.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.TruncateFullyAndStartAt(point))
	require.NoError(t, q.RestoreProducers(point, fromFile))
	info, err := q.AppendBatchInfo(pb{pid: 7, epoch: 1, seq: 0, n: 3}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "a retry of the batch below the point")
}

// RestoreProducers returns once the restored state is durable: when the
// log holds batches below the point that no flush has synced yet (a
// follower's copied batches), a crash right after it must still leave the
// restored producer, and the snapshot must not lie past the end the crash
// leaves (a snapshot past the end means synced batches are missing, which
// StrictRecovery refuses).
func TestRestoreProducersSyncsTheBatchesBelow(t *testing.T) {
	for name, policy := range map[string]plog.RecoveryPolicy{"default": plog.DefaultRecovery{}, "strict": plog.StrictRecovery{}} {
		t.Run(name, func(t *testing.T) {
			const dir = "/kafka/restore-unsynced-0"
			mem := vfs.NewMem()
			p, err := plog.Open(dir, plog.Config{FS: mem})
			require.NoError(t, err)
			_, err = p.AppendBatch(pb{pid: 9, epoch: 0, seq: 0, n: 2}.bytes(t)) // offsets 0-1, not synced
			require.NoError(t, err)
			entries := []producer.Entry{
				{ProducerID: 7, ProducerEpoch: 1, LastSequence: 5, LastOffset: 8, OffsetDelta: 2, Timestamp: time.Now().UnixMilli(), CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
			}
			require.NoError(t, p.RestoreProducers(10, snap(entries)))
			clone := mem.CrashClone(vfs.CrashOptions{}) // only what was synced
			require.NoError(t, p.Close())

			p, err = plog.Open(dir, plog.Config{FS: clone, Recovery: policy})
			require.NoError(t, err)
			defer p.Close()
			assert.Equal(t, int64(2), p.LogEndOffset(), "the batches below the restored snapshot")
			st, ok, err := p.ProducerState(7)
			require.NoError(t, err)
			require.True(t, ok, "the restored producer survives the crash")
			assert.Equal(t, int64(8), st.Batches[len(st.Batches)-1].LastOffset)
		})
	}
}

// ProducerSnapshot of a closed partition is ErrClosed, as every method of
// a closed Partition: the directory is no longer the partition's (another
// Open, or a Dir's OpenPartition, may own it and rewrite its snapshots).
// It used to read the snapshot file Close left at the log end and return
// its bytes with a nil error.
func TestProducerSnapshotAfterClose(t *testing.T) {
	p, err := plog.Open(filepath.Join(t.TempDir(), "p-0"), plog.Config{})
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 7, epoch: 1, seq: 0, n: 3}.bytes(t))
	require.NoError(t, err)
	end := p.LogEndOffset()
	require.NoError(t, p.Close()) // writes the snapshot at the log end
	snap, err := p.ProducerSnapshot(end)
	require.ErrorIs(t, err, plog.ErrClosed)
	require.Nil(t, snap)
}
