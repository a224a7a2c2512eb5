package log_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// TestRecordWithoutTimestamp: a record added to a Builder without a
// timestamp is stored with the time it was added (its CreateTime, as
// Kafka's producer sets it at send), through AppendBuilder and through
// AppendBatch of the built bytes alike, and is found by its time; a
// record added with AddAt at timestamp 0, or with NoTimestamp, is stored
// as given: the partition never rewrites a CreateTime record. On a
// LogAppendTime partition every record reads as the append time.
func TestRecordWithoutTimestamp(t *testing.T) {
	appendTime := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		cfg  plog.Config
		add  func(bld *batch.Builder) error
		// want checks the stored timestamp ts of a record added between
		// before and after (ms).
		want func(t *testing.T, ts, before, after int64)
		// builder appends with AppendBuilder, else AppendBatch(Build()).
		builder bool
		// found is whether OffsetForTimestamp(before) finds the record.
		found bool
	}{
		{name: "AppendBuilder stamps the add time", builder: true,
			add:  func(bld *batch.Builder) error { return bld.Add(batch.Record{Value: []byte("v")}) },
			want: between, found: true},
		{name: "AppendBatch of the built batch stamps the add time",
			add:  func(bld *batch.Builder) error { return bld.Add(batch.Record{Value: []byte("v")}) },
			want: between, found: true},
		{name: "AddAt keeps timestamp 0", builder: true,
			add:  func(bld *batch.Builder) error { return bld.AddAt(batch.Record{Value: []byte("v")}) },
			want: exactly(0)},
		{name: "NoTimestamp is kept",
			add: func(bld *batch.Builder) error {
				return bld.Add(batch.Record{Value: []byte("v"), Timestamp: batch.NoTimestamp})
			},
			want: exactly(batch.NoTimestamp)},
		{name: "LogAppendTime reads as the append time", builder: true,
			cfg:  plog.Config{LogAppendTime: true, Now: func() time.Time { return appendTime }},
			add:  func(bld *batch.Builder) error { return bld.Add(batch.Record{Value: []byte("v")}) },
			want: exactly(appendTime.UnixMilli()), found: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openMem(t, tc.cfg)
			bld := batch.NewBuilder(batch.BuilderOptions{})
			before := time.Now().UnixMilli()
			require.NoError(t, tc.add(bld))
			after := time.Now().UnixMilli()
			if tc.builder {
				_, err := p.AppendBuilder(bld)
				require.NoError(t, err)
			} else {
				b, err := bld.Build()
				require.NoError(t, err)
				_, err = p.AppendBatch(b)
				require.NoError(t, err)
			}
			n := 0
			for rec, err := range p.Poll(t.Context(), 0, 10) {
				require.NoError(t, err)
				tc.want(t, rec.Timestamp, before, after)
				n++
			}
			require.Equal(t, 1, n)
			to, found, err := p.OffsetForTimestamp(before)
			require.NoError(t, err)
			require.Equal(t, tc.found, found, "the record found by its time")
			if found {
				assert.Equal(t, int64(0), to.Offset)
			}
		})
	}
}

// between checks that ts lies in [before, after].
func between(t *testing.T, ts, before, after int64) {
	t.Helper()
	assert.GreaterOrEqual(t, ts, before)
	assert.LessOrEqual(t, ts, after)
}

// exactly returns a check that the timestamp is want.
func exactly(want int64) func(t *testing.T, ts, before, after int64) {
	return func(t *testing.T, ts, _, _ int64) {
		t.Helper()
		assert.Equal(t, want, ts)
	}
}
