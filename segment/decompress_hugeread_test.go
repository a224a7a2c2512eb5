package segment

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/batchaccess"
)

// Recovery checks what Kafka's recovery checks (framing, magic, CRC-32C,
// offsets) and never decompresses. A review found recovery decompressing
// under the batch package's default limit, which cut valid, very
// compressible batches (and everything after them) out of the log on Open.
// Here the middle batch claims zstd but holds bytes no decompressor
// accepts; its CRC is right, so it is what the writer appended, and
// recovery keeps it and the batch after it.
func TestRecoverDoesNotDecompress(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 0, k.cfg)
			require.NoError(t, err)
			odd := simpleBatch(t, 1, 2, 10, 100)
			binary.BigEndian.PutUint16(odd[batchaccess.CRCStart:], uint16(batch.Attributes(0).WithCompression(batch.CompressionZstd)))
			odd.SetCRC()
			require.Error(t, odd.Validate(), "the odd batch was meant to fail Validate")
			want := []batch.Batch{simpleBatch(t, 0, 1, 1, 10), odd, simpleBatch(t, 3, 1, 20, 10)}
			for _, b := range want {
				mustAppend(t, s, b)
			}
			mustClose(t, s)

			s, err = Open(fsys, dir, 0, k.cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			res, err := s.Recover(math.MaxInt32)
			require.NoError(t, err)
			require.Equal(t, int64(0), res.TruncatedBytes, "Recover = %+v, want nothing cut and next offset 4", res)
			require.NoError(t, res.Cause, "Recover = %+v, want nothing cut and next offset 4", res)
			require.Equal(t, int64(4), res.NextOffset, "Recover = %+v, want nothing cut and next offset 4", res)
			sl, err := s.Read(0, math.MaxInt32, s.Size(), true)
			require.NoError(t, err)
			got, err := s.Bytes(sl.Start, sl.End, nil)
			require.NoError(t, err)
			for i, w := range want {
				b, rest, err := batch.Parse(got)
				require.NoError(t, err, "batch %d after recovery: %v, bytes equal %t", i, err, string(b) == string(w))
				require.Equal(t, string(w), string(b), "batch %d after recovery: %v, bytes equal %t", i, err, string(b) == string(w))
				got = rest
			}
			require.Empty(t, got, "%d bytes after the last batch", len(got))
			pos, _, found, err := s.Translate(3, 0)
			require.NoError(t, err, "Translate(3) = %d, %t, %v", pos, found, err)
			require.True(t, found, "Translate(3) = %d, %t, %v", pos, found, err)
			require.Equal(t, int64(len(want[0])+len(want[1])), pos, "Translate(3) = %d, %t, %v", pos, found, err)
		})
	}
}

// A maxBytes near MaxInt used to overflow the read bound (first position +
// budget) and return a single batch instead of everything up to
// maxPosition.
func TestReadHugeMaxBytes(t *testing.T) {
	for _, k := range fsKinds {
		t.Run(k.name, func(t *testing.T) {
			fsys, dir := k.fs(t)
			mustMkdir(t, fsys, dir)
			s, err := Create(fsys, dir, 0, k.cfg)
			require.NoError(t, err)
			defer mustClose(t, s)
			for i := range 4 {
				mustAppend(t, s, simpleBatch(t, int64(i), 1, int64(i), 50))
			}
			for _, maxBytes := range []int{math.MaxInt32, math.MaxInt, math.MaxInt - 1} {
				sl, err := s.Read(1, maxBytes, s.Size(), true)
				require.NoError(t, err)
				require.Equal(t, int64(4), sl.NextOffset, "Read(1, %d) = %+v, want everything up to %d", maxBytes, sl, s.Size())
				require.Equal(t, s.Size(), sl.End, "Read(1, %d) = %+v, want everything up to %d", maxBytes, sl, s.Size())
			}
		})
	}
}
