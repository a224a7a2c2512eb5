package batch

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseControlRecord decodes arbitrary key and value bytes as a
// control record: it never panics; a failure wraps ErrCorrupt; an
// accepted record has a version >= 0 and, for an ABORT or COMMIT marker,
// a value version >= 0 with the coordinator epoch read from the value.
// Seeds: an ABORT and a COMMIT marker as Kafka lays them out, and damage.
func FuzzParseControlRecord(f *testing.F) {
	// Kafka's layout: key = version int16, type int16 (0 ABORT, 1
	// COMMIT); value = version int16, coordinator epoch int32.
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 5})
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 5})
	f.Add([]byte{0, 0, 0, 7}, []byte(nil))
	f.Add([]byte{0xff, 0xff, 0, 0}, []byte{0, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 1}, []byte{0x80, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		cr, err := ParseControlRecord(Record{Key: key, Value: value})
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.GreaterOrEqual(t, cr.Version, int16(0))
		if cr.Type.IsTxnMarker() {
			require.GreaterOrEqual(t, cr.ValueVersion, int16(0))
			require.GreaterOrEqual(t, len(value), 6)
		} else {
			require.Zero(t, cr.ValueVersion)
			require.Zero(t, cr.CoordinatorEpoch)
		}
	})
}
