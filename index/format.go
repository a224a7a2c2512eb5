package index

import (
	"encoding/binary"
	"math"
)

// On-disk constants. They are Kafka's and frozen: changing any of them
// changes the file format.
const (
	// OffsetEntrySize is the size in bytes of an offset index entry: 8.
	OffsetEntrySize = offsetPositionAt + offsetPositionLen
	// TimeEntrySize is the size in bytes of a time index entry: 12.
	TimeEntrySize = timeRelOffsetAt + timeRelOffsetLen

	// Offset index entry fields (see the package doc).
	offsetRelOffsetAt  = 0
	offsetRelOffsetLen = 4
	offsetPositionAt   = offsetRelOffsetAt + offsetRelOffsetLen
	offsetPositionLen  = 4

	// Time index entry fields.
	timeTimestampAt  = 0
	timeTimestampLen = 8
	timeRelOffsetAt  = timeTimestampAt + timeTimestampLen
	timeRelOffsetLen = 4

	// warmSectionBytes is the size of the warm section that lookups
	// search first (KAFKA-6432): small enough that the two or three pages
	// it spans are touched by every tail lookup and so stay in the page
	// cache, large enough to hold the targets of in-sync followers and
	// consumers. Kafka uses the same value.
	warmSectionBytes = 8192
	// offsetWarmEntries and timeWarmEntries are the warm section's
	// lengths in entries (1024 and 682).
	offsetWarmEntries = warmSectionBytes / OffsetEntrySize
	timeWarmEntries   = warmSectionBytes / TimeEntrySize
)

// Defaults and limits.
const (
	// DefaultMaxIndexSize is Kafka's segment.index.bytes default, 10 MiB:
	// 1,310,720 offset entries or 873,813 time entries.
	DefaultMaxIndexSize = 10 << 20
	// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP (-1): the Timestamp
	// of TimeIndex.Lookup's answer when no entry is at or below the
	// target, and of LastEntry on an empty time index.
	NoTimestamp int64 = -1
	// MaxBaseOffset is the largest base offset an index accepts, so that
	// base + any relative offset fits in an int64.
	MaxBaseOffset = math.MaxInt64 - math.MaxInt32
	// MaxFileBytes caps the length of an index file: OpenOffsetIndex and
	// OpenTimeIndex report a longer existing file as corrupt, and refuse
	// a larger maxIndexSize. Kafka's index sizes are ints.
	MaxFileBytes = math.MaxInt32
)

// OffsetEntry is one offset index entry, decoded. Kafka's OffsetPosition.
type OffsetEntry struct {
	// Offset is an absolute offset: the segment's base offset plus the
	// entry's relative offset. Kafka indexes the last offset of a batch
	// (older Kafka versions: of the last batch of one append).
	Offset int64
	// Position is the byte position in the .log where the batch holding
	// Offset, or an earlier batch of the same append, starts. Every offset
	// >= Offset is in that batch or a later one, so a lookup scans batch
	// headers forward from Position.
	Position int64
}

// TimeEntry is one time index entry, decoded. Kafka's TimestampOffset.
type TimeEntry struct {
	// Timestamp is the largest timestamp seen in the segment up to and
	// including Offset, in milliseconds since the Unix epoch.
	Timestamp int64
	// Offset is an absolute offset: base + the entry's relative offset.
	// Every record with a timestamp greater than Timestamp is at an offset
	// greater than Offset. Kafka writes the last offset of the batch, or
	// (2.x, and sometimes 3.x) the first offset that holds the max
	// timestamp, so callers map it to the batch that contains it.
	Offset int64
}

// The codec. Every function takes the index bytes and an entry number; the
// caller guarantees (i+1)*entrySize <= len(b), which the bounds checks
// enforce anyway.
//
//	offset entry i:  b[8i : 8i+4] relOffset   b[8i+4 : 8i+8] position
//	time entry i:    b[12i : 12i+8] timestamp b[12i+8 : 12i+12] relOffset

// offsetAt returns the absolute offset of offset entry i.
func offsetAt(b []byte, base int64, i int) int64 {
	at := i*OffsetEntrySize + offsetRelOffsetAt
	return base + int64(int32(binary.BigEndian.Uint32(b[at:at+offsetRelOffsetLen])))
}

// positionAt returns the position of offset entry i.
func positionAt(b []byte, i int) int64 {
	at := i*OffsetEntrySize + offsetPositionAt
	return int64(int32(binary.BigEndian.Uint32(b[at : at+offsetPositionLen])))
}

// timestampAt returns the timestamp of time entry i.
func timestampAt(b []byte, i int) int64 {
	at := i*TimeEntrySize + timeTimestampAt
	return int64(binary.BigEndian.Uint64(b[at : at+timeTimestampLen]))
}

// timeOffsetAt returns the absolute offset of time entry i.
func timeOffsetAt(b []byte, base int64, i int) int64 {
	at := i*TimeEntrySize + timeRelOffsetAt
	return base + int64(int32(binary.BigEndian.Uint32(b[at:at+timeRelOffsetLen])))
}

// putOffsetEntry encodes an offset entry into dst[:OffsetEntrySize].
func putOffsetEntry(dst []byte, rel, pos int32) {
	binary.BigEndian.PutUint32(dst[offsetRelOffsetAt:offsetPositionAt], uint32(rel))
	binary.BigEndian.PutUint32(dst[offsetPositionAt:OffsetEntrySize], uint32(pos))
}

// putTimeEntry encodes a time entry into dst[:TimeEntrySize].
func putTimeEntry(dst []byte, ts int64, rel int32) {
	binary.BigEndian.PutUint64(dst[timeTimestampAt:timeRelOffsetAt], uint64(ts))
	binary.BigEndian.PutUint32(dst[timeRelOffsetAt:TimeEntrySize], uint32(rel))
}

// Searches. Each returns the slot of the largest entry whose key is <=
// target, or -1 when there is none, reading only the n = len(b)/entrySize
// entries of b. On sorted keys (strictly increasing, as Append and
// MaybeAppend write them) the warm-section search and the plain binary
// search return the same slot; on unsorted keys (a corrupt file) both
// return some slot in [-1, n) and never read outside b.
//
// The warm-section search (Kafka's AbstractIndex.indexSlotRangeFor,
// KAFKA-6432): with N warm entries and firstHot = max(0, n-1-N), a target
// >= key(firstHot) is searched in [firstHot, n-1] only, touching the last
// 8 KiB of the index, which every tail lookup and every append keeps in
// the page cache. A plain binary search over [0, n-1] would touch pages
// spread over the whole file (for a 10 MiB index, about 11 pages in the
// cold part), which stalled Kafka's produce path for up to a second on
// page faults.

// searchOffsets is the warm-section search over offset entries.
func searchOffsets(b []byte, base, target int64) int {
	n := len(b) / OffsetEntrySize
	if n == 0 {
		return -1
	}
	firstHot := max(0, n-1-offsetWarmEntries)
	if offsetAt(b, base, firstHot) <= target {
		return bsearchOffsets(b, base, target, firstHot, n-1)
	}
	if offsetAt(b, base, 0) > target {
		return -1
	}
	return bsearchOffsets(b, base, target, 0, firstHot)
}

// searchOffsetsPlain is a plain binary search over all offset entries: the
// reference for tests and benchmarks.
func searchOffsetsPlain(b []byte, base, target int64) int {
	n := len(b) / OffsetEntrySize
	if n == 0 || offsetAt(b, base, 0) > target {
		return -1
	}
	return bsearchOffsets(b, base, target, 0, n-1)
}

// bsearchOffsets returns the largest slot in [lo, hi] whose offset is <=
// target, given that key(lo) <= target (on sorted keys).
func bsearchOffsets(b []byte, base, target int64, lo, hi int) int {
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		switch k := offsetAt(b, base, mid); {
		case k > target:
			hi = mid - 1
		case k < target:
			lo = mid
		default:
			return mid
		}
	}
	return lo
}

// searchTimes is the warm-section search over time entries, by timestamp.
func searchTimes(b []byte, target int64) int {
	n := len(b) / TimeEntrySize
	if n == 0 {
		return -1
	}
	firstHot := max(0, n-1-timeWarmEntries)
	if timestampAt(b, firstHot) <= target {
		return bsearchTimes(b, target, firstHot, n-1)
	}
	if timestampAt(b, 0) > target {
		return -1
	}
	return bsearchTimes(b, target, 0, firstHot)
}

// searchTimesPlain is a plain binary search over all time entries.
func searchTimesPlain(b []byte, target int64) int {
	n := len(b) / TimeEntrySize
	if n == 0 || timestampAt(b, 0) > target {
		return -1
	}
	return bsearchTimes(b, target, 0, n-1)
}

// bsearchTimes returns the largest slot in [lo, hi] whose timestamp is <=
// target, given that key(lo) <= target (on sorted keys).
func bsearchTimes(b []byte, target int64, lo, hi int) int {
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		switch k := timestampAt(b, mid); {
		case k > target:
			hi = mid - 1
		case k < target:
			lo = mid
		default:
			return mid
		}
	}
	return lo
}

// firstOffsetAtOrAbove returns how many leading entries have an offset <
// target, for entries whose offsets are non-decreasing; offsetOf decodes
// entry i. TruncateTo keeps exactly that many entries.
func firstOffsetAtOrAbove(n int, target int64, offsetOf func(i int) int64) int {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if offsetOf(mid) < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
