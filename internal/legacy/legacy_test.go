package legacy

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// message returns a legacy entry at offset off of magic m with a null key
// and value v, its CRC-32 set.
func message(off int64, m int8, v []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(off))
	b = binary.BigEndian.AppendUint32(b, 0) // messageSize, set below
	b = binary.BigEndian.AppendUint32(b, 0) // crc, set below
	b = append(b, byte(m), 0)
	if m == MagicV1 {
		b = binary.BigEndian.AppendUint64(b, 1_700_000_000_000)
	}
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // null key
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	b = append(b, v...)
	binary.BigEndian.PutUint32(b[SizeOffset:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[CRCOffset:], crc32.ChecksumIEEE(b[crcStart:]))
	return b
}

// zeroed returns an entry of size bytes whose offset and messageSize
// landed and whose other bytes are zeros (a crash's torn write).
func zeroed(off int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(off))
	binary.BigEndian.PutUint32(b[SizeOffset:], uint32(size-LogOverhead))
	return b
}

// TestIs: legacy messages of either magic are legacy, as are their first
// bytes alone and a damaged one; zeros from the magic on after a torn
// write's first bytes (the offset and size, and any part of a v2 batch's
// leader epoch) are not, whatever their length, and neither is a v2
// batch's magic. The one message whose fixed fields are zeros (an empty
// key and value, 14 bytes) stays legacy, valid or not.
func TestIs(t *testing.T) {
	v0, v1 := message(7, MagicV0, []byte("abc")), message(8, MagicV1, nil)
	empty := message(9, MagicV0, nil)
	binary.BigEndian.PutUint32(empty[keyLenOffsetV0:], 0) // empty key, not null
	binary.BigEndian.PutUint32(empty[CRCOffset:], crc32.ChecksumIEEE(empty[crcStart:]))
	require.Len(t, empty, MinSize)
	for _, e := range [][]byte{v0, v1, empty} {
		require.NoError(t, Entry(e).ValidateHeader())
	}
	emptyBad := append([]byte(nil), empty...)
	emptyBad[CRCOffset] ^= 1
	v2 := zeroed(9, 78)
	v2[MagicOffset] = 2
	crcZero := message(7, MagicV0, []byte("abc"))
	binary.BigEndian.PutUint32(crcZero[CRCOffset:], 0) // damaged, still legacy
	epochPrefix := zeroed(11, 78)
	epochPrefix[CRCOffset] = 0xff // the first byte of a v2 leader epoch of -1
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"magic 0", v0, true},
		{"magic 1", v1, true},
		{"magic 0, empty key and value", empty, true},
		{"magic 0, empty key and value, bad CRC", emptyBad, true},
		{"magic 0, first 17 bytes", v0[:peekSize], true},
		{"magic 0 with a zero CRC", crcZero, true},
		{"zeros after offset and size, 78 bytes", zeroed(11, 78), false},
		{"zeros after offset and size, 27 bytes", zeroed(11, MinSize+1), false},
		{"zeros after offset, size and a leader epoch byte", epochPrefix, false},
		{"zeros, first 17 bytes only", zeroed(11, 78)[:peekSize], true},
		{"magic 2", v2, false},
		{"shorter than the magic", v0[:peekSize-1], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Is(tc.b))
		})
	}
	// Why the zeros are no message: their key and value lengths (0 and 0)
	// leave bytes after the value.
	_, _, err := Entry(zeroed(11, 78)).KeyValue()
	assert.Error(t, err)
}
