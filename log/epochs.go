package log

import (
	"github.com/partlog/partlog/internal/checkpoint"
)

// leaderEpochCheckpointFile is the file, in the partition's directory, that
// holds the leader epoch cache (Kafka's leader-epoch-checkpoint, same name
// and format): for each leader epoch, the first offset written under it,
// taken from the batches' partitionLeaderEpoch field.
//
//	0                          version
//	2                          number of entries
//	0 0                        epoch 0 starts at offset 0
//	3 1207                     epoch 3 starts at offset 1207
//
// A new entry is written durably (tmp file, fsync, rename, directory
// fsync) when the epoch is first assigned, before the first batch of the
// epoch is written (AppendBatch, AppendAssigned) or, under
// Config.StampLeaderEpoch, when SetLeaderEpoch raises the epoch: the file
// never misses an epoch of a batch that a crash can leave behind, however
// far rolls and flushes moved the recovery point. TruncateTo removes
// entries durably too. Appends that start no epoch never write it. The
// moves of the first entry's start up to the log start offset
// (DeleteRecordsBefore, retention) are written on the next write or full
// flush (Sync, Close, the flush policies); until then Open derives them
// from the log start offset checkpoint, written before. A
// DeleteRecordsBefore up to the log end writes them before it returns:
// Open tells the state a roll then leaves from a restart of the log that a
// crash interrupted by them (settleEmptyTail). Open reads the
// file, drops entries that start past the log end and, after an unclean
// shutdown, adds the epochs of the recovered batches.
const leaderEpochCheckpointFile = checkpoint.LeaderEpochFile // frozen: "leader-epoch-checkpoint"

// EpochStart is one entry of the leader epoch cache: the first offset of
// the log written under a leader epoch.
type EpochStart struct {
	// Epoch is the leader epoch (>= 0).
	Epoch int32
	// StartOffset is the offset of the first batch written under Epoch.
	StartOffset int64
}

// LeaderEpochs returns the leader epoch cache: for each leader epoch found
// in the batches' partitionLeaderEpoch field (higher than every earlier
// one), the offset of its first batch, in increasing order; under
// Config.StampLeaderEpoch also an epoch SetLeaderEpoch recorded at the log
// end before its first batch. Entries for truncated batches are removed;
// DeleteRecordsBefore moves the first remaining entry up to the log start
// offset, as Kafka does. Batches without a leader epoch (-1) add nothing.
// Every entry is durable in the leader-epoch-checkpoint file before a
// batch of its epoch is written, so the cache survives crashes
// (docs/crash-safety.md, "Leader epochs").
func (p *Partition) LeaderEpochs() []EpochStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	es := p.mu.epochs.Entries()
	out := make([]EpochStart, len(es))
	for i, e := range es {
		out[i] = EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}
