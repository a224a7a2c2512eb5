// Package compaction holds partlog's cleanup policies, which run on top of
// a partition: retention (Kafka's cleanup.policy=delete: whole segments by
// time, by size and below the log start offset) and key-based compaction
// (cleanup.policy=compact: keep the latest record of every key, with
// tombstones), the two together (compact,delete), and a Runner that applies
// them to many partitions.
//
// # Basics
//
// A policy decides; the partition acts. Retention is a
// log.RetentionPolicy (which of the oldest segments to delete) and the
// Compactor a log.Cleaner (up to which offset to rewrite, and batch by
// batch, record by record, what stays); *log.Partition carries out their
// plans on its own files (log.Partition.DeleteExpired and
// log.Partition.Compact) through a [Partition], the two methods this
// package needs. The policies read the partition through a log.View (a
// snapshot of its segments and read-only walks over their batches) and
// never create, rename or delete a file. A user's own policy implements
// log.Cleaner or log.RetentionPolicy the same way.
//
//	policies, err := compaction.Policies(compaction.Config{CleanupPolicy: "compact,delete"})
//	for _, p := range policies {
//		res, err := p.Apply(ctx, partition)
//		...
//	}
//
// or, for many partitions, [Runner].
//
// The laws the policies keep (DESIGN.md laws 6, 7 and 9): offsets are
// never renumbered; at least the latest record of every key is kept;
// tombstones are kept for delete.retention.ms after the first round that
// rewrites them; the active segment is never compacted; nothing at or past
// the high watermark, or the last stable offset, is deleted or compacted;
// aborted transactional records are removed and never shadow committed
// ones; retention deletes whole segments, oldest first, and an expired
// active segment goes too (the log rolls to an empty one first, as in
// Kafka); a segment removed by either policy stays readable for every
// reader that holds a reference to it; a crash at any step of a compaction
// leaves, after log.Open, either the old segments or the new ones.
//
// # The offset map
//
// Kafka's cleaner keys its offset map by an MD5 of the key and drops a
// record when two keys collide. partlog hashes keys with xxhash64 and
// stores the keys themselves next to the table, comparing them on every
// hash match, so a collision costs a probe, never a record. The price is
// memory per distinct key: 24 bytes plus the key's length (Kafka: 24
// bytes); the budget (Config.OffsetMapBytes) bounds the total, and a round
// whose keys do not fit cleans up to the last mapped offset and leaves the
// rest to the next round.
//
// # Files
//
// The partition writes each new segment with the .cleaned suffix, renames
// it .swap, renames the old segments .deleted and the .swap files to their
// final names, syncing the directory between the steps; a segment's
// .txnindex follows its other files. The
// per-partition cleaner-offset-checkpoint file (Kafka's checkpoint format,
// one "topic partition offset" line) records where the next round starts;
// the partition writes it under its lock, not at all when a truncation
// started during the round (Result.CleanedTo is then -1), and its
// TruncateTo lowers it to the new log end (Kafka's maybeTruncateCheckpoint),
// so re-appended offsets are never taken as clean. log.Open applies Kafka's
// load-time rules to whatever a crash left: a .swap replaces live segments
// only when it is a valid segment covering them. There is no other
// recovery: a directory is recovered by opening it.
//
// # Concurrency
//
// Policies run beside the partition's appends and reads: the partition
// reads only sealed segments for them (holding a reference and a read
// lease while it does) and changes the segment list under its lock,
// refusing with log.ErrSegmentsChanged when a truncation or another policy
// changed it first; the round then changes nothing and the next one
// retries. One compaction round at a time runs on a partition: Compact
// holds the partition's cleaning claim for the whole round, so a second
// Compactor or Runner given the same partition gets
// log.ErrCleaningInProgress and changes nothing, instead of writing the
// same .cleaned files. A Compactor is used by one goroutine at a time (it owns
// its offset map); Retention and Runner are safe for concurrent use.
//
// # Caveats
//
// Transactions are followed through the markers in the log (see
// Compactor, "Transactions"), not through a .txnindex: a round reads every
// batch header below the high watermark. Record timestamps of a rebuilt
// LogAppendTime batch read as the batch's append time, as before.
//
// Legacy messages (magic 0 and 1, which Kafka wrote before 0.11 and which
// a log upgraded in place still holds) are compacted as Kafka's cleaner
// compacts them (see Compactor, "Legacy messages"): their records, a
// compressed wrapper's inner ones included, enter the offset map at their
// offsets, shadow older records of their keys and are shadowed by later
// ones; a plain message is kept or dropped whole, and a wrapper from which
// some records go is written again, in the legacy format, with the others
// at their offsets. partlog never appends legacy messages. A legacy
// tombstone has no delete horizon of its own: it goes by Kafka's legacy
// rule, the modification times of the segments, and since a rewritten
// segment's modification time is the time it was written, a segment that
// every round rewrites keeps its legacy tombstones longer than Kafka would.
package compaction
