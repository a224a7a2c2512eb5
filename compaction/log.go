package compaction

import (
	"github.com/partlog/partlog/segment"
)

// Log is what a cleanup policy needs from a partition: a consistent list of
// its segments, its offsets, and two ways to change the list under the
// partition's own lock. *log.Partition implements it (requested of the log
// package); users can implement it over their own segment stores.
//
// Every method must be safe for concurrent use with the partition's appends
// and reads. The policies never append; the only thing they do to the
// active segment is Roll it, when retention finds it expired.
type Log interface {
	// Dir is the partition directory; FS the filesystem its files live on.
	Dir() string
	FS() segment.FS
	// SegmentConfig is the configuration the partition opens its
	// segments with; compaction creates its new segments with it.
	SegmentConfig() segment.Config
	// SegmentBytes is segment.bytes, the size at which the partition rolls:
	// compaction groups segments while their total size stays within it.
	SegmentBytes() int64
	// LogStartOffset and HighWatermark are the partition's offsets:
	// nothing at or past the high watermark is ever deleted or cleaned.
	LogStartOffset() int64
	HighWatermark() int64
	// Segments returns a snapshot of the segment list in ascending base
	// offset order; the last one is the active segment. The caller owns one
	// reference on each (segment.Segment.Ref was called for it) and drops it
	// with Unref.
	Segments() ([]*segment.Segment, error)
	// DeleteSegments removes the oldest segments: oldest must be exactly
	// the first len(oldest) segments of the current list (the same
	// pointers), none of them the active one, and the next segment's base
	// offset must be at or below the high watermark; otherwise nothing
	// changes and an error is returned. The partition raises its log start
	// offset to the next segment's base, publishes the shorter list, marks
	// the segments deleted (their files are renamed .deleted and removed at
	// the last Unref, so readers holding them keep reading) and syncs the
	// directory.
	DeleteSegments(oldest []*segment.Segment) error
	// ReplaceSegments replaces old, a contiguous run of sealed segments of
	// the current list (the same pointers, never the active one), with new,
	// under the partition's write lock: it checks old, calls commit (which
	// renames the files), and, when commit succeeds, publishes the list
	// with new in place of old, takes over the reference each new segment
	// was created with, and drops its own references on old. When the
	// check or commit fails it publishes nothing and returns the error.
	ReplaceSegments(old, new []*segment.Segment, commit func() error) error
	// Roll seals the active segment and starts a new, empty one at the
	// log end offset; it does nothing when the active segment is empty.
	// Retention rolls when the active segment itself is due for deletion,
	// then deletes it as a sealed segment (as Kafka's deleteSegments
	// rolls before deleting every segment).
	Roll() error
	// ClaimCleaning claims the partition for one compaction round, which
	// calls release when it ends: while a claim is held, another
	// ClaimCleaning must fail at once with an error wrapping
	// ErrCleaningInProgress (two rounds at once would write the same
	// .cleaned files). The partition enforces it, so two Compactors or
	// Runners given one partition never clean it at the same time.
	ClaimCleaning() (release func(), err error)
}
