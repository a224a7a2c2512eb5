package logtest

import (
	"fmt"
	"slices"

	"github.com/partlog/partlog/batch"
	plog "github.com/partlog/partlog/log"
)

// The model's leader epoch cache: the rules of Partition.LeaderEpochs,
// written out plainly.

// observeEpoch records b's leader epoch by the assign rule (a stored
// batch's epoch starts at its base offset).
func (m *Model) observeEpoch(b batch.Batch) {
	m.assignEpoch(b.PartitionLeaderEpoch(), b.BaseOffset())
}

// assignEpoch is the cache's assign rule, Kafka's: a negative epoch, or
// the latest epoch at or after its own start, changes nothing; otherwise
// the trailing entries of an epoch at or above epoch, or starting at or
// after start, go and (epoch, start) is added. A lower epoch than the
// latest (a follower copying a leader that went back) thus cuts the cache
// back.
func (m *Model) assignEpoch(epoch int32, start int64) {
	n := len(m.epochs)
	if epoch < 0 || n > 0 && epoch == m.epochs[n-1].Epoch && start >= m.epochs[n-1].StartOffset {
		return
	}
	for n > 0 && (m.epochs[n-1].Epoch >= epoch || m.epochs[n-1].StartOffset >= start) {
		n--
	}
	m.epochs = append(m.epochs[:n:n], plog.EpochStart{Epoch: epoch, StartOffset: start})
}

// cutEpochsFrom drops the entries starting at or after end.
func (m *Model) cutEpochsFrom(end int64) {
	n := len(m.epochs)
	for n > 0 && m.epochs[n-1].StartOffset >= end {
		n--
	}
	m.epochs = m.epochs[:n:n]
}

// cutEpochsBelow drops the entries wholly below start and moves the one
// holding start up to it (Kafka's truncateFromStart).
func (m *Model) cutEpochsBelow(start int64) {
	i := 0
	for i+1 < len(m.epochs) && m.epochs[i+1].StartOffset <= start {
		i++
	}
	if len(m.epochs) == 0 {
		return
	}
	es := append([]plog.EpochStart(nil), m.epochs[i:]...)
	if es[0].StartOffset < start {
		es[0].StartOffset = start
	}
	m.epochs = es
}

// LeaderEpochs returns the model's leader epoch cache, as
// Partition.LeaderEpochs. The slice is the model's; do not modify it.
func (m *Model) LeaderEpochs() []plog.EpochStart { return m.epochs }

// AssignEpochStartOffset mirrors Partition.AssignEpochStartOffset: offset
// must be the log end offset (an error wrapping plog.ErrUnexpectedOffset
// otherwise), and epoch not below the latest cached one nor negative (an
// error wrapping plog.ErrStaleLeaderEpoch).
func (m *Model) AssignEpochStartOffset(epoch int32, offset int64) error {
	if offset != m.next {
		return fmt.Errorf("partlog/logtest: model: %w: epoch start %d, log end %d", plog.ErrUnexpectedOffset, offset, m.next)
	}
	if n := len(m.epochs); epoch < 0 || n > 0 && epoch < m.epochs[n-1].Epoch {
		return fmt.Errorf("partlog/logtest: model: %w: %d", plog.ErrStaleLeaderEpoch, epoch)
	}
	m.epochBelowStartMaybe = false
	m.assignEpoch(epoch, offset)
	return nil
}

// endOffsetForEpoch mirrors Partition.EndOffsetForEpoch (Kafka's
// LeaderEpochFileCache.endOffsetFor).
func (m *Model) endOffsetForEpoch(requested int32) (int32, int64) {
	n := len(m.epochs)
	if requested == plog.UndefinedEpoch {
		return plog.UndefinedEpoch, -1
	}
	if n > 0 && m.epochs[n-1].Epoch == requested {
		return requested, m.next
	}
	var floor *plog.EpochStart
	for i := range m.epochs {
		e := &m.epochs[i]
		if e.Epoch > requested {
			if floor == nil {
				return requested, e.StartOffset
			}
			return floor.Epoch, e.StartOffset
		}
		floor = e
	}
	return plog.UndefinedEpoch, -1
}

// listOffsetsEpochs returns the leader epochs of the Latest and Earliest
// answers of OffsetForTimestamp.
func (m *Model) listOffsetsEpochs() (latest, earliest int32) {
	latest, earliest = plog.UndefinedEpoch, plog.UndefinedEpoch
	if n := len(m.epochs); n > 0 {
		latest = m.epochs[n-1].Epoch
		if m.epochs[0].StartOffset <= m.logStart {
			earliest = m.epochs[0].Epoch
		}
	}
	return latest, earliest
}

// checkEpochs compares the leader epoch caches and EndOffsetForEpoch for
// every cached epoch, the epochs around them and the undefined one. After
// a Crash that left the log without a batch at
// or past its start and the model's cache empty, a partition with one
// entry at the log end is right too (recovery read the epoch of a batch
// below the log start again: see epochBelowStartMaybe); the model then
// takes it.
func checkEpochs(p *plog.Partition, m *Model) error {
	got, want := p.LeaderEpochs(), m.epochs
	if m.epochBelowStartMaybe {
		if len(want) == 0 && len(got) == 1 && got[0].StartOffset == m.next {
			m.epochs, want = slices.Clone(got), got
		}
		m.epochBelowStartMaybe = false
	}
	if len(got) != len(want) {
		return fmt.Errorf("partlog/logtest: leader epochs %v, model %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("partlog/logtest: leader epochs %v, model %v", got, want)
		}
	}
	asks := []int32{plog.UndefinedEpoch, 0}
	for _, e := range want {
		asks = append(asks, e.Epoch-1, e.Epoch, e.Epoch+1)
	}
	for _, e := range asks {
		ge, go_, err := p.EndOffsetForEpoch(e)
		if err != nil {
			return fmt.Errorf("partlog/logtest: EndOffsetForEpoch(%d): %w", e, err)
		}
		we, wo := m.endOffsetForEpoch(e)
		if ge != we || go_ != wo {
			return fmt.Errorf("partlog/logtest: EndOffsetForEpoch(%d) = (%d, %d), model (%d, %d); cache %v", e, ge, go_, we, wo, want)
		}
	}
	return nil
}
