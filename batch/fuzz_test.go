package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds returns every v2 batch of the fixtures and a few built ones.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "extracted", "*", "*.bin"))
	for _, f := range files {
		p, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) < 8<<10 { // the big snappy ones slow the fuzzer down
			seeds = append(seeds, p)
		}
	}
	for _, f := range []string{
		"kafkajs/src/protocol/recordBatch/fixtures/v0_recordbatch.json",
		"kafkajs/src/protocol/recordBatch/fixtures/v0_recordbatch_zstd.json",
	} {
		seeds = append(seeds, readFixture(t, f))
	}
	seeds = append(seeds, readFixture(t, "kafka-2.7.1/kafka-logs/__consumer_offsets-39/00000000000000000000.log"))
	for _, c := range allCodecs {
		seeds = append(seeds, build(t, BuilderOptions{Compression: c}, numbered(3, 1000)...))
	}
	m, _ := AppendControlBatch(nil, TxnMarker{Type: ControlCommit, CoordinatorEpoch: 1, ProducerID: 1, Timestamp: 1})
	seeds = append(seeds, m)
	return seeds
}

// fixFraming sets batchLength and the CRC of p (a copy) so that mutations
// reach the record framing instead of stopping at the CRC.
func fixFraming(p []byte) Batch {
	if len(p) < HeaderSize {
		return nil
	}
	b := append(Batch{}, p...)
	binary.BigEndian.PutUint32(b[batchLengthOffset:], uint32(len(b)-LogOverhead))
	b[magicOffset] = Magic
	b.SetCRC()
	return b[:len(b):len(b)] // a read past the end panics instead of passing unseen
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, rest, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || b != nil || len(rest) != len(data) {
				t.Fatalf("Parse error %v with batch %d bytes, rest %d", err, len(b), len(rest))
			}
			return
		}
		// The batch is a prefix of the input, the rest the remainder.
		if len(b)+len(rest) != len(data) || !bytes.Equal(append(append([]byte{}, b...), rest...), data) ||
			b.Size() != len(b) || len(b) < HeaderSize || b.Magic() != Magic {
			t.Fatalf("Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		}
		// Parsing the batch alone gives the same batch.
		b2, rest2, err := Parse(b)
		if err != nil || len(rest2) != 0 || !bytes.Equal(b2, b) {
			t.Fatalf("re-Parse: %v", err)
		}
		if err := b.Validate(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Validate error %v does not wrap ErrCorrupt", err)
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, int64(7), int32(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, base int64, epoch int32) {
		for _, b := range []Batch{Batch(data), fixFraming(data)} {
			err := b.Validate()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Validate error %v does not wrap ErrCorrupt", err)
				}
				continue
			}
			var dec Decoder
			if err := dec.Validate(b); err != nil {
				t.Fatalf("Decoder.Validate disagrees: %v", err)
			}
			// Rewrites outside the CRC keep a valid batch valid.
			c := append(Batch{}, b...)
			c.SetBaseOffset(base)
			c.SetPartitionLeaderEpoch(epoch)
			if err := c.Validate(); err != nil {
				t.Fatalf("after SetBaseOffset(%d)/SetPartitionLeaderEpoch(%d): %v", base, epoch, err)
			}
			if c.BaseOffset() != base || c.PartitionLeaderEpoch() != epoch || c.NextOffset() != base+int64(b.LastOffsetDelta())+1 {
				t.Fatalf("rewritten header %+v", c.Header())
			}
			// Decode then re-encode round-trips the records.
			orig := fuzzDecode(t, b)
			opts := BuilderOptions{}
			if b.Attributes().IsControl() {
				continue // the Builder makes control batches only through AppendControlBatch
			}
			re := reencode(t, b, opts)
			if err := re.Validate(); err != nil {
				t.Fatalf("re-encoded batch: %v", err)
			}
			got := fuzzDecode(t, re)
			if len(got) != len(orig) {
				t.Fatalf("re-encoded %d records, want %d", len(got), len(orig))
			}
			for i := range orig {
				if !equalRecord(got[i], orig[i]) {
					t.Fatalf("record %d: %+v, want %+v", i, got[i], orig[i])
				}
			}
			if b.Attributes()&^TransactionalBit == 0 && b.RecordsCount() > 0 &&
				b.BaseTimestamp() == orig[0].Timestamp && minimalVarints(b) &&
				!bytes.Equal(re[CRCStart:], b[CRCStart:]) && b.MaxTimestamp() == maxTimestamp(orig) {
				t.Fatalf("re-encoding changed the bytes:\n%x\n%x", b, re)
			}
		}
	})
}

func FuzzRecords(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fixFraming(data)
		if b == nil {
			b = Batch(data)
		}
		verr := b.Validate()
		if len(b) >= HeaderSize {
			// The fast walk and the cursor agree on the raw records region.
			recs := b[HeaderSize:]
			count, last, control := b.RecordsCount(), b.LastOffsetDelta(), b.Attributes().IsControl()
			if _, fast := fastWalk(recs, count, last, control, 0); fast == walkRecords(recs, count, last, control).failed {
				c := walkRecords(recs, count, last, control)
				t.Fatalf("fast walk %v, cursor %v", fast, c.error(HeaderSize, false))
			}
		}
		requireAllMatchesNext(t, b)
		var dec Decoder
		it := b.Records(&dec)
		n := 0
		var ierr error
		prev := int64(-1) // offset deltas: the offsets themselves may wrap
		// The timestamp range the iteration sees, for ValidateTimes
		// (create times: under LogAppendTime the iterator reports the
		// append time instead, so the range is only compared without it).
		lo, hi := int64(math.MaxInt64), NoTimestamp
		for {
			r, ok, err := it.Next()
			if err != nil {
				ierr = err
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("iteration error %v does not wrap ErrCorrupt", err)
				}
				if _, ok2, err2 := it.Next(); ok2 || err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				break
			}
			if !ok {
				break
			}
			hi = max(hi, r.Timestamp)
			if r.Timestamp != NoTimestamp {
				lo = min(lo, r.Timestamp)
			}
			if d := r.Offset - b.BaseOffset(); d <= prev || d > int64(b.LastOffsetDelta()) {
				t.Fatalf("record %d offset delta %d after %d, lastOffsetDelta %d", n, d, prev, b.LastOffsetDelta())
			} else {
				prev = d
			}
			n++
		}
		switch {
		case verr == nil && ierr != nil:
			t.Fatalf("Validate passed, iteration failed: %v", ierr)
		case verr == nil && n != int(b.RecordsCount()):
			t.Fatalf("iterated %d records of %d", n, b.RecordsCount())
		case verr != nil && ierr == nil && b.ValidateHeader() == nil:
			t.Fatalf("Validate failed (%v), iteration passed", verr)
		}
		tr, terr := b.ValidateTimes()
		if (terr == nil) != (verr == nil) {
			t.Fatalf("ValidateTimes %v, Validate %v", terr, verr)
		}
		if verr == nil && !b.Attributes().LogAppendTime() {
			if lo == math.MaxInt64 {
				lo = NoTimestamp
			}
			if want := (TimeRange{Min: lo, Max: hi}); tr != want {
				t.Fatalf("ValidateTimes %+v, the records span %+v", tr, want)
			}
		}
	})
}

func fuzzDecode(t *testing.T, b Batch) []decoded {
	var out []decoded
	for r, err := range b.All(nil) {
		if err != nil {
			t.Fatalf("iterate a valid batch: %v", err)
		}
		d := decoded{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)}
		for _, h := range r.Headers {
			d.Headers = append(d.Headers, RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
		}
		out = append(out, d)
	}
	return out
}

func equalRecord(a, b decoded) bool {
	if a.Offset != b.Offset || a.Timestamp != b.Timestamp || !sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) ||
		len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if !bytes.Equal(a.Headers[i].Key, b.Headers[i].Key) || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func maxTimestamp(recs []decoded) int64 {
	m := recs[0].Timestamp
	for _, r := range recs {
		m = max(m, r.Timestamp)
	}
	return m
}

// minimalVarints reports whether every varint of the uncompressed batch b
// is minimally encoded and every record attribute is zero-free of
// surprises, so that the Builder would write the same bytes.
func minimalVarints(b Batch) bool {
	var f recordFields
	c := cursor{b: b[HeaderSize:], curHdr: -1}
	var hdrs []RecordHeader
	for i := int32(0); i < b.RecordsCount(); i++ {
		start := c.pos
		hdrs = hdrs[:0]
		c.readRecord(&f, &hdrs)
		r := Record{Key: f.key, Value: f.value, Headers: hdrs, Attributes: f.attributes}
		enc, err := AppendRecord(nil, r, f.offsetDelta, f.timestampDelta)
		if c.failed || err != nil || !bytes.Equal(enc, b[HeaderSize+start:HeaderSize+c.pos]) {
			return false
		}
	}
	return true
}
