package compaction

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Defaults, Kafka's where Kafka has the setting.
const (
	// defaultRetention is retention.ms: 7 days.
	defaultRetention = 7 * 24 * time.Hour
	// defaultDeleteRetention is delete.retention.ms: 1 day.
	defaultDeleteRetention = 24 * time.Hour
	// defaultMinCleanableDirtyRatio is min.cleanable.dirty.ratio.
	defaultMinCleanableDirtyRatio = 0.5
	// defaultOffsetMapBytes is the offset map's memory budget
	// (log.cleaner.dedupe.buffer.size is 128 MiB shared by Kafka's cleaner
	// threads).
	defaultOffsetMapBytes = 128 << 20
	// minOffsetMapBytes is the smallest budget accepted.
	minOffsetMapBytes = 4 << 10
	// maxOffsetMapBytes is the largest budget accepted: key positions in
	// the map are 32-bit.
	maxOffsetMapBytes = 1 << 31
	// defaultProducerIDExpiration is producer.id.expiration.ms: 1 day.
	defaultProducerIDExpiration = 24 * time.Hour
)

// CleanupPolicy values, Kafka's cleanup.policy.
const (
	// PolicyDelete deletes whole segments by time, size and log start.
	PolicyDelete = "delete"
	// PolicyCompact keeps the latest record of every key.
	PolicyCompact = "compact"
)

// Config configures the cleanup policies. Durations use Go types; a
// negative Retention or RetentionBytes means unlimited, as Kafka's -1. The
// zero value of a field means Kafka's default for it.
type Config struct {
	// CleanupPolicy is cleanup.policy: "delete" (default), "compact", or
	// "compact,delete" (both; either order).
	CleanupPolicy string
	// Retention is retention.ms (default 7 days; negative: unlimited): a
	// sealed segment goes once now minus its retention timestamp exceeds
	// it. See Retention for how a future timestamp is handled.
	Retention time.Duration
	// RetentionBytes is retention.bytes (zero or negative: unlimited, the
	// Kafka default -1): the oldest segments go while the partition's size
	// minus the segment's size stays at or above it.
	RetentionBytes int64
	// DeleteRetention is delete.retention.ms (default 1 day): how long a
	// tombstone survives after the first compaction that rewrites its
	// batch.
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (default 0.5):
	// a partition is compacted when dirty bytes / (clean + dirty bytes)
	// exceed it. Must lie in (0, 1] once defaults are applied.
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms (default 0): a dirty
	// segment (one holding an offset at or past the cleaner checkpoint)
	// whose largest timestamp is younger than this is not compacted yet,
	// nor is any segment after it. As in Kafka, it bounds only the dirty
	// section: a clean segment is rewritten with the rest of the log
	// whatever its age. A segment none of whose records has a timestamp
	// ages by the modification time of its .log instead, as in Kafka.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms (default: unlimited, 0
	// here): once the first batch of any dirty sealed segment is older
	// than this by its max timestamp (timestamps of 0 or less are left
	// out, as in Kafka), the partition is compacted whatever its dirty
	// ratio, as far as MinCompactionLag and the high watermark let a
	// round go.
	MaxCompactionLag time.Duration
	// OffsetMapBytes bounds the offset map's memory in bytes (default 128
	// MiB, at least 4 KiB, at most 2 GiB): the
	// table and the keys it holds. When it is full, a round cleans up to
	// the last mapped offset and the next round continues.
	OffsetMapBytes int
	// ProducerIDExpiration is producer.id.expiration.ms (default 1 day):
	// compaction keeps the empty header of a producer's last batch (its
	// sequence state) only while the producer is live, that is while its
	// last batch in the log has a max timestamp within this of Now, or is
	// part of a transaction no marker has ended yet, as Kafka's producer
	// expiry decides. Once the partition keeps producer state of its own,
	// compaction will follow that state instead.
	ProducerIDExpiration time.Duration
	// KeyHash hashes keys for the offset map; nil means xxhash64. Tests set
	// a colliding hash: the map compares whole keys, so collisions cost
	// probes, never records.
	KeyHash func(key []byte) uint64
	// Now is the clock (default time.Now). Tests move it.
	Now func() time.Time
	// Logger receives progress and warnings (default: discard).
	Logger *slog.Logger
}

// ensureDefaults replaces zero fields with their defaults.
func (c *Config) ensureDefaults() {
	if c.CleanupPolicy == "" {
		c.CleanupPolicy = PolicyDelete
	}
	if c.Retention == 0 {
		c.Retention = defaultRetention
	}
	if c.DeleteRetention == 0 {
		c.DeleteRetention = defaultDeleteRetention
	}
	if c.MinCleanableDirtyRatio == 0 {
		c.MinCleanableDirtyRatio = defaultMinCleanableDirtyRatio
	}
	if c.OffsetMapBytes == 0 {
		c.OffsetMapBytes = defaultOffsetMapBytes
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = defaultProducerIDExpiration
	}
	if c.KeyHash == nil {
		c.KeyHash = xxhash.Sum64
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// validate checks a Config after ensureDefaults (every constructor calls
// both: NewCompactor, NewRetention, Policies, NewRunner, NewDirRunner,
// which return its error). Errors wrap ErrInvalidConfig.
func (c *Config) validate() error {
	if _, _, err := parsePolicy(c.CleanupPolicy); err != nil {
		return err
	}
	switch {
	case c.MinCleanableDirtyRatio <= 0 || c.MinCleanableDirtyRatio > 1:
		return fmt.Errorf("%w: MinCleanableDirtyRatio %v outside (0, 1]", ErrInvalidConfig, c.MinCleanableDirtyRatio)
	case c.OffsetMapBytes < minOffsetMapBytes || c.OffsetMapBytes > maxOffsetMapBytes:
		return fmt.Errorf("%w: OffsetMapBytes %d outside [%d, %d]", ErrInvalidConfig, c.OffsetMapBytes, minOffsetMapBytes, maxOffsetMapBytes)
	case c.DeleteRetention < 0:
		return fmt.Errorf("%w: negative DeleteRetention", ErrInvalidConfig)
	case c.MinCompactionLag < 0 || c.MaxCompactionLag < 0:
		return fmt.Errorf("%w: negative compaction lag", ErrInvalidConfig)
	case c.ProducerIDExpiration < 0:
		return fmt.Errorf("%w: negative ProducerIDExpiration", ErrInvalidConfig)
	case c.ProducerIDExpiration < time.Millisecond:
		// Kafka's setting counts milliseconds, at least 1; less would be
		// 0 ms, which expires every producer at once.
		return fmt.Errorf("%w: ProducerIDExpiration %v below 1 ms", ErrInvalidConfig, c.ProducerIDExpiration)
	}
	return nil
}

// parsePolicy splits cleanup.policy into its two switches.
func parsePolicy(s string) (deleteOn, compactOn bool, err error) {
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case PolicyDelete:
			deleteOn = true
		case PolicyCompact:
			compactOn = true
		default:
			return false, false, fmt.Errorf("%w: cleanup.policy %q", ErrInvalidConfig, s)
		}
	}
	return deleteOn, compactOn, nil
}
