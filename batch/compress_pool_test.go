package batch

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecompressAfterCorruptInput: pooled decompressors carry state from
// one payload to the next, and klauspost's flate reader reads a corrupt
// stream through tables a previous stream left (an empty Huffman tree
// keeps the old table), so the pooled reader's error for a corrupt
// payload depends on what it decoded before: the gzip payload FuzzRecords
// found (its corpus entry fa50cb4178d42f4e) fails with "corrupt input
// before offset 4" from a new reader, and with "unexpected EOF" or
// "unexpected length code" after other payloads. decompress decodes a
// failed gzip payload again with a new reader (gzipReader), so what must
// hold whatever came before: a corrupt payload fails with the error it
// gets first, alone, and a valid payload decodes to its bytes.
func TestDecompressAfterCorruptInput(t *testing.T) {
	// The gzip payload of the fuzz input: a gzip header, then a deflate
	// stream that does not decode.
	corruptGzip := []byte("\x1f\x8b\b\x002ee,eee\x00\x00\x00\x00\x00\x03\xc0\xc0p\x82\xb1\x82\x0e@,#5''_!;1-;8\x89--?\x9f-)\xb1\b\x00\xe4\xcd\xba\x1f\x80\x00\x00\x00")
	plain := bytes.Repeat([]byte("partlog pooled decompressors "), 64)
	for _, c := range []Compression{CompressionGzip, CompressionLZ4, CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			valid, err := appendCompressed(nil, c, 0, plain)
			require.NoError(t, err)
			target := corruptGzip
			if c != CompressionGzip {
				target = valid[:len(valid)/2] // cut in the middle
			}
			_, want := decompress(nil, c, target, 1<<20)
			require.Error(t, want)
			if c == CompressionGzip {
				require.ErrorContains(t, want, "corrupt input before offset 4", "a new reader's error")
			}
			rng := uint64(1)
			next := func() byte {
				rng = rng*6364136223846793005 + 1442695040888963407
				return byte(rng >> 56)
			}
			for i := range 2000 {
				// A payload with the codec's own header and random bytes
				// after it, then the target and a valid payload.
				junk := append([]byte(nil), valid[:min(10, len(valid))]...)
				for range int(next()) % 40 {
					junk = append(junk, next())
				}
				_, _ = decompress(nil, c, junk, 1<<20)
				_, err := decompress(nil, c, target, 1<<20)
				require.EqualError(t, err, want.Error(), "after %d payloads, the last %x", i+1, junk)
				out, err := decompress(nil, c, valid, 1<<20)
				require.NoError(t, err)
				require.Equal(t, plain, out)
				// After a valid stream too (its dynamic Huffman tables
				// are what a corrupt stream read before).
				_, err = decompress(nil, c, target, 1<<20)
				require.EqualError(t, err, want.Error(), "after a valid payload")
			}
		})
	}
}
