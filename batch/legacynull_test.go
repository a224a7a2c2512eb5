package batch

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/legacy"
)

// Kafka reads a legacy message's key or value whose length is any negative
// number as null (LegacyRecord.key and value: a negative size is null, and
// the value's length follows a null key directly), not only -1: such a
// message, plain or inside a wrapper, validates and decodes here too.
func TestLegacyNegativeLengthsReadAsNull(t *testing.T) {
	// nulls returns a legacy message with a null key and value whose
	// lengths are keyLen and valueLen.
	nulls := func(offset int64, magic int8, keyLen, valueLen int32) []byte {
		b := legacyMessage(offset, magic, 0, 5, nil, nil)
		at := legacy.LogOverhead + 4 + 1 + 1 // after the CRC, magic and attributes
		if magic == legacy.MagicV1 {
			at += 8
		}
		binary.BigEndian.PutUint32(b[at:], uint32(keyLen))
		binary.BigEndian.PutUint32(b[at+4:], uint32(valueLen))
		return resum(b)
	}
	var d Decoder
	for _, magic := range []int8{legacy.MagicV0, legacy.MagicV1} {
		e := nulls(7, magic, -2, -1<<31)
		require.NoError(t, d.ValidateLegacy(e), "magic %d", magic)
		recs, err := d.AppendLegacyRecords(nil, e, true)
		require.NoError(t, err, "magic %d", magic)
		require.Len(t, recs, 1)
		require.Nil(t, recs[0].Key)
		require.Nil(t, recs[0].Value)
		require.Equal(t, int64(7), recs[0].Offset)
	}
	w := legacyWrapper(11, legacy.MagicV0, 0, 0,
		nulls(10, legacy.MagicV0, -5, 0),
		legacyMessage(11, legacy.MagicV0, 0, 0, []byte("k"), []byte("v")))
	require.NoError(t, d.ValidateLegacy(w))
	recs, err := d.AppendLegacyRecords(nil, w, true)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Nil(t, recs[0].Key)
	require.Equal(t, []byte{}, recs[0].Value)
	require.Equal(t, []byte("k"), recs[1].Key)
	first, err := d.LegacyBaseOffset(w)
	require.NoError(t, err)
	require.Equal(t, int64(10), first)
	out, kept, removed, err := d.AppendLegacyFiltered(nil, w, func(r Record) bool { return r.Key != nil })
	require.NoError(t, err)
	require.Equal(t, 1, kept)
	require.Equal(t, 1, removed)
	require.NoError(t, d.ValidateLegacy(out))
}
