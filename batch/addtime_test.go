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
