// Package log stores one Kafka partition: a directory of segments in Apache
// Kafka's on-disk format, with offsets assigned the way a Kafka leader
// assigns them, zero-copy reads, and the three offsets a consumer sees (log
// start, high watermark, log end).
//
// The package shadows the standard library's log; import it under another
// name:
//
//	import plog "github.com/partlog/partlog/log"
//
// It never logs through the standard log either: Config.Logger takes a
// *slog.Logger and defaults to one that discards everything.
//
// # Basics
//
//	p, err := plog.Open(dir, plog.Config{}) // Kafka's defaults
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//
//	base, err := p.AppendBatch(producerBatch) // 11 records: base 0, next 11
//	if err != nil {
//		return err // errors.Is(err, plog.ErrInvalidBatch), ...
//	}
//
//	recs, err := p.ReadFrom(base, 1<<20) // whole batches, zero-copy
//	if err != nil {
//		return err // errors.Is(err, plog.ErrOffsetOutOfRange)
//	}
//	defer recs.Close()
//	_, err = recs.WriteTo(conn) // sendfile
//
// AppendBatch takes a producer's RecordBatch v2 and assigns its offsets:
// the stored batch's baseOffset is the log end offset, and the next batch
// starts at baseOffset + lastOffsetDelta + 1 (a batch of 11 records then one
// of 3 get bases 0 and 11, and the log end offset is 14). AppendBuilder
// appends the batch a batch.Builder holds, as AppendBatchInfo would append
// its Build() (same stored bytes, same errors), without encoding it into a
// slice: the records go to the file from the Builder's own buffer, which
// no caller can change during the call, so the CRC-32C check and record
// walk AppendBatch spends on a caller's bytes are skipped (uncompressed
// batches; a compressed one takes AppendBatch's path). AppendAssigned
// takes batches whose offsets a leader already assigned. ReadFrom returns
// whole batches, starting with the one that holds the offset, never past
// the high watermark. OffsetForTimestamp answers ListOffsets. TruncateTo
// and DeleteRecordsBefore move the log end back and the log start forward.
//
// # Files
//
// A partition directory holds Kafka's files: per segment
// NNNNNNNNNNNNNNNNNNNN.log, .index and .timeindex (package segment), and
// .txnindex once an aborted transaction's marker lies in it (see
// Transactions);
// recovery-point-offset-checkpoint;
// log-start-offset-checkpoint once DeleteRecordsBefore moved the log start
// offset; replication-offset-checkpoint under DisableAutoHighWatermark;
// leader-epoch-checkpoint once batches carry a leader epoch (see
// LeaderEpochs); and
// .kafka_cleanshutdown while the
// partition is closed after a clean Close. Checkpoints use Kafka's text
// format and are replaced atomically (tmp file, fsync, rename, directory
// fsync). Segments deleted while readers still hold them carry the .deleted
// suffix until the last reader lets go. Open removes leftovers and, with
// Kafka's rules, undoes an unfinished compaction (.cleaned) or completes one
// past its commit point (.swap). Open also reads directories a Kafka broker
// wrote, compacted ones included (offset gaps, 0-byte or missing indexes),
// reads their leader-epoch-checkpoint and their producer .snapshot files
// (see Idempotent producers).
//
// Open locks the directory (lockFile, flock(2) on unix) until Close: a
// second Open of it, in this process or another, fails with ErrLocked.
// Before it changes anything, Open checks the directory as a whole (see
// docs/crash-safety.md, "Directory checks"): a .swap replaces live segments
// only when it is a valid segment covering them; offsets missing between
// segments (unless compaction explains them) or below the first one, and a
// sealed segment that does not end on a batch, are refused with an error
// wrapping ErrRecoveryRefused; a checkpoint that contradicts the segments
// goes to Config.Recovery (DefaultRecovery ignores a log start checkpoint
// past the log end, loudly, rather than hiding every record). A refused
// Open has written nothing.
//
// # Durability
//
// What survives a crash depends on Config.FlushMessages (flush.messages)
// and Config.FlushInterval (flush.ms):
//
//   - Kafka's default (both 0): appends are written to the page cache and
//     acknowledged; they become durable at the next Sync, TruncateTo,
//     DeleteRecordsBefore or Close, or when a roll's background flush of
//     the segment it sealed completes. A crash (power loss, kernel panic)
//     may lose any suffix of what was appended since; a process crash
//     loses nothing the kernel accepted.
//   - A roll does no fsync and writes no checkpoint under the partition's
//     lock: the flush of the sealed segment, its producer snapshot and the
//     recovery point at the new segment's base are done in the background
//     (a goroutine; in a Dir, the Dir's flush scheduler), without the
//     lock, as Kafka flushes after a roll. A crash before that flush may
//     cut sealed segments above the recovery point short; Open then cuts
//     the log at the first one that ends early and removes the later ones
//     (what remains is a prefix; see docs/crash-safety.md, "Rolls").
//     Nor does it create or rename the next segment's files: a goroutine
//     makes the next segment ahead under temporary names (*.spare.deleted,
//     which every Open removes and never reads), the roll makes it the
//     active segment at its base in memory (no filesystem operation under
//     the lock), and its files are renamed to the base's names after the
//     lock, in the background, and in any case before anything syncs the
//     directory, so no sync, recovery point or checkpoint covers data of a
//     segment whose files a start-up would remove (a crash before the
//     renames loses only appends nothing had acknowledged durable); a
//     spare no append used for 10 s, and Close, remove it.
//   - FlushMessages == 1, per-append durability: AppendBatch and
//     AppendAssigned return only after an fdatasync of the .log covered
//     the batch. Concurrent appenders share fdatasyncs (group commit: one
//     syncer at a time, covering every batch written before it started;
//     the others wait and are released together), so many appenders
//     exceed the device's fsync rate. An AppendBatch under this policy
//     queues its batch in memory (offsets assigned in order under the
//     lock) and the syncer writes every queued batch with one write
//     before its fdatasync; readers and every other writer see written
//     batches only. A failed write of the queue fails the partition, as
//     a failed fsync does (docs/crash-safety.md, "Group commit"). The automatic high watermark then
//     covers only synced batches: ReadFrom never returns a batch a crash
//     could take back.
//   - FlushMessages == N > 1: the append that brings the unflushed record
//     count to N flushes everything before it returns.
//   - FlushInterval > 0: a background goroutine flushes every interval;
//     Close stops it.
//
// After any crash the log is a prefix of what was appended: no hole, no
// garbage, no partial batch, and every batch synced before the crash (by
// any of the above) is there. An fsync that fails fails the partition:
// every later write returns an error wrapping ErrFailed and the cause
// (after a failed fsync the kernel may have dropped the dirty pages and
// cleared the error, so retrying would pretend); reads go on; reopen to
// recover. The full statement, the filesystem assumptions and the tests
// that check them are in docs/crash-safety.md.
//
// Whatever the policy, the leader epoch cache (LeaderEpochs) survives
// every crash: an epoch is written durably to leader-epoch-checkpoint
// when it is first assigned, before its first batch is written or
// SetLeaderEpoch returns, so rolls that move the recovery point past an
// epoch's start can no longer lose it. After a crash the cache is the one
// the surviving batches imply (plus at most an epoch recorded at the log
// end that has no batch yet). Appends in a known epoch write nothing more.
//
// # Timestamps
//
// AppendBatch applies Kafka's LogValidator timestamp rules to producer
// batches: the stored maxTimestamp is the records' largest timestamp
// (found during validation; a producer's wrong value, such as -1, is
// replaced and the CRC recomputed), or under Config.LogAppendTime the
// append time with the LogAppendTime bit set; a producer's LogAppendTime
// bit and, on CreateTime partitions, record timestamps outside
// Config.MessageTimestampBeforeMax / MessageTimestampAfterMax
// (message.timestamp.before/after.max.ms, default unbounded / 1 hour) are
// refused with ErrInvalidBatchTimestamp (Kafka's INVALID_TIMESTAMP).
// OffsetForTimestamp, time-based rolls and retention thus see the records'
// real times.
//
// # Recovery
//
// Close writes the clean-shutdown marker after everything is flushed; Open
// removes it before loading, so a crash while loading counts as unclean.
// After a clean shutdown Open reads no batch data (each segment's indexes
// get an O(1) sanity check), whatever the log's size. After an unclean one
// it recovers from the recovery point, as Kafka's LogLoader does: every
// segment from the one holding the recovery point on is validated batch by
// batch (framing, magic, CRC-32C, increasing offsets; as Kafka, the
// records are not decompressed) and gets its indexes rebuilt; at the first invalid batch the log is cut and every
// later segment removed. What to do with invalid data is Config.Recovery's
// decision (a RecoveryPolicy): DefaultRecovery cuts and logs what it cut
// (file, position, bytes, last good offset) through Config.Logger, with
// progress on long recoveries; StrictRecovery refuses to open with an
// error naming the file and position (a *batch.CorruptionError) and leaves
// the files as they are. A RecoveryEvent tells a torn tail (what a crash
// leaves at the end of the active segment) from corruption followed by
// more data.
//
// Logs Kafka wrote before 0.11 may hold legacy magic 0/1 messages: Open
// keeps them (recovery checks their CRC-32), ReadFrom serves them as
// stored, OffsetForTimestamp and Verify read them; appends stay RecordBatch
// v2. Legacy data recovery cannot prove torn (an invalid legacy message in
// a sealed segment or with data after it) is never cut, under any policy:
// Open fails with ErrRecoveryRefused and the file and position.
//
// # Compaction and retention
//
// The Partition is the only owner of its files; cleanup policies (package
// compaction's, or a user's own) hand it plans. DeleteExpired asks a
// RetentionPolicy how many of the oldest segments to delete (rolling an
// expired active segment first) and deletes them; Compact asks a Cleaner
// up to which offset to rewrite, then rewrites the sealed segments below
// the high watermark in groups, asking the Cleaner about each batch and
// record, writes each group as a .cleaned segment, swaps it in with the
// .cleaned → .swap → .deleted protocol under the write lock, and writes the
// cleaner checkpoint. A policy sees the partition through a View (a
// snapshot of segment descriptions and read-only batch walks); readers
// holding replaced segments keep them. Each compaction round holds the
// partition's cleaning claim, so two never run at once
// (ErrCleaningInProgress). Open is the one crash cleanup: it completes or
// undoes what a swap or a deletion left (package log/internal/repair).
//
// # Concurrency
//
// A Partition is safe for concurrent use by any number of goroutines.
// Writers (AppendBatch, AppendAssigned, Roll, TruncateTo,
// DeleteRecordsBefore, SetHighWatermark, Sync, Verify, Close) are
// serialized by one mutex, Partition.mu. Flushes (Sync, the FlushInterval
// goroutine, group syncs) are serialized by Partition.flushMu; a group
// sync holds mu only to take the list of segments to sync, so appends go
// on while it waits for the device. Readers (ReadFrom,
// ReadFromFollower, OffsetForTimestamp, the offset getters, SegmentInfos) take
// no lock of the partition: they never block appends, and appends never
// block them. A read waits only while TruncateTo wants or cuts the very
// segment it reads.
//
// TruncateTo waits for the readers of the segment it cuts before it
// changes anything, without holding mu: under mu it finds the segment and
// marks the partition truncating (Partition.mu.truncating), releases mu
// while it takes the segment's exclusive read lease (waiting for the
// readers that hold it), then takes mu again and publishes, deletes and
// cuts with the lease held. While it waits, reads of other segments,
// SetHighWatermark and LeaderEpochs run; new reads of the segment being
// cut wait for the cut (the lease prefers the truncation, so overlapping
// readers cannot starve it); every other writer (AppendBatch,
// AppendAssigned, Roll, TruncateTo, DeleteRecordsBefore, Sync, Verify,
// Close, DeleteExpired and Compact's swaps, flushes) waits on the condition
// variable Partition.truncated, holding no partition lock but flushMu.
//
// The wait is bounded: after Config.TruncateWait (by default 30
// s), or when the context of TruncateToContext ends, TruncateTo gives up,
// changes nothing and returns an error wrapping ErrTruncationBlocked that
// names how many readers still hold the segment; the waiting writers and
// readers then go on. A wait is logged through Config.Logger (the segment
// and the number of readers) and counted (Stats: TruncationWaits,
// TruncationsBlocked, and TruncationWaiting, the readers a truncation waits
// for right now).
//
// Appends are linearized by mu: concurrent appenders get disjoint,
// gap-free offset ranges, in the order their batches are in the file.
// Validation runs before mu is taken, so the critical section holds only
// the reservation, the header patch (a copy in the partition's memory: the
// caller's bytes are never written, so they may be read-only, such as a
// ReadFrom's Records.Bytes), the write and the index update. A batch that
// starts a new leader epoch also writes the leader epoch checkpoint under
// mu, durably, before the batch (see LeaderEpochs).
//
// # Lock order
//
//  0. Partition.flushMu (flushes, group syncs, Close), taken before mu;
//     an appender waiting for a group sync holds neither (it waits on
//     Partition.group, a mutex and condition variable never held while
//     taking another lock).
//  1. A segment's exclusive read lease (LockForTruncate), taken by
//     TruncateTo without mu (the partition marked truncating) and held
//     while it takes mu again, publishes and cuts. Nobody waits for a
//     read lease while holding mu, so this order cannot deadlock.
//  2. Partition.mu (writers, and the few calls that read what only it
//     guards: LeaderEpochs, ProducerState, Producers, OpenTransactions,
//     which neither wait for a truncation nor write the group-write
//     queue). A writer that finds the partition truncating waits on
//     Partition.truncated, which releases mu.
//  3. A segment's shared read lease, taken by readers, which take no
//     partition lock at all. Then the segment's own mutexes.
//  4. The indexes' and the filesystem's internal locks.
//
// Readers take no lock of level 2; they take a segment's read lease (level
// 3) and hold it until Records.Close. A new lease on a segment waits while
// a truncation wants or cuts it, so a goroutine that holds Records of a
// segment and reads that segment again while a truncation waits for it
// waits until the truncation gives up (Config.TruncateWait). A goroutine
// that holds Records and calls TruncateTo, or a writer that waits for a
// truncation (see Concurrency), waits as long. Close stops the
// FlushInterval goroutine, then takes flushMu, mu, then each segment's
// locks in ascending base offset order.
//
// # Lock-free reads
//
// A reader needs three things to agree: the visibility bound (the high
// watermark or the log end offset, with the segment and byte position that
// go with it), the segment list, and the bytes of the segment it reads.
// The writer publishes them so that a reader needs no lock:
//
//  1. The segment list is an immutable snapshot behind an atomic.Pointer;
//     a writer that changes it (roll, truncation, retention) builds a new
//     one and swaps it in under mu. Each snapshot is reference counted: the
//     partition holds one reference on the current snapshot; a reader takes
//     one with a CAS that refuses once the count reached zero. The
//     snapshots form a chain in publication order whose links finalize in
//     that order (a link waits for its snapshot's release and for its
//     predecessor), and a segment carries one reference for the whole
//     chain: taken when it enters a snapshot, dropped when the last
//     snapshot holding it finalizes. So a segment in a snapshot stays open
//     while that snapshot or any older one is held, and a publication
//     costs references on what it adds and removes only, not on every
//     segment (state.go, snapLink); Close ends the chain. A writer swaps the new
//     snapshot in before it drops its reference on the old one, so a
//     refusal means a newer snapshot is published: the reader loads again
//     (every lock-free user goes through one helper, acquireSnapshot, and
//     never gives up while the partition is open). So a segment a reader finds in a snapshot is open while the
//     reader holds that snapshot, and the reader's own segment reference
//     (taken before it lets the snapshot go) keeps it open, mapped and
//     named until Records.Close, even when retention removed it meanwhile:
//     the last reference removes the files (DESIGN law 9).
//  2. The bounds (high watermark and log end, each with its segment base
//     and byte position) are published under a sequence lock whose fields
//     are all atomics: one writer under mu, readers retry until they read
//     the same even sequence number before and after. A bound's position
//     is a batch boundary at or below which every byte belongs to a batch
//     below the bound's offset.
//  3. An append writes the batch and its index entries and publishes the
//     segment's new size (package segment does this, see Segment) before
//     the partition publishes the new bounds; a roll publishes the new
//     snapshot before any bound names the new segment. A reader loads the
//     bounds first, then the snapshot: by the Go memory model (atomics are
//     sequentially consistent) every segment a bound names is in the
//     snapshot the reader loads, and every byte below a bound's position
//     was written before the reader reads it. A reader never reads at or
//     past the bound's position in the bound's segment, and never reads a
//     segment above it, so it never sees a partial batch or an unexposed
//     one.
//     (A truncation that empties the log publishes bounds naming its new
//     segment before the snapshot that holds it; such bounds make every
//     read at or above the log start empty, and point 4 covers the rest.)
//  4. Truncation is the one writer that makes published bytes invalid. It
//     first takes the exclusive read lease of the segment it cuts
//     (package segment), which is granted once no reader holds the
//     segment and is held until the cut is done; then, under mu, it
//     publishes the lowered bounds, increments Partition.truncations,
//     deletes the later segments and cuts. A reader loads truncations
//     before the bounds and again after taking its read lease; if the
//     count changed it drops everything and starts again. If it did not
//     change and the reader's segment is the one being cut, its lease
//     was granted before the truncation's exclusive lease (a lease
//     granted after the cut sees the new count), so the cut waits for the
//     reader, whose bounds are those from before the cut: it reads the
//     log as it was, consistently. A reader of a later segment reads
//     bytes nothing cuts (the deleted segment stays open and named while
//     the reader holds its reference). Until the exclusive lease is
//     granted nothing is published, so SetHighWatermark, which may run
//     then, works on the log as it stands; it cannot run during the cut,
//     which holds mu.
//  5. The log start offset is a plain atomic. Retention publishes it
//     before it removes whole segments; a reader that checked an offset
//     against an older log start finds either the old snapshot (and reads
//     what was there, still referenced: a deleted segment's files are
//     reopened by their *.deleted names, and when those are gone the read
//     starts again, segment.ErrDeleted) or a snapshot without the segment
//     (and reports ErrOffsetOutOfRange).
//
// # Resource lifetimes
//
// Records returned by ReadFrom alias the segment's memory mapping: Bytes
// is valid only until Close. Records is a small handle; the state behind
// it is pooled (a read allocates nothing) and carries a generation number
// the handle checks, so Close is safe to repeat (ErrClosed, nothing else
// happens), a closed handle sees an empty result (Bytes nil, WriteTo
// ErrClosed), and no handle ever sees another reader's result. Records
// stay valid across Partition.Close, TruncateTo (which waits for them) and
// retention (which defers removing the files).
//
// # Caveats: what a held read result costs
//
// An open Records holds a reference on its segment (a segment deleted
// meanwhile keeps its files, named *.deleted, until the last Records on
// it is closed) and a read lease on it. The lease costs nothing until a
// TruncateTo wants to cut that segment: then the truncation waits for it,
// up to Config.TruncateWait; every writer waits for the truncation; new
// reads of that segment wait too. A Records that is never closed thus
// makes every truncation of its segment fail with ErrTruncationBlocked
// after TruncateWait, and stalls writers that long each time. A goroutine
// must not call TruncateTo, or a writer other than SetHighWatermark, while
// it holds Records of the partition (it would wait for itself until
// TruncateWait), nor hold two Records of one segment at once if a
// truncation may come between them. Close Records as soon as the response
// is written.
//
// # Media errors
//
// The .log and index files are read through memory mappings. A page the
// kernel cannot read (a media error: EIO while paging it in) or that lies
// past the end of a file someone cut raises SIGBUS, which would kill the
// process. Every read of mapped memory the library itself does (ReadFrom's
// header scan, OffsetForTimestamp, Verify, appends' index reads, recovery
// on Open, compaction's scans) runs under a fault guard instead
// (runtime/debug.SetPanicOnFault plus a deferred recover), so the fault
// becomes an error wrapping ErrFault, with a *segment.FaultError naming
// the file and the byte offset. ErrFault, in this package's documentation,
// is index.ErrFault: the module declares one sentinel for a fault on a
// mapped page, in the lowest package that maps files, and packages segment
// and log return errors wrapping that same value (test with
// errors.Is(err, index.ErrFault), or errors.As a *segment.FaultError).
// Kafka error code: KAFKA_STORAGE_ERROR (56). The partition then goes offline, as Kafka
// takes a log offline on an IOException: that call and every later one
// (reads, writes, Verify) return an error wrapping ErrFailed and the
// fault, and Close writes no clean-shutdown marker. Reopen once the disk
// is fixed. A fault met by another writer (TruncateTo, DeleteRecordsBefore,
// a roll, a compaction) is returned wrapping ErrFault; when that writer had
// already changed files it fails the partition (ErrFailed), as any failure
// halfway does; a compaction's scan changes nothing.
//
// The walk that defines damage (recovery and Verify) reports a .log that
// ends before the bytes it was told the file holds the same way when it
// reads the file instead of its mapping (DisableMmap, or a filesystem
// without descriptors): the loss is a fault, never a torn tail to cut.
//
// Zero-copy bytes cannot be protected: Records.Bytes aliases the mapping
// and the caller reads it, so a media error on those pages still kills the
// process. A caller that must survive a failing disk sends the records
// with Records.WriteTo (sendfile, or a protected write: the error comes
// back) or copies them with Records.AppendTo (protected), never touching
// Bytes itself. Those two, Records.Batches (its framing; the batches it
// yields are Bytes) and AppendBatch given such bytes return the error
// without taking the partition offline: a Records does not know its
// partition, and AppendBatch's b is the caller's memory. Partition.Records
// decodes under the same protection (its loop body runs outside it) and
// takes the partition offline on a fault, as ReadFrom does. Sealed segments map only their file's length; the active
// segment maps segment.bytes (SegmentBytes), and a mapped page past the
// end of its file is never read.
//
// # Consuming
//
// A consumer that has read up to the high watermark parks in Wait (or
// WaitFollower, against the log end) with the offset it will read next;
// Wait returns when an append, a SetHighWatermark or a group sync makes
// that offset visible, not on a timer, and returns early with ctx.Err(),
// ErrClosed, the partition's failure, or ErrOffsetOutOfRange after a
// truncation below it. Waiting costs an append nothing when no goroutine
// waits (one atomic load), and the wake-up is one channel close per
// publication however many goroutines wait. The high watermark and the log
// end have a notifier each, and a publication signals only the one whose
// bound moved (a lowered log end signals both), after the appender has
// released the partition's lock: an append that moves only the log end
// (DisableAutoHighWatermark) leaves Wait's goroutines parked and wakes
// WaitFollower's.
//
// Records.Batches ranges over the whole batches of a read result (v2
// only: a legacy message is yielded as a *LegacyEntryError, wrapping
// ErrLegacyEntry), Records.All over its records at or after the offset
// read (control batches skipped, legacy messages decoded; runs of up to
// 32 records are decoded across batches under one fault guard, then
// yielded, each record checked as batch.Iter.Next checks it, one-record
// batches in the cheaper form package batch describes; after a fault the
// run that faulted is decoded again a record at a time, and the runs
// after it are long again), and Partition.Records, a loop of ReadFrom and
// Records.All, over the records from an offset on, tailing the log with
// Wait until its context ends:
//
//	for rec, err := range p.Records(ctx, next) {
//		if err != nil {
//			return err // ctx.Err() once ctx ends
//		}
//		handle(rec.Offset, rec.Key, rec.Value) // valid during the body only
//	}
//
// ReadFrom checks the headers of only some of the batches of a long range
// (it finds the end in the offset index), so a result can hold a batch
// damaged on disk since it was appended: the iterators frame every entry
// and report such a batch with an error wrapping batch.ErrCorrupt whose
// *batch.CorruptionError names the segment file and the damaged field's
// position in it, after yielding the batches before it.
//
// # Context
//
// The calls that can block for long have a variant taking a
// context.Context, named with the suffix Context (the plain method is the
// variant with context.Background()): AppendBatchContext and
// AppendAssignedContext (an append under FlushMessages == 1 waits for its
// group fdatasync; the append crossing FlushMessages > 1 records runs a
// flush) and SyncContext; Wait, WaitFollower and Records take one too. The
// context bounds the caller's wait, not the work: when it ends the caller
// gets ctx.Err() at once and the sync runs to completion (a failure of it
// fails the partition, reported by the next call); an AppendBatchContext
// abandoned that way still returns the base offset its batch got. A
// context that ended before the call makes it do nothing. The wait for
// the partition's lock is not covered. TruncateTo's wait for readers is
// described with TruncateTo.
//
// # Stats
//
// Stats returns counters and gauges read from atomics without a lock and
// without allocating: the offsets, the segment count and size, the open
// Records, batches, records and bytes appended, rolls, truncations, the
// number of segment fdatasyncs and their total time, whether the
// partition failed, and what the recovery in Open scanned and cut.
//
// # Caveats
//
// Mapped memory is read-only. Records.Bytes, and the batches and record
// keys, values and headers the iterators yield, alias the segment's
// mapping, made with PROT_READ: writing into them is not an error but a
// fault that kills the process (on platforms or files without mmap they
// alias a read buffer instead, and a write corrupts only that copy). Copy
// what must be modified or kept past Close.
//
// A held read result is not free. Each open Records (Stats.OpenReaders)
// holds a reference on its segment and a read lease on it: the segment's
// files stay open and mapped, and stay on disk after retention or
// compaction deleted them, until the last Records on them is closed, so
// a forgotten Records leaks disk space and address space; a TruncateTo
// that cuts that segment waits for it, and every writer waits behind that
// TruncateTo. On an unmapped segment a Records also holds a read buffer
// of up to the bytes asked for (kept, up to 4 MiB, by the pool). Close
// Records promptly, and do not hold one across a call that changes the
// partition (see Resource lifetimes).
//
// # Idempotent producers
//
// A batch with a producer id (>= 0) is checked by AppendBatch under the
// partition's lock, before anything is written, with the rules of Kafka's
// ProducerStateManager and ProducerAppendInfo. Per producer id the
// partition keeps its epoch, its last five batches (first and last
// sequence, first and last offset, max timestamp), the coordinator epoch
// of its last transaction marker and the first offset of its open
// transaction (ProducerState). For the producer's batch:
//
//   - the same epoch and the first and last sequence of one of its last
//     five batches: a retry. Nothing is written; AppendBatch returns the
//     original base offset and a nil error, AppendBatchInfo also reports
//     Duplicate; under FlushMessages == 1 it returns once the original is
//     durable, as the original's append does;
//   - an older epoch: ErrInvalidProducerEpoch (the producer was fenced);
//   - a newer epoch must start at sequence 0, the same epoch must continue
//     at the last sequence + 1 (after math.MaxInt32 comes 0); otherwise
//     ErrOutOfOrderSequence;
//   - an unknown producer (new, expired, or whose batches were deleted) may
//     start at any sequence, as in Kafka;
//   - a base sequence below 0: ErrInvalidBatch; a non-transactional batch
//     while the producer's transaction is open: ErrInvalidTxnState.
//
// A refused batch consumes no offset. AppendAssigned (followers,
// coordinators) updates the state without checking, as Kafka's replica
// path; control batches end the producer's open transaction.
//
// The state is stored in Kafka's <offset>.snapshot files (version 1,
// docs/format.md): taken at every roll for the new segment's base and
// written, fsynced, once the segments below it are durable (by the roll's
// background flush or the next Sync, periodic flush or Close; a torn one
// is skipped), at Close and after a recovery (fsynced);
// removed below the log start with their segments and past the new end by
// TruncateTo, which then reloads the state. Open loads the newest snapshot
// at or below the log end that decodes (a corrupt one is skipped with a
// warning) and replays the batch headers after it. A snapshot keeps one
// batch per producer, so after a reopen a producer's batches before the
// loaded snapshot are known by their last one only (as in Kafka). Producers
// idle longer than Config.ProducerIDExpiration (by Config.Now against their
// last batch's max timestamp) and without an open transaction are removed
// on load, at each roll, at most every 10 minutes when a new producer
// appears, and by ExpireProducers.
//
// # Transactions
//
// A producer's transactional batches (the transactional attribute) open a
// transaction in the partition at the first one's offset; a transaction
// marker (a control batch holding ABORT or COMMIT) ends it. A transaction
// coordinator writes markers with AppendMarker (the leader path: the
// partition assigns the offset under its lock and fences, with Kafka's
// appendEndTxnMarker rules, an older producer epoch with
// ErrInvalidProducerEpoch and an older coordinator epoch than the
// producer's last marker with ErrTransactionCoordinatorFenced; a marker
// for a producer with no open transaction is written and ends nothing);
// a follower copies them with AppendAssigned, unchecked, and keeps the
// same state.
//
// The last stable offset (LastStableOffset) is the first offset of the
// oldest open transaction (not below the log start offset), else the high
// watermark, and never above the high watermark. A read_committed
// consumer reads with ReadCommitted: ReadFrom bounded by the last stable
// offset (whole batches, nothing at or past it), which also returns the
// aborted transactions overlapping the batches returned, the list a
// Kafka Fetch response carries so that the consumer drops those
// producers' batches from each aborted transaction's first offset up to
// its ABORT marker. OffsetForTimestampCommitted is OffsetForTimestamp
// with the last stable offset as its bound ("latest" is the last stable
// offset). OpenTransactions lists the open transactions with their first
// offsets and start timestamps, for a coordinator's timeouts (the
// partition itself never ends a transaction).
//
// The aborted transactions are kept where Kafka keeps them: in the
// .txnindex of the segment holding each ABORT marker (docs/format.md),
// one 34-byte entry per aborted transaction (producer id, first offset,
// marker offset, and the last stable offset once the marker was written:
// the first offset of the oldest transaction still open, else the
// marker's offset + 1). The file is created with the first entry, written
// when the marker lands (before the last stable offset moves past it),
// fsynced with its segment, cut by TruncateTo and by recovery with the
// segment's batches, renamed and removed with the segment's other files.
// The open transactions are part of the producer state and its .snapshot
// files (currentTxnFirstOffset), so they survive Close and a crash; Open
// and TruncateTo rebuild the .txnindex entries of the markers after the
// snapshot they load while they replay the log after it (what a flush
// made durable before that snapshot was written stays as it is). A
// read_committed read of a partition where nothing was ever aborted looks
// at no .txnindex and allocates nothing, as ReadFrom.
//
// # Many partitions: Dir
//
// A Dir (OpenDir) holds a whole Kafka log directory: a partition directory
// "<topic>-<partition>" per partition and, at the root, one
// recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint for all of
// them, the clean-shutdown marker and Kafka's .lock (dirLockFile), as
// Kafka lays them out (docs/format.md, "Log directory"). A directory a
// Kafka broker wrote opens with its recovery points, log start offsets
// and high watermarks, and one a Dir wrote opens in Kafka.
//
//	d, err := plog.OpenDir(dataDir, plog.DirConfig{RecoveryThreads: 4})
//	...
//	p, err := d.CreatePartition("orders", 0) // or d.Partition("orders", 0)
//	...
//	defer d.Close()
//
// The Dir's lock covers its partitions, which take no lock of their own
// and keep their offset checkpoints as entries of the root files (one file
// write covers the entries of every partition that changed at once). A
// partition of a Dir behaves as one opened alone otherwise: the same
// durability, recovery and directory checks; a roll's background flush
// (run by the Dir's flush scheduler workers, like the FlushInterval
// flushes) syncs the partition directory itself, since the checkpoint it
// writes is at the root.
// OpenDir loads RecoveryThreads partitions at once (Kafka's
// num.recovery.threads.per.data.dir) and logs its progress at INFO; a
// partition that fails to load fails OpenDir.
//
// The Dir shares its machinery among its partitions: one segment budget
// (DirConfig.MaxOpenSegments, see Open files and mappings), one flush
// scheduler that runs every partition's FlushInterval flushes with
// DirConfig.BackgroundThreads workers (Kafka's background.threads; a
// partition opened alone runs a goroutine of its own), and, in package
// compaction, compaction.DirRunner, which runs retention and key
// compaction over every partition with its topic's configuration and one
// bounded pool of workers.
//
// # Open files and mappings
//
// Every open segment holds up to three descriptors (.log, .index,
// .timeindex) and three mappings; a sealed segment maps its files at their
// length (an index without entries maps nothing). Kafka keeps every
// segment open, which caps a process at the open-file limit and at
// vm.max_map_count (65,530 by default) divided by three, about 21,800
// segments. With Config.MaxOpenSegments (a Partition alone) or
// DirConfig.MaxOpenSegments (shared by a Dir's partitions) set, the least
// recently used sealed segments that no reader holds are closed once more
// than that many are open, and reopened when read (package segment,
// Budget): the reopen reads no batch data, only checks that the .log has
// the length and the indexes the entry counts they had. A Records, a
// read of the partition in progress, compaction's scans and Verify keep
// the segments they read open; a segment closed at rest is answered from
// memory for its offsets, size and timestamps. The active segment is
// never closed. A budget costs a reopen (three opens and mappings) on the
// first read of a closed segment; Stats of the budget (Dir.SegmentBudget,
// Stats.SegmentBudget) count reopens and closes. Measured with
// BenchmarkSegmentResources (2,000 one-batch segments): without a budget
// 3 descriptors and 2 mappings per segment, with MaxOpenSegments 16 about
// 0.03 of each. Deleting (retention, truncation) a closed segment reopens
// it to rename its files.
//
// # Follower logs
//
// A follower copies its leader's batches with AppendAssigned, offsets and
// headers as the leader stored them. A compacted leader's log has offset
// gaps, and so does the follower's copy: the first batch may start above
// the log end offset, and each batch after the previous one's last offset
// (offsets strictly increase; Kafka's follower append). What a gap means:
//
//   - Reads: ReadFrom at an offset inside a gap returns the first batch
//     after it (the first batch whose last offset is at or past the
//     offset), as Kafka does; the log end offset is the next offset of the
//     last batch, or the active segment's base when that segment holds no
//     batch yet.
//   - Segments: a gap lies inside a segment whenever the segment can hold
//     the batch; a roll starts the new segment at the log end offset, so
//     segments stay contiguous. Only a batch more than 2^31-1 offsets past
//     the active segment's base (32-bit relative offsets) makes the new
//     segment start above the log end offset: at the batch's last offset -
//     (2^31-1), below the batch, and the log end offset moves there. The
//     offset index is sparse and relative to the segment's base, so gaps
//     cost it nothing.
//   - Recovery: gaps inside a segment and a gap before a segment whose
//     first batch starts above its base are what Kafka's compaction leaves
//     too, and Open accepts them. An empty last segment after a gap is a
//     follower's roll whose first batch a crash lost: Open accepts it when
//     the recovery point reaches its base, and otherwise, after a crash,
//     hands it to Config.Recovery as a torn tail; either way it removes it
//     (it holds nothing) and the log ends where the previous segment does,
//     so that a batch appended next never leaves a segment after a gap its
//     batches do not show. The same holds when later segments follow it
//     (the crash kept a later roll's files): recovery cuts the log at the
//     empty segment and removes them first. After a clean shutdown such a
//     segment without that recovery point is refused, as a stray file.
//   - TruncateTo at an offset inside a gap keeps the batches below it; the
//     log ends at the last one's next offset (a segment a cut would leave
//     empty after a gap is removed instead), never below the log start
//     offset. When no batch reaching the log start offset would stay, the
//     log restarts empty at the log start offset.
//   - Producer state and the leader epoch cache follow the batches' headers
//     (no sequence checks on this path, as on a Kafka follower); a new
//     epoch starts at its first batch's base offset, above a gap.
//
// A follower whose log end is below its leader's log start restarts its
// log there: TruncateFullyAndStartAt(offset) empties the log, leader epoch
// cache and producer state, and the log starts and ends at offset; at or
// above the log end this is atomic across a crash (docs/crash-safety.md,
// "Follower logs"). TruncateTo below the log start offset lowers the log
// start offset the same way, as Kafka's truncateTo does. The restarted,
// empty log (or a log holding a compacted leader's batches below the
// offset) may then take its leader's producer state at that offset
// (RestoreProducers, with the entries of the leader's producer snapshot
// there), written durably as its own snapshot, so a retry of a batch
// older than the restart is still a duplicate on the follower (Kafka's
// followers forget those producers).
//
// Leader epochs (Kafka's leader epoch cache, LeaderEpochs): a replica that
// becomes leader records its epoch at the log end with
// AssignEpochStartOffset, durably, before its first batch in the epoch.
// EndOffsetForEpoch answers OffsetsForLeaderEpoch from the cache with
// Kafka's edge cases (the latest epoch answers the log end offset; an
// epoch between entries answers the entry below it and the start of the
// one above; an epoch below the first answers the first start offset;
// undefined or above every epoch answers (UndefinedEpoch, -1)): a
// follower asks its leader for its own latest epoch and truncates to the
// answer. OffsetForTimestamp answers carry a leader epoch
// (TimestampOffset.LeaderEpoch): a record's batch's partitionLeaderEpoch,
// and for Latest and Earliest what the cache says.
package log
