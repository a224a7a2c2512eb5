package batch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// rawZstdFrame returns a zstd frame, without content size or checksum,
// whose window descriptor asks for 2^windowLog bytes and which holds p as
// one raw block.
func rawZstdFrame(windowLog int, p []byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte((windowLog - 10) << 3)}
	h := uint32(len(p))<<3 | 1 // last block, raw, its size
	f = append(f, byte(h), byte(h>>8), byte(h>>16))
	return append(f, p...)
}

// A zstd frame may ask for a window of up to 2^27 bytes (128 MiB), zstd's
// default limit, which zstd-jni, Kafka's reader, decodes: a Java producer
// at compression.zstd.level 22 streams frames asking for exactly that
// whatever their size. A larger window is refused, as Kafka refuses it.
func TestZstdWindowKafkaReads(t *testing.T) {
	want := numbered(6, 1000)
	data := []byte(build(t, BuilderOptions{}, want...)[HeaderSize:])
	zs := build(t, BuilderOptions{Compression: CompressionZstd}, want...)
	for _, wl := range []int{10, 21, 26, 27} {
		b := withRecords(zs, rawZstdFrame(wl, data))
		require.NoError(t, b.Validate(), "window 2^%d", wl)
		require.Len(t, decodeAll(t, b), len(want), "window 2^%d", wl)
	}
	checkCorrupt(t, withRecords(zs, rawZstdFrame(28, data)).Validate())
}
