package log_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/invariants"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestFieldReport is the field report's scenario: a batch of 11 records then
// one of 3 must get bases 0 and 11 and a log end offset of 14, and keep them
// across a reopen (the reported server stored base 0 in every batch and
// counted one offset per append).
func TestFieldReport(t *testing.T) {
	p, dir := openT(t, plog.Config{})
	base, err := p.AppendBatch(logtest.MakeBatch(11, 10, 1000, 1))
	require.NoError(t, err)
	require.Equal(t, int64(0), base)
	base, err = p.AppendBatch(logtest.MakeBatch(3, 10, 2000, 2))
	require.NoError(t, err)
	require.Equal(t, int64(11), base)
	require.Equal(t, int64(14), p.LogEndOffset())
	require.Equal(t, int64(14), p.HighWatermark())
	require.Equal(t, int64(0), p.LogStartOffset())

	check := func(p *plog.Partition) {
		t.Helper()
		r, err := p.ReadFrom(0, 1<<20)
		require.NoError(t, err)
		defer r.Close()
		require.Equal(t, [][2]int64{{0, 10}, {11, 13}}, batchesIn(t, r.Bytes()))
		require.Equal(t, int64(0), r.FirstOffset())
		require.Equal(t, int64(14), r.NextOffset())
		// A read in the middle of a batch starts with that whole batch.
		r2, err := p.ReadFrom(12, 1)
		require.NoError(t, err)
		require.Equal(t, [][2]int64{{11, 13}}, batchesIn(t, r2.Bytes()))
		require.NoError(t, r2.Close())
	}
	check(p)
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Close(), plog.ErrClosed)
	_, err = p.AppendBatch(logtest.MakeBatch(1, 1, 0, 0))
	require.ErrorIs(t, err, plog.ErrClosed)
	_, err = p.ReadFrom(0, 1)
	require.ErrorIs(t, err, plog.ErrClosed)

	p2, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p2.Close()
	require.Equal(t, int64(14), p2.LogEndOffset())
	require.Equal(t, int64(14), p2.HighWatermark())
	check(p2)
	base, err = p2.AppendBatch(logtest.MakeBatch(2, 10, 3000, 3))
	require.NoError(t, err)
	require.Equal(t, int64(14), base)
	require.NoError(t, p2.Verify())
}

// TestAppendBatchBadInput checks DESIGN law 8 for every kind of bad input:
// a typed error before any byte is written, the partition unchanged, the
// next good append succeeds with the base the bad one would have had.
func TestAppendBatchBadInput(t *testing.T) {
	good := func() []byte { return logtest.MakeBatch(5, 20, 1000, 7) }
	withCRC := func(mut func(b batch.Batch)) []byte {
		b := batch.Batch(good())
		mut(b)
		b.SetCRC()
		return b
	}
	control, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 3})
	require.NoError(t, err)
	cases := []struct {
		name string
		cfg  plog.Config
		b    []byte
		want []error
	}{
		{name: "empty input", b: nil, want: []error{plog.ErrInvalidBatch, batch.ErrCorrupt}},
		{name: "truncated batch", b: good()[:70], want: []error{plog.ErrInvalidBatch, batch.ErrCorrupt, batch.ErrTruncated}},
		{name: "bad crc", b: func() []byte { b := good(); b[len(b)-1] ^= 0xff; return b }(), want: []error{plog.ErrInvalidBatch, batch.ErrCorrupt}},
		{name: "two batches", b: append(good(), good()...), want: []error{plog.ErrInvalidBatch}},
		{name: "trailing byte", b: append(good(), 0), want: []error{plog.ErrInvalidBatch}},
		{name: "magic 1", b: func() []byte { b := good(); b[16] = 1; return b }(), want: []error{plog.ErrInvalidBatch, batch.ErrUnsupportedMagic}},
		{name: "count above lastOffsetDelta+1", b: withCRC(func(b batch.Batch) { setU32(b, 23, 3) }), want: []error{plog.ErrInvalidBatch}},
		{name: "count below lastOffsetDelta+1 (compacted)", b: withCRC(func(b batch.Batch) { setU32(b, 23, 9) }), want: []error{plog.ErrInvalidBatch}},
		{name: "no records", b: func() []byte {
			b, err := batch.NewBuilder(batch.BuilderOptions{}).Build()
			require.NoError(t, err)
			return b
		}(), want: []error{plog.ErrInvalidBatch}},
		{name: "control batch", b: control, want: []error{plog.ErrControlBatch}},
		{name: "over max.message.bytes", cfg: plog.Config{MaxMessageBytes: 200}, b: logtest.MakeBatch(5, 100, 0, 0), want: []error{plog.ErrBatchTooLarge}},
		{name: "over segment.bytes", cfg: plog.Config{SegmentBytes: 300}, b: logtest.MakeBatch(5, 100, 0, 0), want: []error{plog.ErrBatchTooLarge}},
	}
	names := map[string]bool{}
	for _, c := range cases {
		require.False(t, names[c.name], "duplicate case %q", c.name)
		names[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			p, dir := openT(t, c.cfg)
			_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 0, 0))
			require.NoError(t, err)
			before := dirContents(t, dir)
			end := p.LogEndOffset()

			base, err := p.AppendBatch(c.b)
			require.Error(t, err)
			require.Equal(t, int64(-1), base)
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			require.Contains(t, err.Error(), "partlog/log: ")
			require.Equal(t, end, p.LogEndOffset())
			require.Equal(t, end, p.HighWatermark())
			require.Equal(t, before, dirContents(t, dir))

			base, err = p.AppendBatch(logtest.MakeBatch(1, 10, 0, 0))
			require.NoError(t, err)
			require.Equal(t, end, base)
			require.NoError(t, p.Verify())
		})
	}
}

func setU32(b []byte, at int, v uint32) {
	b[at], b[at+1], b[at+2], b[at+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// TestAppendAssigned covers the follower path: offsets kept, several
// batches at once, control batches allowed, a wrong base refused.
func TestAppendAssigned(t *testing.T) {
	p, _ := openT(t, plog.Config{})
	b1 := batch.Batch(logtest.MakeBatch(4, 10, 100, 1))
	b2 := batch.Batch(logtest.MakeBatch(2, 10, 200, 2))
	b2.SetBaseOffset(4)
	b1.SetPartitionLeaderEpoch(7)
	set := append(slices.Clone([]byte(b1)), b2...)
	end, err := p.AppendAssigned(set)
	require.NoError(t, err)
	require.Equal(t, int64(6), end)

	ctl, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlAbort, ProducerID: 9, CoordinatorEpoch: 1})
	require.NoError(t, err)
	_, err = p.AppendAssigned(ctl) // base 0, log end 6
	require.ErrorIs(t, err, plog.ErrUnexpectedOffset)
	batch.Batch(ctl).SetBaseOffset(6)
	end, err = p.AppendAssigned(ctl)
	require.NoError(t, err)
	require.Equal(t, int64(7), end)

	gap := batch.Batch(logtest.MakeBatch(1, 1, 0, 0))
	gap.SetBaseOffset(9)
	_, err = p.AppendAssigned(append(slices.Clone([]byte(batch.Batch(logtest.MakeBatch(1, 1, 0, 0)))), gap...))
	require.ErrorIs(t, err, plog.ErrUnexpectedOffset)
	bad := slices.Clone([]byte(b2))
	bad[len(bad)-1] ^= 1
	_, err = p.AppendAssigned(bad)
	require.ErrorIs(t, err, batch.ErrCorrupt)
	require.Equal(t, int64(7), p.LogEndOffset())

	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, [][2]int64{{0, 3}, {4, 5}, {6, 6}}, batchesIn(t, r.Bytes()))
	require.Equal(t, int32(7), batch.Batch(r.Bytes()).PartitionLeaderEpoch())
	require.NoError(t, p.Verify())
}

// TestStampLeaderEpoch checks that the leader epoch is stamped into the
// stored batch (not into the caller's bytes).
func TestStampLeaderEpoch(t *testing.T) {
	p, _ := openT(t, plog.Config{StampLeaderEpoch: true, LeaderEpoch: 3})
	b := logtest.MakeBatch(2, 5, 0, 0)
	_, err := p.AppendBatch(b)
	require.NoError(t, err)
	require.Equal(t, batch.NoPartitionLeaderEpoch, batch.Batch(b).PartitionLeaderEpoch(), "the caller's bytes are not written")
	r0, err := p.ReadFrom(0, 1)
	require.NoError(t, err)
	require.Equal(t, int32(3), batch.Batch(r0.Bytes()).PartitionLeaderEpoch())
	require.NoError(t, r0.Close())
	require.NoError(t, p.SetLeaderEpoch(5))
	_, err = p.AppendBatch(logtest.MakeBatch(2, 5, 0, 0))
	require.NoError(t, err)
	r, err := p.ReadFrom(2, 1)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, int32(5), batch.Batch(r.Bytes()).PartitionLeaderEpoch())
	require.NoError(t, batch.Batch(r.Bytes()).Validate())
}

// TestReadBounds checks law 3: out of range, empty at the bound, the high
// watermark under manual control, at least one whole batch.
func TestReadBounds(t *testing.T) {
	p, dir := openT(t, plog.Config{DisableAutoHighWatermark: true})
	for i := 0; i < 5; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(10, 100, int64(i*100), byte(i)))
		require.NoError(t, err)
	}
	require.Equal(t, int64(50), p.LogEndOffset())
	require.Equal(t, int64(0), p.HighWatermark())
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	require.Empty(t, r.Bytes())
	require.Equal(t, int64(-1), r.FirstOffset())
	require.NoError(t, r.Close())

	require.NoError(t, p.SetHighWatermark(25)) // inside the third batch
	require.ErrorIs(t, p.SetHighWatermark(51), plog.ErrOffsetOutOfRange)
	require.Equal(t, int64(25), p.HighWatermark())
	r, err = p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{0, 9}, {10, 19}}, batchesIn(t, r.Bytes()))
	require.NoError(t, r.Close())
	r, err = p.ReadFrom(21, 1<<20) // below the mark, but its batch crosses it
	require.NoError(t, err)
	require.Empty(t, r.Bytes())
	require.NoError(t, r.Close())
	r, err = p.ReadFromFollower(21, 1) // a follower sees it, whole, despite maxBytes
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{20, 29}}, batchesIn(t, r.Bytes()))
	require.NoError(t, r.Close())
	r, err = p.ReadFromFollower(50, 1)
	require.NoError(t, err)
	require.Empty(t, r.Bytes())
	require.NoError(t, r.Close())
	_, err = p.ReadFrom(51, 1)
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
	_, err = p.ReadFrom(-1, 1)
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)

	// DeleteRecordsBefore never passes the high watermark.
	require.ErrorIs(t, p.DeleteRecordsBefore(26), plog.ErrOffsetOutOfRange)
	require.NoError(t, p.DeleteRecordsBefore(15))
	require.Equal(t, int64(15), p.LogStartOffset())
	_, err = p.ReadFrom(14, 1)
	require.ErrorIs(t, err, plog.ErrOffsetOutOfRange)
	r, err = p.ReadFrom(15, 1)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{10, 19}}, batchesIn(t, r.Bytes()))
	require.NoError(t, r.Close())

	// The log start offset survives a reopen, and so does a manual high
	// watermark (replication-offset-checkpoint).
	require.NoError(t, p.Close())
	p, err = plog.Open(dir, plog.Config{DisableAutoHighWatermark: true})
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(15), p.LogStartOffset())
	require.Equal(t, int64(25), p.HighWatermark())
	require.Equal(t, int64(50), p.LogEndOffset())
	cp, err := os.ReadFile(filepath.Join(dir, plog.LogStartOffsetCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, "0\n1\norders 0 15\n", string(cp))
}

// TestRollAndRetention rolls small segments and deletes whole ones.
func TestRollAndRetention(t *testing.T) {
	p, dir := openT(t, plog.Config{SegmentBytes: 2048, IndexIntervalBytes: 1})
	m := logtest.NewModel(0, false)
	for i := 0; i < 40; i++ {
		b := logtest.MakeBatch(1+i%5, 100, int64(1000+i*10), byte(i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	segs := p.SegmentInfos()
	require.Greater(t, len(segs), 3)
	for i := 1; i < len(segs); i++ {
		require.Equal(t, segs[i-1].NextOffset, segs[i].BaseOffset)
		require.LessOrEqual(t, segs[i-1].Size, int64(2048))
	}
	require.NoError(t, logtest.Check(p, m))

	// Hold a reader on the first segment while retention deletes it.
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	held := slices.Clone(r.Bytes())
	cut := segs[2].BaseOffset + 1
	require.NoError(t, p.DeleteRecordsBefore(cut))
	require.NoError(t, m.DeleteRecordsBefore(cut))
	require.Equal(t, segs[2].BaseOffset, p.SegmentInfos()[0].BaseOffset)
	require.Equal(t, held, r.Bytes()) // still mapped, still intact
	first := filepath.Join(dir, "00000000000000000000.log")
	_, err = os.Stat(first)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(first + ".deleted")
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = os.Stat(first + ".deleted")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, logtest.Check(p, m))

	require.NoError(t, p.Roll())
	require.NoError(t, p.Roll()) // the new active segment is empty: no-op
	require.NoError(t, logtest.Check(p, m))

	// Truncate into an older segment: later segments go.
	to := segs[3].BaseOffset + 1
	require.NoError(t, p.TruncateTo(to))
	require.NoError(t, m.TruncateTo(to))
	require.NoError(t, logtest.Check(p, m))
	require.Equal(t, segs[3].BaseOffset, p.SegmentInfos()[len(p.SegmentInfos())-1].BaseOffset)
	want := m.LogEndOffset()
	b := logtest.MakeBatch(3, 10, 5000, 1)
	base, err := p.AppendBatch(b)
	require.NoError(t, err)
	require.NoError(t, m.AppendBatch(b, base))
	require.Equal(t, want, base)
	require.NoError(t, logtest.Check(p, m))

	require.NoError(t, p.Close())
	p2, err := plog.Open(dir, plog.Config{SegmentBytes: 2048, IndexIntervalBytes: 1})
	require.NoError(t, err)
	defer p2.Close()
	m.Reopen()
	require.NoError(t, logtest.Check(p2, m))
}

// TestOffsetForTimestamp checks Kafka's ListOffsets semantics.
func TestOffsetForTimestamp(t *testing.T) {
	p, _ := openT(t, plog.Config{SegmentBytes: 1024})
	// Timestamps: batch i has records at 1000*i + j.
	for i := 1; i <= 6; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 50, int64(1000*i), byte(i)))
		require.NoError(t, err)
	}
	find := func(ts int64) (plog.TimestampOffset, bool) {
		to, ok, err := p.OffsetForTimestamp(ts)
		require.NoError(t, err)
		return to, ok
	}
	to, ok := find(0)
	require.True(t, ok)
	require.Equal(t, plog.TimestampOffset{Timestamp: 1000, Offset: 0, LeaderEpoch: -1}, to)
	to, ok = find(3002)
	require.True(t, ok)
	require.Equal(t, plog.TimestampOffset{Timestamp: 3002, Offset: 10, LeaderEpoch: -1}, to)
	to, ok = find(3004)
	require.True(t, ok)
	require.Equal(t, plog.TimestampOffset{Timestamp: 4000, Offset: 12, LeaderEpoch: -1}, to)
	_, ok = find(6004)
	require.False(t, ok)
	to, ok = find(plog.LatestTimestamp)
	require.True(t, ok)
	require.Equal(t, int64(24), to.Offset)
	to, ok = find(plog.EarliestTimestamp)
	require.True(t, ok)
	require.Equal(t, int64(0), to.Offset)
	to, ok = find(plog.MaxTimestamp)
	require.True(t, ok)
	require.Equal(t, plog.TimestampOffset{Timestamp: 6003, Offset: 23, LeaderEpoch: -1}, to)
	to, ok, err := p.OffsetForTimestamp(plog.EarliestLocalTimestamp)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, p.LogStartOffset(), to.Offset, "without tiering the local start is the log start")
	_, _, err = p.OffsetForTimestamp(-5)
	require.ErrorIs(t, err, plog.ErrInvalidTimestamp)
}

// TestOffsetForTimestampAfterLostSealEntry: a flush moved the recovery
// point past a segment's batches, a roll sealed it, and a crash lost the
// seal's time index entry (here: the .timeindex emptied, the clean-shutdown
// marker gone, the recovery point at the log end, so the segment is not
// recovered). Every time lookup answers as before the crash, after the
// open that follows it and after the clean shutdown and open after that:
// the clean open trusts the final entry, which the unclean one restored.
// (The reopen used to skip the segment: its largest timestamp read -1.)
func TestOffsetForTimestampAfterLostSealEntry(t *testing.T) {
	p, dir := openT(t, plog.Config{SegmentBytes: 1024})
	// Batch i has records at 1000*i + j; the rolls leave segments of one
	// or two batches.
	for i := 1; i <= 6; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(4, 50, int64(1000*i), byte(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Sync())
	segs := p.SegmentInfos()
	require.Greater(t, len(segs), 1)
	answers := func(p *plog.Partition) []plog.TimestampOffset {
		var out []plog.TimestampOffset
		for ts := int64(0); ts <= 6004; ts += 1000 {
			for _, at := range []int64{ts, ts + 2} {
				to, ok, err := p.OffsetForTimestamp(at)
				require.NoError(t, err)
				if !ok {
					to = plog.TimestampOffset{Offset: -1}
				}
				out = append(out, to)
			}
		}
		return out
	}
	want := answers(p)
	require.NoError(t, p.Close())

	first := filepath.Join(dir, segment.FileName(segs[0].BaseOffset, segment.TimeIndexSuffix))
	require.NoError(t, os.Truncate(first, 0))
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))

	for _, open := range []string{"after the crash", "after the next clean shutdown"} {
		p, err := plog.Open(dir, plog.Config{SegmentBytes: 1024})
		require.NoError(t, err, open)
		assert.Equal(t, want, answers(p), open)
		require.NoError(t, p.Close())
	}
}

// TestConfigDefaults checks the zero Config.
func TestConfigDefaults(t *testing.T) {
	var c plog.Config
	c.EnsureDefaults()
	require.Equal(t, int64(1<<30), c.SegmentBytes)
	require.Equal(t, 10<<20, c.SegmentIndexBytes)
	require.Equal(t, 4096, c.IndexIntervalBytes)
	require.Equal(t, 1048588, c.MaxMessageBytes)
	require.Equal(t, 7*24*3600.0, c.SegmentTime.Seconds())
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.FS)
	require.NotNil(t, c.Now)
	_, err := plog.Open(t.TempDir(), plog.Config{SegmentBytes: 10})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)
	require.Equal(t, checkpoint.LogStartOffsetFile, plog.LogStartOffsetCheckpointFile)
}

// TestRecordsWriteTo checks the sendfile path against Bytes.
func TestRecordsWriteTo(t *testing.T) {
	p, dir := openT(t, plog.Config{})
	for i := 0; i < 3; i++ {
		_, err := p.AppendBatch(logtest.MakeBatch(3, 1000, 0, byte(i)))
		require.NoError(t, err)
	}
	r, err := p.ReadFrom(0, 1<<20)
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(dir, "..", "out"))
	require.NoError(t, err)
	defer f.Close()
	n, err := r.WriteTo(f)
	require.NoError(t, err)
	require.Equal(t, int64(len(r.Bytes())), n)
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, r.Bytes()))
	var buf bytes.Buffer
	_, err = r.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, r.Bytes(), buf.Bytes())
	require.NoError(t, r.Close())
	if !invariants.Enabled { // there a double Close panics
		require.True(t, errors.Is(r.Close(), plog.ErrClosed))
	}
}

// TestOffsetForTimestampAfterTimeIndexEmptied: a sealed segment's
// .timeindex emptied after a clean shutdown changes no time lookup (law
// 5): the clean open sees that the last batch holds a timestamp the index
// does not, and rebuilds it. OffsetForTimestamp used to skip the segment,
// which then claimed no timestamp, and answer from the next one.
func TestOffsetForTimestampAfterTimeIndexEmptied(t *testing.T) {
	dir := t.TempDir()
	cfg := plog.Config{SegmentBytes: 4096, IndexIntervalBytes: 512}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	for i := range 60 {
		bld := batch.NewBuilder(batch.BuilderOptions{PartitionLeaderEpoch: batch.NoPartitionLeaderEpoch})
		require.NoError(t, bld.Add(batch.Record{Value: make([]byte, 200), Timestamp: 1_700_000_000_000 + int64(i)}))
		b, err := bld.Build()
		require.NoError(t, err)
		_, err = p.AppendBatch(b)
		require.NoError(t, err)
	}
	want, found, err := p.OffsetForTimestamp(1_700_000_000_005)
	require.NoError(t, err)
	require.True(t, found)
	require.NoError(t, p.Close())
	require.NoError(t, os.Truncate(filepath.Join(dir, "00000000000000000000.timeindex"), 0))

	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer p.Close()
	got, found, err := p.OffsetForTimestamp(1_700_000_000_005)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, want, got)
}

// TestConfigSegmentIndexBytesTooLarge: a segment.index.bytes larger than
// an index file can be (index.MaxFileBytes, math.MaxInt32: Kafka's setting
// is an int) is ErrInvalidConfig, refused before Open changes anything. It
// used to pass validation and fail Open later with the index's own error,
// after Open had removed the clean-shutdown marker of a directory closed
// cleanly (the next Open then recovered it as after a crash) or created a
// new directory.
func TestConfigSegmentIndexBytesTooLarge(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("an int cannot hold more than math.MaxInt32")
	}
	tooLarge := int(int64(index.MaxFileBytes) + 1)

	fresh := filepath.Join(t.TempDir(), "fresh-0")
	_, err := plog.Open(fresh, plog.Config{SegmentIndexBytes: tooLarge})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)
	_, err = os.Stat(fresh)
	require.ErrorIs(t, err, fs.ErrNotExist, "a refused config creates nothing")

	p, dir := openT(t, plog.Config{})
	_, err = p.AppendBatch(logtest.MakeBatch(3, 10, 1000, 1))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	before := dirContents(t, dir)
	_, err = plog.Open(dir, plog.Config{SegmentIndexBytes: tooLarge})
	require.ErrorIs(t, err, plog.ErrInvalidConfig)
	require.Equal(t, before, dirContents(t, dir), "a refused config changes nothing")

	p, err = plog.Open(dir, plog.Config{SegmentIndexBytes: index.MaxFileBytes})
	require.NoError(t, err, "the largest index size is accepted")
	require.True(t, p.Stats().Recovery.Clean)
	require.NoError(t, p.Close())
}
