package batch

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
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
		enc := appendVarlong(nil, v)
		require.Equal(t, string(want), string(enc), "appendVarlong(%d) = %x, want %x", v, enc, want)
		require.Equal(t, len(want), varlongSize(v), "appendVarlong(%d) = %x, want %x", v, enc, want)
		c := cursor{b: want}
		gotLong := c.varlong("v")
		require.Equal(t, v, gotLong, "cursor.varlong(%x) = %d, %v", want, gotLong, c.failed)
		require.False(t, c.failed, "cursor.varlong(%x) = %d, %v", want, gotLong, c.failed)
		require.Equal(t, len(want), c.pos, "cursor.varlong(%x) = %d, %v", want, gotLong, c.failed)
		gotLong, p := readVarlongSlow(want, 0)
		require.Equal(t, v, gotLong, "readVarlongSlow(%x) = %d, %d", want, gotLong, p)
		require.Equal(t, len(want), p, "readVarlongSlow(%x) = %d, %d", want, gotLong, p)
		// varint: only int32 values decode
		c = cursor{b: want}
		got := c.varint("v")
		got2, p := readVarintSlow(want, 0)
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			enc := appendVarint(nil, int32(v))
			require.Equal(t, string(want), string(enc), "appendVarint(%d) = %x, want %x", v, enc, want)
			require.Equal(t, len(want), varintSize(int32(v)), "appendVarint(%d) = %x, want %x", v, enc, want)
			require.Equal(t, int32(v), got, "varint(%x) = %d/%d, %v/%d", want, got, got2, c.failed, p)
			require.False(t, c.failed, "varint(%x) = %d/%d, %v/%d", want, got, got2, c.failed, p)
			require.Equal(t, int32(v), got2, "varint(%x) = %d/%d, %v/%d", want, got, got2, c.failed, p)
			require.Equal(t, len(want), p, "varint(%x) = %d/%d, %v/%d", want, got, got2, c.failed, p)
		} else {
			require.True(t, c.failed, "varint(%x) of %d accepted", want, v)
			require.Equal(t, -1, p, "varint(%x) of %d accepted", want, v)
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
		_, p := readVarintSlow(bad, 0)
		require.True(t, c.failed, "varint %x accepted", bad)
		require.Equal(t, -1, p, "varint %x accepted", bad)
	}
	for _, bad := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		{0xff, 0xff},
	} {
		c := cursor{b: bad}
		c.varlong("v")
		_, p := readVarlongSlow(bad, 0)
		require.True(t, c.failed, "varlong %x accepted", bad)
		require.Equal(t, -1, p, "varlong %x accepted", bad)
	}
}
