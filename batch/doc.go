// Package batch is a zero-copy codec for Kafka's RecordBatch v2, the unit
// every Kafka log stores and every Kafka client produces and fetches.
//
// A [Batch] is a byte slice viewed as one encoded batch. [Parse] frames the
// first batch of a record set without copying; the accessors read header
// fields in place; [Batch.Validate] checks the CRC-32C and the record
// framing; [Batch.SetBaseOffset] assigns offsets in place, outside the CRC,
// so a broker never re-encodes what a producer sent. [Batch.Records]
// iterates the records (keys and values alias the batch), a [Builder]
// encodes batches with any of Kafka's codecs, and [AppendControlBatch] and
// [ParseControlRecord] write and read transaction markers.
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
// # The bytes
//
// Everything is big-endian except the record fields, which are zig-zag
// varints (int32, at most 5 bytes) and varlongs (int64, at most 10 bytes).
// The batch header (see [Batch] for the byte ruler) is 61 bytes:
//
//	offset  field                 type   notes
//	0       baseOffset            int64  rewritten by the broker, outside the CRC
//	8       batchLength           int32  bytes after this field; total = batchLength + 12
//	12      partitionLeaderEpoch  int32  stamped by the broker, outside the CRC
//	16      magic                 int8   2
//	17      crc                   uint32 CRC-32C (Castagnoli) of bytes [21, end)
//	21      attributes            int16  codec, timestamp type, transactional, control, delete horizon
//	23      lastOffsetDelta       int32
//	27      baseTimestamp         int64  (the delete horizon when that attribute bit is set)
//	35      maxTimestamp          int64
//	43      producerId            int64  -1 when none
//	51      producerEpoch         int16  -1 when none
//	53      baseSequence          int32  -1 when none
//	57      recordsCount          int32  stays plain when the records are compressed
//	61      records               the records; one compressed stream when the codec is set
//
// Each record, in order, with its length first:
//
//	+--------+-----+-----------+---------+------+-----+--------+-------+-------+---------+
//	| length |attrs| timestamp | offset  | key  | key | value  | value | header| headers |
//	| varint |int8 | Delta     | Delta   | Len  |     | Len    |       | Count |         |
//	|        | = 0 | varlong   | varint  |varint|     | varint |       | varint|         |
//	+--------+-----+-----------+---------+------+-----+--------+-------+-------+---------+
//	length counts the bytes after itself; keyLen/valueLen -1 = null
//	each header: keyLen varint (>= 0), key, valueLen varint (-1 = null), value
//	(a reader takes any negative keyLen/valueLen of a record, and valueLen
//	of a header, for null, as Kafka does)
//
// A record's offset is baseOffset + offsetDelta. Its timestamp is
// baseTimestamp + timestampDelta under CreateTime and maxTimestamp under
// LogAppendTime. When the delete-horizon bit is set, baseTimestamp holds
// the time after which compaction may drop the batch's tombstones; Kafka's
// cleaner then writes the deltas relative to it, so baseTimestamp +
// timestampDelta is still each record's timestamp, and this package reads
// it that way.
//
// What a broker does to a producer's batch is here too: [Batch.ValidateBody]
// (after [Batch.ValidateHeader]) returns the range of the records'
// timestamps found while checking them ([TimeRange]: a producer batch's
// real maxTimestamp without a second pass, even for a compressed batch),
// and [Batch.SetLogAppendTime] stamps the broker's time. A record set is
// framed entry by entry in either message format with [FrameEntry], and
// its small batches decoded a run at a time with [Decoder.DecodeRun];
// [Builder.Parts] gives a built batch as its header and records, for a
// vectored write.
//
// # Legacy messages
//
// Kafka before 0.11 stored message sets (magic 0 and 1) instead of
// batches, and logs Kafka upgraded in place still hold them, mixed with v2
// batches; partlog serves them as stored. [PeekMagic] tells the formats
// apart by the magic byte, which both hold at byte 16 (0 or 1 for a legacy
// message, [Magic] for a batch). A legacy entry is handled as its plain
// bytes: [Decoder.ValidateLegacy] checks it as a consumer decodes it
// (framing, its CRC-32 (IEEE), key and value, and a compressed wrapper's
// nested messages), [Decoder.AppendLegacyRecords] yields its records with
// absolute offsets (relative inner offsets under magic 1, absolute under
// magic 0; a wrapper's offset is its last inner message's) and timestamps
// (-1 under magic 0), and [Decoder.LegacyBaseOffset] gives the first offset
// it covers. A reader of a partition's read results meets one as the
// *log.LegacyEntryError that log.Records.Batches yields in place of a
// batch: its Entry field holds the entry's bytes, ready for these three
// methods, and its NextOffset the offset after it:
//
//	for b, err := range recs.Batches() {
//		var le *log.LegacyEntryError
//		if errors.As(err, &le) {
//			rs, err := dec.AppendLegacyRecords(nil, le.Entry, false)
//			// use rs, or handle err
//			continue
//		}
//		// handle err, or use the batch b
//	}
//
// This package never builds new legacy messages; compaction rewrites the
// ones a log holds as Kafka's cleaner does, through
// [Decoder.AppendLegacyFiltered]: a message is kept or dropped whole, and a
// compressed wrapper from which some records go is written again with the
// others, at their original offsets.
//
// # Checksums
//
// Every CRC-32C of this package (Validate, ComputeCRC, SetCRC,
// CRCWithHeader, the Builder) is the Castagnoli CRC of hash/crc32's
// Castagnoli table. On amd64 CPUs with AVX-512 and VPCLMULQDQ the package
// computes long inputs with its own assembly; the purego build tag turns
// that off (github.com/klauspost/crc32 then computes every CRC).
//
// # Fast paths
//
// The Builder, Validate and the record decoders take faster routes for
// the common shapes of batches and records (no headers, short varints,
// uncompressed, one record per batch). Every fast route produces and
// accepts exactly what the general one does, and an error found on one
// is reported as the general route reports it.
//
// # Compression
//
// gzip, snappy, lz4 and zstd use github.com/klauspost/compress and
// github.com/pierrec/lz4/v4 (LZ4 frame format). Snappy is read in both
// forms clients write: the xerial framing of the Java client
// ("\x82SNAPPY\x00", version, compatible version, then length-prefixed raw
// blocks, one or more) and a bare raw block (librdkafka and most other
// clients). The Builder writes xerial, as the Java client does; every
// broker and client reads it. Decompression is bounded (see [Decoder]):
// payloads that expand past the limit are rejected as corrupt before they
// can exhaust memory.
//
// Compressors and decompressors are pooled across the process. Batches may
// be built and decoded inside a testing/synctest bubble. A payload decodes
// the same, and a corrupt one fails with the same error, whatever the
// pooled decompressor decoded before.
//
// # Errors
//
// Every failure to frame, validate or decode bytes is a
// *CorruptionError that names the field ("crc",
// "record[3].keyLength", ...) and its byte position in the batch, and wraps
// [ErrCorrupt]; a buffer that ends inside a batch also wraps
// [ErrTruncated], a magic other than 2 [ErrUnsupportedMagic]. In Kafka's
// protocol terms: ErrCorrupt and ErrTruncated are CORRUPT_MESSAGE (2);
// ErrUnsupportedMagic is INVALID_RECORD (87) on a produce request and
// CORRUPT_MESSAGE on disk. Builder errors ([ErrOffsetOrder],
// [ErrBatchTooLarge], [ErrBadCompression]) are misuse, not corruption;
// ErrBatchTooLarge corresponds to MESSAGE_TOO_LARGE (10). No input, however
// malformed, makes this package panic, except the documented accessors and
// setters on a Batch shorter than its header.
//
// # Concurrency
//
// A Batch is a plain byte slice: any number of goroutines may read it
// (accessors, Validate, ValidateHeader, Records with their own Decoders),
// and a goroutine that writes it (SetBaseOffset, SetPartitionLeaderEpoch,
// SetAttributes, SetCRC) must not overlap readers. A [Decoder], an
// [Iter] and a [Builder] are each for one goroutine at a time; give every
// goroutine its own. Package-level state (codec pools) is safe for
// concurrent use.
package batch
