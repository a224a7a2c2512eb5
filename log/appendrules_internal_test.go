package log

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
	"github.com/partlog/partlog/internal/producer"
)

// The append rules part without a Partition: an appendRules over a
// configuration, given batches built here.

// newRules returns the append rules of a partition with configuration cfg
// (defaults applied) and, unless cfg.Now is set, the clock fixed at
// testNow.
func newRules(cfg Config) *appendRules {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.UnixMilli(testNow) }
	}
	cfg.ensureDefaults()
	r := &appendRules{}
	r.init("/d/t-0", &cfg)
	return r
}

// withMaxTimestamp returns a copy of b claiming maxTimestamp ts, its CRC
// valid.
func withMaxTimestamp(b []byte, ts int64) []byte {
	c := bytes.Clone(b)
	batchaccess.SetMaxTimestamp(c, ts)
	batch.Batch(c).SetCRC()
	return c
}

// withLastOffsetDelta returns a copy of b with lastOffsetDelta d, its CRC
// valid.
func withLastOffsetDelta(b []byte, d int32) []byte {
	c := bytes.Clone(b)
	binary.BigEndian.PutUint32(c[23:], uint32(d)) // lastOffsetDelta
	batch.Batch(c).SetCRC()
	return c
}

// TestAppendRulesProducerBatch: what appendRules.checkProducer accepts of
// a producer's batch (AppendBatch), the error it refuses the rest with,
// and the header it returns: the records' real maxTimestamp (or Now under
// LogAppendTime) with the CRC the stored batch has, the caller's bytes
// never written.
func TestAppendRulesProducerBatch(t *testing.T) {
	hour := time.Hour.Milliseconds()
	plain := timedBatch(t, batch.BuilderOptions{}, testNow-2000, testNow-1000)
	control, err := batch.AppendControlBatch(nil, batch.TxnMarker{Type: batch.ControlCommit, ProducerID: 1, Timestamp: testNow})
	require.NoError(t, err)
	badCRC := bytes.Clone(plain)
	badCRC[len(badCRC)-1] ^= 0xff

	for _, tc := range []struct {
		name string
		cfg  Config
		b    []byte
		// err is the sentinel of the refusal (nil: accepted).
		err error
		// maxTS and appendTime are the accepted header's maxTimestamp
		// and LogAppendTime bit.
		maxTS      int64
		appendTime bool
	}{
		{name: "create time kept", b: plain, maxTS: testNow - 1000},
		{name: "wrong maxTimestamp replaced", b: withMaxTimestamp(plain, testNow+5000), maxTS: testNow - 1000},
		{name: "log append time stamped", cfg: Config{LogAppendTime: true}, b: plain, maxTS: testNow, appendTime: true},
		{name: "producer's log append time refused", b: timedBatch(t, batch.BuilderOptions{LogAppendTime: true, AppendTime: testNow}, testNow),
			err: ErrInvalidBatchTimestamp},
		{name: "too early", cfg: Config{MessageTimestampBeforeMax: time.Hour}, b: timedBatch(t, batch.BuilderOptions{}, testNow-2*hour, testNow),
			err: ErrInvalidBatchTimestamp},
		{name: "at the early bound", cfg: Config{MessageTimestampBeforeMax: time.Hour}, b: timedBatch(t, batch.BuilderOptions{}, testNow-hour),
			maxTS: testNow - hour},
		{name: "too late", cfg: Config{MessageTimestampAfterMax: time.Hour}, b: timedBatch(t, batch.BuilderOptions{}, testNow, testNow+2*hour),
			err: ErrInvalidBatchTimestamp},
		{name: "no timestamps unbounded", cfg: Config{MessageTimestampBeforeMax: time.Hour, MessageTimestampAfterMax: time.Hour},
			b: timedBatch(t, batch.BuilderOptions{}, batch.NoTimestamp), maxTS: batch.NoTimestamp},
		{name: "max.message.bytes", cfg: Config{MaxMessageBytes: len(plain) - 1}, b: plain, err: ErrBatchTooLarge},
		{name: "segment.bytes", cfg: Config{SegmentBytes: int64(len(plain) - 1)}, b: plain, err: ErrBatchTooLarge},
		{name: "control batch", b: control, err: ErrControlBatch},
		{name: "two batches", b: append(bytes.Clone(plain), plain...), err: ErrInvalidBatch},
		{name: "bad crc", b: badCRC, err: batch.ErrCorrupt},
		{name: "fewer records than offsets", b: withLastOffsetDelta(plain, 2), err: ErrInvalidBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRules(tc.cfg)
			given := bytes.Clone(tc.b)
			bt, hdr, err := r.checkProducer(tc.b)
			require.Equal(t, given, tc.b, "checkProducer wrote into the caller's bytes")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				if tc.err == batch.ErrCorrupt {
					require.ErrorIs(t, err, ErrInvalidBatch)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.b, []byte(bt))
			h := batch.Batch(hdr[:])
			require.Equal(t, tc.maxTS, h.MaxTimestamp())
			require.Equal(t, tc.appendTime, h.Attributes().LogAppendTime())
			stored := append(hdr[:], bt[batch.HeaderSize:]...)
			require.NoError(t, batch.Batch(stored).Validate(), "the stored batch's CRC")
		})
	}
}

// TestAppendRulesWithinBounds: a clock reading taken before the append (a
// Builder's) spares the rules their own reading only when it proves the
// bounds cannot refuse the records: the wall clock, no limit on how old a
// record may be, no record newer than the reading. Otherwise stampTimes
// reads the clock and applies the bounds.
func TestAppendRulesWithinBounds(t *testing.T) {
	seen := clockReading{unixMilli: testNow, taken: true}
	for _, tc := range []struct {
		name      string
		wallClock bool
		beforeMax time.Duration
		seen      clockReading
		max       int64
		within    bool
	}{
		{name: "wall clock, no limit, older records", wallClock: true, beforeMax: NoTimestampLimit, seen: seen, max: testNow - 1, within: true},
		{name: "record at the reading", wallClock: true, beforeMax: NoTimestampLimit, seen: seen, max: testNow, within: true},
		{name: "negative limit", wallClock: true, beforeMax: -1, seen: seen, max: testNow, within: true},
		{name: "record after the reading", wallClock: true, beforeMax: NoTimestampLimit, seen: seen, max: testNow + 1},
		{name: "no reading", wallClock: true, beforeMax: NoTimestampLimit, max: testNow - 1},
		{name: "not the wall clock", beforeMax: NoTimestampLimit, seen: seen, max: testNow - 1},
		{name: "limit on old records", wallClock: true, beforeMax: time.Hour, seen: seen, max: testNow - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			r := newRules(Config{MessageTimestampBeforeMax: tc.beforeMax, Now: func() time.Time {
				reads++
				return time.UnixMilli(testNow)
			}})
			r.wallClock = tc.wallClock // as ensureDefaults sets it for time.Now
			times := batch.TimeRange{Min: tc.max, Max: tc.max}
			require.Equal(t, tc.within, r.withinBounds(times, tc.seen))

			hdr := [batch.HeaderSize]byte(timedBatch(t, batch.BuilderOptions{}, tc.max)[:batch.HeaderSize])
			_, err := r.stampTimes(times, &hdr, tc.seen)
			require.NoError(t, err)
			if tc.within {
				require.Zero(t, reads, "the clock was read although the reading proved the bounds")
			} else {
				require.Equal(t, 1, reads, "the bounds were not checked against the clock")
			}
		})
	}
}

// TestAppendRulesAssigned: the checks of an AppendAssigned record set
// (checkAssigned, without the lock) and of where it starts against the
// log end (checkAssignedStart, under it), and the stored headers the part
// makes: a producer batch's offset and leader epoch (assignLocked), a
// marker's control batch (markerLocked).
func TestAppendRulesAssigned(t *testing.T) {
	at := func(base int64, n int, lod int32) []byte {
		var ts []int64
		for range n {
			ts = append(ts, testNow)
		}
		b := timedBatch(t, batch.BuilderOptions{BaseOffset: base}, ts...)
		if lod >= 0 {
			b = withLastOffsetDelta(b, lod)
		}
		return b
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	huge := at(10, 1, math.MaxInt32) // spans 2^31 offsets
	big := at(0, 30, -1)             // larger than the segments below
	badCRC := bytes.Clone(at(0, 3, -1))
	badCRC[20] ^= 0xff // the CRC's last byte

	t.Run("checkAssigned", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			records []byte
			err     error
		}{
			{name: "one batch", records: at(0, 2, -1)},
			{name: "gap", records: cat(at(0, 2, -1), at(10, 1, -1))},
			{name: "compacted", records: at(0, 1, 5)},
			{name: "huge first", records: at(0, 1, math.MaxInt32)},
			{name: "empty", err: ErrInvalidBatch},
			{name: "garbage", records: []byte("not a batch at all, too short"), err: ErrInvalidBatch},
			{name: "bad crc", records: badCRC, err: batch.ErrCorrupt},
			{name: "larger than a segment", records: big, err: ErrBatchTooLarge},
			{name: "more records than offsets", records: at(0, 3, 1), err: ErrInvalidBatch},
			{name: "negative base", records: at(-5, 1, -1), err: ErrUnexpectedOffset},
			{name: "next offset overflows", records: at(math.MaxInt64-1, 2, -1), err: ErrInvalidBatch},
			{name: "last offset the largest", records: at(math.MaxInt64-2, 2, -1)},
			{name: "overlap", records: cat(at(0, 2, -1), at(1, 1, -1)), err: ErrUnexpectedOffset},
			{name: "huge after a gap", records: cat(at(0, 2, -1), huge), err: ErrUnexpectedOffset},
			{name: "huge right after", records: cat(at(0, 10, -1), huge)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := newRules(Config{SegmentBytes: int64(len(big) - 1)})
				err := r.checkAssigned(tc.records)
				if tc.err == nil {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, tc.err)
			})
		}
	})

	t.Run("checkAssignedStart", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			records []byte
			logEnd  int64
			err     error
		}{
			{name: "at the log end", records: at(10, 1, -1), logEnd: 10},
			{name: "after a gap", records: at(10, 1, -1), logEnd: 3},
			{name: "below the log end", records: at(10, 1, -1), logEnd: 11, err: ErrUnexpectedOffset},
			{name: "huge at the log end", records: huge, logEnd: 10},
			{name: "huge after a gap", records: huge, logEnd: 9, err: ErrUnexpectedOffset},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := checkAssignedStart(tc.records, tc.logEnd)
				if tc.err == nil {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, tc.err)
			})
		}
	})

	t.Run("assignLocked", func(t *testing.T) {
		b := timedBatch(t, batch.BuilderOptions{PartitionLeaderEpoch: 77}, testNow, testNow)
		for _, stamp := range []bool{false, true} {
			r := newRules(Config{StampLeaderEpoch: stamp})
			hdr := [batch.HeaderSize]byte(b[:batch.HeaderSize])
			given := hdr
			h := r.assignLocked(&hdr, 42, 5)
			require.Equal(t, given, hdr, "assignLocked wrote into the checked header")
			require.Equal(t, int64(42), h.BaseOffset())
			want := batch.NoPartitionLeaderEpoch // the producer's 77 never stored
			if stamp {
				want = 5
			}
			require.Equal(t, want, h.PartitionLeaderEpoch(), "stamp %v", stamp)
			stored := append(bytes.Clone([]byte(h)), b[batch.HeaderSize:]...)
			require.NoError(t, batch.Batch(stored).Validate(), "offset and epoch lie outside the CRC")
		}
	})

	t.Run("markerLocked", func(t *testing.T) {
		m := batch.TxnMarker{Type: batch.ControlAbort, CoordinatorEpoch: 3, ProducerID: 9, ProducerEpoch: 2,
			BaseOffset: 1000, PartitionLeaderEpoch: 77, Timestamp: 1}
		for _, tc := range []struct {
			name       string
			cfg        Config
			epoch      int32
			appendTime bool
		}{
			{name: "create time", epoch: batch.NoPartitionLeaderEpoch},
			{name: "stamped", cfg: Config{StampLeaderEpoch: true}, epoch: 5},
			{name: "log append time", cfg: Config{LogAppendTime: true}, epoch: batch.NoPartitionLeaderEpoch, appendTime: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.NoError(t, checkMarker(m))
				r := newRules(tc.cfg)
				bt, err := r.markerLocked(m, 42, 5)
				require.NoError(t, err)
				require.NoError(t, bt.Validate())
				require.True(t, bt.Attributes().IsControl())
				require.Equal(t, int64(42), bt.BaseOffset())
				require.Equal(t, tc.epoch, bt.PartitionLeaderEpoch())
				require.Equal(t, testNow, bt.MaxTimestamp())
				require.Equal(t, tc.appendTime, bt.Attributes().LogAppendTime())
				require.Equal(t, int64(9), bt.ProducerID())
			})
		}
		for _, bad := range []batch.TxnMarker{
			{Type: batch.ControlType(7), ProducerID: 1},
			{Type: batch.ControlCommit, ProducerID: -1},
			{Type: batch.ControlCommit, ProducerID: 1, ProducerEpoch: -1},
		} {
			require.ErrorIs(t, checkMarker(bad), ErrInvalidBatch, "%+v", bad)
		}
	})
}

// TestCheckProducer: the producer checks of an append (checkProducer,
// under the lock): a batch without a producer id passes unasked; a base
// sequence below 0 is a malformed batch, refused before the producer
// state is asked; a retry of a recorded batch is answered with its
// original offsets; the state's refusals come back as they are.
func TestCheckProducer(t *testing.T) {
	st := producer.NewState(producer.Config{})
	idem := func(base int64, seq int32, epoch int16) batch.Batch {
		bld := batch.NewBuilder(batch.BuilderOptions{BaseOffset: base, Producer: &batch.Producer{ID: 5, Epoch: epoch, BaseSequence: seq}})
		for range 2 {
			require.NoError(t, bld.Add(batch.Record{Value: []byte("v"), Timestamp: testNow}))
		}
		b, err := bld.Build()
		require.NoError(t, err)
		return b
	}
	st.Apply(idem(10, 0, 1)) // offsets 10-11, sequences 0-1, epoch 1

	for _, tc := range []struct {
		name string
		bt   batch.Batch
		info AppendInfo
		done bool
		err  error
	}{
		{name: "no producer", bt: timedBatch(t, batch.BuilderOptions{}, testNow)},
		{name: "next sequence", bt: idem(0, 2, 1)},
		{name: "retry", bt: idem(0, 0, 1), info: AppendInfo{Base: 10, LastOffset: 11, Duplicate: true}, done: true},
		{name: "gap", bt: idem(0, 5, 1), info: AppendInfo{Base: -1, LastOffset: -1}, done: true, err: ErrOutOfOrderSequence},
		{name: "older epoch", bt: idem(0, 2, 0), info: AppendInfo{Base: -1, LastOffset: -1}, done: true, err: ErrInvalidProducerEpoch},
		{name: "negative sequence", bt: idem(0, -3, 1), info: AppendInfo{Base: -1, LastOffset: -1}, done: true, err: ErrInvalidBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, done, err := checkProducer(st, tc.bt)
			require.Equal(t, tc.done, done)
			require.Equal(t, tc.info, info)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
		})
	}
}
