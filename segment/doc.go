// Package segment implements one segment of a Kafka partition log: a
// NNNNNNNNNNNNNNNNNNNN.log of RecordBatch v2 bytes with its sparse offset
// index (.index) and time index (.timeindex), in Apache Kafka's on-disk
// format byte for byte. A segment Kafka wrote opens here; one written here
// opens in Kafka's tools.
//
// A partition (package log) is a directory of segments; it appends to the
// last one (the active segment), rolls to a new one when it is full,
// seals the old one, and removes whole segments for retention. This
// package is the single segment: append, lookup by offset and by time,
// read, recover, truncate, seal.
//
// # Files
//
// The 20-digit number in the names is the segment's base offset: at or
// below the first offset it holds (above it after compaction removed the
// first batches; offsets may have gaps).
//
//	00000000000000000100.log        batches, back to back, as Kafka writes them:
//	                                [batch 100..104][batch 105..105][batch 107..110]...
//	00000000000000000100.index      8-byte entries  (i32 offset-base, i32 position)
//	00000000000000000100.timeindex  12-byte entries (i64 timestamp, i32 offset-base)
//	00000000000000000100.txnindex   34-byte entries, one per aborted transaction whose
//	                                ABORT marker is in the segment (made on the first)
//
// An offset index entry is added once more than Config.IndexIntervalBytes
// were appended since the last one (Kafka's index.interval.bytes, 4096):
// key = the last offset of the batch being appended, value = that batch's
// position. With it, the time index gets (largest timestamp so far, last
// offset of the batch that has it) if the timestamp grew; sealing adds that
// entry once more even if no offset entry was due. Both indexes are
// preallocated to Config.MaxIndexBytes while the segment is active and
// trimmed to their entries once it is sealed (TrimSealedIndexes, which
// Seal leaves for later so that a roll does not wait for it) or closed.
// Indexes are hints:
// Open checks them (never trusting the entry count of a preallocated index
// after a crash, KAFKA-12734) and rebuilds a missing or failing one from a
// scan of the batch headers (an offset index without entries fails only
// when a batch starts past the first IndexIntervalBytes); lookups verify
// the entry they use against the .log and scan from the start if it does
// not match. The transaction index is not a hint: it lists the aborted
// transactions whose ABORT marker lies in the segment (AbortedTxns; the
// partition writes it), is created with its first entry, and is cut by
// TruncateTo and Recover; the log package rebuilds its entries when it
// replays a log. Every close, seal, recovery and rebuild ends the time index
// with a final entry for the segment's largest timestamp, so a partition
// that was shut down cleanly takes the largest timestamp from it
// without reading batches after it. Details of the formats: packages
// batch and index.
//
// A .log Kafka wrote before 0.11 (or upgraded in place) may also hold
// legacy magic 0/1 messages (package batch, Legacy): they are read and
// served as stored, indexed as batches covering [first inner offset,
// wrapper offset] with their timestamp (-1 under magic 0) as max
// timestamp, and never written, except that Append takes one for
// compaction to copy verbatim.
//
// # Reading and writing
//
// The .log is appended with File.WriteAt at the published size and read
// through a read-only memory mapping (when the file has a descriptor and
// mapping is not disabled), so Bytes returns the page cache's bytes without
// a copy, and WriteTo sends them with sendfile. An active segment maps
// Config.MaxSegmentBytes (its window, which appends fill; Grow widens it
// to MaxSegmentBytesLimit for a log that can no longer roll); a sealed one
// maps only its file's length: Open maps the file, Seal and a cutting
// Recover unmap the pages past the end, TruncateTo of a sealed
// segment maps the window anew, keeping the old mapping until the
// segment is released. So a process with many segments takes address
// space for their bytes only (100 segments at Kafka's 1 GiB default: 1 GiB
// plus their files, not 100 GiB), and a file cut to a shorter length is
// never left mapped past its end. Files without a descriptor (the
// in-memory filesystem of tests) are read with ReadAt. Every file access
// goes through the vfs.FS passed to Create or Open (package index/vfs, the
// filesystem every file of a partition goes through); nil is the
// operating system's, vfs.Default, which a filesystem of your own may wrap.
//
// # Media errors
//
// A mapped page the kernel cannot read (a media error) or that lies past
// the end of a file cut behind the segment's back raises SIGBUS. Every
// method that reads the mapped .log or indexes (Read, Batches,
// FindOffsetByTimestamp, WriteTo, Append, TruncateTo, Recover, Open) runs
// under a fault guard (runtime/debug.SetPanicOnFault and a deferred
// recover): the fault becomes an error wrapping
// index.ErrFault, a *FaultError naming the file and the byte offset, and the
// process lives. The guard costs about 6 ns a call. Bytes is zero-copy:
// the caller reads the returned slice outside any guard, so a media error
// on those pages still kills the process; WriteTo (sendfile, or a guarded
// write) reports it as an error instead.
//
// Lookups follow Kafka: Read finds the batch holding an offset (offset
// index floor, then batch headers forward to the first batch whose last
// offset is >= the target) and returns whole batches from there (within a
// byte limit and below a visibility bound, at least one batch if asked), FindOffsetByTimestamp (time index floor,
// offset index, first batch whose maxTimestamp is >= the target, first
// record in it with a timestamp >= the target).
//
// # Recovery
//
// Recover checks every batch (framing, header and CRC-32C with
// batch.ValidateHeader, nothing decompressed; offsets increasing), rebuilds both indexes and cuts the .log after the
// last valid batch. Its RecoverResult says what was cut and why: a torn
// tail (what a crash leaves: nothing valid after the damage), or
// corruption followed by valid data.
// Legacy messages get their CRC-32 checked; one that frames but fails its
// checks where no crash of partlog's can have left it (data after it), and damage that a valid legacy message follows, is
// never cut: RecoverResult.Kept, ErrLegacyKept (DESIGN law 12). The search
// for data after the damage skips the records of a damaged uncompressed
// v2 batch (walked by their length prefixes): bytes inside its own
// payload, such as a legacy message stored in a record value, are not
// data after it.
//
// That is the one definition of damage in a .log, and Check applies it
// read-only to a file: package log's recovery asks its policy from
// Check's result before Recover cuts, package log's crash repair walks a
// leftover .swap with it (HeadersOnly for the cheap open check), the
// dumplog example dumps with
// it (KeepGoing: a framed entry that fails its checks is reported and the
// walk goes on), and package log's Verify and header walks run it over an
// open segment's own bytes. The segment's own walks are the same walk:
// Open's header scan (from the last index entry, or from the start to
// rebuild an index) and TruncateTo's read headers through it, stopping at
// the first entry that is not valid, and Batches reads entries through it
// from the batch holding its offset, stopping with the entry's error. So
// the framing rules (smallest sizes, RecordBatch v2 or legacy, offsets in
// order and inside the segment, bounds) live in one place. Bytes the walk cannot read (a media error, a
// file cut behind its back) are an error wrapping ErrFault, never damage. TestCheckAgreesWithRecover proves that Check and Recover
// find the same end, next offset, cause and kept flag on every kind of
// damage.
//
// # Concurrency
//
// One writer and any number of readers use a Segment at the same time.
//
//   - Readers, from any goroutine, concurrently with each other and with
//     Append: Read, Bytes, WriteTo, Batches, FindOffsetByTimestamp,
//     BaseOffset, NextOffset, Size, MaxTimestamp, Sealed, AbortedTxns,
//     AcquireRead, ReleaseRead. They take no lock against
//     Append: Append publishes a batch by storing the new size with an
//     atomic after the bytes and index entries are in place, and readers
//     only look below the size they loaded.
//   - The writer, one call at a time: Append, Flush, Seal, TruncateTo,
//     Recover, Close.
//   - TruncateTo and Recover shrink the .log. They first wait for every
//     read lease to be released, so a reader that holds a lease
//     (AcquireRead ... ReleaseRead) around its reads, and for as long as it
//     uses bytes returned by Bytes, never has them cut from under it (and
//     never touches a mapped page past the file's end). Once a truncation
//     waits, new read leases wait too, so overlapping readers cannot
//     starve it.
//
// # Lifetimes
//
// Close ends the use of the segment: the files are closed and unmapped,
// and bytes returned by Bytes must not be used after it.
//
// # Open files at rest
//
// An open segment holds up to three descriptors and three mappings: the
// .log's (mapped at its length once sealed) and each index's (cut to its
// entries once sealed, none for an empty index). Segments created or
// opened with Config.Budget share a Budget: a sealed segment that no one
// uses (a read lease, or a method running on it) may be closed while more
// than the budget's Max are open, least recently used first, and is
// reopened by the next method that needs its files. What needs no file
// (BaseOffset, NextOffset, Size, the timestamps) is answered from memory
// meanwhile. A deleted segment (MarkDeleted) leaves the budget: it is
// renamed without being opened, and closes its files whenever no one uses
// it, so that it holds descriptors only while it is read.
//
// # The partition's machinery
//
// A partition (package log) uses more of a segment than a program that
// uses one on its own needs; those methods are documented one by one:
// reference counts for readers that outlive a deletion (Ref, Unref), the
// bounded wait for readers before a truncation (LockForTruncate,
// TruncateToLocked, UnlockForTruncate), budget pins (Pin, Unpin), the
// .cleaned/.swap/.deleted renames of its crash protocol (CreateWithSuffix,
// ChangeSuffix, MarkDeleted), spare segments made ahead of a roll
// (CreateSpare, AdoptAs, or BeginAdoptAs and SettleAdoption, Discard),
// roll decisions (ShouldRoll), sealed and clean opens (RecoverSealed,
// OpenClean, Unseal), the deferred half of Seal (TrimSealedIndexes), the
// transaction index writes (AppendAbortedTxn, TruncateAbortedTxns,
// FlushTxnIndex) and the header walk (Headers).
//
// # Example
//
//	s, err := segment.Create(nil, dir, 0, segment.Config{}) // nil FS: the OS's
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	if _, err := s.Append(b); err != nil { // b: a batch with offsets assigned
//		return err
//	}
//	s.AcquireRead()
//	defer s.ReleaseRead()
//	sl, err := s.Read(0, 1<<20, s.Size(), true)
//	if err != nil {
//		return err
//	}
//	p, err := s.Bytes(sl.Start, sl.End, nil) // zero-copy: whole batches
package segment
