// Package index implements a segment's sparse offset index (.index) and
// time index (.timeindex) in Apache Kafka's on-disk format, byte for byte:
// files written here open in Kafka's tools, and Kafka's open here.
//
// An [OffsetIndex] maps offsets to the .log positions of the batches that
// hold them; a [TimeIndex] maps the largest timestamp seen so far to the
// offset where it was seen. Both are sparse (the segment adds an entry once
// index.interval.bytes of log were written since the last), sorted,
// preallocated to their maximum size and mapped read-write, and carry no
// checksum: after a crash they are checked ([OffsetIndex.SanityCheck]) and
// rebuilt from the log when wrong. Indexes are hints; the log is the truth.
//
// # Format
//
// A file is a sequence of fixed-size entries, big-endian, with nothing
// before or after them. Offsets are stored relative to the segment's base
// offset (the number in the file name), which is why a segment rolls
// before offset - base overflows an int32. The sizes are frozen.
//
// Offset index entry, 8 bytes, Kafka's OffsetPosition:
//
//	0               4               8
//	+---------------+---------------+
//	| relOffset i32 | position  i32 |
//	+---------------+---------------+
//	relOffset: the last offset of the indexed batch, minus the base offset
//	position:  byte position in the .log where that batch starts
//
// Time index entry, 12 bytes, Kafka's TimestampOffset:
//
//	0                               8               12
//	+-------------------------------+---------------+
//	| timestamp                 i64 | relOffset i32 |
//	+-------------------------------+---------------+
//	timestamp: the largest batch max timestamp seen up to relOffset (ms)
//	relOffset: the offset where it was seen, minus the base offset
//
// For example, with base offset 100, the offset entry (offset 105, position
// 4096) is 00 00 00 05 00 00 10 00, and the time entry (timestamp
// 1700000000000, offset 105) is 00 00 01 8b cf e5 68 00 00 00 00 05.
//
// Kafka's rules, which this package keeps: a new file is preallocated to
// maxIndexSize rounded down to whole entries; an existing file holds as
// many entries as its length has room for; offsets strictly increase; time entries are
// added only when the timestamp grows; the time index counts as full one
// slot early, keeping the last slot for the entry written when the segment
// is sealed; both are trimmed to their entries when sealed or closed.
//
// Opening an existing file does not change it: the file is mapped with
// room for maxIndexSize bytes of entries (the mapping may reach past the
// end of the file; nothing past the end is touched) and grown to that
// size only when an entry is appended past its end (or when a segment
// rebuilds or regrows it).
// Opening a directory of
// sealed segments therefore writes nothing, and a crash soon after does not
// leave every index with a zero tail. (Kafka maps an existing file at its
// length and resizes only the active segment's indexes.) Trimming, which
// a segment does when it is sealed or opened, also cuts the mapping to the
// entries, so that a sealed segment's index maps what it holds, not
// maxIndexSize (an empty one maps nothing).
//
// A file grown to maxIndexSize is sparse, as Kafka's: its disk blocks are
// reserved (fallocate) as the entries grow, a step ahead of them (the
// first page when the file is made; then, once half of the room reserved
// ahead is used, as much again as the entries take, at most 1 MiB a
// step), so an index holding few entries takes a page of disk, not
// maxIndexSize (10 MiB at Kafka's default, twice per partition). An entry
// is never written into the mapping past the reserved blocks: an append
// whose entry they do not cover reserves first, and when the disk is full
// it fails with the filesystem's error (ENOSPC) and writes nothing,
// instead of raising SIGBUS in a store into an unbacked page.
//
// Entries are stored through the mapping. A first store into a page of a
// mapping is a page fault (tens of microseconds), which an index written
// a few times (a partition among thousands, a segment woken from rest)
// would pay for a few entries. On Linux, therefore, a new index maps its
// first page into the process when it is created, and the first 64
// entries after an existing file is mapped (opened, or grown back by
// Resize) are written through the file (pwrite): there file writes and a
// shared mapping use the same page cache pages, so lookups through the
// mapping see them. The writer reads its own last entry from a copy
// (LastAppended), and SanityCheck reads the last two through the file
// there too. Flush fdatasyncs the file after such writes, msyncs the
// mapping after entries stored through it, and makes no system call when
// nothing was written since the last Flush.
//
// Files are opened through a vfs.FS (package index/vfs, the filesystem
// every file of a partition goes through; segment.Config and the log
// package's Config take the same type). A nil FS is the operating
// system's, vfs.Default. A file without an operating-system descriptor (an
// in-memory filesystem's, whose Fd is vfs.InvalidFd) is not mapped: the
// index keeps a heap copy, read once, and writes every entry through to
// the file, so the same code runs on both.
//
// A file's length is only a trustworthy entry count for a trimmed index.
// An index that was still preallocated when the process crashed has a
// zero tail that the count includes (KAFKA-12734); SanityCheck detects it
// in O(1), because a zero entry never follows a real one.
//
// # Lookup
//
// Lookup returns the largest entry <= the target, by offset or by
// timestamp, with Kafka's warm-section search (KAFKA-6432): when the
// target is at or above the entry 8 KiB before the end, only the last
// 8 KiB of entries (1024 offset entries, 682 time entries) are binary
// searched; otherwise the rest. The appender and the tail lookups of
// in-sync followers and consumers keep those pages in the page cache,
// while a plain binary search over a 10 MiB index touches about a dozen
// pages spread over the file, some of them cold: page faults on the
// produce path. An offset lookup below every entry answers
// {base offset, 0}; a time lookup answers {batch.NoTimestamp (-1), base offset}.
//
// # Concurrency
//
// One writer goroutine and any number of readers may use an index at the
// same time without locks. The methods fall in three groups:
//
//   - Readers, safe from any goroutine at any time, concurrently with each
//     other and with the writer: Lookup, Entry, LastEntry, Entries,
//     SanityCheck.
//   - Writer methods, called by one goroutine at a time (the segment's
//     appender), overlapping readers freely: Append (MaybeAppend),
//     LastAppended, Flush.
//   - Exclusive methods, which no other call of the same index may
//     overlap, reader or writer: TruncateTo, Close. The segment takes the
//     write side of its read lease around them.
//
// A segment also grows (Resize), trims (TrimToValidSize), resets,
// renames and deletes its indexes, checks them against its .log (Check),
// and counts the entries below a position (SearchPosition, a reader).
//
// A reader never sees a partly written entry. One called after Close (or
// a delete) finds the index empty rather than touching unmapped memory,
// but calling it then is still a bug.
//
// # Media errors
//
// A page of the mapping that the kernel cannot read (a media error, or a
// file cut behind the index's back) raises SIGBUS when touched. The
// methods that return an error (Append, MaybeAppend, TruncateTo,
// SanityCheck) turn such a fault into an error wrapping ErrFault,
// naming the file and the byte offset (SanityCheck, where it reads the
// last entries through the file, returns the read's error, and for a file
// that ends before them the same fault). Lookup, Entry and LastEntry return
// no error: they are called by package segment inside its own protection
// (its reads return an error wrapping this same ErrFault); a caller of this
// package that uses them directly on a failing disk gets the SIGBUS.
//
// # Example
//
//	idx, err := index.OpenOffsetIndex(nil, "00000000000000000100.index", 100, index.DefaultMaxIndexSize) // nil FS: the OS's
//	if err != nil {
//		return err
//	}
//	if err := idx.SanityCheck(); err != nil {
//		// rebuild from the log: remove the file, reopen, Append per indexed batch
//	}
//	if err := idx.Append(105, 4096); err != nil { // batch 100..105 at 4096
//		return err
//	}
//	e := idx.Lookup(103) // {Offset: 100, Position: 0}: scan from position 0
//	e = idx.Lookup(110)  // {Offset: 105, Position: 4096}
//	return idx.Close()   // trims the file to 8 bytes
package index
