package raftlog

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/log"
)

// producerSnapEntry is one entry of a producer snapshot file, field for
// field: a producer's last batch and its open transaction.
type producerSnapEntry struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastOffset            int64
	OffsetDelta           int32
	Timestamp             int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64
}

// decodeProducerSnapshot decodes the entries of a producer snapshot file
// after checkProducerSnapshot accepts it (test helper: the broker itself
// passes the bytes on as they are).
func decodeProducerSnapshot(data []byte) ([]producerSnapEntry, error) {
	if err := checkProducerSnapshot(data); err != nil {
		return nil, err
	}
	out := make([]producerSnapEntry, (len(data)-producerSnapHeaderSize)/producerSnapEntrySize)
	for i := range out {
		b := data[producerSnapHeaderSize+i*producerSnapEntrySize:]
		out[i] = producerSnapEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(b[0:])),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(b[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(b[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(b[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(b[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(b[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(b[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(b[38:])),
		}
	}
	return out, nil
}

// appendProducerSnapshot appends the producer snapshot file of entries to
// dst (test helper: a leader's snapshot without a leader).
func appendProducerSnapshot(dst []byte, entries []producerSnapEntry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, producerSnapVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+2:], crc32.Checksum(dst[start+producerSnapCRCStart:], castagnoli))
	return dst
}

// The broker's reading of a producer snapshot agrees with the partition's
// writing of one: a snapshot a roll wrote decodes to the producer's last
// batch, and the partition restores a snapshot the broker's helper
// encoded. Every damage checkProducerSnapshot looks for is refused.
func TestProducerSnapshotFormat(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "t-0")
	p, err := log.Open(dir, log.Config{})
	require.NoError(t, err)
	defer p.Close()
	bld := batch.NewBuilder(batch.BuilderOptions{Producer: &batch.Producer{ID: 7, Epoch: 2, BaseSequence: 0}})
	now := time.Now().UnixMilli()
	for i := range 3 {
		require.NoError(t, bld.Add(batch.Record{Value: []byte{byte('a' + i)}, Timestamp: now}))
	}
	b, err := bld.Build()
	require.NoError(t, err)
	_, err = p.AppendBatch(b)
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	data, err := p.ProducerSnapshot(3)
	require.NoError(t, err)
	entries, err := decodeProducerSnapshot(data)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, producerSnapEntry{ProducerID: 7, ProducerEpoch: 2, LastSequence: 2, LastOffset: 2, OffsetDelta: 2,
		Timestamp: now, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}, entries[0])
	assert.Equal(t, data, appendProducerSnapshot(nil, entries), "the helper encodes what the partition wrote")

	q, err := log.Open(filepath.Join(t.TempDir(), "t-0"), log.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.TruncateFullyAndStartAt(3))
	require.NoError(t, q.RestoreProducers(3, appendProducerSnapshot(nil, entries)))
	st, ok, err := q.ProducerState(7)
	require.NoError(t, err)
	require.True(t, ok, "the restored producer")
	assert.Equal(t, int16(2), st.Epoch)

	damage := map[string]func([]byte) []byte{
		"short":         func(d []byte) []byte { return d[:producerSnapHeaderSize-1] },
		"version":       func(d []byte) []byte { d[1] = 2; return d },
		"checksum":      func(d []byte) []byte { d[len(d)-1] ^= 1; return d },
		"count":         func(d []byte) []byte { d[9]++; return fixCRC(d) },
		"partial entry": func(d []byte) []byte { return fixCRC(d[:len(d)-1]) },
	}
	for name, f := range damage {
		err := checkProducerSnapshot(f(append([]byte(nil), data...)))
		require.ErrorIs(t, err, errProducerSnapshot, name)
	}
}

// fixCRC recomputes a producer snapshot's checksum after a change.
func fixCRC(d []byte) []byte {
	binary.BigEndian.PutUint32(d[2:], crc32.Checksum(d[producerSnapCRCStart:], castagnoli))
	return d
}
