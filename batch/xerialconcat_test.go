package batch

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Kafka reads snappy through snappy-java's SnappyInputStream, which takes
// a chunk length equal to the xerial magic's first four bytes for the
// header of a further xerial stream and reads on after it: a payload of
// two xerial streams, one after the other, is the records of both. A
// header cut short there is corrupt.
func TestXerialConcatenatedStreams(t *testing.T) {
	want := numbered(6, 1000)
	plain := build(t, BuilderOptions{}, want...)
	snappy := build(t, BuilderOptions{Compression: CompressionSnappy}, want...)
	data := []byte(plain[HeaderSize:])
	for _, cut := range []int{0, 1, len(data) / 2, len(data)} {
		payload := append(appendXerial(nil, data[:cut]), appendXerial(nil, data[cut:])...)
		b := withRecords(snappy, payload)
		require.NoError(t, b.Validate(), "cut at %d", cut)
		got := decodeAll(t, b)
		require.Len(t, got, len(want), "cut at %d", cut)
		for i := range want {
			require.Equal(t, want[i].Key, got[i].Key, "cut at %d", cut)
			require.Equal(t, want[i].Value, got[i].Value, "cut at %d", cut)
		}
	}
	one := appendXerial(nil, data)
	short := append(append([]byte{}, one...), one[:xerialHeaderSize-1]...)
	checkCorrupt(t, withRecords(snappy, short).Validate())
	// The magic's head as a chunk length before anything but a header.
	bad := binary.BigEndian.AppendUint32(append([]byte{}, one...), binary.BigEndian.Uint32([]byte(xerialMagic)))
	bad = append(bad, make([]byte, xerialHeaderSize)...)
	checkCorrupt(t, withRecords(snappy, bad).Validate())
}
