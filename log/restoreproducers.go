package log

import (
	"fmt"

	"github.com/partlog/partlog/internal/producer"
)

// RestoreProducers gives the log the producer state of another replica at
// offset: snapshot is the bytes of that replica's producer snapshot file at
// offset (Kafka's NNN.snapshot format, checksum included; empty for no
// producers), describing the producers of every batch below offset, and
// replaces what the partition knows. The state is written as the
// log's snapshot at its end offset, fsynced with the directory, before
// RestoreProducers returns, so Open loads it again. Producers expired by
// Config.ProducerIDExpiration are skipped, as Open skips them.
//
// A follower calls it after restarting its log at its leader's log start
// (TruncateFullyAndStartAt(offset)), or after copying the leader's
// compacted batches below offset, with the leader's snapshot at that
// offset: it then recognises a retry of a batch older than offset as a
// duplicate, as the leader does, and knows the transactions open across
// that point. The log may hold batches below offset; its end may be below
// offset when the leader's last batches below it were compacted away (the
// next batch is then appended at offset or later, AppendAssigned).
//
// The log must hold nothing at or past offset (log end offset <= offset),
// else ErrUnexpectedOffset; a snapshot that does not decode gives an error
// wrapping ErrCorrupt, and an entry whose last offset or open transaction
// is at or past offset gives ErrInvalidBatch. Each changes nothing.
func (p *Partition) RestoreProducers(offset int64, snapshot []byte) error {
	var entries []producer.Entry
	if len(snapshot) > 0 {
		var err error
		if entries, err = producer.DecodeSnapshot(snapshot); err != nil {
			return fmt.Errorf("partlog/log: restore producer state at offset %d into %s: %w", offset, p.dir, err)
		}
	}
	p.lockWriter()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return err
	}
	if end := p.mu.end.Offset; end > offset {
		return fmt.Errorf("%w: restore producer state at offset %d into %s: the log ends at %d, past it", ErrUnexpectedOffset, offset, p.dir, end)
	}
	for _, se := range entries {
		if se.LastOffset >= offset || se.CurrentTxnFirstOffset >= offset {
			return fmt.Errorf("%w: restore producer state at offset %d into %s: producer %d has a batch at offset %d or a transaction from %d, at or past it",
				ErrInvalidBatch, offset, p.dir, se.ProducerID, se.LastOffset, se.CurrentTxnFirstOffset)
		}
	}
	if p.dur.group.syncedSeq() != p.mu.writeSeq {
		// The snapshot at the log end must not be on disk before the
		// batches below it: a crash would leave it past the end Open
		// finds, taken for synced batches lost (lostend.go), and the
		// restored state would go with it.
		if err := p.flushLocked(); err != nil {
			p.failLocked(fmt.Errorf("partlog/log: restore producer state into %s: %w", p.dir, err))
			return p.mu.failed
		}
	}
	// The roll snapshots not yet written hold the state this replaces:
	// none of them may land after (or over) the restored one.
	p.snaps.discardPendingLocked()
	p.mu.producers.Restore(entries)
	p.publishUnstableLocked()
	if err := p.snaps.durableLocked(p.mu.producers, p.mu.end.Offset, p.mu.writeSeq, &p.mu.dirDirty); err != nil {
		return fmt.Errorf("partlog/log: restore producer state into %s: %w", p.dir, err)
	}
	return nil
}

// ProducerSnapshot returns the partition's producer state snapshot at
// offset: the bytes of its snapshot file there (Kafka's NNN.snapshot
// format, checksum included), which describe the producers of every batch
// below offset, as another replica's RestoreProducers takes them. A roll
// takes the snapshot at each new segment's base; one its background flush
// has not written yet is returned from memory. An offset with no snapshot
// gives an error wrapping fs.ErrNotExist, a file that does not decode one
// wrapping ErrCorrupt; a closed partition gives ErrClosed.
func (p *Partition) ProducerSnapshot(offset int64) ([]byte, error) {
	// flushMu keeps a roll's background flush from holding the snapshot
	// between taking it from the pending roll snapshots and writing its file; mu keeps
	// a writer from rewriting the file while it is read (a small file,
	// read only when a replica needs the state).
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		// The directory is no longer this partition's to read.
		return nil, ErrClosed
	}
	return p.snaps.atLocked(offset)
}
