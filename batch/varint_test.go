package batch

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// Oracle: the zig-zag varints of the record format are encoding/binary's
// Varint. Encoders, both decoders (cursor and fast path) and the size
// functions agree with it, and both decoders reject the same overflows.
func TestVarintOracle(t *testing.T) {
	vals := []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, math.MaxInt32, math.MinInt32,
		math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		vals = append(vals, r.Int64()>>r.IntN(64))
	}
	for _, v := range vals {
		want := binary.AppendVarint(nil, v)
		// varlong
		if got := appendVarlong(nil, v); string(got) != string(want) || varlongSize(v) != len(want) {
			t.Fatalf("appendVarlong(%d) = %x, want %x", v, got, want)
		}
		c := cursor{b: want}
		if got := c.varlong("v"); got != v || c.failed || c.pos != len(want) {
			t.Fatalf("cursor.varlong(%x) = %d, %v", want, got, c.failed)
		}
		if got, p := readVarlongSlow(want, 0); got != v || p != len(want) {
			t.Fatalf("readVarlongSlow(%x) = %d, %d", want, got, p)
		}
		// varint: only int32 values decode
		c = cursor{b: want}
		got := c.varint("v")
		got2, p := readVarintSlow(want, 0)
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			if enc := appendVarint(nil, int32(v)); string(enc) != string(want) || varintSize(int32(v)) != len(want) {
				t.Fatalf("appendVarint(%d) = %x, want %x", v, enc, want)
			}
			if got != int32(v) || c.failed || got2 != int32(v) || p != len(want) {
				t.Fatalf("varint(%x) = %d/%d, %v/%d", want, got, got2, c.failed, p)
			}
		} else if !c.failed || p != -1 {
			t.Fatalf("varint(%x) of %d accepted", want, v)
		}
	}
	// Over-long encodings: 6-byte varint, 11-byte varlong, 10th byte > 1.
	for _, bad := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0x10}, // 5 bytes but > 32 bits
		{0x80},                         // truncated
	} {
		c := cursor{b: bad}
		c.varint("v")
		if _, p := readVarintSlow(bad, 0); !c.failed || p != -1 {
			t.Fatalf("varint %x accepted", bad)
		}
	}
	for _, bad := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		{0xff, 0xff},
	} {
		c := cursor{b: bad}
		c.varlong("v")
		if _, p := readVarlongSlow(bad, 0); !c.failed || p != -1 {
			t.Fatalf("varlong %x accepted", bad)
		}
	}
}
