package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/partlog/partlog/compaction"
	"github.com/partlog/partlog/index/vfs"
)

// topicConfigsFile holds the configurations CreateTopics set per topic
// (JSON: topic -> name -> value), in the data directory next to the
// partitions; OpenDir leaves it alone.
const topicConfigsFile = "partlog-broker-topic-configs"

// errInvalidConfig is wrapped by every refused topic configuration: Kafka's
// INVALID_CONFIG.
var errInvalidConfig = errors.New("broker: invalid topic config")

// topicConfig is a topic's configuration overrides: Kafka's names and
// values, as CreateTopics gave them. Only the names of honouredConfigs are
// in it.
type topicConfig map[string]string

// configKind is how a honoured configuration's value is checked.
type configKind struct {
	// min is the smallest value of a number (Kafka's validator).
	min int64
	// policy, ratio, boolean: cleanup.policy's list,
	// min.cleanable.dirty.ratio's fraction, remote.storage.enable's true
	// or false; otherwise an integer of at least min.
	policy, ratio, boolean bool
}

// honouredConfigs are the topic configurations the broker applies per topic
// (single mode): those of the cleanup policies, which the compaction
// package takes per partition, and remote.storage.enable (tiering.go). Every other Kafka topic configuration is
// refused with INVALID_CONFIG (partition-level ones such as segment.bytes
// are the broker's flags, for every topic).
var honouredConfigs = map[string]configKind{
	"cleanup.policy":            {policy: true},
	"retention.ms":              {min: -1},
	"retention.bytes":           {min: math.MinInt64},
	"delete.retention.ms":       {min: 0},
	"min.compaction.lag.ms":     {min: 0},
	"max.compaction.lag.ms":     {min: 1},
	"min.cleanable.dirty.ratio": {ratio: true},
	remoteStorageEnable:         {boolean: true},
}

// kafkaTopicConfigs are the other names Kafka 3.9 knows as topic
// configurations (LogConfig): refused as unsupported rather than unknown.
var kafkaTopicConfigs = []string{
	"compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
	"file.delete.delay.ms", "flush.messages", "flush.ms",
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"index.interval.bytes", "local.retention.bytes", "local.retention.ms",
	"max.message.bytes", "message.downconversion.enable", "message.format.version",
	"message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
	"message.timestamp.difference.max.ms", "message.timestamp.type",
	"min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable",
	"segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
	"unclean.leader.election.enable",
}

// checkTopicConfig checks one configuration of a CreateTopics request and
// returns an error wrapping errInvalidConfig, with Kafka's reason, when the
// broker does not take it.
func checkTopicConfig(name, value string) error {
	kind, ok := honouredConfigs[name]
	if !ok {
		if slices.Contains(kafkaTopicConfigs, name) {
			return fmt.Errorf("%w: %s is not supported by this broker per topic (it honours %s)", errInvalidConfig, name, strings.Join(slices.Sorted(maps.Keys(honouredConfigs)), ", "))
		}
		return fmt.Errorf("%w: Unknown topic config name: %s", errInvalidConfig, name)
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: Invalid value %s for configuration %s: %s", errInvalidConfig, value, name, why)
	}
	switch {
	case kind.policy:
		if _, err := compaction.NewRunner(compaction.Config{CleanupPolicy: value}, compaction.RunnerOptions{}); err != nil || strings.TrimSpace(value) == "" {
			return bad("expected a list of delete and compact")
		}
	case kind.boolean:
		if v := strings.TrimSpace(value); !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return bad("Expected value to be either true or false")
		}
	case kind.ratio:
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
			return bad("expected a number in [0, 1]")
		}
	default:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return bad("expected a long integer")
		}
		if n < kind.min {
			return bad(fmt.Sprintf("value must be at least %d", kind.min))
		}
	}
	return nil
}

// checkTopicConfigs checks a topic's overrides as a whole, once each
// passed checkTopicConfig: min.compaction.lag.ms must not be above
// max.compaction.lag.ms (Kafka's LogConfig.validateValues, whatever the
// cleanup policy; the defaults are 0 and 2^63-1), and the cleaner's runner
// for them on base (the user topics' configuration) must build, or the
// topic would never be cleaned. The error wraps errInvalidConfig.
func checkTopicConfigs(tc topicConfig, base compaction.Config) error {
	minLag, maxLag := int64(0), int64(math.MaxInt64)
	if v, ok := tc["min.compaction.lag.ms"]; ok {
		minLag, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	}
	if v, ok := tc["max.compaction.lag.ms"]; ok {
		maxLag, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	}
	if minLag > maxLag {
		return fmt.Errorf("%w: conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", errInvalidConfig, minLag, maxLag)
	}
	if _, err := compaction.NewRunner(tc.apply(base), compaction.RunnerOptions{}); err != nil {
		return fmt.Errorf("%w: %w", errInvalidConfig, err)
	}
	return nil
}

// maxDurationMs is the largest millisecond count a time.Duration holds
// (about 292 years).
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

// apply returns base with the topic's overrides, in the compaction
// package's terms: Kafka's 0 (retention.ms, delete.retention.ms: at once;
// min.cleanable.dirty.ratio: always dirty enough) is the smallest positive
// value there, whose 0 means the default. A millisecond value beyond what
// a time.Duration holds (Kafka's longs go to 2^63-1, max.compaction.lag.ms's
// default) is the largest Duration: unlimited in effect.
func (tc topicConfig) apply(base compaction.Config) compaction.Config {
	ms := func(v string) time.Duration {
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case n < 0:
			return -1
		case n == 0:
			return time.Nanosecond
		case n > maxDurationMs:
			return math.MaxInt64
		}
		return time.Duration(n) * time.Millisecond
	}
	for name, v := range tc {
		switch name {
		case "cleanup.policy":
			base.CleanupPolicy = strings.TrimSpace(v)
		case "retention.ms":
			base.Retention = ms(v)
		case "retention.bytes":
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if n == 0 {
				n = 1 // Kafka's 0: every sealed segment goes
			}
			base.RetentionBytes = n
		case "delete.retention.ms":
			base.DeleteRetention = ms(v)
		case "min.compaction.lag.ms":
			base.MinCompactionLag = ms(v)
		case "max.compaction.lag.ms":
			base.MaxCompactionLag = ms(v)
		case "min.cleanable.dirty.ratio":
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			base.MinCleanableDirtyRatio = max(f, math.SmallestNonzeroFloat64)
		}
	}
	return base
}

// key is the overrides in a canonical form (the cleaner keeps one runner
// per distinct configuration).
func (tc topicConfig) key() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(tc)) {
		fmt.Fprintf(&b, "%s=%s\n", name, tc[name])
	}
	return b.String()
}

// loadTopicConfigs reads the data directory's topic configurations; a
// missing file is none.
func loadTopicConfigs(dir string) (map[string]topicConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, topicConfigsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return make(map[string]topicConfig), nil
	}
	if err != nil {
		return nil, fmt.Errorf("topic configs: %w", err)
	}
	m := make(map[string]topicConfig)
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("topic configs %s: %w", filepath.Join(dir, topicConfigsFile), err)
	}
	return m, nil
}

// saveTopicConfigs replaces the data directory's topic configurations
// atomically (vfs.WriteFileAtomic).
func saveTopicConfigs(dir string, m map[string]topicConfig) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(vfs.Default, filepath.Join(dir, topicConfigsFile), append(b, '\n')); err != nil {
		return fmt.Errorf("topic configs: %w", err)
	}
	return nil
}
