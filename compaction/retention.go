package compaction

import (
	"context"
	"fmt"
	"time"

	plog "github.com/partlog/partlog/log"
)

// Retention is the delete policy: it deletes whole segments, oldest first,
// while one of Kafka's three rules applies to the oldest remaining one, and
// stops at the first segment none applies to:
//
//   - log start: the segment lies wholly below the log start offset (the
//     next segment's base is at or below it, after DeleteRecordsBefore);
//   - time: now minus the segment's retention timestamp exceeds
//     Config.Retention;
//   - size: the partition's size minus the segment's size is still at
//     least Config.RetentionBytes.
//
// It never deletes a segment holding an offset at or past the high
// watermark (the next segment's base, or the log end offset for the active
// segment, must be at or below it). Deleted segments are renamed .deleted
// and removed when the last reader lets go of them; readers holding them
// keep reading. The partition does the deleting (log.Partition.DeleteExpired):
// Retention only decides.
//
// # The active segment
//
// When every segment is due, the active one included (an idle partition
// whose only segment expired: the time rule; the size rule cannot take the
// last segment with a positive RetentionBytes, nor the log start rule, which
// needs a next segment, as in Kafka), the partition rolls the
// log first, as Kafka's retention does, and then deletes the expired
// segment as a sealed one. An empty active segment is never due. Afterwards
// the log end offset is unchanged, the log start offset equals it, and
// appends continue at the same offset in the new, empty segment. The plan
// is made again after the roll, over segments that can no longer change, so
// a batch appended between the first plan and the roll is judged with its
// segment (a fresh one keeps it).
//
// # Future timestamps
//
// Kafka's retention timestamp is the segment's largest record timestamp, so
// one record stamped years ahead by a producer's wrong clock pins its
// segment, and every later one, for years.
// partlog caps it: the retention timestamp is the smaller of the largest
// record timestamp and the modification time of the segment's .log (the
// last time a batch was appended to it, or compaction rewrote it); a
// segment without timestamps uses the modification time alone, as Kafka
// does. A future-dated segment therefore goes Retention after it was last
// written, never later; one whose records are older than its file goes by
// its records, as in Kafka.
type Retention struct {
	cfg Config
}

// NewRetention returns the delete policy for cfg (defaults applied).
func NewRetention(cfg Config) (*Retention, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Retention{cfg: cfg}, nil
}

// Name returns "retention".
func (r *Retention) Name() string { return "retention" }

// retentionReason says why retention deletes a segment.
type retentionReason uint8

// Retention reasons, in the order Apply checks them.
const (
	// reasonNone: the segment stays.
	reasonNone retentionReason = iota
	// reasonLogStart: the segment lies wholly below the log start offset.
	reasonLogStart
	// reasonTime: the segment is older than Config.Retention.
	reasonTime
	// reasonSize: the partition is larger than Config.RetentionBytes
	// without it.
	reasonSize
	numReasons
)

var reasonNames = [...]string{"none", "log-start", "time", "size"}

func init() {
	if len(reasonNames) != int(numReasons) {
		panic(fmt.Sprintf("partlog/compaction: %d reason names for %d retentionReason constants", len(reasonNames), numReasons))
	}
}

// String returns the reason's name.
func (r retentionReason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// retentionTimestamp returns the timestamp retention ages s by, in
// milliseconds: its largest record timestamp, capped at the modification
// time of its .log, or that time alone when s has no timestamp (see
// Retention, "Future timestamps").
func retentionTimestamp(s plog.SegmentView) int64 {
	mtime := s.Modified.UnixMilli()
	if s.MaxTimestamp < 0 || s.MaxTimestamp > mtime {
		return mtime
	}
	return s.MaxTimestamp
}

// plan returns how many of the oldest segments of v retention would delete
// now, and why each goes. When it returns a reason for every segment, the
// active one is due too: the partition rolls before deleting it.
func (r *Retention) plan(v *plog.View, now time.Time) []retentionReason {
	hw, start := v.HighWatermark(), v.LogStartOffset()
	segs := v.Segments()
	var size int64
	for _, s := range segs {
		size += s.Size
	}
	nowMs := now.UnixMilli()
	var reasons []retentionReason
	for i, s := range segs {
		var next int64
		if s.Active {
			if s.Size == 0 {
				break // an empty active segment is never due
			}
			next = s.NextOffset
		} else {
			next = segs[i+1].BaseOffset
		}
		if next > hw {
			break
		}
		why := reasonNone
		switch {
		case !s.Active && next <= start:
			why = reasonLogStart
		case r.cfg.Retention >= 0 && nowMs-retentionTimestamp(s) > r.cfg.Retention.Milliseconds():
			why = reasonTime
		case r.cfg.RetentionBytes > 0 && size-s.Size >= r.cfg.RetentionBytes:
			why = reasonSize
		}
		if why == reasonNone {
			break
		}
		reasons = append(reasons, why)
		size -= s.Size
	}
	return reasons
}

// retentionRound is one Apply's log.RetentionPolicy: it plans with the
// round's clock and logs why each segment goes.
type retentionRound struct {
	r   *Retention
	now time.Time
}

// Expired implements log.RetentionPolicy.
func (rr retentionRound) Expired(v *plog.View) int {
	reasons := rr.r.plan(v, rr.now)
	segs := v.Segments()
	if len(reasons) == len(segs) {
		active := segs[len(segs)-1]
		rr.r.cfg.Logger.Info("partlog/compaction: retention rolls the expired active segment", "dir", v.Dir(),
			"segment", active.BaseOffset, "logEnd", active.NextOffset, "reason", reasons[len(reasons)-1].String())
	}
	for i, why := range reasons {
		if segs[i].Active {
			break
		}
		rr.r.cfg.Logger.Info("partlog/compaction: retention deletes a segment", "dir", v.Dir(),
			"segment", segs[i].BaseOffset, "reason", why.String(), "bytes", segs[i].Size)
	}
	return len(reasons)
}

// Apply deletes the segments retention picks, through the partition
// (log.Partition.DeleteExpired: it rolls first when the active segment is
// due, then asks again).
func (r *Retention) Apply(ctx context.Context, p Partition) (Result, error) {
	res, err := p.DeleteExpired(ctx, retentionRound{r: r, now: r.cfg.Now()})
	if err != nil {
		return Result{CleanedTo: -1}, wrapDir("retention", p, err)
	}
	return fromClean(res), nil
}
