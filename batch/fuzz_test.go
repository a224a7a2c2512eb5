package batch

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzSeeds returns every v2 batch of the fixtures and a few built ones.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "extracted", "*", "*.bin"))
	for _, f := range files {
		p, err := os.ReadFile(f)
		require.NoError(t, err)
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
			require.ErrorIs(t, err, ErrCorrupt, "Parse error %v with batch %d bytes, rest %d", err, len(b), len(rest))
			require.Nil(t, b, "Parse error %v with batch %d bytes, rest %d", err, len(b), len(rest))
			require.Len(t, rest, len(data), "Parse error %v with batch %d bytes, rest %d", err, len(b), len(rest))
			return
		}
		// The batch is a prefix of the input, the rest the remainder.
		require.Equal(t, len(data), len(b)+len(rest), "Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		require.Equal(t, string(data), string(append(append([]byte{}, b...), rest...)), "Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		require.Equal(t, len(b), b.Size(), "Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		require.GreaterOrEqual(t, len(b), HeaderSize, "Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		require.Equal(t, int8(Magic), b.Magic(), "Parse split %d bytes into %d + %d", len(data), len(b), len(rest))
		// Parsing the batch alone gives the same batch.
		b2, rest2, err := Parse(b)
		require.NoError(t, err, "re-Parse: %v", err)
		require.Empty(t, rest2, "re-Parse: %v", err)
		require.Equal(t, string(b), string(b2), "re-Parse: %v", err)
		err = b.Validate()
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt, "Validate error %v does not wrap ErrCorrupt", err)
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
				require.ErrorIs(t, err, ErrCorrupt, "Validate error %v does not wrap ErrCorrupt", err)
				continue
			}
			var dec Decoder
			require.NoError(t, dec.Validate(b), "Decoder.Validate disagrees")
			// Rewrites outside the CRC keep a valid batch valid.
			c := append(Batch{}, b...)
			c.SetBaseOffset(base)
			c.SetPartitionLeaderEpoch(epoch)
			require.NoError(t, c.Validate(), "after SetBaseOffset(%d)/SetPartitionLeaderEpoch(%d)", base, epoch)
			require.Equal(t, base, c.BaseOffset(), "rewritten header %+v", c.Header())
			require.Equal(t, epoch, c.PartitionLeaderEpoch(), "rewritten header %+v", c.Header())
			require.Equal(t, base+int64(b.LastOffsetDelta())+1, c.NextOffset(), "rewritten header %+v", c.Header())
			// Decode then re-encode round-trips the records.
			orig := fuzzDecode(t, b)
			opts := BuilderOptions{}
			if b.Attributes().IsControl() {
				continue // the Builder makes control batches only through AppendControlBatch
			}
			re := reencode(t, b, opts)
			require.NoError(t, re.Validate(), "re-encoded batch")
			got := fuzzDecode(t, re)
			require.Len(t, got, len(orig), "re-encoded %d records, want %d", len(got), len(orig))
			for i := range orig {
				require.True(t, equalRecord(got[i], orig[i]), "record %d: %+v, want %+v", i, got[i], orig[i])
			}
			if b.Attributes()&^transactionalBit == 0 && b.RecordsCount() > 0 && b.BaseTimestamp() == orig[0].Timestamp && minimalVarints(b) && !bytes.Equal(re[crcStart:], b[crcStart:]) {
				require.NotEqual(t, maxTimestamp(orig), b.MaxTimestamp(), "re-encoding changed the bytes:\n%x\n%x", b, re)
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
			ftr, fast := fastWalk(recs, count, last, control, 0)
			c := walkRecords(recs, count, last, control)
			require.NotEqual(t, c.failed, fast, "fast walk %v, cursor %v", fast, c.error(HeaderSize, false))
			// walkShort accepts only what fastWalk accepts, with the same
			// range (it may leave a valid batch to fastWalk). Validate
			// gives it no control batch: it does not check control keys.
			if str, short := walkShort(recs, count, last, 0); short && !control {
				require.True(t, fast, "walkShort accepts what fastWalk rejects")
				require.Equal(t, ftr, str, "walkShort and fastWalk disagree on the time range")
			}
		}
		requireAllMatchesNext(t, b)
		var dec Decoder
		it := b.Records(&dec)
		n := 0
		var ierr error
		prev := int64(-1) // offset deltas: the offsets themselves may wrap
		// The timestamp range the iteration sees, for validateTimes
		// (create times: under LogAppendTime the iterator reports the
		// append time instead, so the range is only compared without it).
		lo, hi := int64(math.MaxInt64), NoTimestamp
		for {
			r, ok, err := it.Next()
			if err != nil {
				ierr = err
				require.ErrorIs(t, err, ErrCorrupt, "iteration error %v does not wrap ErrCorrupt", err)
				_, ok2, err2 := it.Next()
				require.False(t, ok2, "error not sticky: %v then %v", err, err2)
				require.True(t, err2 == err, "error not sticky: %v then %v", err, err2)
				break
			}
			if !ok {
				break
			}
			hi = max(hi, r.Timestamp)
			if r.Timestamp != NoTimestamp {
				lo = min(lo, r.Timestamp)
			}
			d := r.Offset - b.BaseOffset()
			require.Greater(t, d, prev, "record %d offset delta %d after %d, lastOffsetDelta %d", n, d, prev, b.LastOffsetDelta())
			require.LessOrEqual(t, d, int64(b.LastOffsetDelta()), "record %d offset delta %d after %d, lastOffsetDelta %d", n, d, prev, b.LastOffsetDelta())
			prev = d
			n++
		}
		if verr == nil {
			require.NoError(t, ierr, "Validate passed, iteration failed")
			require.Equal(t, int(b.RecordsCount()), n, "iterated %d records of %d", n, b.RecordsCount())
		} else if ierr == nil {
			require.Error(t, b.ValidateHeader(), "Validate failed (%v), iteration passed", verr)
		}
		tr, terr := b.validateTimes()
		require.Equal(t, verr == nil, terr == nil, "validateTimes %v, Validate %v", terr, verr)
		if verr == nil && !b.Attributes().LogAppendTime() {
			if lo == math.MaxInt64 {
				lo = NoTimestamp
			}
			want := (TimeRange{Min: lo, Max: hi})
			require.Equal(t, want, tr, "validateTimes %+v, the records span %+v", tr, want)
		}
		// ValidateBody does not panic whatever the header says, and after
		// a header ValidateHeader accepts it is Validate's record check.
		btr, berr := b.ValidateBody()
		if berr != nil {
			require.ErrorIs(t, berr, ErrCorrupt, "ValidateBody error %v does not wrap ErrCorrupt", berr)
		}
		if b.ValidateHeader() == nil {
			require.Equal(t, verr == nil, berr == nil, "ValidateBody %v, Validate %v", berr, verr)
			if verr == nil {
				require.Equal(t, tr, btr, "ValidateBody and validateTimes disagree on the time range")
			}
		}
	})
}

func fuzzDecode(t *testing.T, b Batch) []decoded {
	var out []decoded
	for r, err := range b.All(nil) {
		require.NoError(t, err, "iterate a valid batch")
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
		enc, err := encodeRecord(nil, r, f.offsetDelta, f.timestampDelta)
		if c.failed || err != nil || !bytes.Equal(enc, b[HeaderSize+start:HeaderSize+c.pos]) {
			return false
		}
	}
	return true
}
