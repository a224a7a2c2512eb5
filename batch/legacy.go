package batch

import (
	"bytes"
	"fmt"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/legacy"
)

// Legacy message sets (magic 0 and 1, Kafka 0.8 to 0.10) are read and
// never appended: a log Kafka wrote before the upgrade to RecordBatch v2
// keeps them, and they are served as stored; compaction rewrites them as
// Kafka's cleaner does (AppendLegacyFiltered). The byte level (framing,
// fields, CRC-32, encoding) is internal/legacy's; this file decodes their
// records and filters them.

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

// frameEntry frames the first entry of a record set as stored on disk or
// sent in a fetch response: a RecordBatch v2 or a legacy message. It
// returns the entry's total size, its magic and the offset after it (a v2
// batch's NextOffset; a legacy entry's offset + 1, the offset of a
// compressed wrapper being that of its last inner message). It checks
// framing only (no CRC); a b shorter than the entry wraps ErrTruncated.
func frameEntry(b []byte) (size int, magic int8, next int64, err error) {
	m, ok := PeekMagic(b)
	if !ok {
		return 0, 0, 0, corruptTruncated(0, "batchLength", "have %d bytes, need %d to read the magic", len(b), legacyPeekSize)
	}
	if legacy.IsMagic(m) {
		e, _, err := legacy.Parse(b)
		if err != nil {
			return 0, m, 0, err
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
		return err
	}
	if c := legacy.Entry(e).Compression(); c > legacy.MaxCompression {
		return base.CorruptionErrorf("", legacy.AttributesOffset, "attributes", "codec %d in a magic %d message", c, legacy.Entry(e).Magic())
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
		return 0, err
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
		return dst, err
	}
	return d.appendLegacyRecords(dst, e, check)
}

// AppendLegacyFiltered appends to dst the legacy entry (magic 0 or 1) at
// the start of b with only the records keep accepts, as Kafka's log
// cleaner rewrites legacy messages. keep sees each record as
// AppendLegacyRecords decodes it (its Key and Value valid during the
// call), in offset order. When keep accepts every record the entry is
// appended as it is, and when it accepts none nothing is. A compressed
// wrapper from which some records go is written again with the others:
// the same magic, codec and attributes, the inner messages as stored at
// their original offsets (under magic 1 relative to the first one kept,
// as Kafka's producer writes them; absolute under magic 0), the wrapper's
// offset that of the last one kept, its timestamp (magic 1) the largest
// of theirs or, under LogAppendTime, its own, a null key and a new
// CRC-32. A magic 0 LZ4 value carries the frame header checksum Kafka
// writes under magic 0 (KAFKA-3160). kept and removed count the records.
// An error wraps ErrCorrupt when the entry does not decode (its inner
// messages are checked as ValidateLegacy checks them), ErrBadCompression
// when compressing fails; dst is then returned as it was.
func (d *Decoder) AppendLegacyFiltered(dst, b []byte, keep func(Record) bool) (out []byte, kept, removed int, err error) {
	e, _, err := legacy.Parse(b)
	if err != nil {
		return dst, 0, 0, err
	}
	if e.Compression() == legacy.CompressionNone {
		k, v, err := e.KeyValue()
		if err != nil {
			return dst, 0, 0, err
		}
		if keep(Record{Offset: e.Offset(), Timestamp: e.Timestamp(), Key: k, Value: v, Attributes: e.Attributes()}) {
			return append(dst, e...), 1, 0, nil
		}
		return dst, 0, 1, nil
	}
	set, valuePos, err := d.legacyInnerSet(e)
	if err != nil {
		return dst, 0, 0, err
	}
	recs, err := appendInnerRecords(d.legacy[:0], e, set, valuePos, true)
	d.legacy = recs[:0]
	if err != nil {
		return dst, 0, 0, err
	}
	// The set is compacted in place: a message kept moves to w, at or
	// before where it was, once keep has seen it; the records keep has
	// yet to see lie after it.
	w, p := 0, 0
	first, last, maxTS := int64(-1), int64(-1), int64(NoTimestamp)
	for _, r := range recs {
		in, _, err := legacy.Parse(set[p:]) // framed by appendInnerRecords
		if err != nil {
			return dst, 0, 0, err
		}
		p += len(in)
		if !keep(r) {
			removed++
			continue
		}
		kept++
		if first < 0 {
			first = r.Offset
		}
		last = r.Offset
		maxTS = max(maxTS, in.Timestamp())
		n := copy(set[w:], in)
		moved := legacy.Entry(set[w : w+n])
		if e.Magic() == legacy.MagicV1 {
			moved.SetOffset(r.Offset - first)
		}
		w += n
	}
	switch {
	case removed == 0:
		return append(dst, e...), kept, 0, nil
	case kept == 0:
		return dst, 0, removed, nil
	}
	m := legacy.Message{Offset: last, Magic: e.Magic(), Attributes: e.Attributes(), Timestamp: maxTS}
	if e.LogAppendTime() {
		m.Timestamp = e.Timestamp()
	}
	c := Compression(e.Compression())
	out, err = legacy.AppendMessageFunc(dst, m, func(b []byte) ([]byte, error) {
		at := len(b)
		b, err := appendCompressed(b, c, 0, set[:w])
		if err != nil {
			return b, fmt.Errorf("%w: %w", ErrBadCompression, err)
		}
		if c == CompressionLZ4 && e.Magic() == legacy.MagicV0 {
			err = legacy.SetLZ4HeaderChecksum(b[at:], legacy.MagicV0)
		}
		return b, err
	})
	if err != nil {
		return dst, 0, 0, err
	}
	return out, kept, removed, nil
}

// appendLegacyRecords is AppendLegacyRecords of a framed entry.
func (d *Decoder) appendLegacyRecords(dst []Record, e legacy.Entry, check bool) ([]Record, error) {
	if e.Compression() == legacy.CompressionNone {
		k, v, err := e.KeyValue()
		if err != nil {
			return dst, err
		}
		return append(dst, Record{Offset: e.Offset(), Timestamp: e.Timestamp(), Key: k, Value: v, Attributes: e.Attributes()}), nil
	}
	out, valuePos, err := d.legacyInnerSet(e)
	if err != nil {
		return dst, err
	}
	return appendInnerRecords(dst, e, out, valuePos, check)
}

// legacyInnerSet decompresses the message set of the compressed wrapper e
// into d's buffer, under d's limit; valuePos is the position of e's value.
// A magic 0 LZ4 value is read whatever its frame header checksum, as Kafka
// reads it: Kafka before 0.10 computed that checksum over the wrong bytes
// and still writes it so under magic 0 (KAFKA-3160).
func (d *Decoder) legacyInnerSet(e legacy.Entry) (out []byte, valuePos int64, err error) {
	c := Compression(e.Compression())
	if c > legacy.MaxCompression {
		return nil, 0, base.CorruptionErrorf("", legacy.AttributesOffset, "attributes", "codec %d in a magic %d message", c, e.Magic())
	}
	_, value, err := e.KeyValue()
	if err != nil {
		return nil, 0, err
	}
	valuePos = int64(len(e) - len(value))
	if value == nil {
		return nil, 0, base.CorruptionErrorf("", valuePos, "value", "compressed wrapper with a null value")
	}
	if c == CompressionLZ4 && e.Magic() == legacy.MagicV0 {
		if ok, err := legacy.LZ4HeaderChecksumOK(value, legacy.MagicV1); err == nil && !ok {
			value = bytes.Clone(value) // e aliases a mapping: fix a copy
			if err := legacy.SetLZ4HeaderChecksum(value, legacy.MagicV1); err != nil {
				return nil, 0, err
			}
		}
	}
	legacy.Work.Decompressions.Add(1)
	out, err = decompress(d.buf[:0], c, value, d.limit(len(value)))
	d.buf = out[:0]
	if err != nil {
		return nil, 0, base.CorruptionErrorf("", valuePos, "value", "%s wrapper: %v", c, err)
	}
	return out, valuePos, nil
}

// appendInnerRecords appends the records of out, the decompressed message
// set of the wrapper e whose value is at valuePos, to dst with their
// absolute offsets (see AppendLegacyRecords).
func appendInnerRecords(dst []Record, e legacy.Entry, out []byte, valuePos int64, check bool) ([]Record, error) {
	first := len(dst)
	for p := 0; p < len(out); {
		in, _, err := legacy.Parse(out[p:])
		if err != nil {
			return dst, base.CorruptionErrorf("", valuePos, fmt.Sprintf("inner[%d]", len(dst)-first), "at byte %d of the decompressed value: %v", p, err)
		}
		field := fmt.Sprintf("inner[%d]", len(dst)-first)
		if check {
			if err := in.ValidateHeader(); err != nil {
				return dst, base.CorruptionErrorf("", valuePos, field, "%v", err)
			}
			if in.Magic() != e.Magic() {
				return dst, base.CorruptionErrorf("", valuePos, field, "magic %d in a magic %d wrapper", in.Magic(), e.Magic())
			}
		}
		if in.Compression() != legacy.CompressionNone {
			return dst, base.CorruptionErrorf("", valuePos, field, "inner message compressed with %s", Compression(in.Compression()))
		}
		k, v, err := in.KeyValue()
		if err != nil {
			return dst, base.CorruptionErrorf("", valuePos, field, "%v", err)
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
		return dst, base.CorruptionErrorf("", valuePos, "value", "compressed wrapper holds no message")
	}
	wrapper := e.Offset()
	if e.Magic() == legacy.MagicV1 {
		// Relative inner offsets: the wrapper's offset is the last one's.
		baseOff := int64(0)
		if wrapper != 0 {
			lastRel := inner[len(inner)-1].Offset
			if lastRel < 0 || lastRel > wrapper {
				return dst, base.CorruptionErrorf("", legacy.OffsetOffset, "offset",
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
			return dst, base.CorruptionErrorf("", valuePos, fmt.Sprintf("inner[%d]", i), "offset %d after %d", r.Offset, prev)
		}
		prev = r.Offset
	}
	if check && prev != wrapper && wrapper != 0 {
		return dst, base.CorruptionErrorf("", legacy.OffsetOffset, "offset", "wrapper offset %d, its last inner message has %d", wrapper, prev)
	}
	return dst, nil
}
