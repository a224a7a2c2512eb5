// Package batch is a zero-copy codec for Kafka's RecordBatch v2, the unit
// every Kafka log stores and every Kafka client produces and fetches.
//
// A [Batch] is a byte slice viewed as one encoded batch. [Parse] frames the
// first batch of a record set without copying; the accessors read header
// fields in place; [Batch.Validate] checks the CRC-32C and the record
// framing; [Batch.SetBaseOffset] assigns offsets in place, outside the CRC,
// so a broker never re-encodes what a producer sent.
//
// Example: frame a record set, check it, assign offsets.
//
//	next := int64(0)
//	for len(set) > 0 {
//		b, rest, err := batch.Parse(set)
//		if err != nil {
//			return err // errors.Is(err, batch.ErrCorrupt)
//		}
//		if err := b.Validate(); err != nil {
//			return err
//		}
//		b.SetBaseOffset(next)
//		next = b.NextOffset()
//		set = rest
//	}
//
// # Concurrency
//
// A Batch is a plain byte slice: any number of goroutines may read it, and
// a goroutine that writes it (SetBaseOffset) must not overlap readers.
package batch
