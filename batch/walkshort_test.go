package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWalkShort: Validate's short walk (every varint one or two bytes, no
// control batch) accepts only what fastWalk accepts, with the same time
// range, and takes every batch of that shape (so the hot path is the one
// that runs); a batch with a longer varint is left to fastWalk. Every
// single-byte change of a valid batch's records gets the same verdict from
// both walks where the short one decides.
func TestWalkShort(t *testing.T) {
	const base = int64(1_700_000_000_000)
	value := func(n int) []byte { return bytes.Repeat([]byte{'v'}, n) }
	tests := []struct {
		name  string
		recs  func() []Record
		short bool // every varint fits in two bytes
	}{
		{"one record", func() []Record { return []Record{{Value: value(10), Timestamp: base}} }, true},
		{"100 small records", func() []Record {
			r := make([]Record, 100)
			for i := range r {
				r[i] = Record{Value: value(100), Timestamp: base}
			}
			return r
		}, true},
		{"null key and value", func() []Record { return []Record{{Timestamp: base}, {Key: []byte{}, Value: []byte{}, Timestamp: base}} }, true},
		{"lengths at the one/two-byte edge", func() []Record {
			return []Record{{Key: value(63), Value: value(64), Timestamp: base}, {Key: value(64), Value: value(63), Timestamp: base}}
		}, true},
		{"value of 8191 bytes", func() []Record { return []Record{{Value: value(8191 - 16), Timestamp: base}} }, true},
		{"value of 8192 bytes (three-byte length)", func() []Record { return []Record{{Value: value(8192), Timestamp: base}} }, false},
		{"timestamp deltas of two bytes", func() []Record {
			return []Record{{Value: value(1), Timestamp: base}, {Value: value(1), Timestamp: base + 8191}, {Value: value(1), Timestamp: base - 8192}}
		}, true},
		{"timestamp delta of three bytes", func() []Record {
			return []Record{{Value: value(1), Timestamp: base}, {Value: value(1), Timestamp: base + 8192}}
		}, false},
		{"records without timestamp", func() []Record {
			return []Record{{Value: value(1), Timestamp: NoTimestamp}, {Value: value(1), Timestamp: NoTimestamp}}
		}, true},
		{"headers", func() []Record {
			return []Record{{Key: []byte("k"), Value: value(5), Timestamp: base, Headers: []RecordHeader{
				{Key: []byte("a"), Value: []byte("1")}, {Key: []byte{}, Value: nil}, {Key: value(70), Value: value(70)}}}}
		}, true},
		{"offset deltas past 64", func() []Record {
			r := make([]Record, 70)
			for i := range r {
				r[i] = Record{Value: value(3), Timestamp: base + int64(i)}
			}
			return r
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := build(t, BuilderOptions{}, tt.recs()...)
			recs := b[HeaderSize:]
			count, last := b.RecordsCount(), b.LastOffsetDelta()
			want, ok := fastWalk(recs, count, last, false, b.BaseTimestamp())
			require.True(t, ok, "fastWalk rejects a built batch")
			got, short := walkShort(recs, count, last, b.BaseTimestamp())
			require.Equal(t, tt.short, short, "walkShort's verdict")
			if short {
				require.Equal(t, want, got)
			}
			tr, err := b.validateTimes()
			require.NoError(t, err)
			require.Equal(t, want, tr)

			// Every single-byte change, three ways.
			mut := bytes.Clone(recs)
			for i := range mut {
				for _, x := range []byte{0x01, 0x80, 0xff} {
					mut[i] = recs[i] ^ x
					ftr, fok := fastWalk(mut, count, last, false, b.BaseTimestamp())
					str, sok := walkShort(mut, count, last, b.BaseTimestamp())
					if sok {
						require.True(t, fok, "byte %d ^ %#x: walkShort accepts what fastWalk rejects", i, x)
						require.Equal(t, ftr, str, "byte %d ^ %#x", i, x)
					}
					mut[i] = recs[i]
				}
			}
			// Wrong counts and a wrong lastOffsetDelta.
			for _, c := range []int32{count - 1, count + 1, -1} {
				_, sok := walkShort(recs, c, last, 0)
				require.False(t, sok, fmt.Sprintf("count %d of %d", c, count))
			}
			if last > 0 {
				_, sok := walkShort(recs, count, last-1, 0)
				require.False(t, sok, "lastOffsetDelta below the last record's")
			}
		})
	}
}

// TestWalkShortEveryByteValue: walkShort reads a length, an offset delta
// or a key or value length from the parity of its zig-zag value (odd is
// negative: refused, but for a null key or value's 1). Every value of
// every byte of batches with null, empty and short keys and values, and
// two-byte varints, gets no acceptance from walkShort that fastWalk (the
// general walk's fast form, which TestWalkShort and FuzzRecords tie to the
// cursor) refuses, and the same time range where both accept.
func TestWalkShortEveryByteValue(t *testing.T) {
	const base = int64(1_700_000_000_000)
	for _, recs := range [][]Record{
		{{Timestamp: base}, {Key: []byte{}, Value: []byte{}, Timestamp: base + 1}, {Key: []byte("k"), Value: []byte("vv"), Timestamp: base - 1}},
		{{Key: bytes.Repeat([]byte{'k'}, 70), Value: bytes.Repeat([]byte{'v'}, 130), Timestamp: base + 100}, {Value: []byte("x"), Timestamp: base - 100}},
	} {
		b := build(t, BuilderOptions{}, recs...)
		data := b[HeaderSize:]
		count, last, baseTs := b.RecordsCount(), b.LastOffsetDelta(), b.BaseTimestamp()
		_, ok := walkShort(data, count, last, baseTs)
		require.True(t, ok, "walkShort refuses a built batch")
		mut := bytes.Clone(data)
		for i := range mut {
			for v := range 256 {
				mut[i] = byte(v)
				str, sok := walkShort(mut, count, last, baseTs)
				if sok {
					ftr, fok := fastWalk(mut, count, last, false, baseTs)
					require.True(t, fok, "byte %d = %#x: walkShort accepts what fastWalk rejects", i, v)
					require.Equal(t, ftr, str, "byte %d = %#x", i, v)
				}
			}
			mut[i] = data[i]
		}
	}
}
