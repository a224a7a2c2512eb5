package main

import (
	"github.com/partlog/partlog/batch"
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

// offsetForTimestamp answers ListOffsets for one partition. At
// read_committed "latest" is the last stable offset, and any other lookup
// but "earliest" finds only an offset below it, as Kafka's
// fetchOffsetForTimestamp bounds it.
func offsetForTimestamp(p *plog.Partition, ts int64, committedOnly bool) (plog.TimestampOffset, bool, error) {
	if !committedOnly {
		return p.OffsetForTimestamp(ts)
	}
	lso := p.LastStableOffset()
	if ts == plog.LatestTimestamp {
		return plog.TimestampOffset{Timestamp: batch.NoTimestamp, Offset: lso}, true, nil
	}
	to, found, err := p.OffsetForTimestamp(ts)
	if err != nil || !found || ts == plog.EarliestTimestamp || to.Offset < lso {
		return to, found, err
	}
	return plog.TimestampOffset{}, false, nil
}
