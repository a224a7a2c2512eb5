package log_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/invariants"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// builderCase is a Builder made from options and records, for the
// AppendBuilder tables.
type builderCase struct {
	opts batch.BuilderOptions
	recs []batch.Record // Offset is the offset delta
	last int32          // SetLastOffsetDelta when > 0
}

func (c builderCase) builder(t failer) *batch.Builder {
	t.Helper()
	bld := batch.NewBuilder(c.opts)
	for _, r := range c.recs {
		r.Offset += c.opts.BaseOffset // recs hold offset deltas
		require.NoError(t, bld.AddAt(r))
	}
	if c.last > 0 {
		require.NoError(t, bld.SetLastOffsetDelta(c.last))
	}
	return bld
}

// recsAt returns n records with timestamps ts, ts+step, ... at offsets 0..n-1.
func recsAt(n int, ts, step int64, value []byte) []batch.Record {
	out := make([]batch.Record, n)
	for i := range out {
		out[i] = batch.Record{Offset: int64(i), Timestamp: ts + int64(i)*step, Key: []byte{byte(i)}, Value: value}
	}
	return out
}

// twinAppend appends c to a through AppendBatchInfo(Build()) and to b
// through AppendBuilder, and requires the same outcome: the same info,
// the same error text (so the same sentinels), and on error no change.
func twinAppend(t failer, a, b *plog.Partition, c builderCase) error {
	t.Helper()
	bld := c.builder(t)
	built, err := bld.Build()
	require.NoError(t, err)
	endA, endB := a.LogEndOffset(), b.LogEndOffset()
	wantInfo, wantErr := a.AppendBatchInfo(built)
	info, err := b.AppendBuilder(bld)
	require.Equal(t, wantInfo, info)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		require.Equal(t, endA, a.LogEndOffset())
		require.Equal(t, endB, b.LogEndOffset(), "a refused batch changes nothing")
	} else {
		require.NoError(t, err)
	}
	after, err := bld.Build()
	require.NoError(t, err)
	require.Equal(t, []byte(built), []byte(after), "AppendBuilder leaves the Builder as it was")
	return wantErr
}

// requireSameLogs requires a and b to hold byte-identical batches.
func requireSameLogs(t failer, a, b *plog.Partition) {
	t.Helper()
	sa, sb := storedBatches(t, a), storedBatches(t, b)
	require.Equal(t, len(sa), len(sb))
	for i := range sa {
		require.True(t, bytes.Equal(sa[i], sb[i]), "batch %d differs:\n%x\n%x", i, []byte(sa[i]), []byte(sb[i]))
	}
	require.NoError(t, b.Verify())
}

// TestAppendBuilderSameAsAppendBatch: every Builder AppendBatch refuses
// (a form a producer may not send, a size or timestamp limit, a producer
// or transaction rule) gets the same error through AppendBuilder and
// changes nothing, and every one it accepts is stored byte for byte as
// AppendBatch stores it, on each partition configuration that changes
// what is stored.
func TestAppendBuilderSameAsAppendBatch(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	ms := now.UnixMilli()
	const hour = int64(3_600_000)
	v := bytes.Repeat([]byte("v"), 20)
	prod := func(id int64, epoch int16, seq int32) *batch.Producer {
		return &batch.Producer{ID: id, Epoch: epoch, BaseSequence: seq}
	}
	plain := func(n int) builderCase { return builderCase{recs: recsAt(n, ms, 1, v)} }
	cases := []struct {
		name  string
		cfg   plog.Config
		prior []builderCase // appended first, each must be accepted
		c     builderCase
		bad   bool
	}{
		{name: "plain", c: plain(5)},
		{name: "plain, producer's leader epoch and base offset ignored", c: builderCase{opts: batch.BuilderOptions{BaseOffset: 77, PartitionLeaderEpoch: 9}, recs: recsAt(3, ms, 1, v)}},
		{name: "stamped leader epoch", cfg: plog.Config{StampLeaderEpoch: true, LeaderEpoch: 3}, c: plain(4)},
		{name: "LogAppendTime partition", cfg: plog.Config{LogAppendTime: true}, c: plain(4)},
		{name: "LogAppendTime partition ignores the limits", cfg: plog.Config{LogAppendTime: true, MessageTimestampBeforeMax: time.Millisecond}, c: builderCase{recs: recsAt(2, ms+100*hour, 1, v)}},
		{name: "records out of time order", c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: ms}, {Offset: 1, Timestamp: ms - 5}, {Offset: 2, Timestamp: ms - 2}}}},
		{name: "only -1 timestamps", c: builderCase{recs: recsAt(3, -1, 0, v)}},
		{name: "negative timestamps", c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: -5}, {Offset: 1, Timestamp: -3}}}},
		{name: "-1 among timestamps", cfg: plog.Config{MessageTimestampBeforeMax: time.Hour}, c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: -1}, {Offset: 1, Timestamp: ms}, {Offset: 2, Timestamp: -1}}}},
		{name: "extreme timestamps", cfg: plog.Config{MessageTimestampAfterMax: plog.NoTimestampLimit}, c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: math.MaxInt64}, {Offset: 1, Timestamp: math.MinInt64}}}},
		{name: "headers and null key and value", c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: ms, Headers: []batch.RecordHeader{{Key: []byte("h"), Value: nil}, {Key: nil, Value: []byte("x")}}}}}},
		{name: "record attributes", c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: ms, Attributes: 0x7f, Value: v}}}},
		{name: "zstd", c: builderCase{opts: batch.BuilderOptions{Compression: batch.CompressionZstd}, recs: recsAt(20, ms, 1, v)}},
		{name: "gzip on a LogAppendTime partition", cfg: plog.Config{LogAppendTime: true}, c: builderCase{opts: batch.BuilderOptions{Compression: batch.CompressionGzip}, recs: recsAt(20, ms, 1, v)}},
		{name: "idempotent producer", c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 0, 0)}, recs: recsAt(3, ms, 1, v)}},
		{name: "transactional producer", c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 0, 0), Transactional: true}, recs: recsAt(3, ms, 1, v)}},
		{name: "duplicate", prior: []builderCase{{opts: batch.BuilderOptions{Producer: prod(7, 0, 0)}, recs: recsAt(3, ms, 1, v)}},
			c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 0, 0)}, recs: recsAt(3, ms, 1, v)}},

		{name: "no records", c: builderCase{}, bad: true},
		{name: "count below lastOffsetDelta+1", c: builderCase{recs: recsAt(3, ms, 1, v), last: 9}, bad: true},
		{name: "offset gap", c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: ms}, {Offset: 2, Timestamp: ms}}}, bad: true},
		{name: "control batch", c: builderCase{opts: batch.BuilderOptions{Control: true, Producer: prod(1, 0, -1)}, recs: []batch.Record{{Offset: 0, Timestamp: ms, Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 3}}}}, bad: true},
		{name: "delete horizon", c: builderCase{opts: batch.BuilderOptions{DeleteHorizon: ms}, recs: recsAt(2, ms, 1, v)}},
		{name: "LogAppendTime bit from a producer", c: builderCase{opts: batch.BuilderOptions{LogAppendTime: true, AppendTime: ms}, recs: recsAt(2, ms, 1, v)}, bad: true},
		{name: "over max.message.bytes", cfg: plog.Config{MaxMessageBytes: 200}, c: plain(10), bad: true},
		{name: "zstd over max.message.bytes", cfg: plog.Config{MaxMessageBytes: 100}, c: builderCase{opts: batch.BuilderOptions{Compression: batch.CompressionZstd}, recs: recsAt(20, ms, 1, v)}, bad: true},
		{name: "over segment.bytes", cfg: plog.Config{SegmentBytes: 300}, c: plain(20), bad: true},
		{name: "an hour and 1 ms ahead", c: builderCase{recs: recsAt(1, ms+hour+1, 1, v)}, bad: true},
		{name: "exactly an hour ahead", c: builderCase{recs: recsAt(1, ms+hour, 1, v)}},
		{name: "2 hours old, before limit 1 hour", cfg: plog.Config{MessageTimestampBeforeMax: time.Hour}, c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: ms - 2*hour}, {Offset: 1, Timestamp: ms}}}, bad: true},
		{name: "-5 is a timestamp, before limit 1 hour", cfg: plog.Config{MessageTimestampBeforeMax: time.Hour}, c: builderCase{recs: []batch.Record{{Offset: 0, Timestamp: -5}, {Offset: 1, Timestamp: ms}}}, bad: true},
		{name: "sequence gap", prior: []builderCase{{opts: batch.BuilderOptions{Producer: prod(7, 0, 0)}, recs: recsAt(3, ms, 1, v)}},
			c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 0, 5)}, recs: recsAt(3, ms, 1, v)}, bad: true},
		{name: "new epoch not at sequence 0", prior: []builderCase{{opts: batch.BuilderOptions{Producer: prod(7, 0, 0)}, recs: recsAt(3, ms, 1, v)}},
			c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 1, 3)}, recs: recsAt(3, ms, 1, v)}, bad: true},
		{name: "stale epoch", prior: []builderCase{{opts: batch.BuilderOptions{Producer: prod(7, 2, 0)}, recs: recsAt(3, ms, 1, v)}},
			c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 1, 0)}, recs: recsAt(3, ms, 1, v)}, bad: true},
		{name: "negative sequence with a producer id", c: builderCase{opts: batch.BuilderOptions{Producer: prod(7, 0, -5)}, recs: recsAt(3, ms, 1, v)}, bad: true},
		{name: "transactional without a producer id", c: builderCase{opts: batch.BuilderOptions{Transactional: true}, recs: recsAt(3, ms, 1, v)}},
	}
	names := map[string]bool{}
	for _, tc := range cases {
		require.False(t, names[tc.name], "duplicate case %q", tc.name)
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Now = func() time.Time { return now }
			a, _ := openT(t, cfg)
			b, _ := openT(t, cfg)
			first := builderCase{recs: recsAt(1, ms, 1, nil)} // small: under every limit here
			for _, c := range append([]builderCase{first}, tc.prior...) {
				require.NoError(t, twinAppend(t, a, b, c))
			}
			err := twinAppend(t, a, b, tc.c)
			require.Equal(t, tc.bad, err != nil, "AppendBatch's verdict: %v", err)
			requireSameLogs(t, a, b)
			// The next batch gets the base the refused one would have had.
			require.NoError(t, twinAppend(t, a, b, plain(1)))
			requireSameLogs(t, a, b)
		})
	}
}

// TestAppendBuilderBuildErrors: what the Builder itself refuses to encode
// is ErrInvalidBatch (or ErrBatchTooLarge) wrapping the Builder's error,
// and nothing is written; a nil Builder is ErrInvalidBatch.
func TestAppendBuilderBuildErrors(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1_700_000_000_000, 0))
	require.NoError(t, err)
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionGzip, CompressionLevel: 42})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: 1_700_000_000_000}))
	info, err := p.AppendBuilder(bld)
	require.ErrorIs(t, err, plog.ErrInvalidBatch)
	require.ErrorIs(t, err, batch.ErrBadCompression)
	require.Equal(t, plog.AppendInfo{Base: -1, LastOffset: -1}, info)
	info, err = p.AppendBuilder(nil)
	require.ErrorIs(t, err, plog.ErrInvalidBatch)
	require.Equal(t, plog.AppendInfo{Base: -1, LastOffset: -1}, info)
	require.Equal(t, int64(2), p.LogEndOffset())
	require.Len(t, storedBatches(t, p), 1)
}

// TestAppendBuilderZeroAllocs: appending an uncompressed Builder's batch
// allocates nothing, on the plain path and when the partition patches the
// header (LogAppendTime, stamped epoch).
func TestAppendBuilderZeroAllocs(t *testing.T) {
	if invariants.Enabled || testing.CoverMode() != "" {
		t.Skip("invariants builds do not pool Records")
	}
	for _, tc := range []struct {
		name string
		cfg  plog.Config
	}{
		{"plain", plog.Config{}},
		{"LogAppendTime", plog.Config{LogAppendTime: true}},
		{"stamped epoch", plog.Config{StampLeaderEpoch: true, LeaderEpoch: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openT(t, tc.cfg)
			bld := builderCase{recs: recsAt(100, 1_700_000_000_000, 0, bytes.Repeat([]byte("x"), 100))}.builder(t)
			_, err := p.AppendBuilder(bld)
			require.NoError(t, err)
			allocs := testing.AllocsPerRun(100, func() {
				_, err := p.AppendBuilder(bld)
				require.NoError(t, err)
			})
			require.Equal(t, 0.0, allocs)
		})
	}
	t.Run("one record stamped by Add", func(t *testing.T) {
		p, _ := openT(t, plog.Config{})
		bld := batch.NewBuilder(batch.BuilderOptions{})
		val := bytes.Repeat([]byte("x"), 100)
		allocs := testing.AllocsPerRun(100, func() {
			bld.Reset(batch.BuilderOptions{})
			require.NoError(t, bld.Add(batch.Record{Value: val}))
			_, err := p.AppendBuilder(bld)
			require.NoError(t, err)
		})
		require.Equal(t, 0.0, allocs)
	})
}

// TestAppendBuilderClockRead: AppendBuilder takes the Builder's clock
// reading (Builder.ClockRead) for its own only where the timestamp bounds
// could not refuse the batch with a later reading; a bound that could
// (an old record under MessageTimestampBeforeMax, a record newer than
// the reading under MessageTimestampAfterMax) or a clock of the caller's
// (Config.Now) still gets the partition's own reading, as AppendBatch of
// the same bytes does.
func TestAppendBuilderClockRead(t *testing.T) {
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		name    string
		cfg     plog.Config
		recs    []batch.Record // Timestamp 0: stamped by Add
		refused bool
	}{
		{"stamped, default bounds", plog.Config{}, []batch.Record{{}, {}}, false},
		{"older record, no before bound", plog.Config{}, []batch.Record{{Timestamp: now - 48*3600_000}, {}}, false},
		{"older record past the before bound", plog.Config{MessageTimestampBeforeMax: time.Hour},
			[]batch.Record{{Timestamp: now - 2*3600_000}, {}}, true},
		{"stamped, before bound", plog.Config{MessageTimestampBeforeMax: time.Hour}, []batch.Record{{}, {}}, false},
		{"newer record past the after bound", plog.Config{}, []batch.Record{{}, {Timestamp: now + 2*3600_000}}, true},
		{"newer record within the after bound", plog.Config{}, []batch.Record{{}, {Timestamp: now + 60_000}}, false},
		{"the caller's clock, two hours behind", plog.Config{Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }},
			[]batch.Record{{}}, true},
		{"the caller's clock, on time", plog.Config{Now: time.Now}, []batch.Record{{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			viaBuilder, _ := openT(t, tc.cfg)
			viaBatch, _ := openT(t, tc.cfg)
			bld := batch.NewBuilder(batch.BuilderOptions{})
			for _, r := range tc.recs {
				r.Value = []byte("v")
				require.NoError(t, bld.Add(r))
			}
			_, ok := bld.ClockRead()
			require.True(t, ok, "every case stamps a record")
			b, err := bld.Build()
			require.NoError(t, err)
			_, errBuilder := viaBuilder.AppendBuilder(bld)
			_, errBatch := viaBatch.AppendBatch(b)
			if tc.refused {
				require.ErrorIs(t, errBuilder, plog.ErrInvalidBatchTimestamp)
				require.ErrorIs(t, errBatch, plog.ErrInvalidBatchTimestamp)
				require.Equal(t, int64(0), viaBuilder.LogEndOffset())
				return
			}
			require.NoError(t, errBuilder)
			require.NoError(t, errBatch)
			requireSameLogs(t, viaBuilder, viaBatch)
		})
	}
}

// TestAppendBuilderRapid: random Builders (records with random keys,
// values, headers and timestamps; random codecs, producers, leader epochs
// and base offsets) appended to two partitions, one through
// AppendBatchInfo(Build()) and one through AppendBuilder, give the same
// outcomes and byte-identical logs, across rolls. Rerun a failure with
// -rapid.seed=N.
func TestAppendBuilderRapid(t *testing.T) {
	root := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		// Each check's partitions go when it ends: a long run
		// (-rapid.checks) once filled the disk with every check's
		// preallocated indexes, kept until the test ended.
		left, err := os.ReadDir(root)
		require.NoError(rt, err)
		require.Empty(rt, left, "files of an earlier check")
		now := time.UnixMilli(1_800_000_000_000)
		ms := now.UnixMilli()
		cfg := plog.Config{
			Now:              func() time.Time { return now },
			SegmentBytes:     int64(rapid.IntRange(600, 4000).Draw(rt, "segmentBytes")),
			LogAppendTime:    rapid.Bool().Draw(rt, "logAppendTime"),
			StampLeaderEpoch: rapid.Bool().Draw(rt, "stamp"),
			LeaderEpoch:      rapid.Int32Range(0, 5).Draw(rt, "leaderEpoch"),
		}
		if rapid.Bool().Draw(rt, "beforeLimit") {
			cfg.MessageTimestampBeforeMax = time.Hour
		}
		a, b := openCheck(rt, root, cfg), openCheck(rt, root, cfg)
		tsGen := rapid.OneOf(rapid.Just(int64(-1)), rapid.Int64Range(ms-2*3_600_000, ms+2*3_600_000), rapid.Int64())
		bytesGen := rapid.OneOf(rapid.Just([]byte(nil)), rapid.SliceOfN(rapid.Byte(), 0, 40))
		seqs := map[int64]int32{}
		for i, n := 0, rapid.IntRange(1, 12).Draw(rt, "batches"); i < n; i++ {
			var c builderCase
			c.opts.Compression = rapid.SampledFrom([]batch.Compression{batch.CompressionNone, batch.CompressionNone, batch.CompressionGzip, batch.CompressionLZ4}).Draw(rt, "codec")
			c.opts.PartitionLeaderEpoch = rapid.Int32Range(-1, 3).Draw(rt, "producerEpochField")
			c.opts.BaseOffset = rapid.Int64Range(0, 1000).Draw(rt, "baseOffset")
			if pid := rapid.Int64Range(-1, 2).Draw(rt, "pid"); pid >= 0 {
				seq := seqs[pid]
				if rapid.IntRange(0, 9).Draw(rt, "badSeq") == 0 {
					seq += 3
				}
				c.opts.Producer = &batch.Producer{ID: pid, Epoch: 0, BaseSequence: seq}
			}
			for j, m := 0, rapid.IntRange(0, 6).Draw(rt, "records"); j < m; j++ {
				r := batch.Record{Offset: int64(j), Timestamp: tsGen.Draw(rt, "ts"),
					Key: bytesGen.Draw(rt, "key"), Value: bytesGen.Draw(rt, "value")}
				for range rapid.IntRange(0, 2).Draw(rt, "headers") {
					r.Headers = append(r.Headers, batch.RecordHeader{Key: bytesGen.Draw(rt, "hkey"), Value: bytesGen.Draw(rt, "hvalue")})
				}
				c.recs = append(c.recs, r)
			}
			err := twinAppend(rt, a, b, c)
			if err == nil && c.opts.Producer != nil {
				seqs[c.opts.Producer.ID] = c.opts.Producer.BaseSequence + int32(len(c.recs))
			}
		}
		requireSameLogs(rt, a, b)
		require.Equal(rt, a.LogEndOffset(), b.LogEndOffset(), fmt.Sprint("log end offsets"))
	})
}

// openCheck opens a partition for one rapid check, in a fresh directory
// under root that is closed and removed when the check ends.
func openCheck(rt *rapid.T, root string, cfg plog.Config) *plog.Partition {
	dir, err := os.MkdirTemp(root, "orders-")
	require.NoError(rt, err)
	rt.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := plog.Open(filepath.Join(dir, "orders-0"), cfg)
	require.NoError(rt, err)
	rt.Cleanup(func() { _ = p.Close() })
	return p
}
