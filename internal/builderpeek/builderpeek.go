// Package builderpeek lets package log append a batch.Builder's batch
// without building it into a byte slice first, and without widening
// package batch's exported API: package batch fills in the two functions
// below when it is initialised, and log.Partition.AppendBuilder calls
// them. Nothing else may use them.
//
// The functions are variables because package batch cannot be imported
// here (batch imports this package to set them); the Builder travels as
// an any holding a *batch.Builder.
package builderpeek

// HeaderSize is batch.HeaderSize; package batch checks at compile time
// that the two agree.
const HeaderSize = 61

// Plain returns, for a *batch.Builder whose batch needs no work beyond a
// header and a CRC (uncompressed, not a control batch, no delete horizon,
// no LogAppendTime bit, at least one record, recordsCount ==
// lastOffsetDelta+1, within the format's size limit), the header its
// AppendTo writes with the CRC field zero, the encoded records (the
// Builder's own buffer: valid until the Builder is next changed), and the
// smallest record timestamp other than -1 and the largest record
// timestamp, as batch.TimeRange defines them (Min -1 when every record has
// -1; Max at least -1). ok is false for any other Builder, and then
// nothing else is set.
var Plain func(b any) (h [HeaderSize]byte, records []byte, minTS, maxTS int64, ok bool)

// CRC returns the CRC-32C of the batch made of the header h followed by
// records, as batch.Batch.ComputeCRC computes it over the joined bytes.
var CRC func(h [HeaderSize]byte, records []byte) uint32
