package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/partlog/partlog/batch"
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
// Every entry is durable in leaderEpochCheckpointFile before a batch of
// its epoch is written, so the cache survives crashes (see the file's
// documentation).
func (p *Partition) LeaderEpochs() []EpochStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]EpochStart, len(p.mu.epochs))
	for i, e := range p.mu.epochs {
		out[i] = EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// assignEpochLocked records that leader epoch starts at offset start
// (the log end offset) when epoch is higher than every epoch in the cache,
// and writes the cache durably before returning (Kafka's
// LeaderEpochFileCache.assign: the checkpoint never misses an entry a
// batch depends on). Entries starting at or after start are replaced
// (Kafka's rule: at most one epoch starts at an offset). A negative or
// not higher epoch changes nothing and costs nothing; on a failed write
// the cache is as before. REQUIRES: mu held.
func (p *Partition) assignEpochLocked(epoch int32, start int64) error {
	n := len(p.mu.epochs)
	if epoch < 0 || n > 0 && epoch <= p.mu.epochs[n-1].Epoch {
		return nil
	}
	if err := p.syncBeforeEpochLocked(start); err != nil { // lostend.go
		return err
	}
	old, oldDirty := p.mu.epochs, p.mu.epochsDirty
	i := n
	for i > 0 && p.mu.epochs[i-1].StartOffset >= start {
		i--
	}
	entry := checkpoint.EpochEntry{Epoch: epoch, StartOffset: start}
	if i == n {
		p.mu.epochs = append(old, entry) // old keeps its length: a revert restores it
	} else {
		p.mu.epochs = append(old[:i:i], entry) // a new array: old stays intact
	}
	p.mu.epochsDirty = true
	if err := p.writeEpochsLocked(); err != nil {
		p.mu.epochs, p.mu.epochsDirty = old, oldDirty
		return err
	}
	return nil
}

// observeEpochLocked adds bt's leader epoch to the cache when it is newer
// than the last entry. Entries starting at or after bt's base offset are
// dropped first, as assignEpochLocked does (Kafka's assign keeps the cache
// increasing in both epoch and start offset): recovery replays batches
// from the recovery point, which may lie below entries the checkpoint file
// already holds, and a follower may have copied epochs that went down.
// REQUIRES: mu held (or Open's single goroutine).
func (p *Partition) observeEpochLocked(bt batch.Batch) {
	e, start := bt.PartitionLeaderEpoch(), bt.BaseOffset()
	if e < 0 {
		return
	}
	n := len(p.mu.epochs)
	if n > 0 && e <= p.mu.epochs[n-1].Epoch {
		return
	}
	i := n
	for i > 0 && p.mu.epochs[i-1].StartOffset >= start {
		i--
	}
	p.mu.epochs = append(p.mu.epochs[:i], checkpoint.EpochEntry{Epoch: e, StartOffset: start})
	p.mu.epochsDirty = true
}

// truncateEpochsFromEndLocked removes the entries of epochs starting at or
// after end (their batches are gone). REQUIRES: mu held.
func (p *Partition) truncateEpochsFromEndLocked(end int64) {
	i := len(p.mu.epochs)
	for i > 0 && p.mu.epochs[i-1].StartOffset >= end {
		i--
	}
	if i < len(p.mu.epochs) {
		p.mu.epochs = p.mu.epochs[:i]
		p.mu.epochsDirty = true
	}
}

// truncateEpochsFromStartLocked drops the entries wholly below start and
// moves the one holding start up to it (Kafka's truncateFromStart).
// REQUIRES: mu held.
func (p *Partition) truncateEpochsFromStartLocked(start int64) {
	if len(p.mu.epochs) == 0 {
		return
	}
	i := 0
	for i+1 < len(p.mu.epochs) && p.mu.epochs[i+1].StartOffset <= start {
		i++
	}
	if i > 0 {
		// Also when entry i starts exactly at start: the ones before it
		// name no remaining batch.
		p.mu.epochs = slices.Delete(p.mu.epochs, 0, i)
		p.mu.epochsDirty = true
	}
	if p.mu.epochs[0].StartOffset < start {
		p.mu.epochs[0].StartOffset = start
		p.mu.epochsDirty = true
	}
}

// writeEpochsLocked persists the cache when it changed. REQUIRES: mu held.
func (p *Partition) writeEpochsLocked() error {
	if !p.mu.epochsDirty {
		return nil
	}
	if err := checkpoint.WriteLeaderEpochs(p.cfg.FS, filepath.Join(p.dir, leaderEpochCheckpointFile), p.mu.epochs); err != nil {
		return fmt.Errorf("partlog/log: %s: leader epoch checkpoint: %w", p.dir, err)
	}
	p.mu.epochsDirty = false
	return nil
}

// readEpochs loads the leader epoch checkpoint at Open; a file that does
// not parse goes to the recovery policy (nil: start without it).
func (p *Partition) readEpochs() error {
	entries, err := checkpoint.ReadLeaderEpochs(p.cfg.FS, filepath.Join(p.dir, leaderEpochCheckpointFile))
	switch {
	case errors.Is(err, errNotExist):
		return nil
	case err != nil:
		return p.checkpointProblem(leaderEpochCheckpointFile, err)
	}
	// Keep only a strictly increasing prefix (a well-formed cache).
	for i, e := range entries {
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset < entries[i-1].StartOffset) {
			p.logger.Warn("partlog/log: leader epoch checkpoint out of order; ignoring the rest", "dir", p.dir, "entry", i)
			entries = entries[:i]
			p.mu.epochsDirty = true
			break
		}
	}
	p.mu.epochs = entries
	return nil
}
