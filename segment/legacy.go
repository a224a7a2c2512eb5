package segment

import (
	"encoding/binary"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
)

// appendRange frames b for Append: one RecordBatch v2, or one legacy
// message (magic 0 or 1), which only compaction appends, copying legacy
// data Kafka wrote verbatim into its output. It returns the offsets b
// covers and its max timestamp (-1 for a magic 0 message); ok is false
// when b does not frame as exactly one entry.
func appendRange(b batch.Batch, n int) (first, last, maxTs int64, ok bool) {
	if m, peeked := batch.PeekMagic(b); peeked && legacy.IsMagic(m) {
		if n != len(b) {
			return 0, 0, 0, false // a legacy message is appended whole
		}
		e, rest, err := legacy.Parse(b)
		if err != nil || len(rest) != 0 || e.Offset() < 0 || e.Offset() > maxOffset {
			return 0, 0, 0, false
		}
		return legacyFirst(e), e.Offset(), e.Timestamp(), true
	}
	if len(b) < batch.HeaderSize || int64(b.Size()) != int64(n) ||
		b.Magic() != batch.Magic || b.LastOffsetDelta() < 0 {
		return 0, 0, 0, false
	}
	return b.BaseOffset(), b.LastOffset(), b.MaxTimestamp(), true
}

// legacyFirst returns the first offset the legacy message e covers: its
// own offset, or a compressed wrapper's first inner offset. A wrapper whose
// inner messages do not decode (recovery checks the CRC, as Kafka does,
// not the payload) counts from its own offset: it is still kept and served
// as stored.
func legacyFirst(e legacy.Entry) int64 {
	off := e.Offset()
	if e.Compression() == legacy.CompressionNone {
		return off
	}
	dec := decoderPool.Get().(*batch.Decoder)
	defer decoderPool.Put(dec)
	if f, err := dec.LegacyBaseOffset(e); err == nil && f >= 0 && f <= off {
		return f
	}
	return off
}

// legacyWalkFirst is legacyFirst for the walk's check of the whole legacy
// message e at pos (its CRC checked): a compressed wrapper's first offset
// comes from src.wrapperFirst when it can tell (CheckOptions.LegacyFirst),
// under legacyFirst's rule (an offset in [0, e's own], else e's own), so
// that a caller decoding the wrapper anyway does not make the walk
// decompress it a second time.
func (src *logSource) legacyWalkFirst(pos int64, e legacy.Entry) int64 {
	if src.wrapperFirst != nil && e.Compression() != legacy.CompressionNone {
		if f, ok := src.wrapperFirst(pos, e); ok {
			if f >= 0 && f <= e.Offset() {
				return f
			}
			return e.Offset()
		}
	}
	return legacyFirst(e)
}

// legacyPeekSize is how many bytes tell a batch's format: the magic byte
// is at hdrMagicAt in both.
const legacyPeekSize = hdrMagicAt + 1

// legacyBase fills in the first offset of the compressed legacy wrapper
// info describes, from its inner messages. A wrapper that does not decode
// (its CRC is Recover's business) keeps the wrapper's offset as its first:
// it is still served as stored.
func (s *Segment) legacyBase(info BatchInfo) (BatchInfo, error) {
	var buf []byte
	b, err := s.peek(info.Pos, int(info.Size), &buf)
	if err != nil {
		return BatchInfo{}, err
	}
	info.BaseOffset = legacyFirst(legacy.Entry(b))
	info.legacyWrapper = false
	return info, nil
}

// Byte offsets of the legacy message fields a scan reads (see package
// batch). Frozen: Kafka's format.
const (
	legacyAttributesAt = hdrMagicAt + 1         // 17
	legacyTimestampAt  = legacyAttributesAt + 1 // 18, magic 1 only
	legacyCodecMask    = 0x07
)

// decodeLegacy is decodeHeader for a legacy message of the .log at path (magic 0 or 1).
func decodeLegacy(path string, h []byte, pos, limit int64) (BatchInfo, error) {
	m := int8(h[hdrMagicAt])
	n := int64(int32(binary.BigEndian.Uint32(h[hdrLengthAt:])))
	size := n + batch.LogOverhead
	if size < legacyMinSize(m) {
		return BatchInfo{}, base.CorruptionErrorf(path, pos+hdrLengthAt, "messageSize", "magic %d message size %d", m, n)
	}
	if pos+size > limit {
		return BatchInfo{}, base.TornTailErrorf(path, pos+hdrLengthAt, "messageSize",
			"message of %d bytes runs past %d", size, limit)
	}
	off := int64(binary.BigEndian.Uint64(h[hdrBaseOffsetAt:]))
	if off < 0 || off > maxOffset {
		return BatchInfo{}, base.CorruptionErrorf(path, pos, "offset", "offset %d", off)
	}
	ts := batch.NoTimestamp
	if m == legacy.MagicV1 {
		ts = int64(binary.BigEndian.Uint64(h[legacyTimestampAt:]))
	}
	return BatchInfo{Pos: pos, Size: size, BaseOffset: off, LastOffset: off, MaxTimestamp: ts, Magic: m,
		legacyWrapper: h[legacyAttributesAt]&legacyCodecMask != 0}, nil
}

// legacyMinSize is the smallest entry of a legacy magic: the log overhead
// and the message's fixed fields (Kafka's RECORD_OVERHEAD_V0 14, _V1 22).
func legacyMinSize(magic int8) int64 {
	if magic == legacy.MagicV0 {
		return batch.LogOverhead + 14
	}
	return batch.LogOverhead + 22
}
