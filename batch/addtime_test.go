package batch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddStampsMissingTimestamp: Add gives a record without a timestamp
// (0) the time of the call, as Kafka's producer does at send; every other
// timestamp, NoTimestamp included, is kept, and AddAt keeps 0 too.
func TestAddStampsMissingTimestamp(t *testing.T) {
	cases := []struct {
		name  string
		ts    int64
		at    bool // AddAt instead of Add
		stamp bool // the record gets the time of the call
	}{
		{name: "zero gets the time", ts: 0, stamp: true},
		{name: "NoTimestamp is kept", ts: NoTimestamp},
		{name: "a time is kept", ts: 1_700_000_000_000},
		{name: "a negative time is kept", ts: -5},
		{name: "AddAt keeps zero", ts: 0, at: true},
	}
	for _, c := range []Compression{CompressionNone, CompressionZstd} {
		for _, tc := range cases {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				bld := NewBuilder(BuilderOptions{Compression: c})
				before := time.Now().UnixMilli()
				for i := range 3 {
					r := Record{Offset: int64(i), Key: []byte("k"), Value: []byte("v"), Timestamp: tc.ts}
					if tc.at {
						require.NoError(t, bld.AddAt(r))
					} else {
						require.NoError(t, bld.Add(r))
					}
				}
				after := time.Now().UnixMilli()
				b, err := bld.Build()
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				var dec Decoder
				n := 0
				for r, err := range b.All(&dec) {
					require.NoError(t, err)
					if tc.stamp {
						assert.GreaterOrEqual(t, r.Timestamp, before)
						assert.LessOrEqual(t, r.Timestamp, after)
					} else {
						assert.Equal(t, tc.ts, r.Timestamp)
					}
					n++
				}
				require.Equal(t, 3, n)
				if tc.stamp {
					assert.GreaterOrEqual(t, b.MaxTimestamp(), before)
					assert.LessOrEqual(t, b.MaxTimestamp(), after)
				}
			})
		}
	}
}

// TestAppendControlBatchKeepsTimestamp: a transaction marker keeps the
// timestamp it is given, 0 included: AppendControlBatch encodes the
// marker as specified and stamps nothing.
func TestAppendControlBatchKeepsTimestamp(t *testing.T) {
	for _, ts := range []int64{0, NoTimestamp, 1_700_000_000_000} {
		b, err := AppendControlBatch(nil, TxnMarker{Type: ControlCommit, ProducerID: 7, BaseOffset: 3, Timestamp: ts})
		require.NoError(t, err)
		var dec Decoder
		n := 0
		for r, err := range Batch(b).All(&dec) {
			require.NoError(t, err)
			assert.Equal(t, ts, r.Timestamp)
			assert.Equal(t, int64(3), r.Offset)
			n++
		}
		require.Equal(t, 1, n)
	}
}

// TestBuilderClockRead: ClockRead reports the last time Add read the
// clock for a record without a timestamp (the timestamp it gave that
// record), nothing for records that keep theirs (Add with a timestamp,
// AddAt), and nothing after Reset.
func TestBuilderClockRead(t *testing.T) {
	b := NewBuilder(BuilderOptions{})
	_, ok := b.ClockRead()
	require.False(t, ok, "new Builder")
	require.NoError(t, b.Add(Record{Value: []byte("a"), Timestamp: 1_700_000_000_000}))
	require.NoError(t, b.AddAt(Record{Offset: 1, Value: []byte("b")}))
	_, ok = b.ClockRead()
	require.False(t, ok, "no record stamped")

	before := time.Now().UnixMilli()
	require.NoError(t, b.Add(Record{Value: []byte("c")}))
	after := time.Now().UnixMilli()
	ms, ok := b.ClockRead()
	require.True(t, ok)
	assert.GreaterOrEqual(t, ms, before)
	assert.LessOrEqual(t, ms, after)
	require.NoError(t, b.Add(Record{Value: []byte("d"), Timestamp: 5}))
	got, ok := b.ClockRead()
	require.True(t, ok)
	assert.Equal(t, ms, got, "a record with its own timestamp reads no clock")

	var last int64
	require.NoError(t, b.Add(Record{Value: []byte("e")}))
	last, _ = b.ClockRead()
	bt, err := b.Build()
	require.NoError(t, err)
	var stamped []int64
	for r, err := range bt.All(nil) {
		require.NoError(t, err)
		stamped = append(stamped, r.Timestamp)
	}
	assert.Equal(t, []int64{1_700_000_000_000, 0, ms, 5, last}, stamped, "the readings are the records' timestamps")

	b.Reset(BuilderOptions{})
	_, ok = b.ClockRead()
	assert.False(t, ok, "after Reset")
}
