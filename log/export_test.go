package log

import (
	"context"

	"github.com/partlog/partlog/index/vfs"
	"github.com/partlog/partlog/segment"
)

// The partition's internal segment operations, for this package's external
// tests (which drive them directly, as Compact and DeleteExpired do).

func (p *Partition) Segments() ([]*segment.Segment, error) { return p.segmentRefs() }

func (p *Partition) SegmentConfig() segment.Config { return p.segCfg }

// ClaimCleaning takes the partition's cleaning claim as Compact does, for
// a test that holds it without running a round.
func (p *Partition) ClaimCleaning() (func(), error) {
	_, release, err := p.cleaning.claim(context.Background(), p.closed.Load(), p.dir)
	return release, err
}

func (p *Partition) DeleteSegments(oldest []*segment.Segment) error {
	return p.deleteSegments(oldest, p.truncations.Load())
}

func (p *Partition) ReplaceSegments(old, new []*segment.Segment, commit func() error) error {
	return p.replaceSegments(old, new, p.truncations.Load(), commit)
}

func (p *Partition) CleanerCheckpoint() (int64, bool, error) { return p.ckpts.readCleaner() }

func (p *Partition) Truncations() uint64 { return p.truncations.Load() }

func (p *Partition) WriteCleanerCheckpoint(offset int64, truncations uint64) (bool, error) {
	return p.writeCleanerCheckpoint(offset, truncations)
}

// File names, for the external tests.

const (
	LockFile                     = lockFile
	LogStartOffsetCheckpointFile = logStartOffsetCheckpointFile
	RecoveryPointCheckpointFile  = recoveryPointCheckpointFile
	HighWatermarkCheckpointFile  = highWatermarkCheckpointFile
	LeaderEpochCheckpointFile    = leaderEpochCheckpointFile
	CleanerCheckpointFile        = cleanerCheckpointFile
)

func (c *Config) EnsureDefaults() *Config { return c.ensureDefaults() }

// WithManualRollFlush returns cfg with the background flush after a roll
// left to the test (FlushRolled), so that filesystem operations happen in
// a fixed order.
func WithManualRollFlush(cfg Config) Config {
	cfg.manualRollFlush = true
	return cfg
}

// FlushRolled runs the background flush the rolls since the last one left
// (or waits for a running one and finds nothing left to do): afterwards
// every segment sealed before the call is durable and the recovery point
// is at the newest roll's base, unless a truncation came between.
func (p *Partition) FlushRolled() error { return p.flushRolled() }

// RecoveryPoint returns the recovery point last persisted (-1: none).
func (p *Partition) RecoveryPoint() int64 {
	return p.dur.currentRecoveryPoint()
}

// Kafka's defaults the external tests compare with.
const (
	DefaultSegmentBytes = defaultSegmentBytes
	DefaultTruncateWait = defaultTruncateWait
)

// FS is the filesystem of the partition's files, for the external tests.
func (p *Partition) FS() vfs.FS { return p.cfg.FS }

// PrepareSpare makes the next segment's spare now, as the goroutine an
// append past half the segment starts (which WithManualRollFlush leaves
// to the test).
func (p *Partition) PrepareSpare() { p.dur.spare.prepare() }

// HasSpare reports whether the partition holds a spare segment.
func (p *Partition) HasSpare() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dur.spare.readyLocked()
}

// SpareIdleCheck runs the check a timer runs every spareIdleAfter while the
// partition holds a spare: it removes the spare when no append came since
// the spare was made or the last check.
func (p *Partition) SpareIdleCheck() { p.dur.spare.idleCheck() }

// PeriodicFlush runs one FlushInterval flush now, as the partition's
// interval goroutine (or its Dir's flush scheduler) does every interval.
func (p *Partition) PeriodicFlush() { p.periodicFlush() }
