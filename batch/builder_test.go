package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
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
				if b.Attributes().Compression() != c || b.BaseTimestamp() != recs[0].Timestamp ||
					b.MaxTimestamp() != 1700000000100 || b.ProducerID() != NoProducerID || b.ProducerEpoch() != NoProducerEpoch ||
					b.BaseSequence() != NoSequence || b.LastOffsetDelta() != 3 || b.RecordsCount() != 4 {
					t.Fatalf("header %+v", b.Header())
				}
				if c == CompressionSnappy && !isXerial(b[HeaderSize:]) {
					t.Fatal("snappy is written xerial-framed")
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
	if n := xerialChunks(b[HeaderSize:]); n < 10 {
		t.Fatalf("%d xerial chunks", n)
	}
	got := decodeAll(t, b)
	if !bytes.Equal(got[0].Value, big) || !bytes.Equal(got[1].Value, big[:100]) {
		t.Fatal("values differ")
	}
}

func TestBuilderHeaderOptions(t *testing.T) {
	opts := BuilderOptions{
		BaseOffset: 1 << 40, PartitionLeaderEpoch: 12, Producer: &Producer{ID: 77, Epoch: 5, BaseSequence: math.MaxInt32 - 1},
		Transactional: true, LogAppendTime: true, AppendTime: 1234567,
	}
	b := build(t, opts, numbered(4, 1000)...)
	h := b.Header()
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 12 || h.ProducerID != 77 || h.ProducerEpoch != 5 ||
		!h.Attributes.IsTransactional() || !h.Attributes.LogAppendTime() || h.MaxTimestamp != 1234567 ||
		h.BaseTimestamp != 1000 || h.Attributes.IsControl() {
		t.Fatalf("header %+v", h)
	}
	if b.LastSequence() != 1 { // MaxInt32-1, MaxInt32, 0, 1
		t.Fatalf("last sequence %d", b.LastSequence())
	}
	for i, r := range decodeAll(t, b) {
		if r.Timestamp != 1234567 || r.Offset != 1<<40+int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

func TestBuilderOffsets(t *testing.T) {
	bld := NewBuilder(BuilderOptions{BaseOffset: 100})
	if bld.NextOffset() != 100 {
		t.Fatalf("NextOffset %d", bld.NextOffset())
	}
	for _, off := range []int64{100, 103, 110} {
		if err := bld.AddAt(Record{Offset: off, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bld.Add(Record{Value: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{111, 99, 100 + math.MaxInt32 + 1} {
		if err := bld.AddAt(Record{Offset: off}); !errors.Is(err, ErrOffsetOrder) {
			t.Fatalf("AddAt(%d) = %v", off, err)
		}
	}
	if err := bld.SetLastOffsetDelta(5); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("SetLastOffsetDelta below the last record: %v", err)
	}
	if err := bld.SetLastOffsetDelta(20); err != nil {
		t.Fatal(err)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if b.LastOffset() != 120 || b.NextOffset() != 121 || b.RecordsCount() != 4 || bld.Len() != 4 {
		t.Fatalf("header %+v", b.Header())
	}
	var offs []int64
	for _, r := range decodeAll(t, b) {
		offs = append(offs, r.Offset)
	}
	if fmt.Sprint(offs) != "[100 103 110 111]" {
		t.Fatalf("offsets %v", offs)
	}
	// Reset keeps nothing of the previous batch.
	bld.Reset(BuilderOptions{})
	empty, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Validate(); err != nil || empty.RecordsCount() != 0 || empty.BaseTimestamp() != NoTimestamp ||
		empty.MaxTimestamp() != NoTimestamp || empty.LastOffsetDelta() != 0 || len(empty) != HeaderSize {
		t.Fatalf("empty batch %+v: %v", empty.Header(), err)
	}
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
		if !errors.Is(err, ErrBadCompression) || string(out) != "prefix" {
			t.Errorf("%+v: AppendTo = %q, %v", opts, out, err)
		}
	}
}

func TestBuilderAppendTo(t *testing.T) {
	bld := NewBuilder(BuilderOptions{Compression: CompressionZstd})
	for _, r := range numbered(3, 5) {
		bld.Add(r)
	}
	out, err := bld.AppendTo([]byte("xyz"))
	if err != nil {
		t.Fatal(err)
	}
	if string(out[:3]) != "xyz" {
		t.Fatal("prefix lost")
	}
	b := mustParseOne(t, out[3:])
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if bld.EncodedSize() <= HeaderSize {
		t.Fatalf("EncodedSize %d", bld.EncodedSize())
	}
}

func TestAppendRecord(t *testing.T) {
	r := Record{Key: []byte("k"), Value: nil, Headers: []RecordHeader{{Key: nil, Value: []byte("v")}}}
	enc, err := AppendRecord(nil, r, 3, -7)
	if err != nil {
		t.Fatal(err)
	}
	c := walkRecords(enc, 1, 3, false)
	if c.failed {
		t.Fatal(c.error(0, false))
	}
	it := Batch(nil).Records(nil)
	if _, ok, err := it.Next(); ok || err != nil {
		t.Fatalf("zero batch iterates: %v %v", ok, err)
	}
}

func TestControlBatch(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		t.Run(typ.String(), func(t *testing.T) {
			m := TxnMarker{Type: typ, CoordinatorEpoch: 15, ProducerID: 9, ProducerEpoch: 2, BaseOffset: 40,
				PartitionLeaderEpoch: 3, Timestamp: 1700000000000}
			out, err := AppendControlBatch(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			b := mustParseOne(t, out)
			a := b.Attributes()
			if !a.IsControl() || !a.IsTransactional() || a.Compression() != CompressionNone || b.BaseSequence() != NoSequence ||
				b.ProducerID() != 9 || b.ProducerEpoch() != 2 || b.BaseOffset() != 40 || b.PartitionLeaderEpoch() != 3 ||
				b.RecordsCount() != 1 || b.LastOffsetDelta() != 0 {
				t.Fatalf("header %+v", b.Header())
			}
			recs := decodeAll(t, b)
			if len(recs) != 1 || recs[0].Timestamp != m.Timestamp || recs[0].Offset != 40 {
				t.Fatalf("records %+v", recs)
			}
			wantKey := []byte{0, 0, 0, byte(typ)}
			wantVal := []byte{0, 0, 0, 0, 0, 15}
			if !bytes.Equal(recs[0].Key, wantKey) || !bytes.Equal(recs[0].Value, wantVal) {
				t.Fatalf("key %x value %x", recs[0].Key, recs[0].Value)
			}
			cr, err := ParseControlRecord(Record{Key: recs[0].Key, Value: recs[0].Value})
			if err != nil || cr.Type != typ || cr.CoordinatorEpoch != 15 || cr.Version != 0 || cr.ValueVersion != 0 {
				t.Fatalf("ParseControlRecord = %+v, %v", cr, err)
			}
		})
	}
	if _, err := AppendControlBatch(nil, TxnMarker{Type: ControlLeaderChange}); err == nil {
		t.Fatal("a LEADER_CHANGE marker was encoded")
	}
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
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if s := ControlType(128).String(); s != "UNKNOWN(128)" {
		t.Fatalf("String = %q", s)
	}
	if ControlCommit.String() != "COMMIT" || ControlKRaftVoters.String() != "KRAFT_VOTERS" {
		t.Fatal("names")
	}
}

// LZ4 is written as the Java client writes it, also by a pooled (reset)
// writer: an LZ4 frame of independent 64 KiB blocks, no block or content
// checksum, no content size (FLG 0x60, BD 0x40).
func TestBuilderLZ4Frame(t *testing.T) {
	for i := 0; i < 3; i++ {
		b := build(t, BuilderOptions{Compression: CompressionLZ4}, numbered(5, 1)...)
		p := b[HeaderSize:]
		if string(p[:4]) != "\x04\x22\x4d\x18" || p[4] != 0x60 || p[5] != 0x40 {
			t.Fatalf("frame header % x", p[:7])
		}
	}
}

// Snappy is written xerial-framed with version 1 and compatible version 1.
func TestBuilderXerialHeader(t *testing.T) {
	b := build(t, BuilderOptions{Compression: CompressionSnappy}, numbered(5, 1)...)
	if got := b[HeaderSize : HeaderSize+xerialHeaderSize]; string(got) != "\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01" {
		t.Fatalf("xerial header % x", got)
	}
}

func TestBuilderDeleteHorizon(t *testing.T) {
	recs := interopRecords()
	const horizon = 1800000000000
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			b := build(t, BuilderOptions{Compression: c, DeleteHorizon: horizon, BaseOffset: 40}, recs...)
			a := b.Attributes()
			if !a.HasDeleteHorizon() || a.Compression() != c || b.BaseTimestamp() != horizon {
				t.Fatalf("header %+v", b.Header())
			}
			if b.MaxTimestamp() != 1700000000100 {
				t.Fatalf("maxTimestamp %d: it is the largest record timestamp, not the horizon", b.MaxTimestamp())
			}
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
		if b.Attributes().HasDeleteHorizon() || b.BaseTimestamp() != recs[0].Timestamp {
			t.Fatalf("header %+v", b.Header())
		}
	})
}

func TestAppendEmptyBatch(t *testing.T) {
	recs := interopRecords()
	orig := build(t, BuilderOptions{
		Compression: CompressionZstd, BaseOffset: 1000, PartitionLeaderEpoch: 7, Transactional: true,
		Producer: &Producer{ID: 42, Epoch: 3, BaseSequence: 17}, DeleteHorizon: 1800000000000,
	}, recs...)
	prefix := []byte("keep")
	out := AppendEmptyBatch(append([]byte(nil), prefix...), orig)
	if !bytes.Equal(out[:len(prefix)], prefix) {
		t.Fatal("AppendEmptyBatch changed what was before it")
	}
	e, rest, err := Parse(out[len(prefix):])
	if err != nil || len(rest) != 0 {
		t.Fatalf("Parse: %v, %d bytes left", err, len(rest))
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := orig.Header()
	want.Length = HeaderSize - LogOverhead
	want.Attributes = TransactionalBit
	want.BaseTimestamp = NoTimestamp
	want.RecordsCount = 0
	got := e.Header()
	want.CRC = got.CRC
	if got != want {
		t.Fatalf("header\n got %+v\nwant %+v", got, want)
	}
	if e.LastOffset() != orig.LastOffset() || e.LastSequence() != orig.LastSequence() {
		t.Fatalf("empty batch covers %d..%d seq %d, original %d..%d seq %d",
			e.BaseOffset(), e.LastOffset(), e.LastSequence(), orig.BaseOffset(), orig.LastOffset(), orig.LastSequence())
	}
	if e.CRC() != e.ComputeCRC() {
		t.Fatal("CRC not recomputed")
	}
}
