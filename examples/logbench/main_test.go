package main

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelectSteps: -only runs exactly the measurements it names, whatever
// their order (it once ran every measurement after the first one named).
func TestSelectSteps(t *testing.T) {
	names := []string{"append", "read", "validate", "lookup"}
	tests := []struct {
		only string
		want []bool
		err  bool
	}{
		{"", []bool{true, true, true, true}, false},
		{"read", []bool{false, true, false, false}, false},
		{"append", []bool{true, false, false, false}, false},
		{"lookup, append", []bool{true, false, false, true}, false},
		{"read,nosuch", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.only, func(t *testing.T) {
			got, err := selectSteps(names, tt.only)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestFramedRecordRoundTrip: the framed baseline of one_record_read hands
// back each record's key (nil when null) and value, and rejects a key
// length that runs past the payload.
func TestFramedRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		key, value []byte
	}{
		{"null key", nil, []byte("value")},
		{"empty key", []byte{}, []byte("value")},
		{"key", []byte("key"), []byte("value")},
		{"long key", make([]byte, 300), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := appendFramedRecord(nil, tt.key, tt.value)
			require.Len(t, fr, 8+int(binary.BigEndian.Uint32(fr)))
			key, value, ok := splitFramed(fr[8:])
			require.True(t, ok)
			assert.Equal(t, tt.key, key)
			assert.Equal(t, len(tt.value), len(value))
			assert.Equal(t, tt.key == nil, key == nil)
		})
	}
	_, _, ok := splitFramed([]byte{5, 'a', 'b'}) // a key of 4 bytes in 2
	assert.False(t, ok)
	_, _, ok = splitFramed(nil)
	assert.False(t, ok)
}
