package log

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/partlog/partlog/internal/epochs"
)

// UndefinedEpoch is the epoch of EndOffsetForEpoch's answer when the cache
// cannot say, with the end offset -1 (Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET in OffsetsForLeaderEpoch responses), and the
// leader epoch of an OffsetForTimestamp answer that has none.
const UndefinedEpoch int32 = -1

// ErrStaleLeaderEpoch is returned by AssignEpochStartOffset for a leader
// epoch below the latest one in the leader epoch cache, or negative, by
// SetLeaderEpoch (when stamping) for one below the latest, and, under
// Config.StampLeaderEpoch, by AppendBatch, AppendBuilder and AppendMarker
// while the stamped epoch (Config.LeaderEpoch after Open, or one a
// follower's batches overtook) is below the latest: recording it would
// rewrite which leader wrote the batches already there. Kafka error code:
// FENCED_LEADER_EPOCH (74).
var ErrStaleLeaderEpoch = errors.New("partlog/log: stale leader epoch")

// AssignEpochStartOffset records that leader epoch epoch starts at offset,
// which must be the log end offset (else ErrUnexpectedOffset): what a
// replica does when it becomes leader, before its first batch in the epoch
// (Kafka's assignEpochStartOffset). The entry is durable in the
// leader-epoch-checkpoint file before AssignEpochStartOffset returns, so a
// crash keeps it until Open, which removes an entry that starts at the log
// end (no batch of it was appended), as Kafka's loader does. An
// epoch equal to the latest cached one changes nothing (Kafka's assign);
// a lower or negative one gives ErrStaleLeaderEpoch. Under
// Config.StampLeaderEpoch the epoch also becomes the one AppendBatch stamps
// (as SetLeaderEpoch). Errors change nothing.
func (p *Partition) AssignEpochStartOffset(epoch int32, offset int64) error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if offset != p.mu.end.Offset {
		return fmt.Errorf("%w: leader epoch %d would start at offset %d, the log end offset is %d", ErrUnexpectedOffset, epoch, offset, p.mu.end.Offset)
	}
	if latest, ok := p.mu.epochs.Latest(); epoch < 0 || ok && epoch < latest {
		return fmt.Errorf("%w: leader epoch %d, the latest is %d", ErrStaleLeaderEpoch, epoch, latest)
	}
	if err := p.assignEpochLocked(epoch, offset); err != nil {
		return err
	}
	if p.cfg.StampLeaderEpoch {
		p.leaderEpoch.Store(epoch)
	}
	return nil
}

// checkStampedEpochLocked refuses a stamped append (AppendBatch,
// AppendBuilder, AppendMarker) whose leader epoch, leader, is below the
// latest in the leader epoch cache: the cache would be cut back to it
// (epochs.Cache.Assign, a follower's rule) and lose the epochs of the
// batches already there, which SetLeaderEpoch refuses for the same
// reason. Nothing is stamped without Config.StampLeaderEpoch, and a
// negative epoch records nothing. REQUIRES: mu held.
func (p *Partition) checkStampedEpochLocked(leader int32) error {
	if !p.cfg.StampLeaderEpoch || leader < 0 {
		return nil
	}
	if latest, ok := p.mu.epochs.Latest(); ok && leader < latest {
		return fmt.Errorf("%w: stamped leader epoch %d, the latest is %d (SetLeaderEpoch first)", ErrStaleLeaderEpoch, leader, latest)
	}
	return nil
}

// EndOffsetForEpoch answers Kafka's OffsetsForLeaderEpoch from the leader
// epoch cache (LeaderEpochFileCache.endOffsetFor): for the requested
// epoch, the largest cached epoch at or below it and the offset where the
// next higher epoch starts, the end of the requested epoch's batches. The
// edge cases are Kafka's:
//
//   - requested UndefinedEpoch (-1): (UndefinedEpoch, -1);
//   - requested the latest cached epoch: (it, LogEndOffset), the epoch
//     still being written;
//   - requested above every cached epoch, or an empty cache:
//     (UndefinedEpoch, -1);
//   - requested below the first cached epoch: (requested, the first
//     entry's start offset): its batches, if any, are gone, and a follower
//     truncates to where the first known epoch starts;
//   - requested between two entries (an epoch with no batches here): (the
//     entry below it, the start offset of the entry above it).
//
// A follower asks its leader this for its own latest epoch and truncates
// to the answer (when below its log end) before fetching. The only error
// is ErrClosed.
func (p *Partition) EndOffsetForEpoch(requested int32) (epoch int32, endOffset int64, err error) {
	p.mu.Lock()
	p.writeBehindLocked() // writebehind.go
	defer p.mu.Unlock()
	if p.mu.closed {
		return UndefinedEpoch, epochs.UndefinedOffset, ErrClosed
	}
	// The cache's undefined epoch is epochs.Undefined, which
	// UndefinedEpoch equals (-1, Kafka's UNDEFINED_EPOCH).
	epoch, endOffset = p.mu.epochs.EndOffsetFor(requested, p.mu.end.Offset)
	return epoch, endOffset, nil
}

// listOffsetsEpochs returns the leader epochs of OffsetForTimestamp's
// Latest and Earliest answers, as Kafka's log answers them: the latest
// cached epoch, and the epoch of the last entry starting at or below the
// log start offset (UndefinedEpoch when none does, or with an empty
// cache),
// with that log start offset: both read under mu, which every writer of
// either holds, so that Earliest answers an offset with its own epoch.
func (p *Partition) listOffsetsEpochs() (latest, earliest int32, start int64) {
	p.mu.Lock()
	start = p.logStart.Load()
	latest, earliest = p.mu.epochs.ListOffsetsEpochs(start)
	p.mu.Unlock()
	if hook := testHookEpochsListed.Load(); hook != nil {
		(*hook)()
	}
	return latest, earliest, start
}

// testHookEpochsListed, when set (by tests), runs in listOffsetsEpochs
// after it read the leader epoch cache and released the partition's mutex.
var testHookEpochsListed atomic.Pointer[func()]
