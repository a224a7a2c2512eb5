package base

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/corrupt"
)

// TestOneMarker: the markers here, batch's and internal/corrupt's are the
// same values, and the errors made here are batch.CorruptionErrors.
func TestOneMarker(t *testing.T) {
	require.Equal(t, []error{batch.ErrCorrupt, batch.ErrTruncated, batch.ErrUnsupportedMagic},
		[]error{ErrCorrupt, ErrTruncated, ErrUnsupportedMagic})
	require.True(t, ErrTornTail == corrupt.ErrTornTail)

	var ce *batch.CorruptionError
	err := CorruptionErrorf("f.log", 7, "crc", "stored %d", 1)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []any{"f.log", int64(7), "crc"}, []any{ce.File, ce.Pos, ce.Field})
	require.ErrorIs(t, err, batch.ErrCorrupt)
	require.False(t, IsTornTail(err))

	err = TornTailErrorf("f.log", 9, "batchLength", "cut")
	require.True(t, IsTornTail(err))
	require.True(t, IsCorruption(err))
}

// TestWithFile: a buffer's corruption error gets the file and the shifted
// position, and so does internal/legacy's position error, which becomes a
// batch.CorruptionError; an error that already names a file, or is not a
// corruption error, is wrapped with the file's name.
func TestWithFile(t *testing.T) {
	require.NoError(t, WithFile(nil, "f.log", 100))

	var ce *batch.CorruptionError
	err := WithFile(CorruptionErrorf("", 3, "crc", "x"), "f.log", 100)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []any{"f.log", int64(103), "crc"}, []any{ce.File, ce.Pos, ce.Field})

	err = WithFile(corrupt.Wrapf(corrupt.ErrTruncated, 16, "magic", "short"), "f.log", 100)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []any{"f.log", int64(116), "magic"}, []any{ce.File, ce.Pos, ce.Field})
	require.ErrorIs(t, err, batch.ErrTruncated)
	require.Equal(t, "partlog: corrupt data: torn tail: truncated batch: short (magic at f.log:116)", err.Error())

	err = WithFile(CorruptionErrorf("g.log", 3, "crc", "x"), "f.log", 100)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []any{"g.log", int64(3)}, []any{ce.File, ce.Pos}, "a file already named stays")

	err = WithFile(io.ErrUnexpectedEOF, "f.log", 100)
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF))
	require.Equal(t, "f.log: unexpected EOF", err.Error())
}
