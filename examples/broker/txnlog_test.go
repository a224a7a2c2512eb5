package main

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unhex decodes hex written with spaces and comments ("# ..." to the end
// of a line) between the bytes.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	require.NoError(t, err)
	return b
}

// The __transaction_state records are Kafka's TransactionLogKey v0 and
// TransactionLogValue v0, byte for byte (the layout written out from the
// schema, field by field), and the flexible v1 value decodes to the same
// state.
func TestTxnLogRecordBytes(t *testing.T) {
	key := unhex(t, `
		0000          # key version 0
		0003 747831   # transactionalId "tx1"`)
	require.Equal(t, key, encodeTxnKey(nil, "tx1"))
	id, err := decodeTxnKey(key)
	require.NoError(t, err)
	require.Equal(t, "tx1", id)

	rec := txnRecord{
		producerID: 0x1234, producerEpoch: 7, timeoutMs: 60000, status: txnOngoing,
		partitions: []topicPartition{{"a", 0}, {"a", 2}, {"bb", 1}},
		updateMs:   0x0102030405, startMs: 0x0102030400,
	}
	value := unhex(t, `
		0000                   # value version 0
		0000000000001234       # producerId
		0007                   # producerEpoch
		0000ea60               # transactionTimeoutMs 60000
		01                     # transactionStatus Ongoing
		00000002               # two topics
		  0001 61              #   "a"
		  00000002 00000000 00000002
		  0002 6262            #   "bb"
		  00000001 00000001
		0000000102030405       # transactionLastUpdateTimestampMs
		0000000102030400       # transactionStartTimestampMs`)
	require.Equal(t, value, encodeTxnValue(nil, rec))
	got, err := decodeTxnValue(value)
	require.NoError(t, err)
	require.Equal(t, rec, got)

	// No partitions: a null array, as Kafka writes for Empty and the
	// Complete states.
	empty := txnRecord{producerID: 5, producerEpoch: 0, timeoutMs: 1000, status: txnCompleteCommit, updateMs: 9, startMs: -1}
	emptyBytes := unhex(t, `0000 0000000000000005 0000 000003e8 04 ffffffff 0000000000000009 ffffffffffffffff`)
	require.Equal(t, emptyBytes, encodeTxnValue(nil, empty))
	got, err = decodeTxnValue(emptyBytes)
	require.NoError(t, err)
	require.Equal(t, empty, got)

	// Version 1 (flexible): compact lengths, tagged fields (here the
	// previous producer id, tag 0) that the broker skips.
	flexible := unhex(t, `
		0001 0000000000001234 0007 0000ea60 01
		02                     # one topic (compact: n+1)
		  02 61                #   "a" (compact: len+1)
		  03 00000000 00000002 #   two partitions
		  00                   #   topic tags
		0000000102030405 0000000102030400
		01 00 08 0000000000001200 # one tagged field: tag 0, 8 bytes`)
	got, err = decodeTxnValue(flexible)
	require.NoError(t, err)
	require.Equal(t, txnRecord{producerID: 0x1234, producerEpoch: 7, timeoutMs: 60000, status: txnOngoing,
		partitions: []topicPartition{{"a", 0}, {"a", 2}}, updateMs: 0x0102030405, startMs: 0x0102030400}, got)
}

// A record the broker cannot decode is a typed error, never a panic or a
// half-read state.
func TestTxnLogRecordMalformed(t *testing.T) {
	good := encodeTxnValue(nil, txnRecord{producerID: 1, timeoutMs: 1, status: txnOngoing,
		partitions: []topicPartition{{"t", 0}}, startMs: 1})
	cases := []struct {
		name  string
		value []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{0, 9}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"unknown status", func() []byte {
			b := append([]byte{}, good...)
			b[2+8+2+4] = byte(numTxnStatus)
			return b
		}()},
		{"huge topic count", func() []byte {
			b := append([]byte{}, good[:2+8+2+4+1]...)
			return append(b, 0x7f, 0xff, 0xff, 0xff)
		}()},
		{"negative partition count", func() []byte {
			b := append([]byte{}, good[:2+8+2+4+1]...)
			return append(b, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xfe)
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeTxnValue(c.value)
			require.ErrorIs(t, err, errTxnRecord)
		})
	}
	for _, k := range [][]byte{nil, {0, 1, 0, 0}, {0, 0, 0, 5, 'a'}, {0, 0, 0, 1, 'a', 'b'}} {
		_, err := decodeTxnKey(k)
		require.ErrorIs(t, err, errTxnRecord, "key % x", k)
	}
}
