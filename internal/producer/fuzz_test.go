package producer

import (
	"cmp"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/crc32c"
)

// FuzzDecodeSnapshot: the decoder never panics and refuses with
// ErrCorruptSnapshot (a corruption error); what it accepts has exactly the
// length its count says, encodes back to the same bytes, and restores to a
// state whose own snapshot decodes, holds each producer id once in
// ascending order, and lists open transactions by first offset, each its
// producer's. Seeded from Kafka's files in testdata.
func FuzzDecodeSnapshot(f *testing.F) {
	paths, err := filepath.Glob("testdata/*/*/*.snapshot")
	require.NoError(f, err)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add(AppendSnapshot(nil, []Entry{
		{ProducerID: 9, ProducerEpoch: 3, LastSequence: 1, LastOffset: 120, OffsetDelta: 4, Timestamp: 1, CoordinatorEpoch: 2, CurrentTxnFirstOffset: 100},
		{ProducerID: 9, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 7},
		{ProducerID: -1, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := DecodeSnapshot(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptSnapshot)
			require.True(t, base.IsCorruption(err))
			return
		}
		checkAccepted(t, data, es)
	})
}

// checkAccepted checks what the fuzz targets require of bytes the decoder
// accepted as es.
func checkAccepted(t *testing.T, data []byte, es []Entry) {
	require.Len(t, data, HeaderSize+len(es)*EntrySize)
	require.Equal(t, data, AppendSnapshot(nil, es))

	s := NewState(Config{}) // no expiration: every entry is restored
	s.Restore(es)
	again, err := DecodeSnapshot(s.AppendSnapshot(nil))
	require.NoError(t, err)
	ids := make([]int64, 0, len(es))
	for _, e := range es {
		ids = append(ids, e.ProducerID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	require.Len(t, again, len(ids))
	for i, e := range again {
		require.Equal(t, ids[i], e.ProducerID)
	}
	open := s.OpenTxns()
	require.True(t, slices.IsSortedFunc(open, func(a, b OpenTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) }))
	for _, o := range open {
		p, ok := s.Producer(o.ProducerID)
		require.True(t, ok)
		require.Equal(t, o.FirstOffset, p.TxnFirstOffset)
	}
	inTxn := 0
	for _, p := range s.Producers() {
		if p.TxnFirstOffset >= 0 {
			inTxn++
		}
	}
	require.Len(t, open, inTxn, "one open transaction per producer in one")
}

// FuzzSnapshotEntries fuzzes the entries rather than the file: the input,
// cut to whole 46-byte entries, gets a valid header and CRC, so every
// input decodes and reaches Restore (FuzzDecodeSnapshot's inputs rarely
// get past the CRC).
func FuzzSnapshotEntries(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendSnapshot(nil, []Entry{
		{ProducerID: 9, ProducerEpoch: 3, LastSequence: 1, LastOffset: 120, OffsetDelta: 4, Timestamp: 1, CoordinatorEpoch: 2, CurrentTxnFirstOffset: 100},
		{ProducerID: 9, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: 7},
	})[HeaderSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		body = body[:len(body)-len(body)%EntrySize]
		data := binary.BigEndian.AppendUint16(nil, snapshotVersion)
		data = binary.BigEndian.AppendUint32(data, 0)
		data = binary.BigEndian.AppendUint32(data, uint32(len(body)/EntrySize))
		data = append(data, body...)
		binary.BigEndian.PutUint32(data[crcOffset:], crc32c.Update(0, data[crcStart:]))
		es, err := DecodeSnapshot(data)
		require.NoError(t, err)
		checkAccepted(t, data, es)
	})
}
