// Package logtest checks a log.Partition against a reference model, for
// partlog's own tests and for property-based tests of programs that embed
// it.
//
// A [Model] is a plain, in-memory description of one partition: the
// batches it holds with their assigned offsets and record timestamps, the
// log start offset, the high watermark and the log end offset. Its methods
// mirror the Partition's (AppendBatch, Append, TruncateTo, DeleteRecordsBefore,
// SetHighWatermark, Sync, Reopen, Crash, OffsetForTimestamp, and the
// idempotent producer checks with ExpectAppend) and follow the same rules,
// written as simply as possible. [Check] compares a real Partition with
// the model and returns the first difference: the three offsets, the files
// (batches valid and contiguous, index entries pointing at batch starts),
// a read at every offset, scans with several byte limits, the visibility
// bounds, and the time lookups. [MakeBatch] builds producer batches for
// tests; [Model.AppendBuilder] takes what a program appended with a
// batch.Builder, and the model's records carry keys, values, headers and
// timestamps to compare with what a program reads.
//
// # A user's own property test
//
// Drive the partition and the model with the same random operations and
// check after each step; with pgregory.net/rapid:
//
//	func TestMyPartition(t *testing.T) {
//		rapid.Check(t, func(rt *rapid.T) {
//			dir := t.TempDir()
//			p, err := plog.Open(dir, plog.Config{SegmentBytes: 4096})
//			if err != nil {
//				rt.Fatalf("open: %v", err)
//			}
//			defer p.Close()
//			m := logtest.NewModel(0, false)
//			rt.Repeat(map[string]func(*rapid.T){
//				"append": func(rt *rapid.T) {
//					n := rapid.IntRange(1, 20).Draw(rt, "records")
//					b := logtest.MakeBatch(n, 100, 1_700_000_000_000, 0)
//					base, err := p.AppendBatch(b)
//					if err != nil {
//						rt.Fatalf("append: %v", err)
//					}
//					// b is unchanged; the model patches its own copy.
//					if err := m.AppendBatch(b, base); err != nil {
//						rt.Fatalf("model: %v", err)
//					}
//				},
//				"truncate": func(rt *rapid.T) {
//					o := rapid.Int64Range(m.LogStartOffset(), m.LogEndOffset()).Draw(rt, "offset")
//					if err := p.TruncateTo(o); err != nil {
//						rt.Fatalf("truncate: %v", err)
//					}
//					_ = m.TruncateTo(o)
//				},
//				"": func(rt *rapid.T) { require.NoError(rt, logtest.Check(p, m)) },
//			})
//		})
//	}
//
// The same test is in this package's examples (Example_rapid).
//
// # Records, and what a mismatch says
//
// A program that appends through a batch.Builder hands the model the same
// Builder with what Partition.AppendBuilder returned ([Model.AppendBuilder]),
// which checks the offsets the partition assigned. The model's records
// ([Record]: offset, timestamp, key, value, headers) are decoded from what
// the partition stored: [Model.Records] returns those a consumer sees in
// an offset range, [DecodeRecords] decodes what a read returned, and
// [CompareRecords] compares the two. Every difference the package reports
// about content (CompareRecords, AppendBuilder, and Check when a read
// returns other bytes than the model's batch) wraps a *[MismatchError]
// naming the offset, the field and both values:
//
//	partlog/logtest: ReadFrom(3, 1) returned 80 bytes [0,4], not the model's batch [0, 4]: offset 3: value: got "x", want "y"
//
// # Crashes
//
// The model also tracks the synced prefix, the batches a crash must keep
// (moved by [Model.Sync], by every append when [Model.SyncEveryAppend]
// mirrors Config.FlushMessages == 1, and by TruncateTo and
// DeleteRecordsBefore, which flush). After a crash, reopen the partition
// and call [Model.Crash] with its log end offset and high watermark: it
// fails unless the log ends between that synced end and LogEndOffset, on
// a batch boundary, and cuts the model there, so that Check then compares
// the recovered partition byte for byte.
//
// [CrashFS] simulates the crash: an in-memory filesystem that takes what
// a machine crash would leave just before its k-th operation (the synced
// state, plus a random share of the unsynced writes, whole, cut or torn)
// while the history runs on to its end. Run the history once to count
// its operations, then once per crash point:
//
//	fs := logtest.NewCrashFS(k, vfstest.CrashOptions{UnsyncedDataPercent: 50, TornPercent: 50, Seed: uint64(k)})
//	p, err := plog.Open("/p", plog.Config{FS: fs, SegmentIndexBytes: 4096})
//	...
//	m := logtest.NewModel(0, false)
//	for step := 0; step < steps && !fs.Crashed(); step++ {
//		// append to p and m; after p.Sync() returns:
//		if !fs.Crashed() {
//			m.Sync() // acknowledged before the crash
//		}
//	}
//	p.Close()
//	q, err := plog.Open("/p", plog.Config{FS: fs.State(), SegmentIndexBytes: 4096})
//	...
//	if err := m.Crash(q.LogEndOffset(), q.HighWatermark()); err != nil {
//		t.Fatal(err) // a synced batch lost, or a partial batch kept
//	}
//	require.NoError(t, logtest.Check(q, m))
//
// The package's examples are the recipe, with public packages only: a
// property test of a service appending with a Builder
// (ExampleModel_AppendBuilder) and 100 crash cases of one history
// (ExampleCrashFS), which run in about a second. The filesystems CrashFS
// is built on, and an error-injecting one, are in package
// github.com/partlog/partlog/index/vfs/vfstest.
//
// # Idempotent producers
//
// The model knows the producer rules of Partition.AppendBatch (the log
// package's "Idempotent producers"): per producer id its epoch and last
// five batches. [Model.ExpectAppend] tells, before the append, what
// AppendBatchInfo must do with a batch: the offsets it gets, the original
// offsets of a retry (same producer id and epoch, same first and last
// sequence as one of the last five, Duplicate set), or the error, wrapping
// plog.ErrInvalidProducerEpoch, plog.ErrOutOfOrderSequence or
// plog.ErrInvalidBatch. [Model.AppendBatch] checks a producer batch the
// same way and treats a retry as the no-op it is; [Model.NextSequence]
// gives a producer's next epoch and sequence:
//
//	want, wantErr := m.ExpectAppend(b)
//	got, err := p.AppendBatchInfo(b)
//	// wantErr and err wrap the same sentinel, or want == got
//	if err == nil {
//		_ = m.AppendBatch(b, got.Base) // a retry changes nothing
//	}
//
// The partition keeps its producer state in snapshot files that hold one
// batch per producer, so the model follows where it reloads them:
// [Model.Reopen] (Close writes a snapshot at the log end) leaves each
// producer's last batch known; after TruncateTo call
// [Model.ReloadProducers] with the filesystem the partition was opened on,
// which finds the snapshot the partition reloaded from (its placement
// depends on where segments rolled); after Crash the
// state is unknown ([ErrProducerStateUnknown]) until Reopen (or
// ReloadProducers after a later TruncateTo). DeleteRecordsBefore keeps
// it, as the partition does.
// Producer expiry is not modelled: give producer batches recent
// timestamps. ExampleModel_ExpectAppend shows a retry recognised by both.
//
// Transactions are: transactional batches open a producer's transaction,
// [Model.ExpectMarker] says what Partition.AppendMarker must do with a
// marker (the offset, or the fencing error), [Model.AppendMarker] records
// the marker the partition stored (read it back: its timestamp is the
// partition's clock), and the model derives the open transactions, the
// last stable offset and the aborted transactions from the history and
// the high watermarks it was given (a transaction whose marker no high
// watermark has passed since the producer state was last loaded still
// holds the last stable offset back, as in Kafka). Check
// compares them, and read_committed reads, with the partition whenever
// the producer state is known.
//
// # Concurrency
//
// A Model is not safe for concurrent use. Check reads the partition
// without locking it out; run it when no other goroutine changes the
// partition, or the comparison races with the changes.
package logtest
