// Package producer is a partition's producer state: what Kafka's
// ProducerStateManager keeps per producer id so that an idempotent
// producer's retry is recognised and a gap or a fenced epoch refused, the
// transactions open in the partition, and Kafka's producer snapshot files
// (<offset>.snapshot) that carry that state across a restart. Package log
// keeps one State per Partition and asks it before and after every append;
// the State touches no segment and takes no lock, so everything here is
// tested against Kafka's rules without a partition.
//
// # Basics
//
//	s := producer.NewState(producer.Config{Expiration: 24 * time.Hour})
//	dup, isDup, err := s.Check(bt) // leader path, before bt is written
//	...                             // the partition writes bt at its offsets
//	ended, ok := s.Apply(stored)    // after the write; ok: a marker ended a transaction
//	data := s.AppendSnapshot(nil)   // the .snapshot file's bytes
//	entries, err := producer.DecodeSnapshot(data)
//	s.Restore(entries)              // Open: the snapshot, then Replay of the batches after it
//
// The rules are Kafka's (ProducerAppendInfo, appendEndTxnMarker,
// removeExpiredProducers). Per producer id the State keeps the epoch, the
// last five batches of that epoch (NUM_BATCHES_TO_RETAIN: the most a client
// has in flight), the coordinator epoch of the producer's last transaction
// marker, the first offset of its open transaction and its last timestamp.
// Check applies the leader's rules to a batch; Apply and Replay record a
// stored batch without checking it (Kafka's replica and recovery paths
// check nothing either); CheckMarker fences a transaction marker.
//
// A producer without an open transaction expires once its last timestamp
// is Config.Expiration older than Config.Now. Kafka removes expired
// producers on a timer; here the first call that looks the producer up
// after that moment (Check, CheckMarker, Apply, Producer) forgets it, so
// its next batch is a new producer's whatever the order of events, and
// Expire (and Apply when a new producer appears, every SweepEvery at
// most) removes the rest.
//
// # Transactions
//
// A producer's first transactional batch opens a transaction at its
// offset; a marker (a control batch holding ABORT or COMMIT) ends it.
// OpenTxns lists the open transactions by first offset. An ended
// transaction stays unstable until the partition's high watermark passes
// its marker (SetHighWatermark; a marker above it may still be lost with a
// leader change): the oldest transaction open or so ended bounds the
// partition's last stable offset (FirstUnstable), as in Kafka's
// ProducerStateManager (firstUnstableOffset, unreplicatedTxns). Apply returns
// the transaction a marker ended, with the last stable offset right after
// the marker, which is what Kafka's transaction index stores for an
// aborted one.
//
// # Snapshot files
//
// Kafka's producer snapshot, version 1. The file named by offset X
// (twenty digits, SnapshotFileName) describes the producers of every batch
// below X. Big-endian:
//
//	0      2          6        10
//	+------+----------+--------+-----------------+-----------------+---
//	| ver  | crc      | count  | entry 0 (46 B)  | entry 1 (46 B)  | ...
//	+------+----------+--------+-----------------+-----------------+---
//	ver   int16, 1
//	crc   uint32, CRC-32C of bytes [6, end)
//	count int32, the number of entries
//
//	entry:
//	0            8       10        14           22          26          34          38                46
//	+------------+-------+---------+------------+-----------+-----------+-----------+-----------------+
//	| producerId | epoch | lastSeq | lastOffset | offsetDel | timestamp | coordEpoch| txnFirstOffset  |
//	+------------+-------+---------+------------+-----------+-----------+-----------+-----------------+
//	int64        int16   int32     int64        int32       int64       int32       int64
//
// An entry holds a producer's last batch only (its first sequence and
// offset follow from offsetDelta), so a State restored from a snapshot
// knows one batch per producer, as Kafka's does. lastSequence and
// lastOffset are -1 for a producer with no batch (one a marker alone set);
// txnFirstOffset is -1 when no transaction is open. Every width and offset
// is frozen: Kafka's.
//
// # Concurrency
//
// A State is not safe for concurrent use: its owner serializes every call
// (package log holds the partition's lock). The snapshot codec and the
// file functions keep no state and may be called from any goroutine.
package producer
