package log

import (
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
)

// Stats is a snapshot of a partition's counters and gauges, returned by
// Partition.Stats. Counters count from Open (they are not persisted);
// gauges are the current values. The fields are read one by one without a
// lock, so a snapshot taken during an append may see, say, the new log end
// offset with the old byte count.
type Stats struct {
	// LogStartOffset, HighWatermark and LogEndOffset are the partition's
	// offsets, as the methods of the same names return them.
	LogStartOffset, HighWatermark, LogEndOffset int64
	// Segments is the number of segments, the active one included.
	Segments int
	// Size is the total size of the segments' .log files in bytes (the
	// indexes are not counted).
	Size int64
	// OpenReaders is the number of Records returned by ReadFrom and
	// ReadFromFollower (and held by a running Partition.Records
	// iterator) that hold a segment and are not closed yet. Each pins its
	// segment's files and mapping: see "Caveats" in the package
	// documentation.
	OpenReaders int64

	// BatchesAppended, RecordsAppended and BytesAppended count what
	// AppendBatch and AppendAssigned appended: batches, records (the
	// batches' recordsCount) and bytes. Under FlushMessages == 1 a batch
	// counts once its offsets are assigned and it is queued for the group
	// syncer's write (docs/crash-safety.md, "Group commit"), so the counts
	// may run ahead of LogEndOffset and Size until that write; a failed
	// write of the queue fails the partition, and the counts keep the
	// batches it held.
	BatchesAppended, RecordsAppended, BytesAppended int64
	// Rolls counts the segments rolled (full, old, index full, or Roll).
	Rolls int64
	// Truncations counts TruncateTo calls that cut the log.
	Truncations int64
	// Syncs counts the fdatasyncs of segment files: one per segment a
	// full flush (Sync, FlushInterval, FlushMessages > 1, a roll, Close)
	// flushed, with its index files, and one per .log a group sync
	// (FlushMessages == 1) covered. Directory and checkpoint syncs are not
	// counted.
	Syncs int64
	// SyncTime is the total time spent in the syncs Syncs counts; divided
	// by Syncs it is the mean fdatasync latency.
	SyncTime time.Duration
	// Failed reports that the partition failed (ErrFailed) or went offline
	// after a fault in a mapped file (ErrFault): every write returns that
	// error until the partition is reopened.
	Failed bool

	// Recovery describes what Open found and did.
	Recovery RecoveryStats
	// TruncationWaiting is the number of read leases (Records not yet
	// closed, and reads in flight) of the segment a TruncateTo in progress
	// waits for; 0 when no truncation waits.
	TruncationWaiting int
	// TruncationWaits counts TruncateTo calls that found readers on the
	// segment to cut and waited for them; TruncationsBlocked those that
	// gave up waiting (the error wraps ErrTruncationBlocked).
	TruncationWaits, TruncationsBlocked uint64
	// SegmentBudget holds the counters of the segment budget the
	// partition's segments belong to (its own with Config.MaxOpenSegments,
	// its Dir's in a Dir): the sealed segments open now that may be
	// closed, and how many closes and reopens it did; zero without one.
	SegmentBudget segment.BudgetStats
	// Remote holds the tiered storage figures (DirConfig.Remote); zero
	// when the partition is not tiered.
	Remote RemoteStats
}

// RecoveryStats describes the recovery Open ran (Stats.Recovery).
type RecoveryStats struct {
	// Clean reports that the previous Close marked a clean shutdown (or
	// the directory was new): Open read no batch data.
	Clean bool
	// BytesScanned is how many bytes of .log files an unclean Open
	// validated, batch by batch, from the recovery point on.
	BytesScanned int64
	// BytesCut is how many bytes recovery cut: a torn tail, or everything
	// from the first invalid batch on, later segments included.
	BytesCut int64
	// SegmentsRemoved is the number of whole segments recovery removed
	// because they followed the cut.
	SegmentsRemoved int
}

// counters are the partition's running counts. They are atomics written by
// one-line hooks on the paths they count (under mu for appends and rolls,
// under flushMu for syncs) and read by Stats without a lock.
type counters struct {
	batches, records, bytes atomic.Int64
	rolls                   atomic.Int64
	// truncates counts the TruncateTo calls that cut the log
	// (Stats.Truncations). Partition.truncations counts the restarts
	// too: readers must notice those as well.
	truncates        atomic.Int64
	syncs, syncNanos atomic.Int64
	readers          atomic.Int64
	// recovery is written by Open before the partition is returned and
	// never again.
	recovery RecoveryStats
}

// noteAppend counts one appended batch, whole or its header copy (sizes
// come from the header). REQUIRES: mu held.
func (c *counters) noteAppend(b batch.Batch) {
	c.batches.Add(1)
	c.records.Add(int64(b.RecordsCount()))
	c.bytes.Add(int64(b.Size())) // from the header: b may be the header copy alone
}

// flushSegment flushes seg (fdatasync of the .log, msync of the indexes)
// and counts it as a sync.
func (c *counters) flushSegment(seg *segment.Segment) error {
	start := time.Now()
	err := seg.Flush()
	c.noteSync(start)
	return err
}

// syncFile fdatasyncs f and counts it as a sync.
func (c *counters) syncFile(f vfs.File) error {
	start := time.Now()
	err := f.Sync()
	c.noteSync(start)
	return err
}

// noteSync counts a sync that started at start.
func (c *counters) noteSync(start time.Time) {
	c.syncs.Add(1)
	c.syncNanos.Add(int64(time.Since(start)))
}

// Stats returns the partition's counters and gauges. It takes no
// partition lock (only, while a truncation waits for readers, that
// segment's lease mutex for the count, and the mutex of the write below),
// allocates nothing and costs a few
// atomic loads plus one per segment; it
// may be called at any time, after Close too (the gauges then keep their
// last values). Under Config.WriteBehind, when batches are buffered, it
// first writes them, under the partition's mutex, so that its figures
// cover every acknowledged append.
func (p *Partition) Stats() Stats {
	p.showBuffered() // writebehind.go
	hw, end := p.bounds.load()
	s := Stats{
		LogStartOffset:  p.logStart.Load(),
		HighWatermark:   hw.Offset,
		LogEndOffset:    end.Offset,
		OpenReaders:     p.stats.readers.Load(),
		BatchesAppended: p.stats.batches.Load(),
		RecordsAppended: p.stats.records.Load(),
		BytesAppended:   p.stats.bytes.Load(),
		Rolls:           p.stats.rolls.Load(),
		Truncations:     p.stats.truncates.Load(),
		Syncs:           p.stats.syncs.Load(),
		SyncTime:        time.Duration(p.stats.syncNanos.Load()),
		Failed:          p.hasFailed.Load() || p.offline.Load() != nil,
		Recovery:        p.stats.recovery,
	}
	// The list is immutable; Size is an atomic of the segment, valid
	// after the segment is closed too.
	if snap := p.segs.Load(); snap != nil {
		s.Segments = len(snap.list)
		for _, seg := range snap.list {
			s.Size += seg.Size()
		}
	}
	s.TruncationWaits, s.TruncationsBlocked = p.truncStats.waits.Load(), p.truncStats.blocked.Load()
	if seg := p.truncStats.waitingOn.Load(); seg != nil {
		s.TruncationWaiting, _ = seg.ReadLeases()
	}
	if p.segCfg.Budget != nil {
		s.SegmentBudget = p.segCfg.Budget.Stats()
	}
	if t := p.tierPart.Load(); t != nil {
		s.Remote = t.stats()
	}
	return s
}
