package log_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/invariants"
	"github.com/partlog/partlog/internal/legacy"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestAppendReadBytes is issue 12 item 3: passing the bytes ReadFrom
// returned (a read-only mapping of the segment, or the Records' buffer
// without mmap) to AppendBatch, of the same or of another partition, must
// work: AppendBatch used to rewrite the header in the caller's memory and
// died with SIGSEGV on the mapping. The read bytes stay as they were and
// the re-appended batches get new offsets and the same records.
func TestAppendReadBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  plog.Config
	}{
		{"mmap", plog.Config{}},
		{"mmap stamped", plog.Config{StampLeaderEpoch: true, LeaderEpoch: 4}},
		{"no mmap", plog.Config{DisableMmap: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := openT(t, tc.cfg)
			other, _ := openT(t, tc.cfg)
			for i := 0; i < 3; i++ {
				_, err := src.AppendBatch(logtest.MakeBatch(2+i, 50, 1_700_000_000_000+int64(i), byte(i)))
				require.NoError(t, err)
			}
			_, err := other.AppendBatch(logtest.MakeBatch(5, 10, 1_700_000_000_000, 9)) // offsets 0-4
			require.NoError(t, err)
			end := src.LogEndOffset()

			r, err := src.ReadFrom(0, 1<<20)
			require.NoError(t, err)
			defer r.Close()
			read := r.Bytes()
			before := bytes.Clone(read)
			var bases, otherBases []int64
			for data := read; len(data) > 0; {
				b, rest, err := batch.Parse(data)
				require.NoError(t, err)
				base, err := src.AppendBatch(b) // into the same partition
				require.NoError(t, err)
				bases = append(bases, base)
				base, err = other.AppendBatch(b) // and into another one
				require.NoError(t, err)
				otherBases = append(otherBases, base)
				data = rest
			}
			require.Equal(t, before, read, "AppendBatch wrote into the bytes it was given")
			require.Equal(t, []int64{end, end + 2, end + 5}, bases)
			require.Equal(t, []int64{5, 7, 10}, otherBases)

			// The copies hold the same records at their new offsets.
			stored := storedBatches(t, src)
			require.Len(t, stored, 6)
			for i := 0; i < 3; i++ {
				orig, cp := stored[i], stored[3+i]
				require.NoError(t, cp.Validate())
				require.Equal(t, bases[i], cp.BaseOffset())
				require.Equal(t, []byte(orig[batch.LogOverhead+4+1:]), []byte(cp[batch.LogOverhead+4+1:]), "batch %d: everything from the CRC on", i)
			}
			require.NoError(t, src.Verify())
			require.NoError(t, other.Verify())
		})
	}
}

// TestAppendLeavesCallerBytes: whatever AppendBatch stores (offsets,
// leader epoch, a corrected maxTimestamp, LogAppendTime), the caller's
// slice is unchanged afterwards.
func TestAppendLeavesCallerBytes(t *testing.T) {
	now := time.UnixMilli(1_700_000_100_000)
	clock := func() time.Time { return now }
	wrongMax := func() []byte {
		b := batch.Batch(logtest.MakeBatch(4, 20, 1_700_000_000_000, 1))
		batchaccess.SetMaxTimestamp(b, -1)
		b.SetCRC()
		return b
	}
	for _, tc := range []struct {
		name string
		cfg  plog.Config
		b    func() []byte
	}{
		{"default", plog.Config{}, func() []byte { return logtest.MakeBatch(4, 20, 1_700_000_000_000, 1) }},
		{"stamped epoch", plog.Config{StampLeaderEpoch: true, LeaderEpoch: 9}, func() []byte { return logtest.MakeBatch(4, 20, 1_700_000_000_000, 1) }},
		{"wrong maxTimestamp", plog.Config{}, wrongMax},
		{"LogAppendTime", plog.Config{LogAppendTime: true, Now: clock}, func() []byte { return logtest.MakeBatch(4, 20, 1_700_000_000_000, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openT(t, tc.cfg)
			_, err := p.AppendBatch(logtest.MakeBatch(3, 5, 1_700_000_000_000, 0)) // so that the base is not 0
			require.NoError(t, err)
			b := tc.b()
			want := bytes.Clone(b)
			base, err := p.AppendBatch(b)
			require.NoError(t, err)
			require.Equal(t, int64(3), base)
			require.Equal(t, want, b)
		})
	}
}

// batchWithMax returns MakeBatch's batch with maxTimestamp set to max (CRC
// fixed), as a producer with a wrong maxTimestamp sends it.
func batchWithMax(n int, ts, max int64, c batch.Compression) []byte {
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: c, PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
	for i := 0; i < n; i++ {
		if err := bld.Add(batch.Record{Value: []byte("value"), Timestamp: ts + int64(i)}); err != nil {
			panic(err)
		}
	}
	b, err := bld.Build()
	if err != nil {
		panic(err)
	}
	batchaccess.SetMaxTimestamp(b, max)
	b.SetCRC()
	return b
}

// TestAppendMaxTimestampFromRecords is issue 12 item 6's regression: a
// producer batch with maxTimestamp -1 over records at 1.7e12 used to be
// stored as is, and OffsetForTimestamp(1.7e12) then found nothing. The
// partition now stores the records' real maxTimestamp (CRC recomputed),
// for uncompressed and compressed batches alike.
func TestAppendMaxTimestampFromRecords(t *testing.T) {
	const ts = int64(1_700_000_000_000)
	for _, c := range []batch.Compression{batch.CompressionNone, batch.CompressionGzip, batch.CompressionZstd} {
		for _, tc := range []struct {
			name     string
			producer int64
		}{
			{"minus one", -1},
			{"too small", ts},
			{"too large", ts + 999_999},
			{"right", ts + 4},
		} {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				p, _ := openT(t, plog.Config{})
				_, err := p.AppendBatch(batchWithMax(5, ts, tc.producer, c))
				require.NoError(t, err)
				stored := storedBatches(t, p)
				require.Len(t, stored, 1)
				require.NoError(t, stored[0].Validate(), "the CRC covers the rewritten maxTimestamp")
				require.Equal(t, ts+4, stored[0].MaxTimestamp())
				require.False(t, stored[0].Attributes().LogAppendTime())

				to, found, err := p.OffsetForTimestamp(ts)
				require.NoError(t, err)
				require.True(t, found, "OffsetForTimestamp(%d)", ts)
				require.Equal(t, plog.TimestampOffset{Timestamp: ts, Offset: 0, LeaderEpoch: -1}, to)
				to, found, err = p.OffsetForTimestamp(ts + 3)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, int64(3), to.Offset)
				to, found, err = p.OffsetForTimestamp(plog.MaxTimestamp)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, plog.TimestampOffset{Timestamp: ts + 4, Offset: 4, LeaderEpoch: -1}, to)
				require.NoError(t, p.Verify())
			})
		}
	}
}

// TestAppendWrongMaxTimestampTimeRoll: time-based rolls read the stored
// maxTimestamp, so a producer's -1 used to hide an hour-old segment from
// segment.ms (the frozen clock never advanced).
func TestAppendWrongMaxTimestampTimeRoll(t *testing.T) {
	now := time.UnixMilli(1_700_010_000_000)
	p, _ := openT(t, plog.Config{SegmentTime: time.Hour, Now: func() time.Time { return now }})
	ms := now.UnixMilli()
	_, err := p.AppendBatch(batchWithMax(2, ms-3*3_600_000, -1, batch.CompressionNone))
	require.NoError(t, err)
	_, err = p.AppendBatch(batchWithMax(2, ms, -1, batch.CompressionNone)) // 3 hours later
	require.NoError(t, err)
	require.Len(t, p.SegmentInfos(), 2, "segment.ms must roll by the records' timestamps")
}

// TestTimeRollFarApartTimestamps: segment.ms compares the incoming
// batch's maxTimestamp with the first batch's in milliseconds, as Kafka's
// shouldRoll does, however far apart they are. The difference used to be
// turned into a time.Duration, which wraps past about 292 years: a first
// batch stamped in microseconds by mistake made the next batch, stamped in
// milliseconds (thousands of years earlier), roll the segment, and a batch
// more than 292 years after the first did not roll it. A negative
// SegmentTime still never rolls by time.
func TestTimeRollFarApartTimestamps(t *testing.T) {
	const year = int64(365 * 24 * 3_600_000)
	for _, tc := range []struct {
		name          string
		segmentTime   time.Duration
		first, second int64
		segments      int
	}{
		{"the second far earlier", time.Hour, 1_733_600_000_000_000, 1_733_600_000_000, 1},
		{"the second far later", time.Hour, 1_000, 1_000 + 300*year, 2},
		{"the second far later, time rolls off", -1, 1_000, 1_000 + 300*year, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.UnixMilli(1_733_600_000_000)
			p, _ := openT(t, plog.Config{SegmentTime: tc.segmentTime, MessageTimestampAfterMax: plog.NoTimestampLimit,
				Now: func() time.Time { return now }})
			for _, ts := range []int64{tc.first, tc.second} {
				_, err := p.AppendBatch(batchWithMax(1, ts, ts, batch.CompressionNone))
				require.NoError(t, err)
			}
			require.Len(t, p.SegmentInfos(), tc.segments)
		})
	}
}

// TestTimeRollWithoutTimestampsFollowsConfigNow: a segment none of whose
// batches has a timestamp ages, for segment.ms, from its creation by
// Config.Now, the clock ShouldRoll is given. The creation time used to
// come from the real clock, so that a fake clock set in the past never
// rolled and one set in the future rolled at every append.
func TestTimeRollWithoutTimestampsFollowsConfigNow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Time
	}{
		{"clock in the past", time.UnixMilli(1_600_000_000_000)},
		{"clock in the future", time.UnixMilli(4_000_000_000_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.start
			p, _ := openT(t, plog.Config{SegmentTime: time.Hour, Now: func() time.Time { return now }})
			app := func() {
				_, err := p.AppendBatch(batchWithMax(1, -1, -1, batch.CompressionNone))
				require.NoError(t, err)
			}
			app()
			now = now.Add(time.Minute)
			app()
			require.Len(t, p.SegmentInfos(), 1, "a minute is not segment.ms")
			now = now.Add(2 * time.Hour)
			app()
			require.Len(t, p.SegmentInfos(), 2, "two hours past segment.ms")
		})
	}
}

// TestAppendTimestampRules is a table of Kafka's LogValidator timestamp
// rules as AppendBatch applies them: the limits of KIP-937 on CreateTime
// partitions (records without a timestamp exempt), the LogAppendTime bit
// refused from a producer, and LogAppendTime partitions stamping the
// append time. A refused batch changes nothing.
func TestAppendTimestampRules(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	ms := now.UnixMilli()
	clock := func() time.Time { return now }
	const hour = int64(3_600_000)
	lat := func() []byte {
		b := batch.Batch(logtest.MakeBatch(2, 5, ms, 0))
		b.SetLogAppendTime(ms)
		return b
	}
	withTs := func(ts ...int64) func() []byte {
		return func() []byte {
			bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
			for _, v := range ts {
				require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: v}))
			}
			b, err := bld.Build()
			require.NoError(t, err)
			return b
		}
	}
	cases := []struct {
		name    string
		cfg     plog.Config
		b       func() []byte
		wantErr bool
		wantMax int64 // stored maxTimestamp when accepted
		wantLAT bool
	}{
		{"default: a week old accepted", plog.Config{}, withTs(ms - 7*24*hour), false, ms - 7*24*hour, false},
		{"default: 59 minutes ahead accepted", plog.Config{}, withTs(ms + 59*60_000), false, ms + 59*60_000, false},
		{"default: exactly an hour ahead accepted", plog.Config{}, withTs(ms + hour), false, ms + hour, false},
		{"default: an hour and 1 ms ahead refused", plog.Config{}, withTs(ms + hour + 1), true, 0, false},
		{"after limit off: a year ahead accepted", plog.Config{MessageTimestampAfterMax: plog.NoTimestampLimit}, withTs(ms + 365*24*hour), false, ms + 365*24*hour, false},
		{"after limit negative: no limit", plog.Config{MessageTimestampAfterMax: -1}, withTs(ms + 365*24*hour), false, ms + 365*24*hour, false},
		{"after limit 1 minute: 2 minutes ahead refused", plog.Config{MessageTimestampAfterMax: time.Minute}, withTs(ms, ms+120_000), true, 0, false},
		{"before limit 1 hour: 2 hours old refused", plog.Config{MessageTimestampBeforeMax: time.Hour}, withTs(ms-2*hour, ms), true, 0, false},
		{"before limit 1 hour: 30 minutes old accepted", plog.Config{MessageTimestampBeforeMax: time.Hour}, withTs(ms - hour/2), false, ms - hour/2, false},
		{"before limit: records without a timestamp exempt", plog.Config{MessageTimestampBeforeMax: time.Hour}, withTs(-1, ms, -1), false, ms, false},
		{"before limit: only -1 timestamps", plog.Config{MessageTimestampBeforeMax: time.Hour}, withTs(-1, -1), false, -1, false},
		{"before limit: -5 is a timestamp", plog.Config{MessageTimestampBeforeMax: time.Hour}, withTs(-5, ms), true, 0, false},
		{"default: negative timestamps accepted", plog.Config{}, withTs(-5, -3), false, -1, false},
		{"LogAppendTime bit from a producer refused", plog.Config{}, lat, true, 0, false},
		{"LogAppendTime bit refused on a LogAppendTime partition", plog.Config{LogAppendTime: true}, lat, true, 0, false},
		{"LogAppendTime partition stamps now", plog.Config{LogAppendTime: true}, withTs(5, 6), false, ms, true},
		{"LogAppendTime partition ignores the limits", plog.Config{LogAppendTime: true, MessageTimestampBeforeMax: time.Millisecond}, withTs(ms + 100*hour), false, ms, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Now = clock
			p, _ := openT(t, cfg)
			_, err := p.AppendBatch(logtest.MakeBatch(1, 5, ms, 0)) // offset 0
			require.NoError(t, err)
			b := tc.b()
			base, err := p.AppendBatch(b)
			if tc.wantErr {
				require.ErrorIs(t, err, plog.ErrInvalidBatchTimestamp)
				require.Equal(t, int64(-1), base)
				require.Equal(t, int64(1), p.LogEndOffset(), "a refused batch changes nothing")
				require.Len(t, storedBatches(t, p), 1)
				return
			}
			require.NoError(t, err)
			stored := storedBatches(t, p)
			require.Len(t, stored, 2)
			s := stored[1]
			require.NoError(t, s.Validate())
			require.Equal(t, tc.wantMax, s.MaxTimestamp())
			require.Equal(t, tc.wantLAT, s.Attributes().LogAppendTime())
			if tc.wantLAT {
				for rec, err := range s.All(nil) {
					require.NoError(t, err)
					require.Equal(t, ms, rec.Timestamp, "every record reads as the append time")
				}
			}
			require.NoError(t, p.Verify())
		})
	}
}

// TestAppendTimestampsZeroAllocs: correcting maxTimestamp and stamping
// LogAppendTime patch a header copy without allocating, like the plain
// path (TestZeroAllocs).
func TestAppendTimestampsZeroAllocs(t *testing.T) {
	if invariants.Enabled || testing.CoverMode() != "" {
		t.Skip("invariants builds do not pool Records")
	}
	for _, tc := range []struct {
		name string
		cfg  plog.Config
		b    []byte
	}{
		{"wrong maxTimestamp", plog.Config{}, batchWithMax(100, 1_700_000_000_000, -1, batch.CompressionNone)},
		{"LogAppendTime", plog.Config{LogAppendTime: true}, logtest.MakeBatch(100, 150, 1_700_000_000_000, 1)},
		{"stamped epoch", plog.Config{StampLeaderEpoch: true, LeaderEpoch: 2}, logtest.MakeBatch(100, 150, 1_700_000_000_000, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openT(t, tc.cfg)
			_, err := p.AppendBatch(tc.b)
			require.NoError(t, err)
			allocs := testing.AllocsPerRun(100, func() {
				_, err := p.AppendBatch(tc.b)
				require.NoError(t, err)
			})
			require.Equal(t, 0.0, allocs)
		})
	}
}

// TestAppendBatchLZ4FrameKafkaRefuses: a producer batch whose LZ4 frame
// has dependent (linked) blocks, which Kafka's LogValidator refuses (its
// Lz4BlockInputStream cannot read them), gets ErrInvalidBatch and writes
// nothing; it used to be stored, and served to consumers that cannot
// decode it.
func TestAppendBatchLZ4FrameKafkaRefuses(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionLZ4})
	for i := range 3 {
		require.NoError(t, bld.Add(batch.Record{Key: []byte{'k', byte(i)}, Value: []byte("v"), Timestamp: time.Now().UnixMilli()}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	frame := b[batch.HeaderSize:]
	frame[4] &^= 0x20 // FLG: blocks not independent
	require.NoError(t, legacy.SetLZ4HeaderChecksum(frame, legacy.MagicV1))
	b.SetCRC()
	_, err = p.AppendBatch(b)
	require.ErrorIs(t, err, plog.ErrInvalidBatch)
	require.Equal(t, int64(0), p.LogEndOffset())
}
