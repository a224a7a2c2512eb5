package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	plog "github.com/partlog/partlog/log"
)

// v1Message encodes one uncompressed magic 1 message (test helper).
func v1Message(offset int64, ts int64, key, value []byte) []byte {
	m := []byte{0, 0, 0, 0, 1, 0} // CRC (below), magic 1, attributes
	m = binary.BigEndian.AppendUint64(m, uint64(ts))
	for _, f := range [][]byte{key, value} {
		if f == nil {
			m = binary.BigEndian.AppendUint32(m, 0xffffffff)
			continue
		}
		m = binary.BigEndian.AppendUint32(m, uint32(len(f)))
		m = append(m, f...)
	}
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	out := binary.BigEndian.AppendUint64(nil, uint64(offset))
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

// TestReplaysLegacyConsumerOffsets: offsets Kafka 0.10 committed as magic 1
// messages in __consumer_offsets replay like v2 ones (the last for a key
// wins, a null value deletes); before, the replay failed on them.
func TestReplaysLegacyConsumerOffsets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), offsetsTopic+"-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	a := offsetKey{group: "g", topic: "orders", partition: 0}
	b := offsetKey{group: "g", topic: "orders", partition: 1}
	var data []byte
	data = append(data, v1Message(0, 1000, encodeOffsetKey(nil, a), encodeOffsetValue(nil, committed{offset: 5, leaderEpoch: -1}, 1000))...)
	data = append(data, v1Message(1, 1001, encodeOffsetKey(nil, b), encodeOffsetValue(nil, committed{offset: 9, leaderEpoch: -1}, 1001))...)
	data = append(data, v1Message(2, 1002, encodeOffsetKey(nil, a), encodeOffsetValue(nil, committed{offset: 7, leaderEpoch: -1, metadata: "m"}, 1002))...)
	data = append(data, v1Message(3, 1003, encodeOffsetKey(nil, b), nil)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644))
	p, err := plog.Open(dir, plog.Config{})
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(4), p.LogEndOffset())
	o := newOffsetStore(p)
	require.NoError(t, o.replay(p))
	got, ok := o.get(a)
	require.True(t, ok)
	require.Equal(t, committed{offset: 7, leaderEpoch: -1, metadata: "m"}, got)
	_, ok = o.get(b)
	require.False(t, ok, "the null value deleted it")
}
