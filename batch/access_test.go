package batch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/batchaccess"
)

// TestBatchAccess: the byte-level operations of internal/batchaccess
// (which package log applies to header copies) agree with batch's own
// layout and operations.
func TestBatchAccess(t *testing.T) {
	bld := NewBuilder(BuilderOptions{BaseOffset: 7})
	require.NoError(t, bld.Add(Record{Value: []byte("v"), Timestamp: 5}))
	require.NoError(t, bld.Add(Record{Value: []byte("w"), Timestamp: 9}))
	b, err := bld.Build()
	require.NoError(t, err)

	h := append([]byte(nil), b[:HeaderSize]...)
	batchaccess.SetMaxTimestamp(h, 42)
	crc := batchaccess.CRCWithHeader(b, h)
	require.Equal(t, crc, batchaccess.CRCWithRecords(h, b[HeaderSize:]))
	c := append(Batch(nil), b...)
	batchaccess.SetMaxTimestamp(c, 42)
	c.SetCRC()
	batchaccess.PutCRC(h, crc)
	require.Equal(t, []byte(c[:HeaderSize]), h, "a patched header copy with CRCWithHeader is the patched batch's header")
	require.NoError(t, c.Validate())

	require.Equal(t, []int{crcOffset, crcStart, maxTimestampOffset, HeaderSize},
		[]int{batchaccess.CRCOffset, batchaccess.CRCStart, batchaccess.MaxTimestampOffset, batchaccess.HeaderSize},
		"batchaccess's header layout is batch's")
	require.Equal(t, []Attributes{timestampTypeBit, transactionalBit, controlBit},
		[]Attributes{batchaccess.TimestampTypeBit, batchaccess.TransactionalBit, batchaccess.ControlBit}, "batchaccess's attribute bits are batch's")

	e := Batch(batchaccess.AppendEmptyBatch(nil, b))
	require.NoError(t, e.Validate())
	require.Equal(t, []any{int64(7), int64(8), int32(0)}, []any{e.BaseOffset(), e.LastOffset(), e.RecordsCount()})
}

// TestValidateBody: ValidateBody is Validate's record check alone, for
// every codec: it accepts what Validate accepts, with validateTimes's
// range, rejects record damage with Validate's error, and leaves the
// header and CRC to the caller's ValidateHeader (a batch with a wrong CRC
// passes it).
func TestValidateBody(t *testing.T) {
	for _, c := range allCodecs {
		b := build(t, BuilderOptions{Compression: c}, numbered(20, 1)...)
		tr, err := b.ValidateBody()
		require.NoError(t, err, "%s", c)
		want, err := b.validateTimes()
		require.NoError(t, err, "%s", c)
		require.Equal(t, want, tr, "%s", c)

		badCRC := append(Batch(nil), b...)
		badCRC[crcOffset] ^= 0xff
		require.Error(t, badCRC.Validate())
		_, err = badCRC.ValidateBody()
		require.NoError(t, err, "%s: the CRC is the caller's", c)
	}
	b := build(t, BuilderOptions{}, numbered(20, 1)...)
	bad := append(Batch(nil), b...)
	bad[HeaderSize] = 0x7f // zigzag -64: a negative record length
	bad.SetCRC()
	want := bad.Validate()
	require.ErrorIs(t, want, ErrCorrupt)
	_, err := bad.ValidateBody()
	require.Equal(t, want.Error(), err.Error())

	_, err = b[:HeaderSize-1].ValidateBody()
	require.ErrorIs(t, err, ErrTruncated, "shorter than a header")
}
