package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Builder errors. They mark misuse of the Builder, not corrupt input, and
// wrap nothing. Kafka error codes, should a broker answer with them:
// MESSAGE_TOO_LARGE (10) for ErrBatchTooLarge, INVALID_REQUEST (42)
// otherwise.
var (
	// ErrOffsetOrder is returned by AddAt for an offset not greater than
	// the previous record's, below the base offset, or more than MaxInt32
	// past it, and by SetLastOffsetDelta for a delta below the last
	// record's.
	ErrOffsetOrder = errors.New("partlog/batch: record offset out of order or out of range")
	// ErrBatchTooLarge is returned when a record or the batch would not fit
	// the format's 32-bit lengths.
	ErrBatchTooLarge = errors.New("partlog/batch: batch too large")
	// ErrBadCompression is returned for an unknown codec or a compression
	// level the codec does not have.
	ErrBadCompression = errors.New("partlog/batch: bad compression codec or level")
)

// Producer identifies an idempotent or transactional producer in a batch
// header.
type Producer struct {
	// ID is the producer id the broker handed out (InitProducerId).
	ID int64
	// Epoch is the producer's epoch.
	Epoch int16
	// BaseSequence is the sequence number of the batch's first record; the
	// record at offsetDelta d has BaseSequence + d.
	BaseSequence int32
}

// BuilderOptions configure the header of the batches a Builder encodes.
// The zero value builds an uncompressed CreateTime batch at base offset 0,
// partition leader epoch 0, without a producer.
type BuilderOptions struct {
	// Compression is the codec of the records. Snappy is written in the
	// xerial framing, as the Java client writes it; every Kafka broker and
	// client reads that form.
	Compression Compression
	// CompressionLevel is the codec's level; zero is the codec's default.
	// gzip: -2 (Huffman only) to 9; lz4: 1 to 9; zstd: zstd's levels,
	// -131072 to 22 (mapped onto klauspost/compress's four speeds);
	// snappy has none.
	CompressionLevel int
	// BaseOffset is the offset of the first record. A producer leaves it
	// 0; the broker rewrites it in place (Batch.SetBaseOffset).
	BaseOffset int64
	// PartitionLeaderEpoch is written as is. Producers send -1
	// (NoPartitionLeaderEpoch) or 0 (librdkafka); the broker stamps its
	// epoch in place (Batch.SetPartitionLeaderEpoch).
	PartitionLeaderEpoch int32
	// Producer, when set, makes the batch idempotent; nil writes
	// NoProducerID, NoProducerEpoch and NoSequence.
	Producer *Producer
	// Transactional sets the transactional attribute bit. Kafka requires
	// a Producer with it; the Builder does not check.
	Transactional bool
	// LogAppendTime sets timestamp type 1: the batch's maxTimestamp is
	// AppendTime and every record reads as that timestamp. Record
	// timestamps are still encoded, as a broker leaves them.
	LogAppendTime bool
	// AppendTime is the broker's append time in milliseconds, used only
	// with LogAppendTime.
	AppendTime int64
	// DeleteHorizon, when positive, marks the batch as one compaction
	// rewrote while it held tombstones or transaction markers: attribute
	// bit 6 (hasDeleteHorizonMs) is set and baseTimestamp holds this time
	// in milliseconds, after which a later compaction may remove them.
	// Record timestamp deltas are then relative to the horizon, as Kafka's
	// cleaner writes them, so each record still decodes to its own
	// timestamp. Zero (or negative) writes an ordinary batch.
	DeleteHorizon int64

	// Control sets the control bit: the batch holds control records
	// (transaction markers; see AppendControlBatch), which must be
	// uncompressed. Compaction sets it when it rewrites a control batch.
	Control bool
}

// Builder encodes one RecordBatch v2 at a time. Add records, then call
// AppendTo or Build; Reset starts the next batch and keeps the buffers.
//
// Records are encoded as they are added, so the Builder keeps no reference
// to their keys, values or headers. A Builder is not safe for concurrent
// use. A partition appends a Builder's batch without Build with
// log.Partition.AppendBuilder.
//
// Example:
//
//	bld := batch.NewBuilder(batch.BuilderOptions{Compression: batch.CompressionZstd})
//	for _, m := range msgs {
//		if err := bld.Add(batch.Record{Key: m.Key, Value: m.Value, Timestamp: m.Time}); err != nil {
//			return err
//		}
//	}
//	b, err := bld.Build()
type Builder struct {
	opts BuilderOptions

	recs            []byte // the encoded, uncompressed records
	count           int32
	baseTimestamp   int64
	maxTimestamp    int64
	minTimestamp    int64 // smallest record timestamp other than NoTimestamp; MaxInt64 when none
	lastDelta       int32 // offsetDelta of the last record, -1 when none
	lastOffsetDelta int32 // lastOffsetDelta to write: >= lastDelta
	slowAdds        int   // records addSlow encoded (the tests' view of which path a record took)
	clockRead       int64 // Add's last time.Now reading, in ms (ClockRead)
	clockReadOK     bool  // Add read the clock since Reset
}

// NewBuilder returns a Builder for batches with the given options.
func NewBuilder(opts BuilderOptions) *Builder {
	b := &Builder{}
	b.Reset(opts)
	return b
}

// Reset discards the records added so far and starts a batch with opts.
func (b *Builder) Reset(opts BuilderOptions) {
	b.opts = opts
	b.recs = b.recs[:0]
	b.count = 0
	b.baseTimestamp = NoTimestamp
	if opts.DeleteHorizon > 0 {
		b.baseTimestamp = opts.DeleteHorizon
	}
	b.maxTimestamp = NoTimestamp
	b.minTimestamp = math.MaxInt64
	b.lastDelta = -1
	b.lastOffsetDelta = 0
	b.clockRead, b.clockReadOK = 0, false
}

// ClockRead returns the time Add last read from the clock (time.Now, in
// milliseconds) for a record added without a timestamp since the last
// Reset, and false when Add has not read it. That reading is a time the
// append of the batch cannot precede: log.Partition.AppendBuilder takes it
// for its own clock when every record is no newer than it, since such
// records cannot lie too far after the append time, and so reads the
// clock once less.
func (b *Builder) ClockRead() (ms int64, ok bool) { return b.clockRead, b.clockReadOK }

// encodedSize returns the size the batch would have uncompressed: the
// header plus the records added so far.
func (b *Builder) encodedSize() int { return HeaderSize + len(b.recs) }

// Add appends r at the next offset: the base offset for the first record,
// one past the previous record's otherwise. r.Offset is ignored.
//
// A record without a timestamp (Timestamp 0, the zero value) gets the time
// of the call, time.Now in milliseconds, as its CreateTime: what Kafka's
// producer does with a record sent without one, and what Go's Kafka
// clients do with a zero time. The time is the producer's, set here
// because a partition never rewrites the records of a CreateTime batch
// (Partition.AppendBatch stores them as given, as a Kafka broker does):
// the batch Build returns and the one Partition.AppendBuilder appends are
// the same. A record that has no time gets NoTimestamp (-1), which Kafka
// stores as is (its consumers see -1, and the time index skips it). A
// record at exactly 1970-01-01T00:00:00Z is added with AddAt, which keeps
// every timestamp as given.
func (b *Builder) Add(r Record) error {
	// One call, small enough to be inlined: r is encoded from the
	// caller's own copy.
	return b.add(&r, b.lastDelta+1, true)
}

// AddAt appends r at r.Offset, which must be greater than the previous
// record's offset, at least the base offset, and at most MaxInt32 past it.
// Gaps are allowed: compaction rewrites batches this way. r.Timestamp is
// stored as given, 0 included.
func (b *Builder) AddAt(r Record) error {
	d := r.Offset - b.opts.BaseOffset
	if d < 0 || d > math.MaxInt32 || d <= int64(b.lastDelta) {
		return fmt.Errorf("%w: offset %d after delta %d of base %d", ErrOffsetOrder, r.Offset, b.lastDelta, b.opts.BaseOffset)
	}
	return b.add(&r, int32(d), false)
}

// SetLastOffsetDelta sets the batch's lastOffsetDelta past its last
// record, so that the batch keeps covering offsets whose records were
// removed (compaction does this). It must not be below the last record's
// offset delta; it is reset when a later record goes past it.
func (b *Builder) SetLastOffsetDelta(d int32) error {
	if d < b.lastDelta || d < 0 {
		return fmt.Errorf("%w: lastOffsetDelta %d below record delta %d", ErrOffsetOrder, d, b.lastDelta)
	}
	b.lastOffsetDelta = d
	return nil
}

// add encodes r at offset delta delta, stamping it with the time of the
// call first when stamp is set and it has no timestamp (Add). A short record (see shortLimit) is
// written in one pass: every varint's encoding and size computed without
// a loop, the fields stored into the buffer (grown beforehand, if at all)
// without a capacity check each, the key and value copied last. Any other
// record goes to addSlow. The batch's first record sets its base and
// largest timestamps first (base: its own timestamp, unless a delete
// horizon is set), as addSlow does, so that it is short too when it fits
// (the only record of a one-record batch).
func (b *Builder) add(r *Record, delta int32, stamp bool) error {
	if stamp && r.Timestamp == 0 {
		// Add's record without a timestamp gets the time of the call.
		r.Timestamp = time.Now().UnixMilli()
		b.clockRead, b.clockReadOK = r.Timestamp, true
	}
	if b.count == 0 {
		if b.opts.DeleteHorizon <= 0 {
			b.baseTimestamp = r.Timestamp
		}
		b.maxTimestamp = r.Timestamp
	}
	tsd := r.Timestamp - b.baseTimestamp
	kl, vl := len(r.Key), len(r.Value)
	p := len(b.recs)
	if len(r.Headers) != 0 || uint64(tsd+shortLimit) >= 2*shortLimit || uint32(delta) >= shortLimit ||
		uint(kl+vl) >= shortMaxData || p >= plainMaxRecs {
		return b.addSlow(r, delta)
	}
	if cap(b.recs)-p < kl+vl+shortRoom {
		b.growRecs(kl + vl + shortRoom)
	}
	all := b.recs[:cap(b.recs)]
	h := (*[16]byte)(all[p : p+16]) // shortRoom leaves at least 16 bytes
	// A nil key or value is length -1, zig-zag 1; a length n is 2n.
	kz, vz := uint64(kl)<<1, uint64(vl)<<1
	if r.Key == nil {
		kz = 1
	}
	if r.Value == nil {
		vz = 1
	}
	tsE, tsN := encShort(uint64(tsd<<1 ^ tsd>>63))
	odE, odN := encShort(uint64(delta) << 1)
	kE, kN := encShort(kz)
	vE, vN := encShort(vz)
	// attributes, timestampDelta and offsetDelta, then the length before
	// them: at most 7 bytes, stored as one word; then the key's length,
	// ending by byte 9.
	mid := uint64(uint8(r.Attributes)) | tsE<<8 | odE<<(8+8*tsN&63)
	midN := 1 + tsN + odN
	w, q := encShort(uint64(1+midN+kN+kl+vN+vl) << 1)
	w |= mid << (8 * q & 63)
	q += midN
	binary.LittleEndian.PutUint64(h[:8], w)
	binary.LittleEndian.PutUint16(h[q&7:], uint16(kE))
	// Then the key, the value's length, the value and headerCount 0, at
	// positions in all.
	kq := p + q + kN
	vq := kq + kl
	binary.LittleEndian.PutUint16(all[vq:vq+2], uint16(vE))
	vq += vN
	end := vq + vl
	all[end] = 0
	b.recs = all[:end+1]
	b.count++
	b.maxTimestamp = max(b.maxTimestamp, r.Timestamp)
	if r.Timestamp != NoTimestamp {
		b.minTimestamp = min(b.minTimestamp, r.Timestamp)
	}
	b.lastDelta = delta
	b.lastOffsetDelta = max(b.lastOffsetDelta, delta)
	// The copies last: little is live across their calls.
	if kl > 0 {
		copy(all[kq:kq+kl], r.Key)
	}
	copy(all[vq:end], r.Value)
	return nil
}

// growRecs grows the records buffer for n more bytes.
//
//go:noinline
func (b *Builder) growRecs(n int) { b.recs = slices.Grow(b.recs, n) }

// The short record of Builder.add: no headers, a timestamp within 8192 ms
// of the base timestamp, an offset delta below 8192, and key and value
// together shorter than shortMaxData bytes. Each of its varints then takes
// one or two bytes, the whole record at most shortMaxFields bytes more than
// its key and value, and its length varint two bytes at most.
const (
	shortLimit     = 1 << 13
	shortMaxFields = 12 // length 2, attributes 1, timestamp 2, offset 2, key length 2, value length 2, header count 1
	shortMaxData   = shortLimit - shortMaxFields
	shortRoom      = shortMaxFields + 16 // the word stores may write past the record
)

// encShort returns the uvarint encoding of x < 1<<14, its first byte
// in the low byte of e, and its size n, 1 or 2. The branch is predicted
// well (a batch's records mostly share their fields' sizes) and measured
// faster than computing both without one, which loads the ALUs a
// second hardware thread shares.
func encShort(x uint64) (e uint64, n int) {
	if x < 0x80 {
		return x, 1
	}
	// Two bytes: x&0x7f|0x80, then x>>7 (x&^0x7f shifted left once).
	return x + x&^0x7f + 0x80, 2
}

// addSlow is add for any record.
func (b *Builder) addSlow(r *Record, delta int32) error {
	b.slowAdds++
	if b.lastDelta == math.MaxInt32 {
		return fmt.Errorf("%w: offset delta past MaxInt32", ErrOffsetOrder)
	}
	if b.count == 0 {
		if b.opts.DeleteHorizon <= 0 {
			b.baseTimestamp = r.Timestamp
		}
		b.maxTimestamp = r.Timestamp
	}
	tsDelta := r.Timestamp - b.baseTimestamp
	if len(r.Headers) == 0 && len(r.Key) < plainMaxLen && len(r.Value) < plainMaxLen && len(b.recs) < plainMaxRecs {
		// The common record, without headers: its size cannot pass the
		// limits, and it is encoded in one step.
		b.recs = appendPlainRecord(b.recs, r, delta, tsDelta)
	} else {
		n, err := recordBodySize(r, delta, tsDelta)
		if err != nil {
			return b.refuse(err)
		}
		if int64(len(b.recs))+int64(n)+maxVarintLen > math.MaxInt32-HeaderSize {
			return b.refuse(fmt.Errorf("%w: records pass %d bytes", ErrBatchTooLarge, math.MaxInt32-HeaderSize))
		}
		b.recs = appendRecord(b.recs, r, n, delta, tsDelta)
	}
	b.count++
	b.maxTimestamp = max(b.maxTimestamp, r.Timestamp)
	if r.Timestamp != NoTimestamp {
		b.minTimestamp = min(b.minTimestamp, r.Timestamp)
	}
	b.lastDelta = delta
	b.lastOffsetDelta = max(b.lastOffsetDelta, delta)
	return nil
}

// refuse returns err for a record addSlow does not add, first undoing
// what add and addSlow set when it was to be the batch's first: its base
// and largest timestamps, which a batch without records must not carry.
func (b *Builder) refuse(err error) error {
	if b.count == 0 {
		b.baseTimestamp, b.maxTimestamp = NoTimestamp, NoTimestamp
		if b.opts.DeleteHorizon > 0 {
			b.baseTimestamp = b.opts.DeleteHorizon
		}
	}
	return err
}

// Bounds of Builder.add's plain path: a key and a value shorter than
// plainMaxLen make a record of well under 2*plainMaxLen+32 bytes, which
// added to plainMaxRecs bytes stays far below the batch's 32-bit limit.
const (
	plainMaxLen  = 1 << 20
	plainMaxRecs = 1 << 30
)

// appendPlainRecord is appendRecord for a record without headers whose
// key and value are shorter than plainMaxLen: the size is summed from the
// fields' varint sizes, the buffer grown once, and the fields written in
// place, one- and two-byte varints (every field of a small record) in
// line.
func appendPlainRecord(dst []byte, r *Record, offsetDelta int32, tsDelta int64) []byte {
	ts := uint64(tsDelta<<1 ^ tsDelta>>63)
	od := uint64(uint32(offsetDelta<<1 ^ offsetDelta>>31))
	// A nil key or value is length -1, zig-zag 1; a length n (under
	// plainMaxLen) is 2n.
	kz, vz := uint64(1), uint64(1)
	if r.Key != nil {
		kz = uint64(len(r.Key)) << 1
	}
	if r.Value != nil {
		vz = uint64(len(r.Value)) << 1
	}
	body := 2 + uvarintLen(ts) + uvarintLen(od) + uvarintLen(kz) + len(r.Key) + uvarintLen(vz) + len(r.Value)
	start := len(dst)
	total := uvarintLen(uint64(body)<<1) + body
	if cap(dst)-start < total {
		dst = slices.Grow(dst, total)
	}
	dst = dst[:start+total]
	b := dst[start:]
	p := putUvarintShort(b, 0, uint64(body)<<1)
	b[p] = byte(r.Attributes)
	p = putUvarintShort(b, p+1, ts)
	p = putUvarintShort(b, p, od)
	p = putUvarintShort(b, p, kz)
	p += copy(b[p:], r.Key)
	p = putUvarintShort(b, p, vz)
	p += copy(b[p:], r.Value)
	b[p] = 0 // headerCount
	return dst
}

// uvarintLen is uvarintSize with the one- and two-byte cases in line.
func uvarintLen(x uint64) int {
	if x < 0x80 {
		return 1
	}
	if x < 0x4000 {
		return 2
	}
	return uvarintSize(x)
}

// putUvarintShort is putUvarint with the one- and two-byte cases in line;
// b must have room.
func putUvarintShort(b []byte, p int, x uint64) int {
	if x < 0x80 {
		b[p] = byte(x)
		return p + 1
	}
	if x < 0x4000 {
		b[p] = byte(x) | 0x80
		b[p+1] = byte(x >> 7)
		return p + 2
	}
	return putUvarint(b, p, x)
}

// recordBodySize returns the size of r's encoding after its length varint.
func recordBodySize(r *Record, offsetDelta int32, tsDelta int64) (int, error) {
	n := int64(1 + varlongSize(tsDelta) + varintSize(offsetDelta))
	n += bytesSize(r.Key) + bytesSize(r.Value)
	if int64(len(r.Headers)) > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d headers", ErrBatchTooLarge, len(r.Headers))
	}
	n += int64(varintSize(int32(len(r.Headers))))
	for i := range r.Headers {
		n += bytesSize(r.Headers[i].Key) + bytesSize(r.Headers[i].Value)
	}
	if n > math.MaxInt32-HeaderSize {
		return 0, fmt.Errorf("%w: record of %d bytes", ErrBatchTooLarge, n)
	}
	return int(n), nil
}

// bytesSize is the encoded size of a nullable byte string (huge lengths
// are caught by the record size check).
func bytesSize(p []byte) int64 {
	if p == nil {
		return 1
	}
	if len(p) > math.MaxInt32 {
		return math.MaxInt64 / 4
	}
	return int64(varintSize(int32(len(p)))) + int64(len(p))
}

// encodeRecord appends r's encoding, as it appears inside a batch, to dst:
// the length varint, then the fields of Record's diagram. offsetDelta and
// timestampDelta are relative to the batch's base offset and base
// timestamp; r.Offset and r.Timestamp are not used. A nil header key is
// written as an empty one (Kafka's header keys are never null).
func encodeRecord(dst []byte, r Record, offsetDelta int32, timestampDelta int64) ([]byte, error) {
	n, err := recordBodySize(&r, offsetDelta, timestampDelta)
	if err != nil {
		return dst, err
	}
	return appendRecord(dst, &r, n, offsetDelta, timestampDelta), nil
}

func appendRecord(dst []byte, r *Record, bodySize int, offsetDelta int32, tsDelta int64) []byte {
	dst = appendVarint(dst, int32(bodySize))
	dst = append(dst, byte(r.Attributes))
	dst = appendVarlong(dst, tsDelta)
	dst = appendVarint(dst, offsetDelta)
	dst = appendNullable(dst, r.Key)
	dst = appendNullable(dst, r.Value)
	dst = appendVarint(dst, int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = appendVarint(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

func appendNullable(dst, p []byte) []byte {
	if p == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int32(len(p))), p...)
}

// AppendTo appends the encoded batch to dst and returns the extended
// slice; the batch is dst[len(dst):] of the result. The Builder is left as
// it was: call Reset before the next batch.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	o := &b.opts
	if o.Compression >= numCompressions {
		return dst, fmt.Errorf("%w: codec %d", ErrBadCompression, o.Compression)
	}
	if o.Control && o.Compression != CompressionNone {
		return dst, fmt.Errorf("%w: control batches are not compressed", ErrBadCompression)
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	b.putHeader(dst[start:])
	var err error
	dst, err = appendCompressed(dst, o.Compression, o.CompressionLevel, b.recs)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", ErrBadCompression, err)
	}
	size := len(dst) - start
	if size > MaxBatchSize {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrBatchTooLarge, size)
	}
	bt := Batch(dst[start:])
	binary.BigEndian.PutUint32(bt[batchLengthOffset:], uint32(size-LogOverhead))
	bt.SetCRC()
	return dst, nil
}

// putHeader writes the batch's header into h (HeaderSize bytes), all but
// batchLength and the CRC, which depend on the encoded records.
func (b *Builder) putHeader(h []byte) {
	o := &b.opts
	binary.BigEndian.PutUint64(h[baseOffsetOffset:], uint64(o.BaseOffset))
	binary.BigEndian.PutUint32(h[partitionLeaderEpochOffset:], uint32(o.PartitionLeaderEpoch))
	h[magicOffset] = Magic
	attrs := Attributes(0).WithCompression(o.Compression)
	maxTS := b.maxTimestamp
	if o.LogAppendTime {
		attrs |= timestampTypeBit
		maxTS = o.AppendTime
	}
	if o.Transactional {
		attrs |= transactionalBit
	}
	if o.Control {
		attrs |= controlBit
	}
	if o.DeleteHorizon > 0 {
		attrs |= deleteHorizonBit
	}
	binary.BigEndian.PutUint16(h[attributesOffset:], uint16(attrs))
	binary.BigEndian.PutUint32(h[lastOffsetDeltaOffset:], uint32(b.lastOffsetDelta))
	binary.BigEndian.PutUint64(h[baseTimestampOffset:], uint64(b.baseTimestamp))
	binary.BigEndian.PutUint64(h[maxTimestampOffset:], uint64(maxTS))
	p := Producer{ID: NoProducerID, Epoch: NoProducerEpoch, BaseSequence: NoSequence}
	if o.Producer != nil {
		p = *o.Producer
	}
	binary.BigEndian.PutUint64(h[producerIDOffset:], uint64(p.ID))
	binary.BigEndian.PutUint16(h[producerEpochOffset:], uint16(p.Epoch))
	binary.BigEndian.PutUint32(h[baseSequenceOffset:], uint32(p.BaseSequence))
	binary.BigEndian.PutUint32(h[recordsCountOffset:], uint32(b.count))
}

// Build returns the encoded batch in a new slice.
func (b *Builder) Build() (Batch, error) {
	out, err := b.AppendTo(make([]byte, 0, HeaderSize+len(b.recs)))
	if err != nil {
		return nil, err
	}
	return Batch(out), nil
}
