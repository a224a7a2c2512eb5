package log

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Remote storage errors. Implementations of RemoteStorage wrap these
// sentinels so that callers can tell them apart with errors.Is.
var (
	// ErrRemoteUnavailable reports that the remote store could not be
	// reached or refused the request for a reason that may go away (a
	// network error, a throttled request, a store that is down). The log
	// retries copies and deletions later; a read of an offset only the
	// remote store holds returns an error wrapping it.
	ErrRemoteUnavailable = errors.New("partlog/log: remote storage unavailable")
	// ErrRemoteSegmentNotFound reports that the remote store holds no
	// segment with the requested RemoteSegmentID.
	ErrRemoteSegmentNotFound = errors.New("partlog/log: remote segment not found")
	// ErrRemoteInvalidRange reports a FetchSegment byte range outside the
	// segment: a negative start, a start past the segment's size, or an
	// end before the start or past the size.
	ErrRemoteInvalidRange = errors.New("partlog/log: invalid remote segment range")
	// ErrRemoteInvalidID reports a RemoteSegmentID that is not Valid: an
	// empty topic, a negative partition or an ID not made by
	// NewRemoteSegmentID.
	ErrRemoteInvalidID = errors.New("partlog/log: invalid remote segment id")
)

// RemoteSegmentID names one copy of a segment in a remote store: the
// partition it belongs to and an ID unique among every copy ever made of
// that partition's segments. Two copies of the same local segment (a
// retry after a crash, say) get different IDs, so that a retry never
// replaces a recorded copy, and Dirs sharing a store never name the same
// object.
type RemoteSegmentID struct {
	// TopicPartition is the partition the segment belongs to.
	TopicPartition TopicPartition
	// ID is 32 lowercase hexadecimal digits (NewRemoteSegmentID), safe in
	// file names and object keys.
	ID string
}

// NewRemoteSegmentID returns a RemoteSegmentID of tp with a fresh random ID.
func NewRemoteSegmentID(tp TopicPartition) RemoteSegmentID {
	var b [16]byte
	// crypto/rand.Read never returns an error (it panics when the
	// system's random source fails).
	_, _ = rand.Read(b[:])
	return RemoteSegmentID{TopicPartition: tp, ID: hex.EncodeToString(b[:])}
}

// String returns "<topic>-<partition>/<id>".
func (id RemoteSegmentID) String() string {
	return id.TopicPartition.String() + "/" + id.ID
}

// Valid reports whether id names a partition (non-empty topic, partition
// >= 0) and its ID is 32 lowercase hexadecimal digits.
func (id RemoteSegmentID) Valid() bool {
	if id.TopicPartition.Topic == "" || id.TopicPartition.Partition < 0 || len(id.ID) != 32 {
		return false
	}
	for i := 0; i < len(id.ID); i++ {
		c := id.ID[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RemoteSegmentMetadata describes a segment copied to a remote store. The
// log records it durably in the partition's remote log metadata once the
// copy has succeeded.
type RemoteSegmentMetadata struct {
	// ID names the copy.
	ID RemoteSegmentID
	// BaseOffset is the offset of the segment's first record.
	BaseOffset int64
	// EndOffset is the offset of the segment's last record (inclusive).
	EndOffset int64
	// MaxTimestamp is the largest batch max timestamp in the segment, in
	// milliseconds since the epoch; -1 when no batch has a timestamp.
	MaxTimestamp int64
	// Size is the size of the segment file in bytes.
	Size int64
	// LeaderEpochs lists, in increasing order, the leader epochs of the
	// segment's batches with the first offset of each within the segment.
	LeaderEpochs []EpochStart
}

// RemoteIndexKind names one of the files copied with a segment besides
// the segment itself.
type RemoteIndexKind int

// The kinds of files copied with a segment.
const (
	// RemoteOffsetIndex is the segment's offset index.
	RemoteOffsetIndex RemoteIndexKind = iota
	// RemoteTimeIndex is the segment's time index.
	RemoteTimeIndex
	// RemoteTxnIndex is the segment's transaction index (aborted
	// transactions); empty when the segment has none.
	RemoteTxnIndex
	// RemoteProducerSnapshot is the producer state snapshot taken at the
	// segment's end offset + 1; empty when there is none.
	RemoteProducerSnapshot
	// RemoteLeaderEpochIndex is the slice of the leader epoch checkpoint
	// covering the segment, in the checkpoint file's text format.
	RemoteLeaderEpochIndex
)

// RemoteIndexKinds lists every RemoteIndexKind, in order.
var RemoteIndexKinds = []RemoteIndexKind{
	RemoteOffsetIndex, RemoteTimeIndex, RemoteTxnIndex, RemoteProducerSnapshot, RemoteLeaderEpochIndex,
}

// String returns a short lowercase name of k usable in object keys and
// file names ("offset" for RemoteOffsetIndex).
func (k RemoteIndexKind) String() string {
	switch k {
	case RemoteOffsetIndex:
		return "offset"
	case RemoteTimeIndex:
		return "time"
	case RemoteTxnIndex:
		return "txn"
	case RemoteProducerSnapshot:
		return "producer"
	case RemoteLeaderEpochIndex:
		return "epoch"
	}
	return fmt.Sprintf("RemoteIndexKind(%d)", int(k))
}

// RemoteSegmentData holds the contents CopySegment copies. Segment is read
// once, to its end; it holds exactly the RemoteSegmentMetadata's Size
// bytes. The other fields are the whole contents of each file; nil means
// empty.
type RemoteSegmentData struct {
	// Segment is the segment file's contents.
	Segment io.Reader
	// OffsetIndex is the offset index's contents.
	OffsetIndex []byte
	// TimeIndex is the time index's contents.
	TimeIndex []byte
	// TxnIndex is the transaction index's contents.
	TxnIndex []byte
	// ProducerSnapshot is the producer snapshot's contents.
	ProducerSnapshot []byte
	// LeaderEpochs is the leader epoch checkpoint slice's contents.
	LeaderEpochs []byte
}

// Index returns the contents of the file of kind k (nil for an unknown
// kind).
func (d RemoteSegmentData) Index(k RemoteIndexKind) []byte {
	switch k {
	case RemoteOffsetIndex:
		return d.OffsetIndex
	case RemoteTimeIndex:
		return d.TimeIndex
	case RemoteTxnIndex:
		return d.TxnIndex
	case RemoteProducerSnapshot:
		return d.ProducerSnapshot
	case RemoteLeaderEpochIndex:
		return d.LeaderEpochs
	}
	return nil
}

// RemoteStorage stores copies of closed segments outside the local disk (an
// object store, a network file system). The log calls it from background
// copier and deleter goroutines and from reads of offsets below the local
// log start; an implementation must be safe for concurrent use.
//
// Every method honours ctx's cancellation. Errors that may go away on a
// retry wrap ErrRemoteUnavailable; a missing segment wraps
// ErrRemoteSegmentNotFound. The package remotetest holds a conformance
// suite every implementation should pass.
type RemoteStorage interface {
	// CopySegment stores the segment and its files under md.ID. It
	// returns only once everything is stored durably; a later Fetch
	// returns exactly the bytes given. Copying again under an ID already
	// stored (a retry) replaces the copy and succeeds. A failed copy may
	// leave part of it behind: ListSegments lists it and DeleteSegment
	// removes it.
	CopySegment(ctx context.Context, md RemoteSegmentMetadata, data RemoteSegmentData) error
	// FetchSegment returns a reader of the bytes [start, end) of the
	// segment stored under id; end < 0 means the segment's end. The
	// caller closes the reader. A range outside the segment returns an
	// error wrapping ErrRemoteInvalidRange.
	FetchSegment(ctx context.Context, id RemoteSegmentID, start, end int64) (io.ReadCloser, error)
	// FetchIndex returns a reader of the whole file of kind k copied with
	// the segment stored under id (empty if it was copied empty). The
	// caller closes the reader.
	FetchIndex(ctx context.Context, id RemoteSegmentID, k RemoteIndexKind) (io.ReadCloser, error)
	// DeleteSegment removes the segment stored under id and its files,
	// including what a failed CopySegment left. Deleting an ID the store
	// does not hold succeeds.
	DeleteSegment(ctx context.Context, id RemoteSegmentID) error
	// ListSegments returns the IDs of tp the store holds anything of,
	// complete or partial copies, in no particular order. The log uses it
	// on start to remove copies its metadata does not record.
	ListSegments(ctx context.Context, tp TopicPartition) ([]RemoteSegmentID, error)
}
