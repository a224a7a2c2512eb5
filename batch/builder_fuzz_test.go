package batch

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzBytes hands out the fuzzer's bytes one field at a time, zeros once
// they run out.
type fuzzBytes struct{ p []byte }

func (f *fuzzBytes) byte() byte {
	if len(f.p) == 0 {
		return 0
	}
	b := f.p[0]
	f.p = f.p[1:]
	return b
}

func (f *fuzzBytes) u16() int { return int(f.byte()) | int(f.byte())<<8 }

// bytesField returns nil, an empty slice, or a slice of a length drawn
// around the encodings' edges (one- and two-byte varints, the one-pass
// record's limit, xerial's 32 KiB chunks and lz4's 64 KiB blocks).
func (f *fuzzBytes) bytesField() []byte {
	n := 0
	k := f.byte()
	switch k % 8 {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2, 3, 4:
		n = int(f.byte())
	case 5:
		n = f.u16() % 9000
	case 6:
		n = shortMaxData - 2 + int(f.byte()%4)
	default:
		n = []int{xerialBlockSize - 1, xerialBlockSize + 1, 64<<10 + 3, 100 << 10}[f.byte()%4]
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ k
	}
	return p
}

func (f *fuzzBytes) timestamp(base int64) int64 {
	switch k := f.byte(); k % 8 {
	case 0:
		return NoTimestamp
	case 1:
		return []int64{math.MinInt64, math.MaxInt64, -2, 1}[f.byte()%4]
	case 2:
		return base + int64(f.u16()) - 32768
	case 3:
		return base + (int64(f.u16())-32768)<<20
	default:
		return base + int64(int8(f.byte()))
	}
}

// FuzzBuilderRoundTrip: any sequence of records (null, empty and long keys
// and values, headers with null keys and values, any timestamps and
// attribute bytes, offset gaps up to MaxInt32), with any options, built by
// a Builder that is Reset and reused, gives a batch that validates,
// decodes to exactly those records, and is byte for byte what a new
// Builder builds from them; Parts, when it takes the batch, gives the
// same bytes in two pieces.
func FuzzBuilderRoundTrip(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{1, 2, 5, 7, 200, 3}, 20))
	f.Add(bytes.Repeat([]byte{4, 0, 255, 6, 1}, 40))
	reused := NewBuilder(BuilderOptions{})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{p: data}
		for round := 0; round < 3 && (round == 0 || len(in.p) > 0); round++ {
			opts := BuilderOptions{
				Compression:          Compression(in.byte() % byte(numCompressions)),
				BaseOffset:           []int64{0, 5, math.MaxInt64 - math.MaxInt32 - 1, 1 << 40}[in.byte()%4],
				PartitionLeaderEpoch: int32(int8(in.byte())),
			}
			flags := in.byte()
			if flags&1 != 0 {
				opts.LogAppendTime, opts.AppendTime = true, in.timestamp(1_700_000_000_000)
			}
			if flags&2 != 0 {
				opts.DeleteHorizon = 1_700_000_000_000 + int64(in.u16())
			}
			if flags&4 != 0 {
				opts.Producer = &Producer{ID: int64(in.u16()), Epoch: int16(in.byte()), BaseSequence: int32(in.u16())}
				opts.Transactional = flags&8 != 0
			}
			reused.Reset(opts)
			var recs []Record
			var deltas []int32
			next := int64(0)
			baseTS := in.timestamp(1_700_000_000_000)
			for n := int(in.byte() % 12); len(recs) < n; {
				r := Record{Key: in.bytesField(), Value: in.bytesField(), Timestamp: in.timestamp(baseTS), Attributes: int8(in.byte())}
				if r.Timestamp == 0 {
					r.Timestamp = 1 // Add would stamp 0 with the clock
				}
				for range int(in.byte() % 4) {
					h := RecordHeader{Key: in.bytesField(), Value: in.bytesField()}
					r.Headers = append(r.Headers, h)
				}
				gap := int64(in.byte() % 4)
				if gap == 3 {
					gap = math.MaxInt32 - next // the last delta a batch holds
				}
				d := next + gap
				if d > math.MaxInt32 || d < next {
					break
				}
				if gap == 0 {
					require.NoError(t, reused.Add(r))
				} else {
					r.Offset = opts.BaseOffset + d
					require.NoError(t, reused.AddAt(r))
				}
				recs, deltas = append(recs, r), append(deltas, int32(d))
				next = d + 1
			}
			got, err := reused.Build()
			require.NoError(t, err)

			fresh := NewBuilder(opts)
			for i, r := range recs {
				r.Offset = opts.BaseOffset + int64(deltas[i])
				require.NoError(t, fresh.AddAt(r))
			}
			want, err := fresh.Build()
			require.NoError(t, err)
			require.Equal(t, []byte(want), []byte(got), "a reused Builder builds what a new one does")

			require.NoError(t, got.Validate())
			dec := decodeAll(t, got)
			require.Len(t, dec, len(recs))
			maxTS := NoTimestamp
			for i, r := range recs {
				if i == 0 || r.Timestamp > maxTS {
					maxTS = r.Timestamp
				}
				ts := r.Timestamp
				if opts.LogAppendTime {
					ts = opts.AppendTime
				}
				var hs []RecordHeader
				for _, h := range r.Headers {
					k := h.Key
					if k == nil {
						k = []byte{} // a null header key is written empty
					}
					hs = append(hs, RecordHeader{Key: k, Value: h.Value})
				}
				checkRecord(t, "record", dec[i], decoded{opts.BaseOffset + int64(deltas[i]), ts, r.Key, r.Value, hs})
				require.Equal(t, r.Attributes, recordAttributes(t, got, i))
			}
			if opts.LogAppendTime {
				maxTS = opts.AppendTime
			}
			require.Equal(t, maxTS, got.MaxTimestamp())
			require.Equal(t, int32(len(recs)), got.RecordsCount())
			if len(recs) > 0 {
				require.Equal(t, deltas[len(deltas)-1], got.LastOffsetDelta())
			}
			if h, body, _, ok := reused.Parts(); ok {
				require.Equal(t, []byte(got), append(h[:], body...), "Parts")
			}
		}
	})
}

// recordAttributes returns the attribute byte of record i of b.
func recordAttributes(t *testing.T, b Batch, i int) int8 {
	var dec Decoder
	j := 0
	for r, err := range b.All(&dec) {
		require.NoError(t, err)
		if j == i {
			return r.Attributes
		}
		j++
	}
	t.Fatalf("no record %d", i)
	return 0
}
