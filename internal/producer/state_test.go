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

	// Producer 2 commits at 4: nothing open, the LSO is past the marker.
	ended, ok = l.append(l.marker(t, batch.ControlCommit, 2, 0, 0))
	require.True(t, ok)
	assert.Equal(t, EndedTxn{ProducerID: 2, FirstOffset: 1, MarkerOffset: 4, LastStableOffset: 5}, ended)
	_, ok = l.s.FirstUnstable()
	assert.False(t, ok)
	assert.Empty(t, l.s.OpenTxns())

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
	assert.Len(t, l.s.Producers(), 3)

	assert.Equal(t, 1, l.s.Expire())
	_, ok := l.s.Producer(1)
	assert.False(t, ok, "idle for two hours, expiration one hour")
	_, ok = l.s.Producer(2)
	assert.True(t, ok, "an open transaction keeps its producer")

	// A new producer sweeps once SweepEvery passed since the last sweep.
	now = now.Add(2 * time.Hour) // producer 3 is idle now too
	l.append(pb{pid: 4, seq: 0, ts: now.UnixMilli()}.bytes(t))
	_, ok = l.s.Producer(3)
	assert.False(t, ok, "swept when producer 4 appeared")
	// Replay adds a producer without sweeping.
	now = now.Add(2 * time.Hour)
	bt := pb{pid: 5, seq: 0, ts: now.UnixMilli()}.bytes(t)
	bt.SetBaseOffset(l.end)
	l.s.Replay(bt)
	_, ok = l.s.Producer(4)
	assert.True(t, ok, "Replay swept")

	// A known producer's batch never sweeps.
	l.append(pb{pid: 5, seq: 1, ts: now.UnixMilli()}.bytes(t))
	_, ok = l.s.Producer(4)
	assert.True(t, ok)

	// Without an expiration nothing expires.
	forever := newLog(Config{Now: clock})
	forever.append(pb{pid: 1, seq: 0, ts: 1}.bytes(t))
	assert.Zero(t, forever.s.Expire())
	assert.Len(t, forever.s.Producers(), 1)
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
