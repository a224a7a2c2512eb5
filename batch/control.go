package batch

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, the int16 after the version
// in its key. Kafka numbers them; the numbering is frozen.
type ControlType int16

// Control record types. ABORT and COMMIT are transaction markers; the
// others are KRaft metadata-log records, recognised by type only.
const (
	ControlAbort ControlType = iota
	ControlCommit
	ControlLeaderChange
	controlSnapshotHeader
	controlSnapshotFooter
	controlKRaftVersion
	controlKRaftVoters
	numControlTypes
)

var controlTypeNames = [...]string{
	"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS",
}

func init() {
	if len(controlTypeNames) != int(numControlTypes) {
		panic(fmt.Sprintf("batch: %d control type names for %d types", len(controlTypeNames), numControlTypes))
	}
}

// String returns Kafka's name for the type ("ABORT", "COMMIT", ...), or
// "UNKNOWN(n)".
func (t ControlType) String() string {
	if t >= 0 && t < numControlTypes {
		return controlTypeNames[t]
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// IsTxnMarker reports whether t is ABORT or COMMIT.
func (t ControlType) IsTxnMarker() bool { return t == ControlAbort || t == ControlCommit }

// Control record layout, big-endian. Frozen.
//
//	key:   version int16 (0) | type int16
//	value: version int16 (0) | coordinatorEpoch int32   (ABORT and COMMIT)
const (
	controlKeyVersionOffset         = 0
	controlKeyTypeOffset            = controlKeyVersionOffset + 2
	controlKeySize                  = controlKeyTypeOffset + 2 // 4
	markerValueVersionOffset        = 0
	markerValueCoordinatorEpochOffs = markerValueVersionOffset + 2
	markerValueSize                 = markerValueCoordinatorEpochOffs + 4 // 6
	controlVersion                  = 0
)

// validControlKey reports whether k is a control record key: an int16
// version >= 0 and an int16 type.
func validControlKey(k []byte) bool {
	return len(k) >= controlKeySize && int16(binary.BigEndian.Uint16(k[controlKeyVersionOffset:])) >= 0
}

// TxnMarker is a transaction marker: the one record of a control batch
// that a transaction coordinator writes to end a transaction in a
// partition, and the header fields of that batch.
type TxnMarker struct {
	// Type is ControlAbort or ControlCommit.
	Type ControlType
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the marker.
	CoordinatorEpoch int32
	// ProducerID identifies the transactional producer.
	ProducerID int64
	// ProducerEpoch is the producer's epoch.
	ProducerEpoch int16
	// BaseOffset is the marker's offset (the broker rewrites it in place).
	BaseOffset int64
	// PartitionLeaderEpoch is the leader epoch to stamp.
	PartitionLeaderEpoch int32
	// Timestamp is the marker's time in milliseconds (CreateTime).
	Timestamp int64
}

// AppendControlBatch appends a control batch holding the transaction
// marker m to dst: attributes transactional|control, uncompressed,
// baseSequence -1, one record whose key is version 0 + type and whose
// value is version 0 + coordinatorEpoch. It fails when m.Type is not ABORT
// or COMMIT.
func AppendControlBatch(dst []byte, m TxnMarker) ([]byte, error) {
	if !m.Type.IsTxnMarker() {
		return dst, fmt.Errorf("partlog/batch: control type %s is not a transaction marker", m.Type)
	}
	var key [controlKeySize]byte
	binary.BigEndian.PutUint16(key[controlKeyVersionOffset:], controlVersion)
	binary.BigEndian.PutUint16(key[controlKeyTypeOffset:], uint16(m.Type))
	var val [markerValueSize]byte
	binary.BigEndian.PutUint16(val[markerValueVersionOffset:], controlVersion)
	binary.BigEndian.PutUint32(val[markerValueCoordinatorEpochOffs:], uint32(m.CoordinatorEpoch))
	var bld Builder
	bld.Reset(BuilderOptions{
		BaseOffset:           m.BaseOffset,
		PartitionLeaderEpoch: m.PartitionLeaderEpoch,
		Producer:             &Producer{ID: m.ProducerID, Epoch: m.ProducerEpoch, BaseSequence: NoSequence},
		Transactional:        true,
		Control:              true,
	})
	if err := bld.AddAt(Record{Offset: m.BaseOffset, Key: key[:], Value: val[:], Timestamp: m.Timestamp}); err != nil {
		return dst, err
	}
	return bld.AppendTo(dst)
}

// ControlRecord is a decoded control record.
type ControlRecord struct {
	// Version is the key's version (0 today; newer versions are read the
	// same way, as Kafka does).
	Version int16
	// Type is the control type; values Kafka does not know are kept.
	Type ControlType
	// ValueVersion is the marker value's version; set for ABORT and
	// COMMIT only.
	ValueVersion int16
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the marker; set for ABORT and COMMIT only.
	CoordinatorEpoch int32
}

// ParseControlRecord decodes a record of a control batch. The key must be
// a version >= 0 and a type; for ABORT and COMMIT the value must be a
// version >= 0 and a coordinator epoch (later versions may append fields,
// which are ignored). Other types are returned with the value undecoded.
// Failures wrap ErrCorrupt; their position is -1 (the record's bytes may
// come from a decompressed or rebuilt buffer).
func ParseControlRecord(r Record) (ControlRecord, error) {
	k := r.Key
	if !validControlKey(k) {
		return ControlRecord{}, corruptf(-1, "controlKey",
			"key of %d bytes is not a version >= 0 and a type", len(k))
	}
	cr := ControlRecord{
		Version: int16(binary.BigEndian.Uint16(k[controlKeyVersionOffset:])),
		Type:    ControlType(binary.BigEndian.Uint16(k[controlKeyTypeOffset:])),
	}
	if !cr.Type.IsTxnMarker() {
		return cr, nil
	}
	v := r.Value
	if len(v) < markerValueSize {
		return cr, corruptf(-1, "controlValue",
			"%s marker value of %d bytes, need %d", cr.Type, len(v), markerValueSize)
	}
	cr.ValueVersion = int16(binary.BigEndian.Uint16(v[markerValueVersionOffset:]))
	if cr.ValueVersion < 0 {
		return cr, corruptf(-1, "controlValue", "negative marker version %d", cr.ValueVersion)
	}
	cr.CoordinatorEpoch = int32(binary.BigEndian.Uint32(v[markerValueCoordinatorEpochOffs:]))
	return cr, nil
}
