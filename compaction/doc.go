// Package compaction holds partlog's cleanup policies, which run on top of
// a partition: retention (Kafka's cleanup.policy=delete: whole segments by
// time, by size and below the log start offset) and key-based compaction
// (cleanup.policy=compact: keep the latest record of every key, with
// tombstones), the two together (compact,delete), and a Runner that applies
// them to many partitions.
//
// # Basics
//
// A policy works on a [Log]: a partition's segment list, its offsets, and
// two operations the partition performs under its own lock (delete the
// oldest segments; replace a run of sealed segments). *log.Partition
// implements Log; so can any store of package segment's segments.
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
// the high watermark is deleted or compacted; retention deletes whole
// segments, oldest first, and an expired active segment goes too (the log
// rolls to an empty one first, as in Kafka); a segment removed by either
// policy stays
// readable for every reader that holds a reference to it; a crash at any
// step of a compaction leaves, after [RecoverDir], either the old segments
// or the new ones.
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
// Compaction writes each new segment with the .cleaned suffix, renames it
// .swap, renames the old segments .deleted and the .swap files to their
// final names, syncing the directory between the steps; the per-partition
// cleaner-offset-checkpoint file (Kafka's checkpoint format, one
// "topic partition offset" line) records where the next round starts.
// The partition's TruncateTo lowers it to the new log end (Kafka's
// maybeTruncateCheckpoint); on a *log.Partition a round writes it under the
// partition's lock and not at all when a truncation started during the
// round (Result.CleanedTo is then -1), so re-appended offsets are never
// taken as clean.
// [RecoverDir] applies Kafka's load-time rules to whatever a crash left
// (log.Open applies the same ones itself, package segment/repair): a .swap
// replaces live segments only when it is a valid segment covering them.
// It holds the partition directory's lock (log.LockFile) while it works,
// so it refuses, with log.ErrLocked, a directory log.Open holds.
//
// # Concurrency
//
// Policies run beside the partition's appends and reads: they read only
// sealed segments (holding a reference and a read lease while they do) and
// change the segment list only through the Log's locked operations, which
// refuse (log.ErrSegmentsChanged for a *log.Partition) when a truncation or
// another policy changed it first; the round then changes nothing and the
// next one retries. One compaction round at a time runs on a partition:
// every round holds the partition's cleaning claim (Log.ClaimCleaning), so
// a second Compactor or Runner given the same partition gets
// ErrCleaningInProgress and changes nothing, instead of writing the same
// .cleaned files. A Compactor is used by one goroutine at a time (it owns
// its offset map); Retention and Runner are safe for concurrent use.
//
// # Caveats
//
// Transactions: without a transaction index, aborted transactional records
// are not removed and transaction markers are kept forever. Record
// timestamps of a rebuilt LogAppendTime batch read as the batch's append
// time, as before.
//
// Legacy messages (magic 0 and 1, which Kafka wrote before 0.11 and which
// a log upgraded in place still holds) are kept untouched: copied verbatim
// into the cleaned segment, never renumbered, never dropped, even when a
// later record has the same key; their keys are not put in the offset map,
// so they shadow nothing (Kafka's cleaner would rewrite them; partlog
// never writes the legacy format).
package compaction
