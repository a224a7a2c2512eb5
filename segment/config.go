package segment

import (
	"log/slog"
	"math"
	"time"
)

// Defaults, Kafka's.
const (
	// DefaultIndexIntervalBytes is index.interval.bytes: an index entry is
	// added once more than this many bytes were appended since the last.
	DefaultIndexIntervalBytes = 4096
	// DefaultMaxIndexBytes is segment.index.bytes, 10 MiB: 1,310,720
	// offset entries or 873,813 time entries.
	DefaultMaxIndexBytes = 10 << 20
	// DefaultMaxSegmentBytes is segment.bytes, 1 GiB.
	DefaultMaxSegmentBytes = 1 << 30
	// MaxSegmentBytesLimit is the largest segment a Segment accepts: index
	// entries store positions as int32.
	MaxSegmentBytesLimit = math.MaxInt32
)

// Config holds a segment's settings. The zero value means Kafka's defaults,
// and so does each zero field: Create and Open fill them in.
type Config struct {
	// IndexIntervalBytes is index.interval.bytes (default 4096): an append
	// adds an offset (and maybe a time) index entry when more than this
	// many bytes were appended since the last entry. A negative value
	// means 0: an entry for every append after the first.
	IndexIntervalBytes int
	// MaxIndexBytes is segment.index.bytes (default 10 MiB): the size each
	// index is preallocated to while the segment is active.
	MaxIndexBytes int
	// MaxSegmentBytes (default 1 GiB, at most math.MaxInt32: positions
	// are 32-bit in the offset index) is the size of the read-only
	// mapping of the .log, and so the largest size Append lets the .log
	// reach (ErrSegmentFull beyond; Grow raises it for one segment). It
	// must be at least the segment.bytes the log passes to ShouldRoll. A
	// .log that is already larger when opened is mapped whole.
	MaxSegmentBytes int64
	// DisableMmap makes the segment read the .log with ReadAt even when
	// the file has a descriptor (Bytes then copies into the caller's
	// scratch buffer).
	DisableMmap bool
	// Logger receives warnings (a rebuilt index, a torn tail); nil
	// discards them.
	Logger *slog.Logger
	// Budget, when set, closes the files of this sealed segment while no
	// one uses it and other segments of the budget need the room (see
	// Budget); nil keeps them open until the last Unref.
	Budget *Budget
	// Tracker, when set, counts the segment until its last Unref (see
	// Tracker); nil counts nothing.
	Tracker *Tracker
	// Now is the clock Created reads, and so the one a segment none of
	// whose batches has a timestamp is aged by for time-based rolls
	// (ShouldRoll compares it with the now it is given); nil is
	// time.Now.
	Now func() time.Time
}

// readClock reads c's clock.
func (c *Config) readClock() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return timeNow()
}

// ensureDefaults replaces zero fields with Kafka's defaults.
func (c *Config) ensureDefaults() {
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = 0
	}
	if c.MaxIndexBytes == 0 {
		c.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if c.MaxSegmentBytes == 0 {
		c.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
