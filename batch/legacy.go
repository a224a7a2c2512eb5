package batch

import (
	"fmt"

	"github.com/partlog/partlog/internal/legacy"
)

// Legacy message sets (magic 0 and 1, Kafka 0.8 to 0.10) are read, never
// written: a log Kafka wrote before the upgrade to RecordBatch v2 keeps
// them, and they are served as stored. The byte level (framing, fields,
// CRC-32) is internal/legacy's; this file decodes their records.

// legacyPeekSize is the number of bytes needed to tell the format: a v2
// batch and a legacy message both hold their magic at byte 16.
const legacyPeekSize = legacy.MagicOffset + 1

// PeekMagic returns the magic byte of the entry at the start of b (a v2
// batch and a legacy message both hold it at byte 16); ok is false when b
// is too short to hold it.
func PeekMagic(b []byte) (magic int8, ok bool) {
	if len(b) < legacyPeekSize {
		return 0, false
	}
	return int8(b[legacy.MagicOffset]), true
}

// FrameEntry frames the first entry of a record set as stored on disk or
// sent in a fetch response, in either message format: a RecordBatch v2
// (magic 2) or a legacy message (magic 0 or 1, which a log Kafka wrote
// before 0.11 keeps). It returns the entry's total size (b[:size] is the
// entry, b[size:] the rest of the set), its magic and the offset after it
// (a v2 batch's NextOffset; a legacy entry's offset + 1, the offset of a
// compressed wrapper being that of its last inner message). It checks
// framing only, as Parse does for a v2 batch (no CRC: Validate and
// Decoder.ValidateLegacy check the entry). An error is a *CorruptionError;
// a b shorter than the entry wraps ErrTruncated.
//
// A reader of a record set that may hold legacy messages walks it with
// FrameEntry, handing a v2 entry to Batch's methods and a legacy one to
// Decoder.AppendLegacyRecords.
func FrameEntry(b []byte) (size int, magic int8, next int64, err error) {
	m, ok := PeekMagic(b)
	if !ok {
		return 0, 0, 0, corruptTruncated(0, "batchLength", "have %d bytes, need %d to read the magic", len(b), legacyPeekSize)
	}
	if legacy.IsMagic(m) {
		e, _, err := legacy.Parse(b)
		if err != nil {
			return 0, m, 0, located(err)
		}
		return len(e), m, e.Offset() + 1, nil
	}
	bt, _, err := Parse(b)
	if err != nil {
		return 0, m, 0, err
	}
	return len(bt), m, bt.NextOffset(), nil
}

// ValidateLegacy checks the legacy entry (magic 0 or 1) e as a consumer
// decodes it: framing (e holds exactly one entry) and the CRC-32 (IEEE),
// as Kafka's log recovery checks them, a known codec (none, gzip, snappy, lz4: zstd needs magic 2),
// the key and value framing and, for a compressed wrapper, its nested
// message set (decompressed under d's limit): at least one inner message, each framing, matching its CRC-32, having
// the wrapper's magic and no codec of its own, offsets strictly
// increasing and ending at the wrapper's offset (magic 1: relative,
// starting at 0 or above).
// An error wraps ErrCorrupt (ErrTruncated for a short e).
func (d *Decoder) ValidateLegacy(e []byte) error {
	if err := legacy.Entry(e).ValidateHeader(); err != nil {
		return located(err)
	}
	if c := legacy.Entry(e).Compression(); c > legacy.MaxCompression {
		return corruptf(legacy.AttributesOffset, "attributes", "codec %d in a magic %d message", c, legacy.Entry(e).Magic())
	}
	_, err := d.appendLegacyRecords(nil, legacy.Entry(e), true)
	return err
}

// LegacyBaseOffset returns the first offset the legacy entry at the start
// of b covers: its own offset for a plain message, the first inner
// message's offset for a compressed wrapper (which means decompressing it
// into d's buffer). An error wraps ErrCorrupt.
func (d *Decoder) LegacyBaseOffset(b []byte) (int64, error) {
	e, _, err := legacy.Parse(b)
	if err != nil {
		return 0, located(err)
	}
	if e.Compression() == legacy.CompressionNone {
		return e.Offset(), nil
	}
	recs, err := d.appendLegacyRecords(d.legacy[:0], e, false)
	d.legacy = recs[:0]
	if err != nil {
		return 0, err
	}
	return recs[0].Offset, nil
}

// AppendLegacyRecords appends the records of the legacy entry (magic 0 or
// 1) at the start of b to dst, in offset order: the message itself for a
// plain message, its inner messages for a compressed
// wrapper (decompressed into d's buffer, under d's limit). Each Record
// has its absolute offset, its timestamp (NoTimestamp under magic 0; the
// wrapper's under LogAppendTime), key and value (aliasing e or d's buffer,
// valid until d's next use) and attribute byte; Headers is nil. With
// check, every inner message's CRC-32 and magic are checked too
// (ValidateLegacy checks the entry's own). An error wraps ErrCorrupt.
func (d *Decoder) AppendLegacyRecords(dst []Record, b []byte, check bool) ([]Record, error) {
	e, _, err := legacy.Parse(b)
	if err != nil {
		return dst, located(err)
	}
	return d.appendLegacyRecords(dst, e, check)
}

// appendLegacyRecords is AppendLegacyRecords of a framed entry.
func (d *Decoder) appendLegacyRecords(dst []Record, e legacy.Entry, check bool) ([]Record, error) {
	if e.Compression() == legacy.CompressionNone {
		k, v, err := e.KeyValue()
		if err != nil {
			return dst, located(err)
		}
		return append(dst, Record{Offset: e.Offset(), Timestamp: e.Timestamp(), Key: k, Value: v, Attributes: e.Attributes()}), nil
	}
	c := Compression(e.Compression())
	if c > legacy.MaxCompression {
		return dst, corruptf(legacy.AttributesOffset, "attributes", "codec %d in a magic %d message", c, e.Magic())
	}
	_, value, err := e.KeyValue()
	if err != nil {
		return dst, located(err)
	}
	valuePos := int64(len(e) - len(value))
	if value == nil {
		return dst, corruptf(valuePos, "value", "compressed wrapper with a null value")
	}
	legacy.Work.Decompressions.Add(1)
	out, err := decompress(d.buf[:0], c, value, d.limit(len(value)))
	d.buf = out[:0]
	if err != nil {
		return dst, corruptf(valuePos, "value", "%s wrapper: %v", c, err)
	}
	first := len(dst)
	for p := 0; p < len(out); {
		in, _, err := legacy.Parse(out[p:])
		if err != nil {
			return dst, corruptf(valuePos, fmt.Sprintf("inner[%d]", len(dst)-first), "at byte %d of the decompressed value: %v", p, err)
		}
		field := fmt.Sprintf("inner[%d]", len(dst)-first)
		if check {
			if err := in.ValidateHeader(); err != nil {
				return dst, corruptf(valuePos, field, "%v", err)
			}
			if in.Magic() != e.Magic() {
				return dst, corruptf(valuePos, field, "magic %d in a magic %d wrapper", in.Magic(), e.Magic())
			}
		}
		if in.Compression() != legacy.CompressionNone {
			return dst, corruptf(valuePos, field, "inner message compressed with %s", Compression(in.Compression()))
		}
		k, v, err := in.KeyValue()
		if err != nil {
			return dst, corruptf(valuePos, field, "%v", err)
		}
		ts := in.Timestamp()
		if e.LogAppendTime() {
			ts = e.Timestamp()
		}
		dst = append(dst, Record{Offset: in.Offset(), Timestamp: ts, Key: k, Value: v, Attributes: in.Attributes()})
		p += len(in)
	}
	inner := dst[first:]
	if len(inner) == 0 {
		return dst, corruptf(valuePos, "value", "compressed wrapper holds no message")
	}
	wrapper := e.Offset()
	if e.Magic() == legacy.MagicV1 {
		// Relative inner offsets: the wrapper's offset is the last one's.
		baseOff := int64(0)
		if wrapper != 0 {
			lastRel := inner[len(inner)-1].Offset
			if lastRel < 0 || lastRel > wrapper {
				return dst, corruptf(legacy.OffsetOffset, "offset",
					"wrapper offset %d below its last inner relative offset %d", wrapper, lastRel)
			}
			baseOff = wrapper - lastRel
		}
		for i := range inner {
			inner[i].Offset += baseOff
		}
	}
	prev := int64(-1)
	for i, r := range inner {
		if r.Offset <= prev || r.Offset < 0 {
			return dst, corruptf(valuePos, fmt.Sprintf("inner[%d]", i), "offset %d after %d", r.Offset, prev)
		}
		prev = r.Offset
	}
	if check && prev != wrapper && wrapper != 0 {
		return dst, corruptf(legacy.OffsetOffset, "offset", "wrapper offset %d, its last inner message has %d", wrapper, prev)
	}
	return dst, nil
}
