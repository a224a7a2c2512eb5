package logtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// ErrMismatch is wrapped by every error that reports a difference between
// what a partition (or a program built on it) returned and what the model
// holds: the errors of [CompareRecords], of [Model.AppendBuilder], and of
// [Check] when a read returns other bytes than the model's batch. Reach
// the details with errors.As and a *[MismatchError].
var ErrMismatch = errors.New("partlog/logtest: mismatch")

// MismatchError is one difference between what was got and what the
// model wants: the offset where it is, the field that differs and both
// values, printed as
//
//	offset 3: value: got "x", want "y"
type MismatchError struct {
	// Offset is the offset of the record that differs (for a field of a
	// batch's header, the batch's base offset in the model).
	Offset int64
	// Field names what differs: "key", "value", "timestamp", "headers",
	// "offset", "record" (one side has no record there), a header field
	// of a batch ("batch producer id", "batch base offset", ...) or a
	// field of an AppendInfo ("append base", ...).
	Field string
	// Got and Want are the two values, printed for a reader: byte slices
	// quoted (null for nil), numbers as numbers.
	Got, Want string
}

// Error prints the offset, the field and both values.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("offset %d: %s: got %s, want %s", e.Offset, e.Field, e.Got, e.Want)
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// mismatch returns a *MismatchError with the values printed by show.
func mismatch(off int64, field string, got, want any) *MismatchError {
	return &MismatchError{Offset: off, Field: field, Got: show(got), Want: show(want)}
}

// show prints a value of a record or a batch for a mismatch message.
func show(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return showBytes(v)
	case []batch.RecordHeader:
		if v == nil {
			return "none"
		}
		parts := make([]string, len(v))
		for i, h := range v {
			parts[i] = showBytes(h.Key) + "=" + showBytes(h.Value)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v)
}

// showBytes quotes b, null when nil, cut after 64 bytes.
func showBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	const most = 64
	if len(b) > most {
		return fmt.Sprintf("%q... (%d bytes)", b[:most], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// ownRecord copies what the model keeps of a decoded record (the
// decoder's fields alias its buffers).
func ownRecord(rec batch.Record) Record {
	r := Record{Offset: rec.Offset, Timestamp: rec.Timestamp, Key: slices.Clone(rec.Key), Value: slices.Clone(rec.Value)}
	if rec.Headers != nil {
		r.Headers = make([]batch.RecordHeader, len(rec.Headers))
		for i, h := range rec.Headers {
			r.Headers[i] = batch.RecordHeader{Key: slices.Clone(h.Key), Value: slices.Clone(h.Value)}
		}
	}
	return r
}

// Records returns the data records the model holds with offsets in
// [from, to), in offset order: what a consumer reading from from sees
// up to to. Pass LogStartOffset and HighWatermark for everything a
// consumer can read, LogEndOffset as to for what a follower reads.
// Records of control batches (transaction markers) are left out, as a
// consumer's client leaves them out; Batches has them. The records are the
// model's; do not modify them.
func (m *Model) Records(from, to int64) []Record {
	from = max(from, m.logStart)
	var out []Record
	for i := range m.batches {
		b := &m.batches[i]
		if b.LastOffset < from || batch.Batch(b.Bytes).Attributes().IsControl() {
			continue
		}
		if b.BaseOffset >= to {
			break
		}
		for _, r := range b.Records {
			if r.Offset >= from && r.Offset < to {
				out = append(out, r)
			}
		}
	}
	return out
}

// AppendBuilder records the batch that Partition.AppendBuilder(bld)
// stored, given the AppendInfo it returned: the batch bld.Build() returns
// (bld must be unchanged since the append), stored as AppendBatch stores
// it, on a partition with the defaults AppendBatch assumes. Unless the
// producer state is unknown (after Crash) it first compares got with what
// the model expects ([Model.ExpectAppend]) and fails on the first field
// that differs, with a *[MismatchError] ("append base", "append last
// offset", "append duplicate"). A retry (got.Duplicate) changes nothing.
func (m *Model) AppendBuilder(bld *batch.Builder, got plog.AppendInfo) error {
	b, err := bld.Build()
	if err != nil {
		return fmt.Errorf("partlog/logtest: model append: %w", err)
	}
	want, err := m.ExpectAppend(b)
	switch {
	case errors.Is(err, ErrProducerStateUnknown):
	case err != nil:
		return fmt.Errorf("partlog/logtest: model append: the partition stored a batch the model refuses: %w", err)
	default:
		switch {
		case got.Base != want.Base:
			err = mismatch(want.Base, "append base", got.Base, want.Base)
		case got.LastOffset != want.LastOffset:
			err = mismatch(want.Base, "append last offset", got.LastOffset, want.LastOffset)
		case got.Duplicate != want.Duplicate:
			err = mismatch(want.Base, "append duplicate", got.Duplicate, want.Duplicate)
		}
		if err != nil {
			return fmt.Errorf("partlog/logtest: model append: %w", err)
		}
	}
	return m.AppendBatch(b, got.Base)
}

// DecodeRecords decodes the batches in b (what Records.Bytes of a
// partition read returns, or any concatenation of stored batches) into
// records, in order, leaving out the records of control batches as
// [Model.Records] does, so that a test compares a read with the model:
//
//	r, err := p.ReadFrom(off, 1<<20)
//	...
//	got, err := logtest.DecodeRecords(r.Bytes())
//	...
//	err = logtest.CompareRecords(got, m.Records(off, m.HighWatermark()))
func DecodeRecords(b []byte) ([]Record, error) {
	var out []Record
	var dec batch.Decoder
	for rest := b; len(rest) > 0; {
		bt, r, err := batch.Parse(rest)
		if err != nil {
			return out, fmt.Errorf("partlog/logtest: decode: %w", err)
		}
		rest = r
		if bt.Attributes().IsControl() {
			continue
		}
		for rec, err := range bt.All(&dec) {
			if err != nil {
				return out, fmt.Errorf("partlog/logtest: decode: batch at %d: %w", bt.BaseOffset(), err)
			}
			out = append(out, ownRecord(rec))
		}
	}
	return out, nil
}

// CompareRecords returns nil when got and want hold the same records, in
// order, and otherwise a *[MismatchError] naming the first difference:
// its offset, the field (offset, timestamp, key, value, headers, or
// record when one side has no record there) and both values, such as
//
//	offset 3: value: got "x", want "y"
//
// Keys, values and header values compare nil (null) unequal to empty.
func CompareRecords(got, want []Record) error {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return mismatch(want[i].Offset, "record", "none", describeRecord(want[i]))
		case i >= len(want):
			return mismatch(got[i].Offset, "record", describeRecord(got[i]), "none")
		}
		if err := compareRecord(got[i], want[i]); err != nil {
			return err
		}
	}
	return nil
}

// compareRecord returns the first field of g that differs from w's.
func compareRecord(g, w Record) *MismatchError {
	switch {
	case g.Offset != w.Offset:
		return mismatch(w.Offset, "offset", g.Offset, w.Offset)
	case g.Timestamp != w.Timestamp:
		return mismatch(w.Offset, "timestamp", g.Timestamp, w.Timestamp)
	case !equalNullable(g.Key, w.Key):
		return mismatch(w.Offset, "key", g.Key, w.Key)
	case !equalNullable(g.Value, w.Value):
		return mismatch(w.Offset, "value", g.Value, w.Value)
	case !slices.EqualFunc(g.Headers, w.Headers, func(a, b batch.RecordHeader) bool {
		return equalNullable(a.Key, b.Key) && equalNullable(a.Value, b.Value)
	}):
		return mismatch(w.Offset, "headers", g.Headers, w.Headers)
	}
	return nil
}

// equalNullable reports whether a and b are equal, nil unequal to empty.
func equalNullable(a, b []byte) bool {
	return (a == nil) == (b == nil) && string(a) == string(b)
}

// describeRecord prints a record for a mismatch where the other side has
// none.
func describeRecord(r Record) string {
	s := fmt.Sprintf("{timestamp %d key %s value %s", r.Timestamp, showBytes(r.Key), showBytes(r.Value))
	if r.Headers != nil {
		s += " headers " + show(r.Headers)
	}
	return s + "}"
}

// diffBatches returns the first difference between the batches in got and
// the model's batch want (got may hold more batches after it), as a
// *MismatchError: a header field, then the records field by field, then
// the bytes (the same records encoded differently). The caller knows the
// bytes differ; it never returns nil.
func diffBatches(got []byte, want *Batch) *MismatchError {
	off := want.BaseOffset
	if len(got) == 0 {
		return mismatch(off, "batch", "no bytes", fmt.Sprintf("the batch [%d, %d] of %d bytes", want.BaseOffset, want.LastOffset, len(want.Bytes)))
	}
	g, _, err := batch.Parse(got)
	if err != nil {
		return mismatch(off, "batch", fmt.Sprintf("%d bytes that do not parse (%v)", len(got), err), fmt.Sprintf("%d bytes", len(want.Bytes)))
	}
	w := batch.Batch(want.Bytes)
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"batch base offset", g.BaseOffset(), w.BaseOffset()},
		{"batch last offset", g.LastOffset(), w.LastOffset()},
		{"batch partition leader epoch", g.PartitionLeaderEpoch(), w.PartitionLeaderEpoch()},
		{"batch attributes", g.Attributes(), w.Attributes()},
		{"batch producer id", g.ProducerID(), w.ProducerID()},
		{"batch producer epoch", g.ProducerEpoch(), w.ProducerEpoch()},
		{"batch base sequence", g.BaseSequence(), w.BaseSequence()},
		{"batch base timestamp", g.BaseTimestamp(), w.BaseTimestamp()},
		{"batch max timestamp", g.MaxTimestamp(), w.MaxTimestamp()},
		{"batch record count", g.RecordsCount(), w.RecordsCount()},
	} {
		if f.got != f.want {
			return mismatch(off, f.name, f.got, f.want)
		}
	}
	gotRecs, err := DecodeRecords(g)
	if err != nil && !w.Attributes().IsControl() {
		return mismatch(off, "batch", fmt.Sprintf("records that do not decode (%v)", err), "the model's records")
	}
	if !w.Attributes().IsControl() {
		if err := CompareRecords(gotRecs, want.Records); err != nil {
			var me *MismatchError
			errors.As(err, &me)
			return me
		}
	}
	if g.Size() != len(want.Bytes) {
		return mismatch(off, "batch size", g.Size(), len(want.Bytes))
	}
	for i := range want.Bytes {
		if g[i] != want.Bytes[i] {
			return mismatch(off, fmt.Sprintf("batch byte %d", i), g[i], want.Bytes[i])
		}
	}
	return mismatch(off, "batch", "the same batch", "the same batch") // the caller saw a difference
}
