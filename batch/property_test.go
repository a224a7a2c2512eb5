package batch

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"pgregory.net/rapid"
)

// nullableBytes draws nil, empty or random bytes.
func nullableBytes(t *rapid.T, label string, maxLen int) []byte {
	switch rapid.IntRange(0, 4).Draw(t, label+"Kind") {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return rapid.SliceOfN(rapid.Byte(), 0, maxLen).Draw(t, label)
}

// Builder then Parse, Validate and iteration is the identity on records,
// for every codec and header option, including batches appended back to
// back in one record set.
func TestPropertyBuildParseIdentity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nBatches := rapid.IntRange(1, 3).Draw(t, "batches")
		var set []byte
		type built struct {
			opts BuilderOptions
			recs []Record
			last int32
		}
		var want []built
		for bi := 0; bi < nBatches; bi++ {
			opts := BuilderOptions{
				Compression:          rapid.SampledFrom(allCodecs).Draw(t, "codec"),
				BaseOffset:           rapid.Int64Range(0, math.MaxInt64/2).Draw(t, "base"),
				PartitionLeaderEpoch: rapid.Int32Range(-1, 100).Draw(t, "ple"),
				LogAppendTime:        rapid.Bool().Draw(t, "logAppendTime"),
				AppendTime:           rapid.Int64Range(0, 1<<45).Draw(t, "appendTime"),
			}
			if rapid.Bool().Draw(t, "idempotent") {
				opts.Producer = &Producer{
					ID:           rapid.Int64Range(0, 1<<40).Draw(t, "pid"),
					Epoch:        rapid.Int16Range(0, math.MaxInt16).Draw(t, "epoch"),
					BaseSequence: rapid.Int32Range(0, math.MaxInt32).Draw(t, "seq"),
				}
				opts.Transactional = rapid.Bool().Draw(t, "transactional")
			}
			bld := NewBuilder(opts)
			n := rapid.IntRange(0, 20).Draw(t, "records")
			baseTS := rapid.Int64Range(-1, 1<<45).Draw(t, "baseTimestamp")
			var recs []Record
			off := opts.BaseOffset
			for i := 0; i < n; i++ {
				r := Record{
					Key:        nullableBytes(t, "key", 40),
					Value:      nullableBytes(t, "value", 300),
					Timestamp:  baseTS + rapid.Int64Range(-1<<40, 1<<40).Draw(t, "tsDelta"),
					Attributes: rapid.Int8().Draw(t, "attributes"),
				}
				for range rapid.IntRange(0, 3).Draw(t, "headers") {
					k := nullableBytes(t, "hkey", 10)
					if k == nil {
						k = []byte{} // header keys are never null
					}
					r.Headers = append(r.Headers, RecordHeader{Key: k, Value: nullableBytes(t, "hvalue", 20)})
				}
				if i > 0 && rapid.Bool().Draw(t, "gap") {
					off += rapid.Int64Range(1, 1000).Draw(t, "gapSize")
				}
				r.Offset = off
				off++
				require.NoError(t, bld.AddAt(r))
				recs = append(recs, r)
			}
			last := int32(max(0, off-1-opts.BaseOffset))
			if rapid.Bool().Draw(t, "extendLast") {
				last += rapid.Int32Range(0, 100).Draw(t, "extra")
				require.NoError(t, bld.SetLastOffsetDelta(last))
			}
			var err error
			set, err = bld.AppendTo(set)
			require.NoError(t, err)
			want = append(want, built{opts, recs, last})
		}

		var dec Decoder
		rest := set
		for bi, w := range want {
			b, r, err := Parse(rest)
			require.NoError(t, err, "batch %d", bi)
			rest = r
			require.NoError(t, b.Validate(), "batch %d", bi)
			h := b.Header()
			a := h.Attributes
			require.Equal(t, w.opts.BaseOffset, h.BaseOffset, "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, w.opts.PartitionLeaderEpoch, h.PartitionLeaderEpoch, "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, w.opts.Compression, a.Compression(), "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, w.opts.LogAppendTime, a.LogAppendTime(), "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, w.opts.Transactional, a.IsTransactional(), "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, len(w.recs), int(h.RecordsCount), "batch %d header %+v, options %+v", bi, h, w.opts)
			require.Equal(t, w.last, h.LastOffsetDelta, "batch %d header %+v, options %+v", bi, h, w.opts)
			if w.opts.Producer != nil {
				require.Equal(t, w.opts.Producer.ID, h.ProducerID, "batch %d producer %+v", bi, h)
				require.Equal(t, w.opts.Producer.Epoch, h.ProducerEpoch, "batch %d producer %+v", bi, h)
				require.Equal(t, w.opts.Producer.BaseSequence, h.BaseSequence, "batch %d producer %+v", bi, h)
			}
			i := 0
			for got, err := range b.All(&dec) {
				require.NoError(t, err, "batch %d record %d", bi, i)
				r := w.recs[i]
				ts := r.Timestamp
				if w.opts.LogAppendTime {
					ts = w.opts.AppendTime
				}
				d := decoded{Offset: got.Offset, Timestamp: got.Timestamp, Key: got.Key, Value: got.Value, Headers: got.Headers}
				require.True(t, equalRecord(d, decoded{r.Offset, ts, r.Key, r.Value, r.Headers}), "batch %d record %d: %v, want %v", bi, i, got, r)
				require.Equal(t, r.Attributes, got.Attributes, "batch %d record %d: %v, want %v", bi, i, got, r)
				i++
			}
			require.Equal(t, len(w.recs), i, "batch %d: %d records, want %d", bi, i, len(w.recs))
		}
		require.Empty(t, rest, "%d bytes after the last batch", len(rest))
	})
}
