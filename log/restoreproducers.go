package log

import "fmt"

// RestoreProducers gives an empty log the producer state of another
// replica: entries describe the producers of every batch below the log
// end offset (a producer snapshot at that offset, as
// DecodeProducerSnapshot returns one), and replace what the partition
// knows. The state is written as the log's snapshot at its end offset,
// fsynced with the directory, before RestoreProducers returns, so Open
// loads it again. Producers expired by Config.ProducerIDExpiration are
// skipped, as Open skips them.
//
// A follower calls it after restarting its log at its leader's log start
// (TruncateFullyAndStartAt), with the leader's snapshot at that offset:
// it then recognises a retry of a batch older than its log start as a
// duplicate, as the leader does, and knows the transactions open across
// the restart point.
//
// The log must hold no batch (log start offset == log end offset), else
// ErrUnexpectedOffset; an entry whose last offset or open transaction is
// at or past the log end gives ErrInvalidBatch. Either changes nothing.
func (p *Partition) RestoreProducers(entries []ProducerSnapshotEntry) error {
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	start, end := p.logStart.Load(), p.mu.end.Offset
	if start != end {
		return fmt.Errorf("%w: restore producer state into %s: the log holds offsets %d to %d (only an empty log takes another replica's state)", ErrUnexpectedOffset, p.dir, start, end)
	}
	for _, se := range entries {
		if se.LastOffset >= end || se.CurrentTxnFirstOffset >= end {
			return fmt.Errorf("%w: restore producer state into %s: producer %d has a batch at offset %d or a transaction from %d, at or past the log end %d",
				ErrInvalidBatch, p.dir, se.ProducerID, se.LastOffset, se.CurrentTxnFirstOffset, end)
		}
	}
	p.mu.producers.reset()
	p.mu.producers.load(entries, p.nowMs(), p.cfg.ProducerIDExpiration.Milliseconds())
	p.publishUnstableLocked()
	if err := p.snapshotDurableLocked(); err != nil {
		return fmt.Errorf("partlog/log: restore producer state into %s: %w", p.dir, err)
	}
	return nil
}
