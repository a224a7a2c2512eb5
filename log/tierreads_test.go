package log_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// tsAnswer is one OffsetForTimestamp answer, or its error.
type tsAnswer struct {
	to    plog.TimestampOffset
	found bool
	err   error
}

// timestampAnswers asks p OffsetForTimestamp (committed or not) for every
// timestamp of tss.
func timestampAnswers(p *plog.Partition, committed bool, tss []int64) []tsAnswer {
	out := make([]tsAnswer, len(tss))
	for i, ts := range tss {
		var a tsAnswer
		if committed {
			a.to, a.found, a.err = p.OffsetForTimestampCommitted(ts)
		} else {
			a.to, a.found, a.err = p.OffsetForTimestamp(ts)
		}
		out[i] = a
	}
	return out
}

// appendTimedBatches appends n batches of one to four records whose
// timestamps go up and down (so that a segment's time index skips some
// batches and the largest timestamp is not in the last segment), with the
// leader epoch rising every 40 batches, and returns every timestamp
// written.
func appendTimedBatches(t *testing.T, p *plog.Partition, n int) []int64 {
	t.Helper()
	var tss []int64
	for i := range n {
		if i%40 == 0 {
			require.NoError(t, p.SetLeaderEpoch(int32(i/40)))
		}
		ts := int64(10_000 + i*20 + (i*7919)%300 - 150)
		if i == n/3 {
			ts = 99_000 // the largest, in a segment that goes remote
		}
		bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
		for j := range 1 + i%4 {
			rts := ts + int64((j*13)%7)
			require.NoError(t, bld.Add(batch.Record{Timestamp: rts, Key: []byte{byte(i)}, Value: []byte("timed")}))
			tss = append(tss, rts)
		}
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
	return tss
}

// TestTierOffsetForTimestampSameAnswers: OffsetForTimestamp and
// OffsetForTimestampCommitted give, for every timestamp written, the ones
// around them, and the sentinels, the same answers after local retention
// moved most segments to the store as when every segment was local; with
// the store down, an answer that needs a copy is an error wrapping
// ErrRemoteUnavailable, never another answer.
func TestTierOffsetForTimestampSameAnswers(t *testing.T) {
	mem := vfs.NewMem()
	st := &flakyStore{RemoteStorage: plog.NewDirRemoteStorage("/remote", mem)}
	cfg := tierDirConfig(mem, st)
	cfg.Config.StampLeaderEpoch = true
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	written := appendTimedBatches(t, p, 160)
	require.Greater(t, p.Stats().Segments, 8)

	tss := []int64{0, 1, 9_000, 99_000, 99_001, 1 << 40, plog.EarliestTimestamp, plog.MaxTimestamp, plog.LatestTimestamp}
	for _, ts := range written {
		tss = append(tss, ts-1, ts, ts+1)
	}
	wantAll := timestampAnswers(p, false, tss)
	wantCommitted := timestampAnswers(p, true, tss)
	for i, a := range wantAll {
		require.NoError(t, a.err, "all local: ts %d", tss[i])
	}

	d.RunTierPass()
	start := p.LogStartOffset()
	require.Greater(t, start, int64(200), "local retention moved segments to the store")
	require.Equal(t, int64(0), p.Stats().Remote.LogStartOffset)
	assert.Equal(t, wantAll, timestampAnswers(p, false, tss), "OffsetForTimestamp across the tiers")
	assert.Equal(t, wantCommitted, timestampAnswers(p, true, tss), "OffsetForTimestampCommitted across the tiers")

	// Nothing cached: every answer from a copy fetches.
	require.NoError(t, d.Close())
	st.down.Store(true)
	cfg.Remote.CacheBytes = 1
	d, err = plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p = d.Partition("t", 0)
	failed := 0
	for i, got := range timestampAnswers(p, false, tss) {
		if got.err != nil {
			require.ErrorIs(t, got.err, plog.ErrRemoteUnavailable, "store down: ts %d", tss[i])
			failed++
			continue
		}
		require.Equal(t, wantAll[i], got, "store down: ts %d", tss[i])
	}
	assert.Positive(t, failed, "answers that need a copy fail")
	earliest, found, err := p.OffsetForTimestamp(plog.EarliestTimestamp)
	require.NoError(t, err, "the earliest offset is in the metadata")
	assert.True(t, found)
	assert.Equal(t, int64(0), earliest.Offset)
	local, found, err := p.OffsetForTimestamp(plog.EarliestLocalTimestamp)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Positive(t, p.LogStartOffset(), "local retention moved the local start")
	assert.Equal(t, p.LogStartOffset(), local.Offset, "EarliestLocal is the local start")
	st.down.Store(false)
	assert.Equal(t, wantAll, timestampAnswers(p, false, tss), "once the store is back")
}

// readCommittedAt is one ReadCommitted result: the bytes, the next offset
// and the aborted transactions.
type readCommittedAt struct {
	b       []byte
	next    int64
	aborted []plog.AbortedTxn
}

// readCommittedEach reads read_committed at every offset of [from, to)
// with maxBytes and returns the results.
func readCommittedEach(t *testing.T, p *plog.Partition, from, to int64, maxBytes int) []readCommittedAt {
	t.Helper()
	var out []readCommittedAt
	for off := from; off < to; off++ {
		r, ab, err := p.ReadCommitted(off, maxBytes)
		require.NoError(t, err, "ReadCommitted %d", off)
		out = append(out, readCommittedAt{b: append([]byte(nil), r.Bytes()...), next: r.NextOffset(), aborted: ab})
		require.NoError(t, r.Close())
	}
	return out
}

// TestTierReadCommittedAbortedFromCopies: ReadCommitted at every offset
// below the local log start returns the records and the aborted
// transactions that overlap them, from the copies' transaction indexes,
// exactly as it did when the segments were local, also after a restart
// (when no local segment holds an aborted transaction any more).
func TestTierReadCommittedAbortedFromCopies(t *testing.T) {
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	cfg := tierDirConfig(mem, st)
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer func() { _ = d.Close() }()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	// Two transactional producers whose transactions overlap and span
	// segments; every third transaction of each is aborted.
	seq := map[int64]int32{}
	for round := range 24 {
		for _, pid := range []int64{7, 8} {
			for range 2 + (round+int(pid))%3 {
				_, err := p.AppendBatch(txnBatch(t, pid, 0, seq[pid], 2))
				require.NoError(t, err)
				seq[pid] += 2
			}
		}
		for _, pid := range []int64{8, 7} {
			typ := batch.ControlCommit
			if (round+int(pid))%3 == 0 {
				typ = batch.ControlAbort
			}
			_, err := p.AppendMarker(marker(typ, pid, 0, 0))
			require.NoError(t, err)
		}
	}
	_, err = p.AppendBatch(txnBatch(t, 7, 0, seq[7], 1)) // open: the last stable offset stays before it
	require.NoError(t, err)
	lso := p.LastStableOffset()
	require.Less(t, lso, p.HighWatermark())
	require.Greater(t, p.Stats().Segments, 6)
	_, allAborted := readCommittedAll(t, p, 0)
	require.Greater(t, len(allAborted), 8)

	type tc struct {
		name     string
		maxBytes int
	}
	cases := []tc{{"one batch", 0}, {"200 bytes", 200}, {"a segment", 1 << 20}}
	want := map[string][]readCommittedAt{}
	for _, c := range cases {
		want[c.name] = readCommittedEach(t, p, 0, lso, c.maxBytes)
	}

	d.RunTierPass()
	start := p.LogStartOffset()
	require.Greater(t, start, lso/2, "local retention moved most segments to the store")
	check := func(when string) {
		for _, c := range cases {
			got := readCommittedEach(t, p, 0, lso, c.maxBytes)
			for i := range got {
				require.Equal(t, want[c.name][i], got[i], "%s, %s: ReadCommitted(%d)", when, c.name, i)
			}
		}
		_, aborted := readCommittedAll(t, p, 0)
		assert.Equal(t, allAborted, aborted, "%s: the aborted transactions reported from 0", when)
	}
	check("after local retention")

	require.NoError(t, d.Close())
	d, err = plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	p = d.Partition("t", 0)
	require.Equal(t, start, p.LogStartOffset())
	check("after a restart")
}

// TestTierOffsetForTimestampLegacyCopy: a copy of a segment holding
// legacy messages answers time lookups as the local segment did: the
// copy's time index counts the legacy messages' timestamps too (without
// them, a lookup skips a magic 1 message newer than the v2 batches after
// it).
func TestTierOffsetForTimestampLegacyCopy(t *testing.T) {
	v2 := func(base, ts int64) []byte {
		b := logtest.MakeBatch(1, 5, ts, byte(base))
		batch.Batch(b).SetBaseOffset(base)
		return b
	}
	cases := []struct {
		name string
		set  func(t *testing.T) []byte
	}{
		{"mixed-0 fixture", func(t *testing.T) []byte {
			return logFiles(t, copyFixtureFrom(t, "legacy", "mixed-0"))["00000000000000000000.log"]
		}},
		{"v1 newer than the v2 after it", func(t *testing.T) []byte {
			return slices.Concat(legacyMessage(0, legacy.MagicV1, 5000, "a", "1"), v2(1, 1000), v2(2, 2000),
				legacyMessage(3, legacy.MagicV1, 1500, "b", "2"), v2(4, 3000))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := c.set(t)
			recs := recordTimes(t, set)
			end := recs[len(recs)-1][0] + 1
			root := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "t-0"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "t-0", "00000000000000000000.log"), set, 0o644))
			cfg := tierDirConfig(vfs.Default, plog.NewDirRemoteStorage(filepath.Join(t.TempDir(), "remote"), nil))
			cfg.Config.SegmentBytes = int64(len(set)) // the next append rolls
			cfg.Config.IndexIntervalBytes = 1         // an offset index entry per batch
			d, err := plog.OpenDir(root, cfg)
			require.NoError(t, err)
			defer d.Close()
			p := d.Partition("t", 0)
			require.NotNil(t, p)
			require.Equal(t, end, p.LogEndOffset())
			_, err = p.AppendBatch(logtest.MakeBatch(1, 10, 1, 1))
			require.NoError(t, err)
			tss := []int64{plog.MaxTimestamp}
			for _, r := range recs {
				tss = append(tss, r[1]-1, r[1], r[1]+1)
			}
			want := timestampAnswers(p, false, tss)

			d.RunTierPass()
			require.Equal(t, end, p.LogStartOffset(), "the legacy segment went to the store")
			assert.Equal(t, want, timestampAnswers(p, false, tss))
		})
	}
}
