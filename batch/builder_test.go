package batch

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/batchaccess"
)

func TestBuilderEveryCodec(t *testing.T) {
	recs := interopRecords()
	for _, c := range allCodecs {
		for _, level := range []int{0, 1, 9} {
			if c == CompressionNone || c == CompressionSnappy {
				if level != 0 {
					continue
				}
			}
			t.Run(fmt.Sprintf("%s_level%d", c, level), func(t *testing.T) {
				b := build(t, BuilderOptions{Compression: c, CompressionLevel: level}, recs...)
				require.Equal(t, c, b.Attributes().Compression(), "header %+v", b.Header())
				require.Equal(t, recs[0].Timestamp, b.BaseTimestamp(), "header %+v", b.Header())
				require.Equal(t, int64(1700000000100), b.MaxTimestamp(), "header %+v", b.Header())
				require.Equal(t, NoProducerID, b.ProducerID(), "header %+v", b.Header())
				require.Equal(t, NoProducerEpoch, b.ProducerEpoch(), "header %+v", b.Header())
				require.Equal(t, NoSequence, b.BaseSequence(), "header %+v", b.Header())
				require.Equal(t, int32(3), b.LastOffsetDelta(), "header %+v", b.Header())
				require.Equal(t, int32(4), b.RecordsCount(), "header %+v", b.Header())
				if c == CompressionSnappy {
					require.True(t, isXerial(b[HeaderSize:]), "snappy is written xerial-framed")
				}
				got := decodeAll(t, b)
				for i := range recs {
					checkRecord(t, fmt.Sprint("record ", i), got[i], decoded{int64(i), recs[i].Timestamp, recs[i].Key, recs[i].Value, recs[i].Headers})
				}
			})
		}
	}
}

func TestBuilderXerialManyChunks(t *testing.T) {
	big := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 10000) // 320 KB: 10 chunks
	b := build(t, BuilderOptions{Compression: CompressionSnappy}, Record{Value: big}, Record{Value: big[:100]})
	n := xerialChunks(b[HeaderSize:])
	require.GreaterOrEqual(t, n, 10, "%d xerial chunks", n)
	got := decodeAll(t, b)
	require.Equal(t, string(big), string(got[0].Value), "values differ")
	require.Equal(t, string(big[:100]), string(got[1].Value), "values differ")
}

func TestBuilderHeaderOptions(t *testing.T) {
	opts := BuilderOptions{
		BaseOffset: 1 << 40, PartitionLeaderEpoch: 12, Producer: &Producer{ID: 77, Epoch: 5, BaseSequence: math.MaxInt32 - 1},
		Transactional: true, LogAppendTime: true, AppendTime: 1234567,
	}
	b := build(t, opts, numbered(4, 1000)...)
	h := b.Header()
	require.Equal(t, int64(1<<40), h.BaseOffset, "header %+v", h)
	require.Equal(t, int32(12), h.PartitionLeaderEpoch, "header %+v", h)
	require.Equal(t, int64(77), h.ProducerID, "header %+v", h)
	require.Equal(t, int16(5), h.ProducerEpoch, "header %+v", h)
	require.True(t, h.Attributes.IsTransactional(), "header %+v", h)
	require.True(t, h.Attributes.LogAppendTime(), "header %+v", h)
	require.Equal(t, int64(1234567), h.MaxTimestamp, "header %+v", h)
	require.Equal(t, int64(1000), h.BaseTimestamp, "header %+v", h)
	require.False(t, h.Attributes.IsControl(), "header %+v", h)
	// MaxInt32-1, MaxInt32, 0, 1
	require.Equal(t, int32(1), b.LastSequence(), "last sequence %d", b.LastSequence())
	for i, r := range decodeAll(t, b) {
		require.Equal(t, int64(1234567), r.Timestamp, "record %d: %+v", i, r)
		require.Equal(t, 1<<40+int64(i), r.Offset, "record %d: %+v", i, r)
	}
}

func TestBuilderOffsets(t *testing.T) {
	bld := NewBuilder(BuilderOptions{BaseOffset: 100})
	require.Equal(t, int64(100), bld.nextOffset(), "NextOffset %d", bld.nextOffset())
	for _, off := range []int64{100, 103, 110} {
		require.NoError(t, bld.AddAt(Record{Offset: off, Value: []byte("v")}))
	}
	require.NoError(t, bld.Add(Record{Value: []byte("next")}))
	for _, off := range []int64{111, 99, 100 + math.MaxInt32 + 1} {
		err := bld.AddAt(Record{Offset: off})
		require.ErrorIs(t, err, ErrOffsetOrder, "AddAt(%d) = %v", off, err)
	}
	err := bld.SetLastOffsetDelta(5)
	require.ErrorIs(t, err, ErrOffsetOrder, "SetLastOffsetDelta below the last record: %v", err)
	require.NoError(t, bld.SetLastOffsetDelta(20))
	b, err := bld.Build()
	require.NoError(t, err)
	require.Equal(t, int64(120), b.LastOffset(), "header %+v", b.Header())
	require.Equal(t, int64(121), b.NextOffset(), "header %+v", b.Header())
	require.Equal(t, int32(4), b.RecordsCount(), "header %+v", b.Header())
	require.Equal(t, 4, bld.numRecords(), "header %+v", b.Header())
	var offs []int64
	for _, r := range decodeAll(t, b) {
		offs = append(offs, r.Offset)
	}
	require.Equal(t, "[100 103 110 111]", fmt.Sprint(offs), "offsets %v", offs)
	// Reset keeps nothing of the previous batch.
	bld.Reset(BuilderOptions{})
	empty, err := bld.Build()
	require.NoError(t, err)
	err = empty.Validate()
	require.NoError(t, err, "empty batch %+v: %v", empty.Header(), err)
	require.Equal(t, int32(0), empty.RecordsCount(), "empty batch %+v: %v", empty.Header(), err)
	require.Equal(t, NoTimestamp, empty.BaseTimestamp(), "empty batch %+v: %v", empty.Header(), err)
	require.Equal(t, NoTimestamp, empty.MaxTimestamp(), "empty batch %+v: %v", empty.Header(), err)
	require.Equal(t, int32(0), empty.LastOffsetDelta(), "empty batch %+v: %v", empty.Header(), err)
	require.Len(t, empty, HeaderSize, "empty batch %+v: %v", empty.Header(), err)
}

func TestBuilderErrors(t *testing.T) {
	for _, opts := range []BuilderOptions{
		{Compression: 5},
		{Compression: CompressionGzip, CompressionLevel: 10},
		{Compression: CompressionLZ4, CompressionLevel: 10},
		{Compression: CompressionLZ4, CompressionLevel: -1},
	} {
		bld := NewBuilder(opts)
		bld.Add(Record{Value: []byte("x")})
		dst := []byte("prefix")
		out, err := bld.AppendTo(dst)
		assert.ErrorIs(t, err, ErrBadCompression, "%+v: AppendTo = %q, %v", opts, out, err)
		assert.Equal(t, "prefix", string(out), "%+v: AppendTo = %q, %v", opts, out, err)
	}
}

func TestBuilderAppendTo(t *testing.T) {
	bld := NewBuilder(BuilderOptions{Compression: CompressionZstd})
	for _, r := range numbered(3, 5) {
		bld.Add(r)
	}
	out, err := bld.AppendTo([]byte("xyz"))
	require.NoError(t, err)
	require.Equal(t, "xyz", string(out[:3]), "prefix lost")
	b := mustParseOne(t, out[3:])
	require.NoError(t, b.Validate())
	require.Greater(t, bld.encodedSize(), HeaderSize, "encodedSize %d", bld.encodedSize())
}

func TestAppendRecord(t *testing.T) {
	r := Record{Key: []byte("k"), Value: nil, Headers: []RecordHeader{{Key: nil, Value: []byte("v")}}}
	enc, err := encodeRecord(nil, r, 3, -7)
	require.NoError(t, err)
	c := walkRecords(enc, 1, 3, false)
	require.False(t, c.failed, c.error(0, false))
	it := Batch(nil).Records(nil)
	_, ok, err := it.Next()
	require.False(t, ok, "zero batch iterates: %v %v", ok, err)
	require.NoError(t, err, "zero batch iterates: %v %v", ok, err)
}

func TestControlBatch(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		t.Run(typ.String(), func(t *testing.T) {
			m := TxnMarker{Type: typ, CoordinatorEpoch: 15, ProducerID: 9, ProducerEpoch: 2, BaseOffset: 40,
				PartitionLeaderEpoch: 3, Timestamp: 1700000000000}
			out, err := AppendControlBatch(nil, m)
			require.NoError(t, err)
			b := mustParseOne(t, out)
			a := b.Attributes()
			require.True(t, a.IsControl(), "header %+v", b.Header())
			require.True(t, a.IsTransactional(), "header %+v", b.Header())
			require.Equal(t, CompressionNone, a.Compression(), "header %+v", b.Header())
			require.Equal(t, NoSequence, b.BaseSequence(), "header %+v", b.Header())
			require.Equal(t, int64(9), b.ProducerID(), "header %+v", b.Header())
			require.Equal(t, int16(2), b.ProducerEpoch(), "header %+v", b.Header())
			require.Equal(t, int64(40), b.BaseOffset(), "header %+v", b.Header())
			require.Equal(t, int32(3), b.PartitionLeaderEpoch(), "header %+v", b.Header())
			require.Equal(t, int32(1), b.RecordsCount(), "header %+v", b.Header())
			require.Equal(t, int32(0), b.LastOffsetDelta(), "header %+v", b.Header())
			recs := decodeAll(t, b)
			require.Len(t, recs, 1, "records %+v", recs)
			require.Equal(t, m.Timestamp, recs[0].Timestamp, "records %+v", recs)
			require.Equal(t, int64(40), recs[0].Offset, "records %+v", recs)
			wantKey := []byte{0, 0, 0, byte(typ)}
			wantVal := []byte{0, 0, 0, 0, 0, 15}
			require.Equal(t, string(wantKey), string(recs[0].Key), "key %x value %x", recs[0].Key, recs[0].Value)
			require.Equal(t, string(wantVal), string(recs[0].Value), "key %x value %x", recs[0].Key, recs[0].Value)
			cr, err := ParseControlRecord(Record{Key: recs[0].Key, Value: recs[0].Value})
			require.NoError(t, err, "ParseControlRecord = %+v, %v", cr, err)
			require.Equal(t, typ, cr.Type, "ParseControlRecord = %+v, %v", cr, err)
			require.Equal(t, int32(15), cr.CoordinatorEpoch, "ParseControlRecord = %+v, %v", cr, err)
			require.Equal(t, int16(0), cr.Version, "ParseControlRecord = %+v, %v", cr, err)
			require.Equal(t, int16(0), cr.ValueVersion, "ParseControlRecord = %+v, %v", cr, err)
		})
	}
	_, err := AppendControlBatch(nil, TxnMarker{Type: ControlLeaderChange})
	require.Error(t, err, "a LEADER_CHANGE marker was encoded")
}

// Control record pairs from sarama's control_record_test.go (SOURCES.md).
func TestParseControlRecord(t *testing.T) {
	tests := []struct {
		name     string
		key, val []byte
		want     ControlRecord
		bad      bool
	}{
		{"sarama_abort", []byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 10}, ControlRecord{Type: ControlAbort, CoordinatorEpoch: 10}, false},
		{"sarama_commit", []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 15}, ControlRecord{Type: ControlCommit, CoordinatorEpoch: 15}, false},
		{"sarama_unknown_type", []byte{0, 0, 0, 0x80}, []byte{}, ControlRecord{Type: 128}, false},
		{"kraft_leader_change", []byte{0, 0, 0, 2}, []byte{1, 2, 3}, ControlRecord{Type: ControlLeaderChange}, false},
		{"newer_value_version", []byte{0, 0, 0, 1}, []byte{0, 1, 0, 0, 0, 7, 9, 9}, ControlRecord{Type: ControlCommit, ValueVersion: 1, CoordinatorEpoch: 7}, false},
		{"key_short", []byte{0, 0, 0}, nil, ControlRecord{}, true},
		{"key_null", nil, nil, ControlRecord{}, true},
		{"key_negative_version", []byte{0xff, 0xff, 0, 0}, nil, ControlRecord{}, true},
		{"marker_value_short", []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0}, ControlRecord{}, true},
		{"marker_value_negative_version", []byte{0, 0, 0, 0}, []byte{0x80, 0, 0, 0, 0, 0}, ControlRecord{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseControlRecord(Record{Key: tt.key, Value: tt.val})
			if tt.bad {
				require.ErrorIs(t, err, ErrCorrupt, "err = %v, want ErrCorrupt", err)
				return
			}
			require.NoError(t, err, "got %+v, %v; want %+v", got, err, tt.want)
			require.Equal(t, tt.want, got, "got %+v, %v; want %+v", got, err, tt.want)
		})
	}
	s := ControlType(128).String()
	require.Equal(t, "UNKNOWN(128)", s, "String = %q", s)
	require.Equal(t, "COMMIT", ControlCommit.String(), "names")
	require.Equal(t, "KRAFT_VOTERS", controlKRaftVoters.String(), "names")
}

// LZ4 is written as the Java client writes it, also by a pooled (reset)
// writer: an LZ4 frame of independent 64 KiB blocks, no block or content
// checksum, no content size (FLG 0x60, BD 0x40).
func TestBuilderLZ4Frame(t *testing.T) {
	for i := 0; i < 3; i++ {
		b := build(t, BuilderOptions{Compression: CompressionLZ4}, numbered(5, 1)...)
		p := b[HeaderSize:]
		require.Equal(t, "\x04\x22\x4d\x18", string(p[:4]), "frame header % x", p[:7])
		require.Equal(t, byte(0x60), p[4], "frame header % x", p[:7])
		require.Equal(t, byte(0x40), p[5], "frame header % x", p[:7])
	}
}

// Snappy is written xerial-framed with version 1 and compatible version 1.
func TestBuilderXerialHeader(t *testing.T) {
	b := build(t, BuilderOptions{Compression: CompressionSnappy}, numbered(5, 1)...)
	got := b[HeaderSize : HeaderSize+xerialHeaderSize]
	require.Equal(t, "\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", string(got), "xerial header % x", got)
}

func TestBuilderDeleteHorizon(t *testing.T) {
	recs := interopRecords()
	const horizon = 1800000000000
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b := build(t, BuilderOptions{Compression: c, DeleteHorizon: horizon, BaseOffset: 40}, recs...)
			a := b.Attributes()
			require.True(t, a.HasDeleteHorizon(), "header %+v", b.Header())
			require.Equal(t, c, a.Compression(), "header %+v", b.Header())
			require.Equal(t, int64(horizon), b.BaseTimestamp(), "header %+v", b.Header())
			require.Equal(t, int64(1700000000100), b.MaxTimestamp(), "maxTimestamp %d: it is the largest record timestamp, not the horizon", b.MaxTimestamp())
			// Deltas are relative to the horizon, so every record still
			// decodes to its own timestamp.
			got := decodeAll(t, b)
			for i := range recs {
				checkRecord(t, fmt.Sprint("record ", i), got[i], decoded{40 + int64(i), recs[i].Timestamp, recs[i].Key, recs[i].Value, recs[i].Headers})
			}
		})
	}
	t.Run("zero is an ordinary batch", func(t *testing.T) {
		b := build(t, BuilderOptions{}, recs...)
		require.False(t, b.Attributes().HasDeleteHorizon(), "header %+v", b.Header())
		require.Equal(t, recs[0].Timestamp, b.BaseTimestamp(), "header %+v", b.Header())
	})
}

func TestAppendEmptyBatch(t *testing.T) {
	recs := interopRecords()
	orig := build(t, BuilderOptions{
		Compression: CompressionZstd, BaseOffset: 1000, PartitionLeaderEpoch: 7, Transactional: true,
		Producer: &Producer{ID: 42, Epoch: 3, BaseSequence: 17}, DeleteHorizon: 1800000000000,
	}, recs...)
	prefix := []byte("keep")
	out := batchaccess.AppendEmptyBatch(append([]byte(nil), prefix...), orig)
	require.Equal(t, string(prefix), string(out[:len(prefix)]), "AppendEmptyBatch changed what was before it")
	e, rest, err := Parse(out[len(prefix):])
	require.NoError(t, err, "Parse: %v, %d bytes left", err, len(rest))
	require.Empty(t, rest, "Parse: %v, %d bytes left", err, len(rest))
	require.NoError(t, e.Validate(), "Validate")
	want := orig.Header()
	want.Length = HeaderSize - LogOverhead
	want.Attributes = transactionalBit
	want.BaseTimestamp = NoTimestamp
	want.RecordsCount = 0
	got := e.Header()
	want.CRC = got.CRC
	require.Equal(t, want, got, "header\n got %+v\nwant %+v", got, want)
	require.Equal(t, orig.LastOffset(), e.LastOffset(), "empty batch covers %d..%d seq %d, original %d..%d seq %d", e.BaseOffset(), e.LastOffset(), e.LastSequence(), orig.BaseOffset(), orig.LastOffset(), orig.LastSequence())
	require.Equal(t, orig.LastSequence(), e.LastSequence(), "empty batch covers %d..%d seq %d, original %d..%d seq %d", e.BaseOffset(), e.LastOffset(), e.LastSequence(), orig.BaseOffset(), orig.LastOffset(), orig.LastSequence())
	require.Equal(t, e.ComputeCRC(), e.CRC(), "CRC not recomputed")
}

// numRecords returns the number of records added to b.
func (b *Builder) numRecords() int { return int(b.count) }

// nextOffset returns the offset Add gives b's next record.
func (b *Builder) nextOffset() int64 { return b.opts.BaseOffset + int64(b.lastDelta) + 1 }

// TestBuilderZstdLevelRange: zstd's levels run from -131072 (its fastest,
// ZSTD_minCLevel) to 22 (ZSTD_maxCLevel), the range Kafka's
// compression.zstd.level takes; a level outside it is one the codec does
// not have: ErrBadCompression, dst returned as it was.
func TestBuilderZstdLevelRange(t *testing.T) {
	for _, level := range []int{-131072, -5, 1, 3, 19, 22} {
		bld := NewBuilder(BuilderOptions{Compression: CompressionZstd, CompressionLevel: level})
		require.NoError(t, bld.Add(Record{Value: []byte("x"), Timestamp: 1}))
		b, err := bld.Build()
		require.NoError(t, err, "level %d", level)
		require.NoError(t, b.Validate(), "level %d", level)
	}
	for _, level := range []int{23, 100, -131073, math.MinInt32} {
		bld := NewBuilder(BuilderOptions{Compression: CompressionZstd, CompressionLevel: level})
		require.NoError(t, bld.Add(Record{Value: []byte("x"), Timestamp: 1}))
		out, err := bld.AppendTo([]byte("prefix"))
		require.ErrorIs(t, err, ErrBadCompression, "level %d", level)
		require.Equal(t, "prefix", string(out), "level %d", level)
		bld.Reset(BuilderOptions{Compression: CompressionZstd})
		require.NoError(t, bld.Add(Record{Value: []byte("x"), Timestamp: 1}))
		_, err = bld.Build()
		require.NoError(t, err, "level %d, then the default", level)
	}
}

// TestBuilderRefusedRecordChangesNothing: a record the Builder refuses
// (ErrBatchTooLarge) leaves it as it was: the batch built afterwards, with
// no record or with the next one, is byte for byte the batch of a Builder
// that never saw the refused record; its header takes no timestamp from
// it.
func TestBuilderRefusedRecordChangesNothing(t *testing.T) {
	big := make([]byte, 1<<20)
	huge := Record{Timestamp: 1_700_000_000_000, Value: []byte("v")}
	for range 2100 { // more than 2 GiB of headers, sharing one value
		huge.Headers = append(huge.Headers, RecordHeader{Key: []byte("h"), Value: big})
	}
	next := Record{Timestamp: 1_600_000_000_000, Value: []byte("next")}
	for _, opts := range []BuilderOptions{{}, {Compression: CompressionGzip}, {DeleteHorizon: 1_650_000_000_000}} {
		for _, follow := range [][]Record{nil, {next}} {
			bld := NewBuilder(opts)
			require.ErrorIs(t, bld.Add(huge), ErrBatchTooLarge)
			huge.Offset = 0
			require.ErrorIs(t, bld.AddAt(huge), ErrBatchTooLarge)
			fresh := NewBuilder(opts)
			for _, r := range follow {
				require.NoError(t, bld.Add(r))
				require.NoError(t, fresh.Add(r))
			}
			got, err := bld.Build()
			require.NoError(t, err)
			want, err := fresh.Build()
			require.NoError(t, err)
			require.Equal(t, []byte(want), []byte(got), "%+v, then %d records: header %+v, want %+v", opts, len(follow), got.Header(), want.Header())
		}
	}
}
