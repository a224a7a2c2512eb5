// Package logaccess gives the module's own packages that are not the
// partition (log/logtest, the partition's reference model, and the example
// broker, which ships a partition's producer state to a replica) what they
// read and write of a partition's files that is not part of package log's
// API. Package log sets the variables when it is initialized (a program
// that uses them imports log, so they are set before it runs).
//
//	data := logaccess.AppendProducerSnapshot(nil, entries) // a .snapshot file's bytes
//	err := logaccess.CheckProducerSnapshot(data)          // nil: it decodes
package logaccess

import "github.com/partlog/partlog/internal/vfs"

// ProducerSnapshotEntry is one entry of a producer state snapshot file
// (Kafka's .snapshot format), field for field: a producer's last batch and
// its transaction state.
type ProducerSnapshotEntry struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32 // -1 when the producer has no batch
	LastOffset            int64 // -1 when the producer has no batch
	OffsetDelta           int32 // LastOffset - the batch's first offset
	Timestamp             int64 // the producer's last timestamp
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64 // -1 when no transaction is open
}

var (
	// CheckProducerSnapshot reports whether data, the bytes of a producer
	// state snapshot file, decodes; the error wraps the log's corruption
	// marker. The partition skips a snapshot that does not.
	CheckProducerSnapshot func(data []byte) error
	// DecodeProducerSnapshot decodes a producer state snapshot file's
	// bytes (checksum checked).
	DecodeProducerSnapshot func(data []byte) ([]ProducerSnapshotEntry, error)
	// AppendProducerSnapshot appends the snapshot file of entries to dst.
	AppendProducerSnapshot func(dst []byte, entries []ProducerSnapshotEntry) []byte
	// FS returns the filesystem the files of p, a *log.Partition, live on
	// (its Config.FS, the operating system's when that was nil): for the
	// reference model, which lists a partition's snapshot files, and for
	// tests that look at a partition's files.
	FS func(p any) vfs.FS
)
