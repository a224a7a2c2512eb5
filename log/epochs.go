package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
)

// LeaderEpochCheckpointFile is the file, in the partition's directory, that
// holds the leader epoch cache (Kafka's leader-epoch-checkpoint, same name
// and format): for each leader epoch, the first offset written under it,
// taken from the batches' partitionLeaderEpoch field.
//
//	0                          version
//	2                          number of entries
//	0 0                        epoch 0 starts at offset 0
//	3 1207                     epoch 3 starts at offset 1207
//
// It is written on full flushes (Sync, Close, the flush policies) when it
// changed, and at once when TruncateTo removes entries; Open reads it and,
// after an unclean shutdown, adds the epochs of the recovered batches.
const LeaderEpochCheckpointFile = checkpoint.LeaderEpochFile // frozen: "leader-epoch-checkpoint"

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
// one), the offset of its first batch, in increasing order. Entries for
// truncated batches are removed; DeleteRecordsBefore moves the first
// remaining entry up to the log start offset, as Kafka does. Batches
// without a leader epoch (-1) add nothing.
func (p *Partition) LeaderEpochs() []EpochStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]EpochStart, len(p.mu.epochs))
	for i, e := range p.mu.epochs {
		out[i] = EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// observeEpochLocked adds bt's leader epoch to the cache when it is newer
// than the last entry. REQUIRES: mu held (or Open's single goroutine).
func (p *Partition) observeEpochLocked(bt batch.Batch) {
	e := bt.PartitionLeaderEpoch()
	if e < 0 {
		return
	}
	if n := len(p.mu.epochs); n > 0 && e <= p.mu.epochs[n-1].Epoch {
		return
	}
	p.mu.epochs = append(p.mu.epochs, checkpoint.EpochEntry{Epoch: e, StartOffset: bt.BaseOffset()})
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
	i := 0
	for i+1 < len(p.mu.epochs) && p.mu.epochs[i+1].StartOffset <= start {
		i++
	}
	if len(p.mu.epochs) == 0 || p.mu.epochs[i].StartOffset >= start {
		return
	}
	p.mu.epochs = slices.Delete(p.mu.epochs, 0, i)
	p.mu.epochs[0].StartOffset = start
	p.mu.epochsDirty = true
}

// writeEpochsLocked persists the cache when it changed. REQUIRES: mu held.
func (p *Partition) writeEpochsLocked() error {
	if !p.mu.epochsDirty {
		return nil
	}
	if err := checkpoint.WriteLeaderEpochs(p.cfg.FS, filepath.Join(p.dir, LeaderEpochCheckpointFile), p.mu.epochs); err != nil {
		return fmt.Errorf("partlog/log: %s: leader epoch checkpoint: %w", p.dir, err)
	}
	p.mu.epochsDirty = false
	return nil
}

// readEpochs loads the leader epoch checkpoint at Open; a file that does
// not parse goes to the recovery policy (nil: start without it).
func (p *Partition) readEpochs() error {
	entries, err := checkpoint.ReadLeaderEpochs(p.cfg.FS, filepath.Join(p.dir, LeaderEpochCheckpointFile))
	switch {
	case errors.Is(err, errNotExist):
		return nil
	case err != nil:
		return p.checkpointProblem(LeaderEpochCheckpointFile, err)
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
