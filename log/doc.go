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
// It logs through log/slog: Config.Logger, which by default passes the
// warnings and errors (what recovery cut, damaged files, failures) to
// slog.Default() and drops the rest.
//
// # Basics
//
//	p, err := plog.Open(dir, plog.Config{}) // Kafka's defaults
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//
//	bld := batch.NewBuilder(batch.BuilderOptions{})
//	if err := bld.Add(batch.Record{Key: key, Value: value, Timestamp: now}); err != nil {
//		return err
//	}
//	info, err := p.AppendBuilder(bld) // offsets info.Base to info.LastOffset
//	if err != nil {
//		return err // errors.Is(err, plog.ErrInvalidBatch), ...
//	}
//
//	recs, err := p.ReadFrom(info.Base, 1<<20) // whole batches, zero-copy
//	if err != nil {
//		return err // errors.Is(err, plog.ErrOffsetOutOfRange)
//	}
//	defer recs.Close()
//	for rec, err := range recs.All(nil) {
//		if err != nil {
//			return err
//		}
//		use(rec.Offset, rec.Key, rec.Value)
//	}
//
// AppendBatch takes a producer's RecordBatch v2 (the bytes of a produce
// request) and assigns its offsets: the stored batch's baseOffset is the
// log end offset, and the next batch starts at baseOffset + lastOffsetDelta
// + 1 (a batch of 11 records then one of 3 get bases 0 and 11, and the log
// end offset is 14). The caller's bytes are never written: they may be
// read-only, such as another partition's Records.Bytes. AppendBuilder
// appends the batch a batch.Builder holds as AppendBatch would append its
// Build(), with the same stored bytes and errors, without encoding it into
// a slice first. AppendAssigned takes batches whose offsets a leader
// already assigned (see Follower logs). ReadFrom returns whole batches,
// starting with the one that holds the offset, never past the high
// watermark; Records.WriteTo sends them to a socket (sendfile on Linux).
// OffsetForTimestamp answers ListOffsets. TruncateTo moves the log end
// back, DeleteRecordsBefore the log start forward.
//
// # Files
//
// A partition directory holds Kafka's files: per segment
// NNNNNNNNNNNNNNNNNNNN.log, .index and .timeindex (package segment), and
// .txnindex once an aborted transaction's marker lies in it (see
// Transactions); recovery-point-offset-checkpoint;
// log-start-offset-checkpoint, written when partlog creates the partition
// and when the log start offset moves; replication-offset-checkpoint under
// DisableAutoHighWatermark; leader-epoch-checkpoint once batches carry a
// leader epoch (see LeaderEpochs); producer state <offset>.snapshot files;
// .kafka_cleanshutdown while the partition is closed after a clean Close;
// and .partlog.lock, the lock Open holds until Close (or, while Records
// are still open after Close, until the last of them is closed).
// Checkpoints use Kafka's text format and are replaced atomically.
// Segments deleted while readers still hold them carry the .deleted suffix
// until the last reader lets go. The formats are in docs/format.md.
//
// Open also reads directories a Kafka broker wrote, compacted ones
// included (offset gaps, 0-byte or missing indexes), with their
// leader-epoch-checkpoint and producer .snapshot files. It locks the
// directory until Close, and after Close until the last Records still open
// is closed: a second Open of it, in this process or another, fails with
// ErrLocked. Before it changes anything Open checks the
// directory as a whole (docs/crash-safety.md, "Directory checks"): damage
// no policy may accept (missing segments, a sealed segment that does not
// end on a batch, a .swap that would lose data) is refused with an error
// wrapping ErrRecoveryRefused, and a refused Open has written nothing.
// Open finishes or undoes, with Kafka's rules, what a crash left of a
// compaction (.cleaned, .swap) or a deletion (.deleted).
//
// # Durability
//
// What survives a crash depends on Config.FlushMessages (flush.messages)
// and Config.FlushInterval (flush.ms):
//
//   - Kafka's default (both 0): appends are written to the page cache and
//     acknowledged; they become durable at the next Sync, TruncateTo,
//     DeleteRecordsBefore or Close, or when the background flush a roll
//     starts for the segment it sealed completes. A power loss may lose any
//     suffix of what was appended since; a process crash loses nothing the
//     kernel accepted (nor anything acknowledged, but under WriteBehind).
//   - FlushMessages == 1: AppendBatch and AppendAssigned return only after
//     an fdatasync covered the batch. Concurrent appenders share
//     fdatasyncs (group commit), so many appenders exceed the device's
//     fsync rate. The automatic high watermark then covers only synced
//     batches: ReadFrom never returns a batch a crash could take back.
//   - FlushMessages == N > 1: the append that brings the unflushed record
//     count to N flushes everything before it returns. A flush that covered
//     its batch meanwhile (a Sync's, another append's, a Close's, a
//     Dir.Close's) answers it: it succeeds even when the partition closed
//     before it could flush.
//   - FlushInterval > 0: a background goroutine flushes every interval;
//     Close stops it.
//   - WriteBehind > 0 (with any policy but FlushMessages == 1, not a Kafka
//     setting): AppendBatch and AppendBuilder return once the batch is in
//     the partition's 16 KiB write buffer, which is written with one
//     write when it fills, when a call observes the log (a read, Wait,
//     LogEndOffset...) or takes the writer's lock (Sync, a roll, Close...),
//     and at the latest WriteBehind after its first batch. Every call
//     answers as if each batch had been written by its append; only a
//     process crash tells the difference: it loses what the buffer held,
//     as a power loss loses unsynced batches, and a failed write of the
//     buffer fails the partition with acknowledged batches in it. One
//     record per call then costs a memory copy instead of a system call.
//
// After any crash the log is a prefix of what was appended: no hole, no
// garbage, no partial batch, and every batch synced before the crash (by
// any of the above) is there. An fsync that fails fails the partition:
// every later write returns an error wrapping ErrFailed and the cause
// (after a failed fsync the kernel may have dropped the dirty pages, so a
// retry would pretend); reads go on; reopen to recover. The leader epoch
// cache (LeaderEpochs) is durable whatever the policy: an epoch is written
// to leader-epoch-checkpoint before its first batch. The full statement,
// the filesystem assumptions and the tests that check them are in
// docs/crash-safety.md.
//
// # Timestamps
//
// AppendBatch applies Kafka's LogValidator timestamp rules to producer
// batches: the stored maxTimestamp is the records' largest timestamp (a
// producer's wrong value, such as -1, is replaced and the CRC recomputed),
// or under Config.LogAppendTime the append time with the LogAppendTime bit
// set; a producer's LogAppendTime bit and, on CreateTime partitions,
// record timestamps outside Config.MessageTimestampBeforeMax /
// MessageTimestampAfterMax (message.timestamp.before/after.max.ms, default
// unbounded / 1 hour) are refused with ErrInvalidBatchTimestamp (Kafka's
// INVALID_TIMESTAMP). OffsetForTimestamp, time-based rolls and retention
// thus see the records' real times.
//
// # Recovery
//
// After a clean shutdown (Close) Open reads no batch data, whatever the
// log's size. After an unclean one it recovers from the recovery point,
// as Kafka's LogLoader does: every segment from the one holding the
// recovery point on is validated batch by batch (framing, magic, CRC-32C,
// increasing offsets; as in Kafka, records are not decompressed) and gets
// its indexes rebuilt; at the first invalid batch the log is cut and every
// later segment removed. What to do with invalid data is Config.Recovery's
// decision (a RecoveryPolicy): DefaultRecovery cuts and logs what it cut
// (file, position, bytes, last good offset) through Config.Logger;
// StrictRecovery refuses to open with an error naming the file and
// position (a *batch.CorruptionError) and leaves the files as they are. A
// RecoveryEvent tells a torn tail (what a crash leaves at the end of the
// active segment) from corruption followed by more data.
//
// Logs Kafka wrote before 0.11 may hold legacy magic 0/1 messages: Open
// keeps them, ReadFrom serves them as stored, OffsetForTimestamp and
// Verify read them; appends stay RecordBatch v2. Legacy data that recovery
// cannot prove torn is never cut, under any policy: Open fails with
// ErrRecoveryRefused and the file and position.
//
// # Compaction and retention
//
// The Partition is the only owner of its files; cleanup policies (package
// compaction's, or your own) hand it plans. DeleteExpired asks a
// RetentionPolicy how many of the oldest segments to delete (rolling an
// expired active segment first) and deletes them; Compact asks a Cleaner
// up to which offset to rewrite, then rewrites the sealed segments below
// the high watermark, asking the Cleaner about each batch and record, and
// swaps the new segments in with Kafka's .cleaned → .swap → .deleted
// protocol, crash-safe at every step. A policy sees the partition through
// a View: descriptions of its segments and read-only batch walks. Readers
// holding replaced segments keep them. One compaction runs at a time on a
// partition (ErrCleaningInProgress).
//
// # Concurrency
//
// A Partition is safe for concurrent use by any number of goroutines.
// Writers (the appends, Roll, TruncateTo, DeleteRecordsBefore,
// SetHighWatermark, Sync, Verify, Close) are serialized; readers
// (ReadFrom, ReadFromFollower, OffsetForTimestamp, the offset getters,
// SegmentInfos, Stats) take no lock of the partition: they never block
// appends, and appends never block them. Concurrent appenders get
// disjoint, gap-free offset ranges, in the order their batches are in the
// file; a batch is validated before the append waits for other writers.
//
// A read waits only while a TruncateTo wants or cuts the very segment it
// reads. TruncateTo waits for the readers holding Records of the segment
// it cuts before it changes anything; meanwhile reads of other segments,
// SetHighWatermark and LeaderEpochs go on, and every other writer waits.
// The wait is bounded: after Config.TruncateWait (30 s by default), or
// when the context of TruncateToContext ends, TruncateTo gives up, changes
// nothing and returns an error wrapping ErrTruncationBlocked naming how
// many readers still hold the segment. Waits are logged and counted
// (Stats: TruncationWaits, TruncationsBlocked, TruncationWaiting).
//
// The design behind this (the lock order, and why readers need no lock)
// is in the repository's DESIGN.md.
//
// # Read results
//
// Records returned by ReadFrom alias the segment's memory mapping: Bytes,
// and the batches and record keys, values and headers the iterators yield,
// are valid only until Close, and are read-only (writing into a mapping
// made with PROT_READ kills the process; copy what must be modified or
// kept). Close is safe to repeat (ErrClosed, nothing else happens), and a
// closed Records sees an empty result. Records stay valid across
// Partition.Close, TruncateTo (which waits for them) and retention (which
// defers removing the files).
//
// A held Records is not free. It keeps its segment's files open, mapped
// and on disk (after retention or compaction deleted them, named
// *.deleted) until it is closed, so a forgotten Records leaks disk and
// address space; a TruncateTo that cuts its segment waits for it (up to
// TruncateWait), and every writer waits behind that TruncateTo. A
// goroutine must not call TruncateTo, or a writer other than
// SetHighWatermark, while it holds Records of the partition (it would wait
// for itself until TruncateWait), nor hold two Records of one segment at
// once if a truncation may come between them. Close Records as soon as
// the response is written.
//
// # Media errors
//
// The .log and index files are read through memory mappings, where a page
// the kernel cannot read (a media error) or that lies past the end of a
// file someone cut would raise SIGBUS. Every read of mapped memory the
// library itself does (reads, lookups, appends' index reads, recovery,
// Verify, compaction's scans) turns such a fault into an error wrapping
// index.ErrFault, with a *segment.FaultError naming the file and the byte
// offset (Kafka error code: KAFKA_STORAGE_ERROR (56)). The partition then
// goes offline, as Kafka takes a log offline on an IOException: that call
// and every later one return an error wrapping ErrFailed and the fault,
// and Close writes no clean-shutdown marker. Reopen once the disk is
// fixed.
//
// Zero-copy bytes cannot be protected: a media error on a page the caller
// reads itself (Records.Bytes, and the batches and records the iterators
// yield) still kills the process. A caller that must survive a failing
// disk sends the records with Records.WriteTo or copies them with
// Records.AppendTo, which return the error. Those two, the framing of
// Records.Batches and AppendBatch given such bytes return the fault
// without taking the partition offline.
//
// # Consuming
//
// A consumer that has read up to the high watermark parks in Wait (or
// WaitFollower, against the log end) with the offset it will read next
// (Records.NextOffset, which for an empty read is the offset read), or
// any later one: an offset past the log end is waited for until appends
// reach it. Wait returns when an append, a SetHighWatermark or a group
// sync makes that offset visible, not on a timer, and returns early with
// ctx.Err(), ErrClosed, the partition's failure, or ErrOffsetOutOfRange
// after a truncation during the wait leaves the log end below it. Waiting
// costs an append one atomic load when no goroutine waits.
//
// Records.Batches ranges over the whole batches of a read result (a legacy
// message is yielded as a *LegacyEntryError), Records.All over its records
// at or after the offset read (control batches skipped, legacy messages
// decoded), and Partition.Records over the records from an offset on,
// tailing the log with Wait until its context ends:
//
//	for rec, err := range p.Records(ctx, next) {
//		if err != nil {
//			return err // ctx.Err() once ctx ends
//		}
//		handle(rec.Offset, rec.Key, rec.Value) // valid during the body only
//	}
//
// Partition.Poll is the bounded read, Kafka's consumer poll: at most
// maxRecords records from an offset, those visible now, waiting only
// while there is none yet (a long poll ended by its context).
//
// ReadFrom does not check every batch of a long range, so a result can
// hold a batch damaged on disk since it was appended: the iterators report
// it with an error wrapping batch.ErrCorrupt whose *batch.CorruptionError
// names the segment file and the position, after yielding the batches
// before it.
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
// the other writers is not covered. TruncateToContext bounds TruncateTo's
// wait for readers (see Concurrency).
//
// # Stats
//
// Stats returns counters and gauges without a lock (but to write what
// Config.WriteBehind buffered) and without allocating: the offsets, the segment count and size, the open Records,
// batches, records and bytes appended, rolls, truncations, the number of
// segment fdatasyncs and their total time, whether the partition failed,
// and what the recovery in Open scanned and cut.
//
// # Idempotent producers
//
// A batch with a producer id (>= 0) is checked by AppendBatch before
// anything is written, with the rules of Kafka's ProducerStateManager. Per
// producer id the partition keeps its epoch, its last five batches, the
// coordinator epoch of its last transaction marker and the first offset of
// its open transaction (ProducerState, Producers). For the producer's
// batch:
//
//   - the same epoch and the first and last sequence of one of its last
//     five batches: a retry. Nothing is written; AppendBatch returns the
//     original base offset and a nil error, AppendBatchInfo also reports
//     Duplicate; under FlushMessages == 1 it returns once the original is
//     durable;
//   - an older epoch: ErrInvalidProducerEpoch (the producer was fenced);
//   - a newer epoch must start at sequence 0, the same epoch must continue
//     at the last sequence + 1 (after math.MaxInt32 comes 0); otherwise
//     ErrOutOfOrderSequence;
//   - an unknown producer (new, expired, or whose batches were deleted) may
//     start at any sequence, as in Kafka;
//   - a base sequence below 0: ErrInvalidBatch; a non-transactional batch
//     while the producer's transaction is open: ErrInvalidTxnState.
//
// A refused batch consumes no offset. AppendAssigned (followers) updates
// the state without checking, as Kafka's replica path does.
//
// The state survives Close and crashes in Kafka's <offset>.snapshot files
// plus the log after them: after any crash, a retry of each producer's
// last batch in the recovered log is recognised. A snapshot keeps one
// batch per producer, so after a reopen a producer's batches before the
// loaded snapshot are known by their last one only (as in Kafka).
// Producers idle longer than Config.ProducerIDExpiration (by Config.Now)
// and without an open transaction are forgotten: such a producer's next
// batch starts it anew at any sequence, as after Kafka's periodic expiry
// check (every 10 minutes) removed it. The partition
// looks at expiry whenever it looks a producer up, and removes the
// expired ones on load, at rolls, and in ExpireProducers.
//
// # Transactions
//
// A producer's transactional batches open a transaction in the partition
// at the first one's offset; a transaction marker (a control batch holding
// ABORT or COMMIT) ends it. A transaction coordinator writes markers with
// AppendMarker, which fences, with Kafka's rules, an older producer epoch
// (ErrInvalidProducerEpoch) and an older coordinator epoch than the
// producer's last marker (ErrTransactionCoordinatorFenced); a follower
// copies them with AppendAssigned and keeps the same state.
//
// The last stable offset (LastStableOffset) is the first offset of the
// oldest transaction that is open, or whose marker the high watermark has
// not passed (not below the log start offset), else the high watermark:
// as in Kafka, a decided transaction stays unstable until its marker is
// replicated, because a leader change may cut the marker and reopen it
// (under Config.DisableAutoHighWatermark; with the automatic high
// watermark it follows the marker at once). A read_committed consumer reads with ReadCommitted: ReadFrom
// bounded by the last stable offset, which also returns the aborted
// transactions overlapping the batches returned, the list a Kafka Fetch
// response carries. OffsetForTimestampCommitted is OffsetForTimestamp with
// the last stable offset as its bound. OpenTransactions lists the open
// transactions with their first offsets and start timestamps, for a
// coordinator's timeouts (the partition never ends a transaction itself).
// Aborted transactions are kept where Kafka keeps them, in each segment's
// .txnindex; open ones are part of the producer state. Both survive Close
// and crashes. A read_committed read of a partition where nothing was
// ever aborted allocates nothing, as ReadFrom.
//
// # Many partitions: Dir
//
// A Dir (OpenDir) holds a whole Kafka log directory: a partition directory
// "<topic>-<partition>" per partition and, at the root, one
// recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint for all of
// them, the clean-shutdown marker and Kafka's .lock, as Kafka lays them
// out (docs/format.md, "Log directory"). A directory a Kafka broker wrote
// opens with its recovery points, log start offsets and high watermarks.
//
//	d, err := plog.OpenDir(dataDir, plog.DirConfig{RecoveryThreads: 4})
//	...
//	p, err := d.CreatePartition("orders", 0) // or d.Lookup("orders", 0)
//	...
//	defer d.Close()
//
// Lookup tells a partition the Dir does not hold (ErrUnknownPartition)
// from a closed Dir or partition (ErrClosed); OpenPartition reopens a
// partition closed on its own, after a failure for instance, while the
// Dir stays open.
//
// A partition of a Dir behaves as one opened alone: the same durability,
// recovery and directory checks. OpenDir loads RecoveryThreads partitions
// at once (Kafka's num.recovery.threads.per.data.dir); a partition that
// fails to load fails OpenDir. The Dir shares among its partitions one
// segment budget (DirConfig.MaxOpenSegments, see Open files and mappings)
// and one flush scheduler with DirConfig.BackgroundThreads workers
// (Kafka's background.threads); compaction.DirRunner runs retention and
// key compaction over every partition with its topic's configuration.
//
// # Open files and mappings
//
// Every open segment holds up to three descriptors (.log, .index,
// .timeindex) and three mappings. Kafka keeps every segment open, which
// caps a process at the open-file limit and at vm.max_map_count (65,530 by
// default) divided by three, about 21,800 segments. With
// Config.MaxOpenSegments (a Partition alone) or DirConfig.MaxOpenSegments
// (shared by a Dir's partitions) set, the least recently used sealed
// segments that no reader holds are closed once more than that many are
// open, and reopened when read, without reading batch data. A partition
// not written since it was opened counts its last segment among them (its
// files stay sealed until the first append, which reopens them), so a Dir
// of idle partitions holds no more files than the budget allows. In a
// Dir, the active segments of written partitions count against the
// budget as well: when more are open than it allows, those written least
// recently return to rest (their files sealed again, closable by the
// budget, reopened by the next append; the data not yet flushed is
// flushed by the next Sync, flush policy or Close, which reopen it), so a
// Dir written over more partitions than the budget holds stays within it
// too. A budget costs a reopen on the first read of a closed segment (and
// on the first append to a rested one); Stats of the budget
// (Dir.SegmentBudget, Stats.SegmentBudget) count reopens and closes.
//
// # Follower logs
//
// A follower copies its leader's batches with AppendAssigned, offsets and
// headers as the leader stored them. A compacted leader's log has offset
// gaps, and so does the follower's copy: the first batch may start above
// the log end offset, and each batch after the previous one's last offset
// (offsets strictly increase). ReadFrom at an offset inside a gap returns
// the first batch after it, as Kafka does; TruncateTo at an offset inside
// a gap keeps the batches below it; recovery accepts the gaps compaction
// leaves. Producer state and the leader epoch cache follow the batches'
// headers.
//
// A follower whose log end is below its leader's log start restarts its
// log there: TruncateFullyAndStartAt(offset) empties the log, leader epoch
// cache and producer state, and the log starts and ends at offset
// (atomic across a crash at or above the log end). RestoreProducers then
// takes the leader's producer state at that offset, so a retry of a batch
// older than the restart is still a duplicate on the follower.
//
// Leader epochs (Kafka's leader epoch cache, LeaderEpochs): a replica that
// becomes leader records its epoch at the log end with
// AssignEpochStartOffset, durably, before its first batch in the epoch.
// EndOffsetForEpoch answers OffsetsForLeaderEpoch from the cache with
// Kafka's edge cases: a follower asks its leader for its own latest epoch
// and truncates to the answer. OffsetForTimestamp answers carry a leader
// epoch (TimestampOffset.LeaderEpoch).
package log
