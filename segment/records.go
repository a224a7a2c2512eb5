package segment

import "github.com/partlog/partlog/batch"

// firstRecordAtOrAfter returns the first record of b whose timestamp is >=
// ts and whose offset is >= startOffset (Kafka's FileRecords
// searchForTimestamp, inside one batch). Compressed batches are
// decompressed into dec's buffer. The CRC is not checked (lookups trust
// what Recover or the appender checked); malformed records give an error,
// never a panic.
func firstRecordAtOrAfter(b batch.Batch, dec *batch.Decoder, ts, startOffset int64) (offset, timestamp int64, found bool, err error) {
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
