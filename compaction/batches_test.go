package compaction

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// rawBatches returns a copy of every v2 batch of the log by base offset
// (legacy messages left out).
func rawBatches(t testing.TB, l *testLog) map[int64]batch.Batch {
	t.Helper()
	out := map[int64]batch.Batch{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rs, err := l.ReadFromFollower(off, 1<<20)
		require.NoError(t, err)
		for b, err := range rs.Batches() {
			if errors.Is(err, plog.ErrLegacyEntry) {
				continue
			}
			require.NoError(t, err)
			out[b.BaseOffset()] = batch.Batch(bytes.Clone(b))
		}
		off = rs.NextOffset()
		require.NoError(t, rs.Close())
	}
	return out
}

func TestRewrittenBatchesKeepHeaders(t *testing.T) {
	l, _ := newMemLog(t, 800)
	now := time.UnixMilli(1_700_000_000_000)
	fillLog(t, l, 20, 5, now.UnixMilli())
	// A batch whose records all stay: copied byte for byte.
	l.append(buildBatch(t, batch.CompressionGzip, nil, kv{key: k("solo1"), value: k("x"), ts: 5}, kv{key: k("solo2"), value: k("y"), ts: 6}))
	l.roll()
	before := rawBatches(t, l)
	c, _ := NewCompactor(compactCfg(&now))
	_, err := c.Apply(context.Background(), l)
	require.NoError(t, err)
	after := rawBatches(t, l)
	verbatim := 0
	for base, nb := range after {
		ob, ok := before[base]
		require.True(t, ok, "batch at %d did not exist", base)
		oh, nh := ob.Header(), nb.Header()
		require.Equal(t, oh.LastOffsetDelta, nh.LastOffsetDelta, "batch %d header changed:\n%+v\n%+v", base, oh, nh)
		require.Equal(t, oh.ProducerID, nh.ProducerID, "batch %d header changed:\n%+v\n%+v", base, oh, nh)
		require.Equal(t, oh.ProducerEpoch, nh.ProducerEpoch, "batch %d header changed:\n%+v\n%+v", base, oh, nh)
		require.Equal(t, oh.BaseSequence, nh.BaseSequence, "batch %d header changed:\n%+v\n%+v", base, oh, nh)
		require.Equal(t, oh.PartitionLeaderEpoch, nh.PartitionLeaderEpoch, "batch %d header changed:\n%+v\n%+v", base, oh, nh)
		if nh.RecordsCount > 0 {
			require.Equal(t, oh.Attributes.Compression(), nh.Attributes.Compression(), "batch %d codec %v -> %v", base, oh.Attributes.Compression(), nh.Attributes.Compression())
		}
		if nh.RecordsCount == oh.RecordsCount && !nh.Attributes.HasDeleteHorizon() {
			require.Equal(t, string(ob), string(nb), "batch %d with nothing removed was not copied verbatim", base)
			verbatim++
		}
	}
	require.NotEqual(t, 0, verbatim, "%d verbatim of %d batches (before %d)", verbatim, len(after), len(before))
	require.Less(t, len(after), len(before), "%d verbatim of %d batches (before %d)", verbatim, len(after), len(before))
}

func TestEmptyBatchKeptForProducer(t *testing.T) {
	l, _ := newMemLog(t, 1<<20)
	now := time.UnixMilli(1_700_000_000_000)
	// Records an hour old: the producers are live (Config.ProducerIDExpiration).
	t1, t2 := now.Add(-time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()+1
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 5, Epoch: 2, BaseSequence: 10}, kv{key: k("a"), value: k("1"), ts: t1}, kv{key: k("b"), value: k("1"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 6, BaseSequence: 0}, kv{key: k("c"), value: k("1"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, &batch.Producer{ID: 6, BaseSequence: 1}, kv{key: k("c"), value: k("2"), ts: t1}))
	l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("a"), value: k("2"), ts: t2}, kv{key: k("b"), value: k("2"), ts: t2}))
	l.append(buildBatch(t, batch.CompressionNone, nil, kv{key: k("z"), value: k("3"), ts: t2}))
	l.roll()
	c, _ := NewCompactor(compactCfg(&now))
	_, err := c.Apply(context.Background(), l)
	require.NoError(t, err)
	got := rawBatches(t, l)
	// pid 5's only (so last) batch lost both records: an empty header stays.
	b5, ok := got[0]
	require.True(t, ok, "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, int32(0), b5.RecordsCount(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, int64(5), b5.ProducerID(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, int16(2), b5.ProducerEpoch(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, int32(10), b5.BaseSequence(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, int32(1), b5.LastOffsetDelta(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.Equal(t, batch.NoTimestamp, b5.BaseTimestamp(), "pid 5's batch: %v %+v", ok, b5.Header())
	require.NoError(t, b5.Validate(), "pid 5's batch: %v %+v", ok, b5.Header())
	// pid 6's first batch is superseded and not its last: gone.
	_, ok = got[2]
	require.False(t, ok, "pid 6's older empty batch kept")
	b, ok := got[3]
	require.True(t, ok, "pid 6's last batch lost")
	require.Equal(t, int32(1), b.RecordsCount(), "pid 6's last batch lost")
}

func TestCompactionReadersKeepReading(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var l *testLog
			if name == "mem" {
				l, _ = newMemLog(t, 600)
			} else {
				l = newOSLog(t, 600)
			}
			now := time.UnixMilli(1_700_000_000_000)
			fillLog(t, l, 12, 4, now.UnixMilli())
			// A read result taken before the round holds the first
			// segment, which the round replaces.
			held, err := l.ReadFromFollower(0, 1<<20)
			require.NoError(t, err)
			want := bytes.Clone(held.Bytes())
			c, _ := NewCompactor(compactCfg(&now))
			res, err := c.Apply(context.Background(), l)
			require.NoError(t, err, "%+v %v", res, err)
			require.True(t, res.Compacted, "%+v %v", res, err)
			require.Less(t, l.SegmentInfos()[0].Size, int64(len(want)), "the first segment was not replaced")
			// The replaced segment still reads its old, valid bytes.
			var got []byte
			for b, err := range held.Batches() {
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				got = append(got, b...)
			}
			require.Equal(t, string(want), string(got), "a reader of a replaced segment saw different bytes")
			require.NoError(t, held.Close())
		})
	}
}
