package main

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The records of __transaction_state, in Kafka's TransactionLog schema, so
// Kafka's tools decode them and a data directory can be read by either:
//
//	key   (version 0): int16 0, string transactionalId
//	value (version 0): int16 0,
//	                   int64 producerId, int16 producerEpoch,
//	                   int32 transactionTimeoutMs, int8 transactionStatus,
//	                   nullable array of { string topic, array of int32 partition },
//	                   int64 transactionLastUpdateTimestampMs,
//	                   int64 transactionStartTimestampMs
//
// Strings are an int16 length and the bytes; arrays an int32 count (-1:
// null) and the elements. A null value (a tombstone) forgets the
// transactional id. Version 1 of the value is the flexible encoding of the
// same fields (compact lengths, tagged fields: previous and next producer
// id, client transaction version); the broker writes version 0 and reads
// both.

// txnStateTopic is the internal topic holding transaction state. The broker
// gives it one partition (Kafka's default is 50, one per coordinator shard).
const txnStateTopic = "__transaction_state"

const (
	txnKeyVersion   = 0 // TransactionLogKey
	txnValueVersion = 0 // TransactionLogValue, the non-flexible encoding
)

// txnStatus is Kafka's TransactionState, as stored in transactionStatus.
// The values are on disk: frozen.
type txnStatus int8

const (
	txnEmpty             txnStatus = iota // no transaction since the last one ended
	txnOngoing                            // partitions were added; not ending
	txnPrepareCommit                      // committing: markers are being written
	txnPrepareAbort                       // aborting: markers are being written
	txnCompleteCommit                     // committed: every marker is written
	txnCompleteAbort                      // aborted: every marker is written
	txnDead                               // the transactional id expired
	txnPrepareEpochFence                  // fencing: the producer epoch is being bumped
	numTxnStatus
)

var txnStatusNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func init() {
	if len(txnStatusNames) != int(numTxnStatus) {
		panic(fmt.Sprintf("broker: %d transaction status names for %d states", len(txnStatusNames), numTxnStatus))
	}
}

func (s txnStatus) String() string {
	if s >= 0 && s < numTxnStatus {
		return txnStatusNames[s]
	}
	return fmt.Sprintf("txnStatus(%d)", int8(s))
}

// topicPartition names one partition of a transaction.
type topicPartition struct {
	topic     string
	partition int32
}

// txnRecord is one TransactionLogValue: the state of a transactional id.
type txnRecord struct {
	producerID    int64
	producerEpoch int16
	timeoutMs     int32
	status        txnStatus
	partitions    []topicPartition // sorted by topic, then partition
	updateMs      int64            // transactionLastUpdateTimestampMs
	startMs       int64            // transactionStartTimestampMs (-1: none)
}

// errTxnRecord reports a __transaction_state record the broker cannot
// decode; replay names the offset.
var errTxnRecord = errors.New("broker: malformed __transaction_state record")

// encodeTxnKey appends a TransactionLogKey.
func encodeTxnKey(dst []byte, txnID string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnKeyVersion)
	return appendInt16String(dst, txnID)
}

// decodeTxnKey reads a TransactionLogKey.
func decodeTxnKey(b []byte) (string, error) {
	r := reader{b: b}
	if v := r.int16(); v != txnKeyVersion {
		return "", fmt.Errorf("%w: key version %d", errTxnRecord, v)
	}
	id := r.string()
	if r.bad || len(r.b) != 0 {
		return "", fmt.Errorf("%w: key of %d bytes", errTxnRecord, len(b))
	}
	return id, nil
}

// sortPartitions sorts partitions by topic, then partition.
func sortPartitions(ps []topicPartition) {
	slices.SortFunc(ps, func(a, b topicPartition) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
}

// encodeTxnValue appends a TransactionLogValue, version 0. partitions must
// be sorted (sortPartitions): one array entry per topic. No partitions is
// written as a null array, as Kafka does.
func encodeTxnValue(dst []byte, v txnRecord) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnValueVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.producerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.producerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.timeoutMs))
	dst = append(dst, byte(v.status))
	if len(v.partitions) == 0 {
		dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
	} else {
		var topics int
		for i, tp := range v.partitions {
			if i == 0 || tp.topic != v.partitions[i-1].topic {
				topics++
			}
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(topics))
		for i := 0; i < len(v.partitions); {
			j := i
			for j < len(v.partitions) && v.partitions[j].topic == v.partitions[i].topic {
				j++
			}
			dst = appendInt16String(dst, v.partitions[i].topic)
			dst = binary.BigEndian.AppendUint32(dst, uint32(j-i))
			for _, tp := range v.partitions[i:j] {
				dst = binary.BigEndian.AppendUint32(dst, uint32(tp.partition))
			}
			i = j
		}
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.updateMs))
	return binary.BigEndian.AppendUint64(dst, uint64(v.startMs))
}

// maxTxnPartitions bounds what a decoded record may claim, so a damaged
// count cannot make the decoder allocate without bound.
const maxTxnPartitions = 1 << 20

// decodeTxnValue reads a TransactionLogValue, version 0 or 1.
func decodeTxnValue(b []byte) (txnRecord, error) {
	r := reader{b: b}
	var v txnRecord
	version := r.int16()
	if version != 0 && version != 1 {
		return v, fmt.Errorf("%w: value version %d", errTxnRecord, version)
	}
	flexible := version == 1
	v.producerID = r.int64()
	v.producerEpoch = r.int16()
	v.timeoutMs = r.int32()
	st := r.take(1)
	if st != nil {
		v.status = txnStatus(st[0])
	}
	n := r.arrayLen(flexible)
	if n > maxTxnPartitions {
		return v, fmt.Errorf("%w: %d topics", errTxnRecord, n)
	}
	for range max(n, 0) {
		topic := r.str(flexible)
		m := r.arrayLen(flexible)
		if m < 0 || m > maxTxnPartitions-len(v.partitions) {
			return v, fmt.Errorf("%w: topic %q with %d partitions", errTxnRecord, topic, m)
		}
		for range m {
			v.partitions = append(v.partitions, topicPartition{topic: topic, partition: r.int32()})
		}
		if flexible {
			r.skipTags()
		}
	}
	v.updateMs = r.int64()
	v.startMs = r.int64()
	if flexible {
		r.skipTags()
	}
	switch {
	case r.bad:
		return v, fmt.Errorf("%w: value of %d bytes is truncated", errTxnRecord, len(b))
	case len(r.b) != 0:
		return v, fmt.Errorf("%w: %d bytes after the value", errTxnRecord, len(r.b))
	case v.status < 0 || v.status >= numTxnStatus:
		return v, fmt.Errorf("%w: transaction status %d", errTxnRecord, v.status)
	}
	sortPartitions(v.partitions)
	return v, nil
}

// uvarint reads an unsigned varint (flexible encodings).
func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// arrayLen reads an array length: int32, or compact (uvarint n+1). -1 is
// a null array.
func (r *reader) arrayLen(flexible bool) int {
	if !flexible {
		return int(r.int32())
	}
	n := r.uvarint()
	if n > maxTxnPartitions+1 {
		r.bad = true
		return 0
	}
	return int(n) - 1
}

// str reads a non-null string: int16 length, or compact (uvarint len+1).
func (r *reader) str(flexible bool) string {
	if !flexible {
		return r.string()
	}
	n := r.uvarint()
	if n == 0 {
		r.bad = true
		return ""
	}
	return string(r.take(int(min(n-1, uint64(len(r.b)+1)))))
}

// skipTags skips a tagged-field section.
func (r *reader) skipTags() {
	if r.bad {
		return
	}
	rest, err := skipTags(r.b)
	if err != nil {
		r.bad = true
		return
	}
	r.b = rest
}
