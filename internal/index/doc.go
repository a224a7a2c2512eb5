// Package index implements Kafka's sparse offset and time indexes, the
// machinery behind the public package github.com/partlog/partlog/index
// (whose package documentation describes the format, the lookups, the
// concurrency and the media errors).
//
// The public package wraps the open, append, lookup, truncate, check,
// flush and close of an index; this package adds what a segment needs to
// manage its indexes' files: Resize, TrimToValidSize, Reset, Rename,
// Delete, Check (entries verified against the log), SearchPosition, and
// the capacity accessors (MaxEntries, IsFull, BaseOffset, Path).
package index
