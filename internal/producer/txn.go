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

// endTxn forgets producer pid's open transaction.
func (s *State) endTxn(pid int64) {
	if i := slices.IndexFunc(s.ongoing, func(t OpenTxn) bool { return t.ProducerID == pid }); i >= 0 {
		s.ongoing = slices.Delete(s.ongoing, i, i+1)
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

// FirstUnstable returns the first offset of the oldest open transaction,
// and false when none is open: the last stable offset may not pass it.
func (s *State) FirstUnstable() (int64, bool) {
	if len(s.ongoing) == 0 {
		return 0, false
	}
	return s.ongoing[0].FirstOffset, true
}
