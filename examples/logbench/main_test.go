package main

import (
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
