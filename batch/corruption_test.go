package batch_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
)

// TestCorruptionErrorAs: an importer (this external test package) reaches
// the field and position of a decoding failure with errors.As and the
// exported batch.CorruptionError, through a wrapping layer.
func TestCorruptionErrorAs(t *testing.T) {
	bld := batch.NewBuilder(batch.BuilderOptions{})
	require.NoError(t, bld.Add(batch.Record{Value: []byte("v")}))
	b, err := bld.Build()
	require.NoError(t, err)
	b[len(b)-1] ^= 0xff // a record byte: the CRC no longer matches
	err = batch.Batch(b).Validate()
	wrapped := errors.Join(errors.New("reading a fetch response"), err)

	var ce *batch.CorruptionError
	require.True(t, errors.As(wrapped, &ce), "%v", err)
	require.Equal(t, "crc", ce.Field)
	require.Empty(t, ce.File)
	require.ErrorIs(t, ce, batch.ErrCorrupt)
}
