package producer

import "slices"

// OpenTxn is a transaction open in the partition: its producer wrote
// transactional batches and no marker has ended them yet.
type OpenTxn struct {
	// ProducerID is the transactional producer's id.
	ProducerID int64
	// FirstOffset is the offset of the transaction's first batch.
	FirstOffset int64
	// StartTimestamp is the maxTimestamp (ms) of the transaction's first
	// batch; for a transaction restored from a snapshot, the producer's
	// last timestamp recorded there (the snapshot does not keep the
	// start).
	StartTimestamp int64
}

// EndedTxn is a transaction a marker ended, as Apply reports it.
type EndedTxn struct {
	// ProducerID is the producer whose transaction ended.
	ProducerID int64
	// FirstOffset is the transaction's first offset.
	FirstOffset int64
	// MarkerOffset is the offset of the marker that ended it.
	MarkerOffset int64
	// Abort is set for an ABORT marker, clear for a COMMIT.
	Abort bool
	// LastStableOffset is the last stable offset right after the marker:
	// the first offset of the oldest transaction still open, else
	// MarkerOffset + 1 (what Kafka's transaction index stores for an
	// aborted transaction).
	LastStableOffset int64
}

// beginTxn records an open transaction, keeping ongoing ordered by first
// offset (appends come in offset order; a snapshot's entries by producer
// id).
func (s *State) beginTxn(t OpenTxn) {
	i := len(s.ongoing)
	for i > 0 && s.ongoing[i-1].FirstOffset > t.FirstOffset {
		i--
	}
	s.ongoing = slices.Insert(s.ongoing, i, t)
}

// doneTxn is a transaction a marker ended while the high watermark was
// at or below the marker: it bounds the last stable offset until the high
// watermark passes the marker.
type doneTxn struct {
	first, marker int64
}

// dropTxn forgets producer pid's open transaction.
func (s *State) dropTxn(pid int64) {
	if i := slices.IndexFunc(s.ongoing, func(t OpenTxn) bool { return t.ProducerID == pid }); i >= 0 {
		s.ongoing = slices.Delete(s.ongoing, i, i+1)
	}
}

// completeTxn ends producer pid's open transaction, which began at first,
// with the marker at offset marker: it is no longer open, but stays
// unstable until the high watermark passes the marker (Kafka's
// completeTxn).
func (s *State) completeTxn(pid, first, marker int64) {
	s.dropTxn(pid)
	s.unreplicated = append(s.unreplicated, doneTxn{first: first, marker: marker})
}

// SetHighWatermark tells the state that the partition's high watermark is
// hw: the transactions whose markers lie below it are replicated, and no
// longer hold the last stable offset back (Kafka's
// onHighWatermarkUpdated). A lower hw than before brings none back.
func (s *State) SetHighWatermark(hw int64) {
	i := 0
	for i < len(s.unreplicated) && s.unreplicated[i].marker < hw {
		i++
	}
	if i > 0 {
		s.unreplicated = s.unreplicated[:copy(s.unreplicated, s.unreplicated[i:])]
	}
}

// lastStableAfter returns the last stable offset once the marker at
// offset marker ended a transaction (which endTxn removed): the first
// offset of the oldest transaction still open, else marker + 1 (Kafka's
// ProducerStateManager.lastStableOffset of a completed transaction).
func (s *State) lastStableAfter(marker int64) int64 {
	if len(s.ongoing) > 0 {
		return s.ongoing[0].FirstOffset
	}
	return marker + 1
}

// OpenTxns returns the open transactions, oldest (lowest first offset)
// first, in a new slice; nil when none is open.
func (s *State) OpenTxns() []OpenTxn {
	if len(s.ongoing) == 0 {
		return nil
	}
	return slices.Clone(s.ongoing)
}

// FirstUnstable returns the first offset of the oldest transaction that
// is open, or that a marker ended at or above the high watermark last
// given to SetHighWatermark (the marker may still be lost with a leader
// change), and false when there is none: the last stable offset may not
// pass it (Kafka's firstUnstableOffset).
func (s *State) FirstUnstable() (int64, bool) {
	first, ok := int64(0), false
	if len(s.ongoing) > 0 {
		first, ok = s.ongoing[0].FirstOffset, true
	}
	for _, t := range s.unreplicated {
		if !ok || t.first < first {
			first, ok = t.first, true
		}
	}
	return first, ok
}
