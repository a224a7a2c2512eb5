package log

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs/vfstest"
	"github.com/partlog/partlog/internal/vfs"
)

// The reads below race a writer placed exactly by testHookSnapshotLoaded:
// it runs on the reader's goroutine after the read loaded its truncation
// count, bounds and log start, and before it takes the segment list.

// raceTxnBatch is a transactional batch of n records of producer pid.
func raceTxnBatch(t *testing.T, pid int64, seq int32, n int) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: pid, BaseSequence: seq}, Transactional: true})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Timestamp: 1000 + int64(i), Key: []byte{byte(i)}, Value: []byte("v")}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	return append([]byte(nil), b...)
}

// raceAppend appends n one-record batches.
func raceAppend(t *testing.T, p *Partition, n int) {
	t.Helper()
	for i := range n {
		bld := batch.NewBuilder(batch.BuilderOptions{})
		require.NoError(t, bld.Add(batch.Record{Key: []byte{byte(i)}, Value: []byte("0123456789"), Timestamp: 1000 + int64(i)}))
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
}

// onSnapshot makes f run at the n-th snapshot a read takes (n from 1), for
// the rest of the test.
func onSnapshot(t *testing.T, n int, f func()) *int {
	calls := 0
	hook := func() {
		calls++
		if calls == n {
			f()
		}
	}
	testHookSnapshotLoaded.Store(&hook)
	t.Cleanup(func() { testHookSnapshotLoaded.Store(nil) })
	return &calls
}

// TestReadCommittedRacesTruncation: a TruncateTo that cuts an ABORT marker
// while a ReadCommitted runs reopens the transaction (the last stable
// offset falls to its first offset) and removes its .txnindex entry. The
// read must answer from one log: the records with the abort (before the
// cut), or nothing (after it: offset 0 is at the last stable offset). It
// used to trim at the last stable offset loaded before the cut and return
// the transaction's records with no abort, which a read_committed consumer
// takes as committed (law 11).
func TestReadCommittedRacesTruncation(t *testing.T) {
	p, err := Open("/p-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	_, err = p.AppendBatch(raceTxnBatch(t, 1, 0, 3)) // 0-2
	require.NoError(t, err)
	abortAt, err := p.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1})
	require.NoError(t, err)
	first, aborted, err := p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	require.NoError(t, first.Close())
	require.Len(t, aborted, 1, "without the race")

	calls := onSnapshot(t, 1, func() { require.NoError(t, p.TruncateTo(abortAt)) })
	recs, aborted, err := p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	defer recs.Close()
	require.Positive(t, *calls)
	require.Equal(t, int64(0), p.LastStableOffset(), "the cut reopened the transaction")
	require.Empty(t, recs.Bytes(), "offset 0 is at the last stable offset now")
	require.Empty(t, aborted)
}

// TestReadCommittedRacesRetention: DeleteRecordsBefore (as retention
// would) removes the segment a ReadCommitted read its batches from, and
// the segment holding their transaction's ABORT marker, before the read
// collects the aborted transactions. The read must answer from one log:
// the records with the abort, or ErrOffsetOutOfRange. It used to return
// the records (its reference kept their segment, law 9) without the abort,
// as the segment list it then searched had lost the marker's .txnindex
// (law 11).
func TestReadCommittedRacesRetention(t *testing.T) {
	p, err := Open("/p-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	_, err = p.AppendBatch(raceTxnBatch(t, 1, 0, 3)) // 0-2, segment 0
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	_, err = p.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1}) // 3, segment 3
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	raceAppend(t, p, 2) // 4-5, segment 4

	calls := onSnapshot(t, 2, func() { require.NoError(t, p.DeleteRecordsBefore(4)) }) // the collection's snapshot
	recs, aborted, err := p.ReadCommitted(0, 1<<20)
	require.GreaterOrEqual(t, *calls, 2)
	if err == nil {
		defer recs.Close()
		require.NotEmpty(t, aborted, "offsets [%d, %d) without their abort", recs.FirstOffset(), recs.NextOffset())
		return
	}
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

// TestReadRacesRestartBelowEnd: a TruncateFullyAndStartAt below the log
// end while a read of an offset between the new start and the old high
// watermark runs. The new log ends below the offset, so the answer is
// ErrOffsetOutOfRange (the old log would have had a batch there; no log
// gives an empty result). The read used to find the new segment past its
// old bound's segment, stop before any truncation check and return an
// empty result (law 3); Records then waited for the old high watermark in
// a log that ends below it, instead of ending with ErrOffsetOutOfRange.
func TestReadRacesRestartBelowEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(p *Partition) error
	}{
		{"ReadFrom", func(p *Partition) error {
			r, err := p.ReadFrom(30, 1<<20)
			if err == nil {
				defer r.Close()
				require.NotEmpty(t, r.Bytes(), "an empty result at %d", r.NextOffset())
			}
			return err
		}},
		{"Records", func(p *Partition) error {
			// The deadline only bounds a read that would wait forever.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, err := range p.Records(ctx, 30) {
				require.Error(t, err, "a record yielded")
				return err
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open("/p-0", Config{FS: vfs.NewMem()})
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			raceAppend(t, p, 50) // 0-49, one segment
			calls := onSnapshot(t, 1, func() { require.NoError(t, p.TruncateFullyAndStartAt(20)) })
			err = tc.read(p)
			require.Positive(t, *calls)
			require.Equal(t, int64(20), p.LogEndOffset())
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		})
	}
}

// TestReadCommittedFromCopyRacesDeletion: a ReadCommitted served from a
// copy (tiered storage) while DeleteRecordsBefore moves the whole log's
// start past the copies that hold the batches and their ABORT marker,
// between the read and the collection of the aborted transactions (which
// skips copies no longer recorded). The read must answer from one log: the
// records with the abort, or ErrOffsetOutOfRange; it used to return the
// records without the abort (law 11 through law 14).
func TestReadCommittedFromCopyRacesDeletion(t *testing.T) {
	d, err := OpenDir("/data", tierInternalConfig(vfstest.NewMem(), 1))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	_, err = p.AppendBatch(raceTxnBatch(t, 1, 0, 3)) // 0-2
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	_, err = p.AppendMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1}) // 3
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	raceAppend(t, p, 2) // 4-5
	require.NoError(t, p.Roll())
	require.NoError(t, p.flushRolled())
	d.RunTierPass()
	require.Equal(t, int64(4), p.LogStartOffset(), "offsets 0-3 are in copies only")
	recs, aborted, err := p.ReadCommitted(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, aborted, 1, "without the race")
	require.NoError(t, recs.Close())

	calls := onSnapshot(t, 1, func() { require.NoError(t, p.DeleteRecordsBefore(4)) }) // the collection's snapshot
	recs, aborted, err = p.ReadCommitted(0, 1<<20)
	require.Positive(t, *calls)
	if err == nil {
		defer recs.Close()
		require.NotEmpty(t, aborted, "offsets [%d, %d) without their abort", recs.FirstOffset(), recs.NextOffset())
		return
	}
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

// TestReadRacesRestartBelowLogStart: a TruncateTo below the log start (a
// follower whose leader's log is shorter) restarts the log there, lowering
// the start, while a read of an offset between the new start and the old
// one runs. Below the old start lie records DeleteRecordsBefore removed: no
// log answers them. At each store that makes the restart visible, a read
// of every offset in between must answer from the old log
// (ErrOffsetOutOfRange) or the new one (nothing at the new start,
// ErrOffsetOutOfRange past it). The start used to be lowered before the
// bounds were published and the truncation counted, and a read in that
// window returned the deleted records (law 3).
func TestReadRacesRestartBelowLogStart(t *testing.T) {
	p, err := Open("/p-0", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	raceAppend(t, p, 50) // 0-49, one segment
	require.NoError(t, p.DeleteRecordsBefore(30))
	calls := 0
	hook := func() {
		calls++
		for offset := int64(10); offset < 30; offset++ {
			r, err := p.ReadFrom(offset, 1<<20)
			if err != nil {
				require.ErrorIs(t, err, ErrOffsetOutOfRange, "offset %d", offset)
				continue
			}
			require.Zero(t, len(r.Bytes()), "records read at %d, below the old log start 30", offset)
			require.Equal(t, int64(10), offset, "an empty result past the new log's end")
			r.Close()
		}
	}
	testHookRestartVisible.Store(&hook)
	t.Cleanup(func() { testHookRestartVisible.Store(nil) })
	require.NoError(t, p.TruncateTo(10))
	require.Positive(t, calls)
	require.Equal(t, int64(10), p.LogStartOffset())
	require.Equal(t, int64(10), p.LogEndOffset())
}
