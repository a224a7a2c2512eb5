package producer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// testNow is the fixed clock of the tests: batches carry timestamps near
// it, so nothing expires unless a test moves the clock.
var testNow = time.UnixMilli(1_700_000_000_000)

// testLog is a partition stand-in: it assigns offsets in order and feeds each
// stored batch to the state, as a partition's append does after the write.
type testLog struct {
	s   *State
	end int64
}

func newLog(cfg Config) *testLog {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	return &testLog{s: NewState(cfg)}
}

// pb is a producer batch in a table: producer 7 unless pid is set, one
// record unless n is set, stamped at testNow unless ts is set.
type pb struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	txn   bool
	ts    int64
}

// bytes builds the batch at base offset 0.
func (b pb) bytes(t testing.TB) batch.Batch {
	t.Helper()
	pid, n, ts := b.pid, b.n, b.ts
	if pid == 0 {
		pid = 7
	}
	if n == 0 {
		n = 1
	}
	if ts == 0 {
		ts = testNow.UnixMilli()
	}
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: pid, Epoch: b.epoch, BaseSequence: b.seq}, Transactional: b.txn})
	for i := range n {
		require.NoError(t, bld.Add(batch.Record{Timestamp: ts, Key: []byte{byte(i)}, Value: []byte("v")}))
	}
	bt, err := bld.Build()
	require.NoError(t, err)
	return bt
}

// append stores bt at the log end and applies it.
func (l *testLog) append(bt batch.Batch) (ended EndedTxn, ok bool) {
	bt.SetBaseOffset(l.end)
	l.end = bt.NextOffset()
	return l.s.Apply(bt)
}

// marker builds a transaction marker of producer pid at the log end.
func (l *testLog) marker(t testing.TB, typ batch.ControlType, pid int64, epoch int16, coord int32) batch.Batch {
	t.Helper()
	b, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: epoch,
		CoordinatorEpoch: coord, BaseOffset: l.end, Timestamp: testNow.UnixMilli()})
	require.NoError(t, err)
	return batch.Batch(b)
}

// TestCheckSequenceRules is Kafka's ProducerAppendInfo on the leader path,
// case by case, without a partition: after the setup batches (applied at
// consecutive offsets), Check accepts the probe, recognises it as a retry
// of setup batch dupOf (its offsets), or refuses it with the sentinel;
// either way the state is unchanged.
func TestCheckSequenceRules(t *testing.T) {
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
		{"unknown producer, epoch below no epoch", nil, pb{epoch: -2, seq: 0}, -1, ErrInvalidProducerEpoch},
		{"expired producer, epoch below no epoch", []pb{{seq: 0, ts: testNow.Add(-48 * time.Hour).UnixMilli()}}, pb{epoch: math.MinInt16, seq: 0}, -1, ErrInvalidProducerEpoch},
		{"next sequence", []pb{{seq: 0, n: 3}}, pb{seq: 3}, -1, nil},
		{"retry of the last batch", []pb{{seq: 0, n: 3}, {seq: 3, n: 2}}, pb{seq: 3, n: 2}, 1, nil},
		{"retry of the fifth-last batch", []pb{{seq: 0}, {seq: 1}, {seq: 2}, {seq: 3}, {seq: 4}}, pb{seq: 0}, 0, nil},
		{"retry of the sixth-last batch is out of order", []pb{{seq: 0}, {seq: 1}, {seq: 2}, {seq: 3}, {seq: 4}, {seq: 5}}, pb{seq: 0}, -1, ErrOutOfOrderSequence},
		{"gap", []pb{{seq: 0, n: 2}}, pb{seq: 3}, -1, ErrOutOfOrderSequence},
		{"same first sequence, other last sequence", []pb{{seq: 0, n: 3}}, pb{seq: 0, n: 2}, -1, ErrOutOfOrderSequence},
		{"sequence from the past inside a batch", []pb{{seq: 0, n: 3}}, pb{seq: 1, n: 2}, -1, ErrOutOfOrderSequence},
		{"repeated last sequence", []pb{{seq: 0, n: 3}}, pb{seq: 2}, -1, ErrOutOfOrderSequence},
		{"older epoch", []pb{{epoch: 2, seq: 0}}, pb{epoch: 1, seq: 1}, -1, ErrInvalidProducerEpoch},
		{"retry from an older epoch is fenced", []pb{{epoch: 1, seq: 0}, {epoch: 2, seq: 0}}, pb{epoch: 1, seq: 0}, -1, ErrInvalidProducerEpoch},
		{"new epoch at sequence 0", []pb{{epoch: 1, seq: 0, n: 5}}, pb{epoch: 2, seq: 0}, -1, nil},
		{"new epoch not at sequence 0", []pb{{epoch: 1, seq: 0, n: 5}}, pb{epoch: 2, seq: 5}, -1, ErrOutOfOrderSequence},
		{"new epoch forgets the old batches", []pb{{epoch: 1, seq: 0}, {epoch: 2, seq: 0}}, pb{epoch: 2, seq: 0}, 1, nil},
		{"wrap: MaxInt32 then 0", []pb{{seq: maxSeq - 1, n: 2}}, pb{seq: 0}, -1, nil},
		{"wrap inside a batch", []pb{{seq: maxSeq - 1, n: 3}}, pb{seq: 1}, -1, nil},
		{"retry of a wrapping batch", []pb{{seq: maxSeq - 1, n: 3}}, pb{seq: maxSeq - 1, n: 3}, 0, nil},
		{"no wrap before MaxInt32", []pb{{seq: maxSeq - 3, n: 2}}, pb{seq: 0}, -1, ErrOutOfOrderSequence},
		{"other producers do not interfere", []pb{{pid: 8, seq: 0}, {pid: 9, seq: 10}}, pb{seq: 3}, -1, nil},
		{"non-transactional batch during a transaction", []pb{{seq: 0, txn: true}}, pb{seq: 1}, -1, ErrInvalidTxnState},
		{"transactional batches in a row", []pb{{seq: 0, txn: true}}, pb{seq: 1, txn: true}, -1, nil},
		{"retry of a transactional batch during its transaction", []pb{{seq: 0, txn: true}}, pb{seq: 0, txn: true}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(Config{Expiration: 24 * time.Hour})
			var bases []int64
			for _, s := range tc.setup {
				bases = append(bases, l.end)
				l.append(s.bytes(t))
			}
			before := l.s.Producers()
			dup, isDup, err := l.s.Check(tc.probe.bytes(t))
			switch {
			case tc.err != nil:
				require.ErrorIs(t, err, tc.err)
				assert.False(t, isDup)
			case tc.dupOf >= 0:
				require.NoError(t, err)
				require.True(t, isDup)
				n := max(tc.setup[tc.dupOf].n, 1)
				assert.Equal(t, bases[tc.dupOf], dup.FirstOffset)
				assert.Equal(t, bases[tc.dupOf]+int64(n)-1, dup.LastOffset)
				assert.Equal(t, tc.setup[tc.dupOf].seq, dup.FirstSequence)
			default:
				require.NoError(t, err)
				assert.False(t, isDup)
			}
			assert.Equal(t, before, l.s.Producers(), "Check changed the state")
		})
	}
}

// TestCheckErrorsName: a refusal names the producer id, the epochs and the
// sequences.
func TestCheckErrorsName(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{pid: 4242, epoch: 3, seq: 0, n: 2}.bytes(t))
	_, _, err := l.s.Check(pb{pid: 4242, epoch: 3, seq: 9}.bytes(t))
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	assert.Contains(t, err.Error(), "producer 4242 epoch 3")
	assert.Contains(t, err.Error(), "after last sequence 1")
	_, _, err = l.s.Check(pb{pid: 4242, epoch: 2, seq: 2}.bytes(t))
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)
	assert.Contains(t, err.Error(), "epoch 2 is older than its current epoch 3")
}

// TestApplyKeepsFiveBatches: the state keeps the last five batches of the
// current epoch, oldest first, with their sequences, offsets and
// timestamps; a new epoch forgets them.
func TestApplyKeepsFiveBatches(t *testing.T) {
	l := newLog(Config{})
	for i := range 7 {
		l.append(pb{seq: int32(2 * i), n: 2, ts: 1000 + int64(i)}.bytes(t))
	}
	pr, ok := l.s.Producer(7)
	require.True(t, ok)
	require.Len(t, pr.Batches, BatchesKept)
	for i, b := range pr.Batches {
		k := int64(i + 2) // batches 2..6 of 0..6
		assert.Equal(t, Batch{FirstSequence: int32(2 * k), LastSequence: int32(2*k + 1), FirstOffset: 2 * k, LastOffset: 2*k + 1, MaxTimestamp: 1000 + k}, b)
	}
	assert.Equal(t, int64(1006), pr.LastTimestamp)
	assert.Equal(t, int16(0), pr.Epoch)
	assert.Equal(t, int64(-1), pr.TxnFirstOffset)
	assert.Equal(t, int32(-1), pr.CoordinatorEpoch)

	l.append(pb{epoch: 1, seq: 0}.bytes(t))
	pr, _ = l.s.Producer(7)
	assert.Equal(t, int16(1), pr.Epoch)
	assert.Equal(t, []Batch{{FirstSequence: 0, LastSequence: 0, FirstOffset: 14, LastOffset: 14, MaxTimestamp: testNow.UnixMilli()}}, pr.Batches)

	_, ok = l.s.Producer(8)
	assert.False(t, ok)
	assert.Len(t, l.s.Producers(), 1)
}

// TestApplyTakesEveryBatch: Apply is the replica path: stale epochs and
// gaps are recorded as they come (Kafka's followers check nothing), and
// what it leaves is what Check judges next.
func TestApplyTakesEveryBatch(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{epoch: 2, seq: 0, n: 2}.bytes(t))
	l.append(pb{epoch: 2, seq: 10}.bytes(t)) // a gap
	l.append(pb{epoch: 1, seq: 0}.bytes(t))  // an older epoch becomes current
	pr, _ := l.s.Producer(7)
	assert.Equal(t, int16(1), pr.Epoch)
	require.Len(t, pr.Batches, 1)
	assert.Equal(t, int64(3), pr.Batches[0].FirstOffset)
	dup, isDup, err := l.s.Check(pb{epoch: 1, seq: 0}.bytes(t))
	require.NoError(t, err)
	require.True(t, isDup)
	assert.Equal(t, int64(3), dup.FirstOffset)
}

// TestMarkers: Kafka's appendEndTxnMarker. The first transactional batch
// opens a transaction; a marker ends it and reports it with the last
// stable offset after it; the coordinator epoch and the producer epoch
// are taken from the marker; markers without an open transaction, empty
// control batches and control batches that are no transaction markers
// end nothing.
func TestMarkers(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{pid: 1, epoch: 4, seq: 0, txn: true}.bytes(t)) // offset 0
	l.append(pb{pid: 2, epoch: 0, seq: 0, txn: true}.bytes(t)) // offset 1
	l.append(pb{pid: 1, epoch: 4, seq: 1, txn: true}.bytes(t)) // offset 2: same transaction
	assert.Equal(t, []OpenTxn{{ProducerID: 1, FirstOffset: 0, StartTimestamp: testNow.UnixMilli()},
		{ProducerID: 2, FirstOffset: 1, StartTimestamp: testNow.UnixMilli()}}, l.s.OpenTxns())
	first, ok := l.s.FirstUnstable()
	require.True(t, ok)
	assert.Equal(t, int64(0), first)

	// Producer 1 aborts at 3: producer 2's transaction still bounds the
	// last stable offset.
	ended, ok := l.append(l.marker(t, batch.ControlAbort, 1, 4, 7))
	require.True(t, ok)
	assert.Equal(t, EndedTxn{ProducerID: 1, FirstOffset: 0, MarkerOffset: 3, Abort: true, LastStableOffset: 1}, ended)
	pr, _ := l.s.Producer(1)
	assert.Equal(t, int64(-1), pr.TxnFirstOffset)
	assert.Equal(t, int32(7), pr.CoordinatorEpoch)
	assert.Len(t, pr.Batches, 2, "a marker is no batch of the sequence")

	// Producer 2 commits at 4: nothing open; once the high watermark
	// passes both markers the LSO is past them.
	ended, ok = l.append(l.marker(t, batch.ControlCommit, 2, 0, 0))
	require.True(t, ok)
	assert.Equal(t, EndedTxn{ProducerID: 2, FirstOffset: 1, MarkerOffset: 4, LastStableOffset: 5}, ended)
	assert.Empty(t, l.s.OpenTxns())
	l.s.SetHighWatermark(5)
	_, ok = l.s.FirstUnstable()
	assert.False(t, ok)

	// A marker for a producer with no open transaction ends nothing but
	// moves its epoch (forgetting the old epoch's batches) and
	// coordinator epoch.
	_, ok = l.append(l.marker(t, batch.ControlAbort, 1, 5, 8))
	assert.False(t, ok)
	pr, _ = l.s.Producer(1)
	assert.Equal(t, int16(5), pr.Epoch)
	assert.Equal(t, int32(8), pr.CoordinatorEpoch)
	assert.Empty(t, pr.Batches)
	_, _, err := l.s.Check(pb{pid: 1, epoch: 5, seq: 3}.bytes(t))
	require.ErrorIs(t, err, ErrOutOfOrderSequence, "after a marker alone the epoch's sequence starts at 0")
	_, _, err = l.s.Check(pb{pid: 1, epoch: 5, seq: 0}.bytes(t))
	require.NoError(t, err)

	// A marker of a producer never seen: known from then on.
	_, ok = l.append(l.marker(t, batch.ControlCommit, 3, 2, 1))
	assert.False(t, ok)
	pr, known := l.s.Producer(3)
	require.True(t, known)
	assert.Equal(t, Producer{ID: 3, Epoch: 2, CoordinatorEpoch: 1, TxnFirstOffset: -1, LastTimestamp: testNow.UnixMilli()}, pr)

	// A control batch whose records compaction removed changes nothing.
	l.append(pb{pid: 4, seq: 0, txn: true}.bytes(t))
	before := l.s.Producers()
	empty := emptyControlBatch(t, 4, 0)
	_, ok = l.append(empty)
	assert.False(t, ok)
	assert.Equal(t, before, l.s.Producers())
}

// emptyControlBatch is a control batch of producer pid without records, as
// compaction leaves one whose marker it removed.
func emptyControlBatch(t *testing.T, pid int64, epoch int16) batch.Batch {
	t.Helper()
	bt, err := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: batch.NoSequence},
		Transactional: true, Control: true}).Build()
	require.NoError(t, err)
	require.True(t, bt.Attributes().IsControl())
	require.Zero(t, bt.RecordsCount())
	return bt
}

// TestCheckMarker: appendEndTxnMarker's fencing. An epoch older than the
// producer's, or a coordinator epoch older than its last marker's, is
// refused; equal or newer pass; an unknown producer passes.
func TestCheckMarker(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{pid: 1, epoch: 4, seq: 0, txn: true}.bytes(t))
	l.append(l.marker(t, batch.ControlCommit, 1, 4, 7))
	tests := []struct {
		name  string
		m     batch.TxnMarker
		err   error
		names string
	}{
		{"same epochs", batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1, ProducerEpoch: 4, CoordinatorEpoch: 7}, nil, ""},
		{"newer epochs", batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 1, ProducerEpoch: 5, CoordinatorEpoch: 8}, nil, ""},
		{"older producer epoch", batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1, ProducerEpoch: 3, CoordinatorEpoch: 9},
			ErrInvalidProducerEpoch, "ABORT marker for producer 1 epoch 3, older than its current epoch 4"},
		{"older coordinator epoch", batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 1, ProducerEpoch: 4, CoordinatorEpoch: 6},
			ErrTransactionCoordinatorFenced, "producer 1 with coordinator epoch 6, older than 7"},
		{"unknown producer", batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 0}, nil, ""},
		{"unknown producer, coordinator epoch -1", batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: -1}, nil, ""},
		{"unknown producer, coordinator epoch below -1", batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: -2},
			ErrTransactionCoordinatorFenced, "producer 2 with coordinator epoch -2, older than -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := l.s.Producers()
			err := l.s.CheckMarker(tc.m)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), tc.names)
			}
			assert.Equal(t, before, l.s.Producers())
		})
	}
}

// TestOpenTxnsByFirstOffset: open transactions are kept by first offset
// whatever order they begin in (a snapshot's entries come by producer id).
func TestOpenTxnsByFirstOffset(t *testing.T) {
	s := NewState(Config{Now: func() time.Time { return testNow }})
	s.Restore([]Entry{
		{ProducerID: 1, LastSequence: -1, LastOffset: -1, Timestamp: 10, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 30},
		{ProducerID: 2, LastSequence: -1, LastOffset: -1, Timestamp: 11, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 10},
		{ProducerID: 3, LastSequence: -1, LastOffset: -1, Timestamp: 12, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 20},
	})
	assert.Equal(t, []OpenTxn{{2, 10, 11}, {3, 20, 12}, {1, 30, 10}}, s.OpenTxns())
	first, ok := s.FirstUnstable()
	require.True(t, ok)
	assert.Equal(t, int64(10), first)
	s.Reset()
	assert.Empty(t, s.OpenTxns())
	assert.Empty(t, s.Producers())
	_, ok = s.FirstUnstable()
	assert.False(t, ok)
}

// TestExpire: Kafka's removeExpiredProducers. A producer idle for at least
// the expiration (its last timestamp against the clock) goes, unless its
// transaction is open; Apply sweeps when a new producer appears, at most
// every SweepEvery; Replay never sweeps; no expiration keeps everyone.
// (The sweeps are counted on the map: a lookup forgets an expired
// producer on its own, TestExpiredProducerForgottenOnLookup.)
func TestExpire(t *testing.T) {
	now := testNow
	clock := func() time.Time { return now }
	l := newLog(Config{Expiration: time.Hour, Now: clock})
	old := testNow.Add(-2 * time.Hour).UnixMilli()
	l.append(pb{pid: 1, seq: 0, ts: old}.bytes(t))
	l.append(pb{pid: 2, seq: 0, ts: old, txn: true}.bytes(t))
	l.append(pb{pid: 3, seq: 0}.bytes(t))
	// Producer 1 was idle on arrival, but the sweeps of 2 and 3 came less
	// than SweepEvery after producer 1's (the first Apply swept at now).
	assert.Len(t, l.s.m, 3)

	assert.Equal(t, 1, l.s.Expire())
	assert.NotContains(t, l.s.m, int64(1), "idle for two hours, expiration one hour")
	assert.Contains(t, l.s.m, int64(2), "an open transaction keeps its producer")

	// A new producer sweeps once SweepEvery passed since the last sweep.
	now = now.Add(2 * time.Hour) // producer 3 is idle now too
	l.append(pb{pid: 4, seq: 0, ts: now.UnixMilli()}.bytes(t))
	assert.NotContains(t, l.s.m, int64(3), "swept when producer 4 appeared")
	// Replay adds a producer without sweeping.
	now = now.Add(2 * time.Hour)
	bt := pb{pid: 5, seq: 0, ts: now.UnixMilli()}.bytes(t)
	bt.SetBaseOffset(l.end)
	l.s.Replay(bt)
	assert.Contains(t, l.s.m, int64(4), "Replay swept")

	// A known producer's batch never sweeps.
	l.append(pb{pid: 5, seq: 1, ts: now.UnixMilli()}.bytes(t))
	assert.Contains(t, l.s.m, int64(4))

	// Without an expiration nothing expires.
	forever := newLog(Config{Now: clock})
	forever.append(pb{pid: 1, seq: 0, ts: 1}.bytes(t))
	assert.Zero(t, forever.s.Expire())
	assert.Len(t, forever.s.Producers(), 1)
}

// TestExpiredProducerForgottenOnLookup is issue 27 case 7. Kafka removes
// an expired producer on a timer (producer.id.expiration.check.interval.ms,
// 10 minutes), so 48 hours after its last batch (expiration 24 hours) its
// next batch is a new producer's: accepted at any sequence, and a repeat
// of its last batch is no duplicate. The state used to forget it only when
// a new producer id appeared or on Expire, and refused the batch as out of
// order. Now the first call that looks it up after it expired forgets it:
// Check, CheckMarker, Apply (a follower's path), Producer and Producers.
func TestExpiredProducerForgottenOnLookup(t *testing.T) {
	now := testNow
	clock := func() time.Time { return now }
	newExpiring := func() *testLog {
		l := newLog(Config{Expiration: 24 * time.Hour, Now: clock})
		l.append(pb{pid: 1, seq: 0, n: 5, ts: now.UnixMilli()}.bytes(t)) // sequences 0-4
		return l
	}
	now = testNow
	l := newExpiring()
	now = testNow.Add(48 * time.Hour)

	gap := pb{pid: 1, seq: 10, ts: now.UnixMilli()}.bytes(t)
	_, isDup, err := l.s.Check(gap)
	require.NoError(t, err, "Kafka: an expired producer's batch starts a new producer at any sequence")
	assert.False(t, isDup)
	_, known := l.s.Producer(1)
	assert.False(t, known)
	_, isDup, err = l.s.Check(pb{pid: 1, seq: 0, n: 5, ts: now.UnixMilli()}.bytes(t))
	require.NoError(t, err)
	assert.False(t, isDup, "a repeat of the expired producer's last batch is a new batch, as in Kafka")

	// A follower (Apply only) starts the producer anew too.
	now = testNow
	l = newExpiring()
	now = testNow.Add(48 * time.Hour)
	l.append(gap)
	pr, known := l.s.Producer(1)
	require.True(t, known)
	require.Len(t, pr.Batches, 1, "the expired producer's batches were forgotten")
	assert.Equal(t, int32(10), pr.Batches[0].FirstSequence)

	// Producers and CheckMarker forget it as well.
	now = testNow
	l = newExpiring()
	now = testNow.Add(48 * time.Hour)
	assert.Empty(t, l.s.Producers())
	now = testNow
	l = newExpiring()
	now = testNow.Add(48 * time.Hour)
	require.NoError(t, l.s.CheckMarker(batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 0}))
	assert.Empty(t, l.s.m)

	// Just before the expiration it is still known; an open transaction
	// never expires.
	now = testNow
	l = newExpiring()
	now = testNow.Add(24*time.Hour - time.Millisecond)
	_, _, err = l.s.Check(gap)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	now = testNow
	l = newLog(Config{Expiration: 24 * time.Hour, Now: clock})
	l.append(pb{pid: 1, seq: 0, txn: true, ts: now.UnixMilli()}.bytes(t))
	now = testNow.Add(48 * time.Hour)
	_, _, err = l.s.Check(pb{pid: 1, seq: 5, txn: true, ts: now.UnixMilli()}.bytes(t))
	require.ErrorIs(t, err, ErrOutOfOrderSequence, "a producer with an open transaction does not expire")
}

// TestMarkerAboveHighWatermarkStaysUnstable is issue 27 case 2, Kafka's
// ProducerStateManager: "An unstable offset is one which is either
// undecided ... or one that is decided, but may not have been replicated
// (i.e. any transaction which has a COMMIT/ABORT marker written at a
// higher offset than the current high watermark)". completeTxn moves the
// transaction to unreplicatedTxns and onHighWatermarkUpdated removes it
// once the high watermark passes the marker; truncateAndReload (Reset)
// clears them. The state used to forget the transaction at its marker.
func TestMarkerAboveHighWatermarkStaysUnstable(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{pid: 1, seq: 0, n: 3, txn: true}.bytes(t))       // 0-2
	_, ok := l.append(l.marker(t, batch.ControlCommit, 1, 0, 0)) // 3
	require.True(t, ok)
	assert.Empty(t, l.s.OpenTxns(), "the transaction is decided")
	first, ok := l.s.FirstUnstable()
	require.True(t, ok, "the marker at 3 is not below the high watermark")
	assert.Equal(t, int64(0), first)

	l.s.SetHighWatermark(3) // the marker at 3 is not below it
	first, ok = l.s.FirstUnstable()
	require.True(t, ok)
	assert.Equal(t, int64(0), first)

	// A second transaction, open, begins after the first: the older
	// (unreplicated) one still bounds.
	l.append(pb{pid: 2, seq: 0, txn: true}.bytes(t)) // 4
	first, _ = l.s.FirstUnstable()
	assert.Equal(t, int64(0), first)

	l.s.SetHighWatermark(4) // passes the marker at 3
	first, ok = l.s.FirstUnstable()
	require.True(t, ok)
	assert.Equal(t, int64(4), first, "now the open transaction of producer 2 bounds")
	l.s.SetHighWatermark(2) // a lower high watermark brings nothing back
	first, _ = l.s.FirstUnstable()
	assert.Equal(t, int64(4), first)

	_, ok = l.append(l.marker(t, batch.ControlAbort, 2, 0, 0)) // 5
	require.True(t, ok)
	first, ok = l.s.FirstUnstable()
	require.True(t, ok)
	assert.Equal(t, int64(4), first)
	l.s.Reset()
	_, ok = l.s.FirstUnstable()
	assert.False(t, ok, "Reset forgets the unreplicated transactions")
}

// TestApplyAndCheckZeroAllocs backs log's zero-allocation append claim for
// a known producer's next batch: Check and Apply allocate nothing.
func TestApplyAndCheckZeroAllocs(t *testing.T) {
	l := newLog(Config{Expiration: time.Hour})
	bts := make([]batch.Batch, 200)
	for i := range bts {
		bts[i] = pb{seq: int32(i)}.bytes(t)
	}
	l.append(bts[0])
	i := 1
	allocs := testing.AllocsPerRun(100, func() {
		bt := bts[i]
		if _, _, err := l.s.Check(bt); err != nil {
			t.Fatal(err)
		}
		l.append(bt)
		i++
	})
	assert.Zero(t, allocs)
}

// TestUnreadableMarkerEndsNothing: a control batch whose record does not
// decode (a follower checks only a batch's header and CRC) is not known to
// be a transaction marker: like one whose record is not a marker, or one
// compaction emptied, it ends no transaction and changes no producer. It
// used to end the open transaction as a COMMIT.
func TestUnreadableMarkerEndsNothing(t *testing.T) {
	l := newLog(Config{})
	l.append(pb{pid: 1, epoch: 4, seq: 0, txn: true}.bytes(t))
	before := l.s.Producers()
	m := l.marker(t, batch.ControlAbort, 1, 5, 7)
	// The record's length varint claims more bytes than the batch holds;
	// the CRC is made to match.
	m[batch.HeaderSize] = 0x7e
	m.SetCRC()
	require.NoError(t, m.ValidateHeader())
	var dec batch.Decoder
	for _, err := range m.All(&dec) {
		require.Error(t, err, "the record must not decode")
	}
	_, ok := l.append(m)
	assert.False(t, ok)
	assert.Equal(t, before, l.s.Producers())
	assert.Equal(t, []OpenTxn{{ProducerID: 1, FirstOffset: 0, StartTimestamp: testNow.UnixMilli()}}, l.s.OpenTxns())
}
