package compaction

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// txnLog appends transactional data and markers to a testLog through the
// path a follower or a transaction coordinator takes (AppendAssigned):
// offsets assigned here, the log end.
type txnLog struct {
	t   testing.TB
	l   *testLog
	ts  int64
	seq map[int64]int32
}

func newTxnLog(t testing.TB, ts int64) *txnLog {
	l, _ := newMemLog(t, 1<<20)
	return &txnLog{t: t, l: l, ts: ts, seq: map[int64]int32{}}
}

// data appends one batch of pid (transactional when txn) holding recs;
// it returns the batch's base offset.
func (x *txnLog) data(pid int64, txn bool, recs ...kv) int64 {
	x.t.Helper()
	base := x.l.LogEndOffset()
	opts := batch.BuilderOptions{BaseOffset: base, Transactional: txn}
	if pid >= 0 {
		opts.Producer = &batch.Producer{ID: pid, BaseSequence: x.seq[pid]}
		x.seq[pid] += int32(len(recs))
	}
	bld := batch.NewBuilder(opts)
	for _, r := range recs {
		if r.ts == 0 {
			r.ts = x.ts
		}
		require.NoError(x.t, bld.Add(batch.Record{Key: r.key, Value: r.value, Timestamp: r.ts}))
	}
	b, err := bld.AppendTo(nil)
	require.NoError(x.t, err)
	_, err = x.l.AppendAssigned(b)
	require.NoError(x.t, err)
	return base
}

// marker appends pid's COMMIT or ABORT marker; it returns its offset.
func (x *txnLog) marker(pid int64, typ batch.ControlType) int64 {
	x.t.Helper()
	base := x.l.LogEndOffset()
	b, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: typ, ProducerID: pid, BaseOffset: base, Timestamp: x.ts})
	require.NoError(x.t, err)
	_, err = x.l.AppendAssigned(b)
	require.NoError(x.t, err)
	return base
}

// markers returns the offsets of the log's control batches and whether
// each carries a delete horizon.
func markers(t testing.TB, l *testLog) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	for base, b := range rawBatches(t, l) {
		if b.Attributes().IsControl() {
			out[base] = b.Attributes().HasDeleteHorizon()
		}
	}
	return out
}

// TestAbortedNeverShadowsCommitted (issue 11): key K committed, then K
// written again in a transaction that aborted, roll, compact. The cleaner
// mapped the aborted record as K's latest, so it removed the committed one
// and kept the aborted one: a read_committed consumer lost K. Aborted
// batches now map nothing and are dropped; the committed values stay.
func TestAbortedNeverShadowsCommitted(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	x := newTxnLog(t, now.UnixMilli()-1000)
	x.data(7, true, kv{key: k("K"), value: k("committed")}, kv{key: k("A"), value: k("a1")})
	x.marker(7, batch.ControlCommit)
	aborted := x.data(7, true, kv{key: k("K"), value: k("aborted")}, kv{key: k("A"), value: k("a-aborted")})
	x.marker(7, batch.ControlAbort)
	x.data(-1, false, kv{key: k("B"), value: k("b1")})
	x.data(-1, false, kv{key: k("B"), value: k("b2")})
	require.NoError(t, x.l.roll())

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	got := map[string]string{}
	for _, r := range x.l.readAll(t) {
		assert.NotEqual(t, aborted, r.Offset, "an aborted record survived: %+v", r)
		assert.NotEqual(t, aborted+1, r.Offset, "an aborted record survived: %+v", r)
		got[r.Key] = r.Value
	}
	assert.Equal(t, map[string]string{"K": "committed", "A": "a1", "B": "b2"}, got)
	require.NoError(t, x.l.Verify())
}

// TestOpenTransactionBoundsCleaning: nothing at or past the last stable
// offset (the first offset of the oldest open transaction) is cleaned, even
// below the high watermark: the section stops at the segment holding it.
func TestOpenTransactionBoundsCleaning(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	x := newTxnLog(t, now.UnixMilli()-1000)
	for i := range 3 {
		x.data(-1, false, kv{key: k("K"), value: k(fmt.Sprint("v", i))})
	}
	require.NoError(t, x.l.roll())
	open := x.data(9, true, kv{key: k("T"), value: k("open")}) // no marker yet
	require.NoError(t, x.l.roll())
	for i := 3; i < 6; i++ {
		x.data(-1, false, kv{key: k("K"), value: k(fmt.Sprint("v", i))})
	}
	require.NoError(t, x.l.roll())

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	assert.Equal(t, open, res.CleanedTo, "cleaned past the last stable offset")
	var offs []int64
	for _, r := range x.l.readAll(t) {
		offs = append(offs, r.Offset)
	}
	// Below the open transaction: only K's latest there (v2 at 2) stays;
	// from it on, everything.
	assert.Equal(t, []int64{2, 3, 4, 5, 6}, offs)

	// Once the transaction commits, the rest is cleanable.
	x.marker(9, batch.ControlCommit)
	x.data(-1, false, kv{key: k("Z"), value: k("z")})
	require.NoError(t, x.l.roll())
	res, err = c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	got := map[string]string{}
	for _, r := range x.l.readAll(t) {
		got[r.Key] = r.Value
	}
	assert.Equal(t, map[string]string{"K": "v5", "T": "open", "Z": "z"}, got)
}

// TestOpenTransactionBelowLogStartBoundsCleaning: a transaction still open
// while its data lies below the log start (DeleteRecordsBefore removed the
// segment holding it; it is bounded by the high watermark only, as in
// Kafka) keeps the last stable offset at the log start, although no batch
// header of the log shows the transaction: a round cleans nothing (law
// 11). It used to clean up to the high watermark, from the headers alone.
func TestOpenTransactionBelowLogStartBoundsCleaning(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	x := newTxnLog(t, now.UnixMilli()-1000)
	open := x.data(9, true, kv{key: k("T"), value: k("open")}) // 0, no marker
	require.NoError(t, x.l.roll())
	for i := range 5 {
		x.data(-1, false, kv{key: k("K"), value: k(fmt.Sprint("v", i))}) // 1-5
		if i == 2 {
			require.NoError(t, x.l.roll())
		}
	}
	require.NoError(t, x.l.roll())
	require.Equal(t, open, x.l.LastStableOffset())
	require.NoError(t, x.l.DeleteRecordsBefore(1))
	require.Equal(t, int64(1), x.l.LastStableOffset(), "the log start")

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	assert.False(t, res.Compacted, "%+v", res)
	var offs []int64
	for _, r := range x.l.readAll(t) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, offs)
}

// TestMarkerRemovedAfterHorizon (KIP-534): an aborted transaction's data
// goes in the first round, its marker stays; the next round finds the
// transaction's data gone and stamps the marker's batch with a delete
// horizon; the first round past the horizon removes it. A commit marker
// stays while its transaction's records are in the log.
func TestMarkerRemovedAfterHorizon(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	// The producers wrote two days ago: they have expired (1 day), so
	// nothing keeps their last data batches as empty headers, and the
	// aborted batch can go whole.
	x := newTxnLog(t, now.Add(-48*time.Hour).UnixMilli())
	x.data(7, true, kv{key: k("A"), value: k("aborted")})
	abort := x.marker(7, batch.ControlAbort)
	x.data(8, true, kv{key: k("C"), value: k("committed")})
	commit := x.marker(8, batch.ControlCommit)
	x.ts = now.UnixMilli() - 1000
	dirty := func(v string) {
		t.Helper()
		x.data(-1, false, kv{key: k("D"), value: k(v)})
		x.data(-1, false, kv{key: k("D"), value: k(v + "'")})
		require.NoError(t, x.l.roll())
	}
	dirty("1")
	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	round := func() {
		t.Helper()
		res, err := c.Apply(context.Background(), x.l)
		require.NoError(t, err)
		require.True(t, res.Compacted, "%+v", res)
	}

	round()
	assert.Equal(t, map[int64]bool{abort: false, commit: false}, markers(t, x.l), "round 1: data dropped, markers kept as they were")
	_, ok := rawBatches(t, x.l)[0]
	assert.False(t, ok, "round 1: the aborted batch stayed")

	dirty("2")
	round()
	assert.Equal(t, map[int64]bool{abort: true, commit: false}, markers(t, x.l), "round 2: the abort marker's data is gone: horizon stamped")

	now = now.Add(30 * time.Minute) // before the horizon (compactCfg: 1 hour)
	dirty("3")
	round()
	assert.Equal(t, map[int64]bool{abort: true, commit: false}, markers(t, x.l), "before the horizon the marker stays")

	now = now.Add(time.Hour)
	dirty("4")
	round()
	assert.Equal(t, map[int64]bool{commit: false}, markers(t, x.l), "after the horizon the abort marker goes; the commit marker's record stays, so does it")
	got := map[string]string{}
	for _, r := range x.l.readAll(t) {
		got[r.Key] = r.Value
	}
	assert.Equal(t, map[string]string{"C": "committed", "D": "4'"}, got)
	require.NoError(t, x.l.Verify())
}

// TestCompactionKeepsLastDataBatchOfTransactionalProducer is the
// Kafka-semantics issue's third case: a live transactional producer whose
// last data batch compaction empties keeps that batch as an empty header,
// even though its COMMIT marker comes after it (Kafka's cleaner keeps the
// batch whose last offset is the producer's lastDataOffset, markers
// excluded: LogCleaner.isBatchLastRecordOfProducer, RETAIN_EMPTY). On
// 86b910c the marker counted as the producer's last batch, the data batch
// went, and a replica rebuilt from the compacted log knew the producer's
// epoch but not its sequence, so it refused the producer's next batch.
func TestCompactionKeepsLastDataBatchOfTransactionalProducer(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	x := newTxnLog(t, now.UnixMilli()-1000)
	last := x.data(7, true, kv{key: k("K"), value: k("old")})
	x.marker(7, batch.ControlCommit)
	x.data(-1, false, kv{key: k("K"), value: k("new")}) // K's latest: 7's record goes
	require.NoError(t, x.l.roll())

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	kept, ok := rawBatches(t, x.l)[last]
	require.True(t, ok, "the producer's last data batch is gone")
	assert.Equal(t, int32(0), kept.RecordsCount(), "kept as an empty header")
	assert.Equal(t, int64(7), kept.ProducerID())
	assert.Equal(t, int32(0), kept.BaseSequence())
	got := map[string]string{}
	for _, r := range x.l.readAll(t) {
		got[r.Key] = r.Value
	}
	assert.Equal(t, map[string]string{"K": "new"}, got)
	require.NoError(t, x.l.Verify())
}

// TestMarkerWithoutTransactionalBitEndsTransaction: a follower's log may
// hold a transaction marker (a control batch of a producer) whose
// transactional attribute bit is clear. The partition's producer state
// takes it as the marker it is, as Kafka's does (ProducerAppendInfo looks
// at the control bit), so the last stable offset moves past the
// transaction; so does a round: the aborted data goes and what follows is
// cleaned. The round's header scan used to skip the batch for its missing
// bit, took the transaction for one still open, and cleaned nothing at or
// past its first offset, round after round.
func TestMarkerWithoutTransactionalBitEndsTransaction(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	x := newTxnLog(t, now.UnixMilli()-1000)
	aborted := x.data(7, true, kv{key: k("A"), value: k("aborted")})
	base := x.l.LogEndOffset()
	ctl, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 7, BaseOffset: base, Timestamp: x.ts})
	require.NoError(t, err)
	cb := batch.Batch(ctl)
	attrs := binary.BigEndian.Uint16(cb[21:]) // attributes
	binary.BigEndian.PutUint16(cb[21:], attrs&^(1<<4))
	cb.SetCRC()
	require.False(t, cb.Attributes().IsTransactional())
	_, err = x.l.AppendAssigned(cb)
	require.NoError(t, err)
	for i := range 3 {
		x.data(-1, false, kv{key: k("K"), value: k(fmt.Sprint("v", i))})
	}
	require.NoError(t, x.l.roll())
	require.Equal(t, x.l.HighWatermark(), x.l.LastStableOffset(), "the partition ended the transaction")

	c, err := NewCompactor(compactCfg(&now))
	require.NoError(t, err)
	res, err := c.Apply(context.Background(), x.l)
	require.NoError(t, err)
	require.True(t, res.Compacted, "%+v", res)
	assert.Greater(t, res.CleanedTo, base, "the round stopped at the ended transaction")
	got := map[string]string{}
	for _, r := range x.l.readAll(t) {
		assert.NotEqual(t, aborted, r.Offset, "the aborted record survived")
		got[r.Key] = r.Value
	}
	assert.Equal(t, map[string]string{"K": "v2"}, got)
}
