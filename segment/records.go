package segment

import (
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/legacy"
)

// FirstRecordAtOrAfter returns the first record of the whole entry b (a
// RecordBatch v2 batch or a legacy message) whose timestamp is >= ts and
// whose offset is >= startOffset, with its timestamp: the search
// FindOffsetByTimestamp makes inside each batch, for a copy of a segment
// read from elsewhere (tiered storage). found is false when no record
// qualifies; malformed records give an error, never a panic.
func FirstRecordAtOrAfter(b []byte, ts, startOffset int64) (offset, timestamp int64, found bool, err error) {
	dec := decoderPool.Get().(*batch.Decoder)
	defer decoderPool.Put(dec)
	return firstRecordAtOrAfter(batch.Batch(b), dec, ts, startOffset)
}

// firstRecordAtOrAfter returns the first record of b whose timestamp is >=
// ts and whose offset is >= startOffset (Kafka's FileRecords
// searchForTimestamp, inside one batch). Compressed batches are
// decompressed into dec's buffer. The CRC is not checked (lookups trust
// what Recover or the appender checked); malformed records give an error,
// never a panic.
func firstRecordAtOrAfter(b batch.Batch, dec *batch.Decoder, ts, startOffset int64) (offset, timestamp int64, found bool, err error) {
	if m, ok := batch.PeekMagic(b); ok && legacy.IsMagic(m) {
		return firstLegacyAtOrAfter(legacy.Entry(b), dec, ts, startOffset)
	}
	if b.MaxTimestamp() < ts || b.LastOffset() < startOffset {
		return 0, 0, false, nil
	}
	it := b.Records(dec)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return 0, 0, false, err
		}
		if !ok {
			return 0, 0, false, nil
		}
		if rec.Timestamp >= ts && rec.Offset >= startOffset {
			return rec.Offset, rec.Timestamp, true, nil
		}
	}
}

// firstLegacyAtOrAfter is firstRecordAtOrAfter for a legacy message: the
// message itself, or the inner messages of a compressed wrapper. A magic 0
// message has no timestamp (-1) and never qualifies.
func firstLegacyAtOrAfter(e legacy.Entry, dec *batch.Decoder, ts, startOffset int64) (offset, timestamp int64, found bool, err error) {
	if e.Timestamp() < ts || e.Offset() < startOffset {
		return 0, 0, false, nil
	}
	recs, err := dec.AppendLegacyRecords(nil, e, false)
	if err != nil {
		return 0, 0, false, err
	}
	for _, r := range recs {
		if r.Timestamp >= ts && r.Offset >= startOffset {
			return r.Offset, r.Timestamp, true, nil
		}
	}
	return 0, 0, false, nil
}
