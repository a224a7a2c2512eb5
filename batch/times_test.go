package batch

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/batchaccess"
)

// TestValidateTimes checks the timestamp range the validation walk
// returns, for every codec: the largest record timestamp (never below -1,
// as a Kafka broker computes maxTimestamp) and the smallest one other than
// -1, whatever the producer wrote as maxTimestamp.
func TestValidateTimes(t *testing.T) {
	recs := func(ts ...int64) []Record {
		out := make([]Record, len(ts))
		for i, v := range ts {
			out[i] = Record{Offset: int64(i), Value: []byte("v"), Timestamp: v}
		}
		return out
	}
	cases := []struct {
		name     string
		ts       []int64
		min, max int64
	}{
		{"one record", []int64{1_700_000_000_000}, 1_700_000_000_000, 1_700_000_000_000},
		{"increasing", []int64{10, 20, 30}, 10, 30},
		{"out of order", []int64{30, 10, 20}, 10, 30},
		{"no timestamps", []int64{-1, -1}, NoTimestamp, NoTimestamp},
		{"some without a timestamp", []int64{-1, 500, -1, 400}, 400, 500},
		{"negative below -1 keeps max at -1", []int64{-5, -3}, -5, NoTimestamp},
		{"zero", []int64{0}, 0, 0},
		{"large", []int64{math.MaxInt64 - 1, 5}, 5, math.MaxInt64 - 1},
	}
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		for _, tc := range cases {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				// AddAt: Add would stamp the zero timestamp with the time.
				bld := NewBuilder(BuilderOptions{Compression: c})
				for _, r := range recs(tc.ts...) {
					require.NoError(t, bld.AddAt(r))
				}
				b, err := bld.Build()
				require.NoError(t, err)
				tr, err := b.validateTimes()
				require.NoError(t, err)
				require.Equal(t, TimeRange{Min: tc.min, Max: tc.max}, tr)
				var dec Decoder
				tr2, err := dec.validateTimes(b)
				require.NoError(t, err)
				require.Equal(t, tr, tr2)
			})
		}
	}
}

// TestValidateTimesIgnoresHeader: the range comes from the records, not
// from the maxTimestamp a producer wrote (here -1 over records at 1.7e12).
func TestValidateTimesIgnoresHeader(t *testing.T) {
	b := build(t, BuilderOptions{}, numbered(3, 1_700_000_000_000)...)
	batchaccess.SetMaxTimestamp(b, -1)
	b.SetCRC()
	tr, err := b.validateTimes()
	require.NoError(t, err)
	require.Equal(t, TimeRange{Min: 1_700_000_000_000, Max: 1_700_000_000_002}, tr)
}

// TestValidateTimesAllocs: the uncompressed walk with timestamps stays
// allocation-free.
func TestValidateTimesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := build(t, BuilderOptions{}, numbered(50, 1000)...)
	allocs := testing.AllocsPerRun(100, func() {
		_, err := b.validateTimes()
		require.NoError(t, err)
	})
	require.Equal(t, 0.0, allocs)
}

// TestCRCWithHeader: the CRC of a batch with a patched header copy equals
// the CRC of the batch patched in place, and b itself is not touched.
func TestCRCWithHeader(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionZstd} {
		b := build(t, BuilderOptions{Compression: c}, numbered(5, 1000)...)
		orig := append(Batch(nil), b...)
		var hdr [HeaderSize]byte
		copy(hdr[:], b)
		h := Batch(hdr[:])
		h.SetAttributes(b.Attributes() | timestampTypeBit)
		batchaccess.SetMaxTimestamp(h, 424242)
		batchaccess.PutCRC(h, batchaccess.CRCWithHeader(b, h))
		require.Equal(t, orig, b, "b is unchanged")

		whole := append(append(Batch(nil), hdr[:]...), b[HeaderSize:]...)
		require.NoError(t, whole.Validate())
		inPlace := append(Batch(nil), b...)
		inPlace.SetLogAppendTime(424242)
		require.Equal(t, inPlace, whole)
	}
}
