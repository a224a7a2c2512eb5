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
//
// A record's offset is baseOffset + offsetDelta. Its timestamp is
// baseTimestamp + timestampDelta under CreateTime and maxTimestamp under
// LogAppendTime. When the delete-horizon bit is set, baseTimestamp holds
// the time after which compaction may drop the batch's tombstones; Kafka's
// cleaner then writes the deltas relative to it, so baseTimestamp +
// timestampDelta is still each record's timestamp, and this package reads
// it that way.
//
// The partition (package log) also needs operations that are not part of
// this API and reaches them through the module's internal/batchaccess:
// validation that also returns the range of the records' timestamps (a
// producer batch's real maxTimestamp without a second pass, even for a
// compressed batch), the patches of a header copy with the CRC the batch
// would have with it (an append never writes into the producer's bytes),
// the LogAppendTime stamp, the header-only batch compaction keeps, and the
// framing of either message format.
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
// CRCWithHeader, the Builder) is computed by one function. On amd64 CPUs
// with AVX-512 and VPCLMULQDQ it folds inputs of 512 bytes and more 256
// bytes at a time with carry-less multiplies (the package's own assembly,
// tested against hash/crc32), about twice the speed of the SSE 4.2 CRC32
// instruction loop; shorter inputs, other CPUs and the purego build tag
// use github.com/klauspost/crc32.
//
// # Hot paths
//
// The Builder encodes the common record, without headers and with every
// varint one or two bytes long (key and value together under 8 KiB, a
// timestamp within 8192 ms of the batch's base timestamp, an offset delta
// below 8192), in one pass: the sizes and encodings of its varints
// computed without loops, its fields stored into a buffer grown once, key
// and value copied last. Validate walks an uncompressed batch whose
// varints all take one or two bytes in a loop without calls, and any
// other batch, or one that loop refuses, with the general walk, which
// says what is wrong and where. The record decoder behind a partition's
// Records.All (log package) decodes the batches of a read result a run of
// records at a time; a run of one-record batches of the common shape (no
// headers, no compression, varints of one or two bytes) goes through a
// loop without calls that makes the record checks of [Iter.Next] in the
// cheaper form one record filling its batch allows: the record's length
// must encode exactly the bytes left in the batch, the offset delta must
// lie within the batch's last offset delta, and key, value and an empty
// header count must end on the batch's last byte. Anything else, damage
// included, goes to the general loop, which reports it in Next's words.
// Every fast form produces and accepts exactly what the general one does;
// the tests and fuzz targets compare them byte for byte and verdict for
// verdict (the one-record loop on every value of every byte of a record
// set and every cut of it).
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
// be built and decoded inside a testing/synctest bubble: a zstd codec made
// there (it holds a channel, which belongs to the bubble) serves its call
// and is dropped instead of pooled, so nothing outside the bubble touches
// it. A pooled decompressor keeps state from the payloads it decoded
// before; a valid payload decodes the same whatever that state, and a gzip
// payload that fails is decoded again by a new reader, so that a corrupt
// payload always gets the same error.
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
