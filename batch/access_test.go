package batch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/batchaccess"
)

// TestBatchAccessSet: every operation the partition reaches through
// internal/batchaccess is set once batch is initialized, and each is the
// batch operation of the same name.
func TestBatchAccessSet(t *testing.T) {
	bld := NewBuilder(BuilderOptions{BaseOffset: 7})
	require.NoError(t, bld.Add(Record{Value: []byte("v"), Timestamp: 5}))
	require.NoError(t, bld.Add(Record{Value: []byte("w"), Timestamp: 9}))
	b, err := bld.Build()
	require.NoError(t, err)

	tr, err := batchaccess.ValidateTimes(b)
	require.NoError(t, err)
	require.Equal(t, batchaccess.TimeRange{Min: 5, Max: 9}, tr)

	size, magic, next, err := batchaccess.FrameEntry(b)
	require.NoError(t, err)
	require.Equal(t, []any{b.Size(), int8(Magic), int64(9)}, []any{size, magic, next})

	h := append([]byte(nil), b[:HeaderSize]...)
	batchaccess.SetMaxTimestamp(h, 42)
	crc := batchaccess.CRCWithHeader(b, h)
	c := append(Batch(nil), b...)
	batchaccess.SetMaxTimestamp(c, 42)
	c.SetCRC()
	batchaccess.PutCRC(h, crc)
	require.Equal(t, []byte(c[:HeaderSize]), h, "a patched header copy with CRCWithHeader is the patched batch's header")
	require.NoError(t, c.Validate())

	batchaccess.SetLogAppendTime(c, 77)
	require.True(t, c.Attributes().LogAppendTime())
	require.Equal(t, int64(77), c.MaxTimestamp())
	require.NoError(t, c.Validate())

	require.Equal(t, []int{crcOffset, crcStart, maxTimestampOffset, HeaderSize},
		[]int{batchaccess.CRCOffset, batchaccess.CRCStart, batchaccess.MaxTimestampOffset, batchaccess.HeaderSize},
		"batchaccess's header layout is batch's")
	require.Equal(t, []Attributes{timestampTypeBit, controlBit},
		[]Attributes{batchaccess.TimestampTypeBit, batchaccess.ControlBit}, "batchaccess's attribute bits are batch's")

	e := Batch(batchaccess.AppendEmptyBatch(nil, b))
	require.NoError(t, e.Validate())
	require.Equal(t, []any{int64(7), int64(8), int32(0)}, []any{e.BaseOffset(), e.LastOffset(), e.RecordsCount()})
}

// TestValidateBody: batchaccess.ValidateBody is Validate's record check
// alone, for every codec: it accepts what Validate accepts, rejects record
// damage with Validate's error, and leaves the header and CRC to the
// caller's ValidateHeader (a batch with a wrong CRC passes it).
func TestValidateBody(t *testing.T) {
	for _, c := range allCodecs {
		b := build(t, BuilderOptions{Compression: c}, numbered(20, 1)...)
		require.NoError(t, batchaccess.ValidateBody(b), "%s", c)

		badCRC := append(Batch(nil), b...)
		badCRC[crcOffset] ^= 0xff
		require.Error(t, badCRC.Validate())
		require.NoError(t, batchaccess.ValidateBody(badCRC), "%s: the CRC is the caller's", c)
	}
	b := build(t, BuilderOptions{}, numbered(20, 1)...)
	bad := append(Batch(nil), b...)
	bad[HeaderSize] = 0x7f // zigzag -64: a negative record length
	bad.SetCRC()
	want := bad.Validate()
	require.ErrorIs(t, want, ErrCorrupt)
	require.Equal(t, want.Error(), batchaccess.ValidateBody(bad).Error())
}
