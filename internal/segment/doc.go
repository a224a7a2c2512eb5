// Package segment is the implementation of one segment of a partition log,
// the machinery behind the public package
// github.com/partlog/partlog/segment (whose package documentation
// describes the files, reads, recovery, concurrency and lifetimes).
//
// The public package is a small facade for programs that use a segment on
// its own. This package adds what only the partition (package log) needs:
// reference counts (Ref, Unref), read leases and the bounded truncation
// wait (AcquireRead, LockForTruncate, TruncateToLocked), budget pins (Pin,
// Unpin), the file suffixes of the partition's crash protocol
// (CreateWithSuffix, ChangeSuffix, MarkDeleted), spare segments made
// ahead of a roll (CreateSpare, BeginAdoptAs and SettleAdoption, or
// AdoptAs for both at once, Discard), roll decisions
// (ShouldRoll), sealed and clean opens (RecoverSealed, OpenClean, Unseal),
// the transaction index writes (AppendAbortedTxn, TruncateAbortedTxns,
// FlushTxnIndex) and the header walk (Headers). It is internal so that
// importers of the public package see what they can use.
//
// Every loop over a .log's framing is the one walk of damage.go
// (logSource.walk): Check and Segment.Check, Recover, the header scan of
// Open, index rebuilds and TruncateTo (Segment.scan: headers only, from a
// position, below a limit, stopping at the first damage), and Batches and
// Headers (batches.go: from the batch holding an offset, read into the
// walk's own window, never the mapping; a control batch whole).
package segment
