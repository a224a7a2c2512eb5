package main

import (
	plog "github.com/partlog/partlog/log"
)

// The read side of transactions: Fetch and ListOffsets at isolation level
// read_committed (1) see the partition up to its last stable offset (the
// first offset of the oldest open transaction, else the high watermark),
// and a Fetch names the aborted transactions in what it returns, so the
// consumer skips their records.

// readCommitted is the isolation_level of Fetch and ListOffsets that reads
// only committed records.
const readCommitted = 1

// abortedTxn is one aborted transaction a read_committed read overlaps.
type abortedTxn = plog.AbortedTxn

// offsetForTimestamp answers ListOffsets for one partition: at
// read_committed with Partition.OffsetForTimestampCommitted ("latest" is
// the last stable offset, and a lookup finds no record at or past it, as
// Kafka's fetchOffsetForTimestamp bounds it).
func offsetForTimestamp(p *plog.Partition, ts int64, committedOnly bool) (plog.TimestampOffset, bool, error) {
	if committedOnly {
		return p.OffsetForTimestampCommitted(ts)
	}
	return p.OffsetForTimestamp(ts)
}
