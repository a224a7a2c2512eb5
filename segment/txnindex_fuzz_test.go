package segment

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
)

// FuzzDecodeTxnIndex decodes arbitrary bytes as a .txnindex: it never
// panics; the entries it returns re-encode (AppendTxnIndexEntry) to the
// first bytes of the input, byte for byte; without an error that is the
// whole input (a multiple of the entry size, every entry version 0), and
// with one the error is a *base.CorruptionError (wrapping base.ErrCorrupt)
// naming the file at the first byte not decoded: an entry of another
// version there, or a torn tail (base.ErrTornTail) of fewer bytes than an
// entry. No Kafka .txnindex exists in the fixtures (SOURCES.md), so the
// seeds are the hand-written golden of Kafka's layout and encoder output.
func FuzzDecodeTxnIndex(f *testing.F) {
	golden, err := hex.DecodeString(txnGolden)
	require.NoError(f, err)
	f.Add(golden)
	f.Add(golden[:TxnIndexEntrySize+5])        // torn second entry
	f.Add(append([]byte{0, 1}, golden[2:]...)) // entry 0 of version 1
	var enc []byte
	for i := range 5 {
		enc = AppendTxnIndexEntry(enc, AbortedTxn{ProducerID: int64(i) - 1, FirstOffset: int64(i * 10), LastOffset: int64(i*10 + 4), LastStableOffset: int64(i*10 + 5)})
	}
	f.Add(enc)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "00000000000000000000.txnindex"
		got, err := DecodeTxnIndex(file, data)
		var re []byte
		for _, a := range got {
			re = AppendTxnIndexEntry(re, a)
		}
		require.LessOrEqual(t, len(re), len(data))
		require.True(t, bytes.Equal(data[:len(re)], re), "the entries returned are not the input's first bytes")
		if err == nil {
			require.Len(t, re, len(data), "bytes left undecoded without an error")
			return
		}
		require.ErrorIs(t, err, base.ErrCorrupt)
		var ce *base.CorruptionError
		require.True(t, errors.As(err, &ce), "%v is not a *base.CorruptionError", err)
		require.Equal(t, file, ce.File)
		require.Equal(t, int64(len(re)), ce.Pos, "the error is not at the first byte not decoded")
		if rest := len(data) - len(re); rest < TxnIndexEntrySize {
			require.ErrorIs(t, err, base.ErrTornTail, "a short tail")
		} else {
			require.NotEqual(t, []byte{0, 0}, data[len(re):len(re)+2], "a version-0 entry refused")
			require.False(t, errors.Is(err, base.ErrTornTail), "a whole entry of another version is not a torn tail")
		}
	})
}
