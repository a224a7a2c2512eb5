package batch

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParts: for every batch Parts takes, the header and records it
// returns are the bytes Build returns, and its time range is the one
// ValidateBody finds in them; every batch that needs more than a header
// is refused.
func TestParts(t *testing.T) {
	newBuilder := func(opts BuilderOptions, recs ...Record) *Builder {
		bld := NewBuilder(opts)
		for _, r := range recs {
			require.NoError(t, bld.Add(r))
		}
		return bld
	}
	noTimes := []Record{{Value: []byte("a"), Timestamp: NoTimestamp}, {Key: []byte("k"), Timestamp: NoTimestamp}}
	mixed := []Record{{Value: []byte("a"), Timestamp: NoTimestamp}, {Value: []byte("b"), Timestamp: 1_700_000_000_500},
		{Value: []byte("c"), Timestamp: 1_700_000_000_100, Headers: []RecordHeader{{Key: []byte("h"), Value: []byte("v")}}}}
	taken := map[string]*Builder{
		"one record":          newBuilder(BuilderOptions{BaseOffset: 3}, Record{Value: []byte("v"), Timestamp: 5}),
		"numbered":            newBuilder(BuilderOptions{PartitionLeaderEpoch: 4}, numbered(50, 1_000)...),
		"no timestamps":       newBuilder(BuilderOptions{}, noTimes...),
		"mixed timestamps":    newBuilder(BuilderOptions{}, mixed...),
		"transactional":       newBuilder(BuilderOptions{Transactional: true, Producer: &Producer{ID: 9, Epoch: 1, BaseSequence: 4}}, numbered(3, 7)...),
		"explicit none codec": newBuilder(BuilderOptions{Compression: CompressionNone}, numbered(2, 7)...),
		"after a reset and add": func() *Builder {
			b := newBuilder(BuilderOptions{}, numbered(9, 1)...)
			b.Reset(BuilderOptions{})
			require.NoError(t, b.Add(mixed[1]))
			return b
		}(),
	}
	for name, bld := range taken {
		h, recs, times, ok := bld.Parts()
		require.True(t, ok, name)
		built, err := bld.Build()
		require.NoError(t, err, name)
		joined := Batch(slices.Concat(h[:], recs))
		require.Equal(t, built, joined, "%s: header and records are Build's bytes", name)
		require.NoError(t, joined.Validate(), name)
		want, err := joined.ValidateBody()
		require.NoError(t, err, name)
		require.Equal(t, want, times, name)
	}

	gap := newBuilder(BuilderOptions{}, numbered(2, 1)...)
	require.NoError(t, gap.SetLastOffsetDelta(5))
	refused := map[string]*Builder{
		"compressed":     newBuilder(BuilderOptions{Compression: CompressionLZ4}, numbered(2, 1)...),
		"control":        newBuilder(BuilderOptions{Control: true}, Record{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}),
		"delete horizon": newBuilder(BuilderOptions{DeleteHorizon: 1_800_000_000_000}, numbered(2, 1)...),
		"LogAppendTime":  newBuilder(BuilderOptions{LogAppendTime: true, AppendTime: 9}, numbered(2, 1)...),
		"no record":      newBuilder(BuilderOptions{}),
		"offset gap":     gap,
	}
	for name, bld := range refused {
		h, recs, times, ok := bld.Parts()
		require.False(t, ok, name)
		require.Equal(t, [HeaderSize]byte{}, h, name)
		require.Nil(t, recs, name)
		require.Equal(t, TimeRange{}, times, name)
	}
}
