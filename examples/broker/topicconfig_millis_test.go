package main

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/compaction"
)

// Every Kafka long a millisecond topic config takes is accepted and
// becomes a Duration of at least what it says, never a wrapped one: up to
// about 292 years exactly, beyond that the largest Duration. The runner
// of such a configuration builds (Kafka's default max.compaction.lag.ms is
// 2^63-1).
func TestTopicConfigMillisBeyondDuration(t *testing.T) {
	get := map[string]func(compaction.Config) time.Duration{
		"retention.ms":          func(c compaction.Config) time.Duration { return c.Retention },
		"delete.retention.ms":   func(c compaction.Config) time.Duration { return c.DeleteRetention },
		"min.compaction.lag.ms": func(c compaction.Config) time.Duration { return c.MinCompactionLag },
		"max.compaction.lag.ms": func(c compaction.Config) time.Duration { return c.MaxCompactionLag },
	}
	largest := time.Duration(math.MaxInt64)
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{1, time.Millisecond},
		{maxDurationMs, time.Duration(maxDurationMs) * time.Millisecond},
		{maxDurationMs + 1, largest},
		{18446744073710, largest}, // 584 years: 448µs when it wrapped
		{math.MaxInt64 / 2, largest},
		{math.MaxInt64, largest}, // -1ms when it wrapped
	} {
		for name, field := range get {
			v := strconv.FormatInt(c.ms, 10)
			require.NoError(t, checkTopicConfig(name, v), "%s=%s", name, v)
			tc := topicConfig{name: v}
			require.NoError(t, checkTopicConfigs(tc, compaction.Config{OffsetMapBytes: cleanerMapBytes}), "%s=%s", name, v)
			assert.Equal(t, c.want, field(tc.apply(compaction.Config{})), "%s=%s", name, v)
		}
	}
}

// checkTopicConfigs refuses, as INVALID_CONFIG, overrides whose runner
// cannot be built on the broker's base configuration.
func TestTopicConfigsWithoutRunnerRefused(t *testing.T) {
	base := compaction.Config{CleanupPolicy: compaction.PolicyDelete, OffsetMapBytes: cleanerMapBytes}
	require.NoError(t, checkTopicConfigs(topicConfig{"retention.ms": "1000"}, base))
	err := checkTopicConfigs(topicConfig{"cleanup.policy": "delete,forever"}, base)
	require.ErrorIs(t, err, errInvalidConfig)
	require.ErrorIs(t, err, compaction.ErrInvalidConfig)
}
