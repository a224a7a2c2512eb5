package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/s3remote"
)

// Tiered storage (Kafka's KIP-405): with -remote-dir or -remote-s3-* the
// Dir copies the sealed segments of the user topics to remote storage and
// deletes local ones past -local-retention-ms / -local-retention-bytes
// (plog.RemoteConfig, docs/tiered-storage.md). Fetch below the local log
// start is served from the copies by Partition.ReadFrom; the broker only
// reports the offsets as a Kafka broker with tiering does: the log start
// offset of Fetch, Produce and ListOffsets EARLIEST is the whole log's, the
// local one is ListOffsets EARLIEST_LOCAL's (-4, v8).

// remoteStorageEnable is Kafka's topic configuration turning tiering on or
// off for a topic (remote.storage.enable).
const remoteStorageEnable = "remote.storage.enable"

// minEarliestLocalVersion is the first ListOffsets version that may ask
// for EARLIEST_LOCAL_TIMESTAMP (log.EarliestLocalTimestamp, -4, KIP-405).
const minEarliestLocalVersion = 8

// errTieringConfig is wrapped by the refused tiering flag combinations.
var errTieringConfig = errors.New("broker: tiered storage configuration")

// remoteFlags are the command line's remote store settings (the local
// retention and the interval go to config directly).
type remoteFlags struct {
	dir                      string // -remote-dir
	s3Endpoint, s3Bucket     string // -remote-s3-endpoint, -remote-s3-bucket
	s3Prefix, s3Region       string // -remote-s3-prefix, -remote-s3-region
	s3AccessKey, s3SecretKey string // -remote-s3-access-key, -remote-s3-secret-key
	s3Secure                 bool   // -remote-s3-secure
}

// storage returns the remote storage the flags name: nil without
// -remote-dir and -remote-s3-endpoint, a plog.DirRemoteStorage for
// -remote-dir, an s3remote.Store for -remote-s3-endpoint (main creates
// its bucket when missing: ensureBucket).
func (f remoteFlags) storage() (plog.RemoteStorage, error) {
	switch {
	case f.dir != "" && f.s3Endpoint != "":
		return nil, fmt.Errorf("%w: -remote-dir and -remote-s3-endpoint exclude each other", errTieringConfig)
	case f.dir != "":
		return plog.NewDirRemoteStorage(f.dir, nil), nil
	case f.s3Endpoint != "":
		st, err := s3remote.New(s3remote.Config{
			Endpoint:        f.s3Endpoint,
			Secure:          f.s3Secure,
			Region:          f.s3Region,
			Bucket:          f.s3Bucket,
			Prefix:          f.s3Prefix,
			AccessKeyID:     f.s3AccessKey,
			SecretAccessKey: f.s3SecretKey,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errTieringConfig, err)
		}
		return st, nil
	}
	return nil, nil
}

// ensureBucket creates the bucket of an S3 store when it is missing,
// waiting at most 30 seconds. A failure is logged, not fatal: the broker
// serves without its store (copies are retried every pass, local retention
// waits for them).
func ensureBucket(ctx context.Context, st plog.RemoteStorage, logger *slog.Logger) {
	s3, ok := st.(*s3remote.Store)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s3.CreateBucket(ctx); err != nil {
		logger.Warn("tiered storage: cannot create or check the bucket; copies wait for the store", "err", err)
	}
}

// remoteConfig returns the Dir's tiered storage configuration for cfg (nil
// when cfg has no remote storage), or an error wrapping errTieringConfig
// for a combination the broker refuses: cluster mode (a raft log cannot
// start below its remote copies), a compacting -cleanup-policy (Kafka does
// not tier compacted topics), a negative local retention, or a local
// retention longer than -retention (Kafka's rule for local.retention.ms).
// The whole log's retention is -retention: copies older than it are
// deleted from the store.
func remoteConfig(cfg config) (*plog.RemoteConfig, error) {
	if cfg.RemoteStorage == nil {
		return nil, nil
	}
	retentionMs := cfg.Retention.Milliseconds()
	if cfg.Retention == 0 {
		retentionMs = (7 * 24 * time.Hour).Milliseconds()
	}
	switch {
	case cfg.Cluster != nil:
		return nil, fmt.Errorf("%w: cluster mode (-cluster) does not tier", errTieringConfig)
	case strings.Contains(cfg.CleanupPolicy, "compact"):
		return nil, fmt.Errorf("%w: -cleanup-policy %q: compacted topics are not tiered (Kafka refuses them too)", errTieringConfig, cfg.CleanupPolicy)
	case cfg.LocalRetentionMs < 0 || cfg.LocalRetentionBytes < 0:
		return nil, fmt.Errorf("%w: -local-retention-ms %d, -local-retention-bytes %d: want 0 (no bound) or more", errTieringConfig, cfg.LocalRetentionMs, cfg.LocalRetentionBytes)
	case cfg.RemoteInterval < 0:
		return nil, fmt.Errorf("%w: -remote-interval %v is negative", errTieringConfig, cfg.RemoteInterval)
	case retentionMs > 0 && cfg.LocalRetentionMs > retentionMs:
		return nil, fmt.Errorf("%w: -local-retention-ms %d is longer than -retention (%d ms)", errTieringConfig, cfg.LocalRetentionMs, retentionMs)
	}
	return &plog.RemoteConfig{
		Storage:             cfg.RemoteStorage,
		LocalRetentionMs:    cfg.LocalRetentionMs,
		LocalRetentionBytes: cfg.LocalRetentionBytes,
		RetentionMs:         max(retentionMs, 0),
		Interval:            cfg.RemoteInterval,
	}, nil
}

// tieredLocked reports whether the Dir tiers a topic's partitions
// (RemoteConfig.TopicEnabled): the user topics tieredTopic allows; the
// internal topics are compacted, never tiered.
// REQUIRES: s.mu held, or s not yet shared: the Dir calls it from
// OpenDir (in openStore) and CreatePartition (in createLocked).
func (s *store) tieredLocked(topic string) bool {
	return !isInternalTopic(topic) && tieredTopic(s.mu.configs[topic])
}

// tieredTopic reports whether a user topic with configuration tc is
// tiered when the broker has remote storage: unless it was created with
// remote.storage.enable=false, or with its own retention.ms or
// retention.bytes (the Dir's remote retention is the broker's -retention,
// one for every topic, so such a topic stays local, where the cleaner
// applies its retention).
func tieredTopic(tc topicConfig) bool {
	if v, ok := tc[remoteStorageEnable]; ok && !parseKafkaBool(v) {
		return false
	}
	_, ms := tc["retention.ms"]
	_, bytes := tc["retention.bytes"]
	return !ms && !bytes
}

// parseKafkaBool reports whether a boolean configuration value is true
// as Kafka reads it ("true" in any case, surrounding spaces ignored;
// checkTopicConfig refuses values other than true and false).
func parseKafkaBool(v string) bool {
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

// checkTopicTiering checks a new topic's remote.storage.enable against the
// rest of its configuration and the broker's: true is refused, as Kafka
// refuses it, when the broker has no remote storage or the topic is
// compacted, and, as this broker's limit, when the topic has its own
// retention.ms or retention.bytes (see tieredLocked).
func checkTopicTiering(cfg topicConfig, tiering bool) error {
	v, ok := cfg[remoteStorageEnable]
	if !ok || !parseKafkaBool(v) {
		return nil
	}
	policy, hasPolicy := cfg["cleanup.policy"]
	_, ms := cfg["retention.ms"]
	_, bytes := cfg["retention.bytes"]
	switch {
	case !tiering:
		return fmt.Errorf("%w: Tiered Storage functionality is disabled in the broker (no -remote-dir or -remote-s3-endpoint). Topic cannot be configured with remote log storage.", errInvalidConfig)
	case hasPolicy && strings.Contains(policy, "compact"):
		return fmt.Errorf("%w: Remote log storage is unsupported for the compacted topics", errInvalidConfig)
	case ms || bytes:
		return fmt.Errorf("%w: remote.storage.enable=true with the topic's own retention.ms or retention.bytes: this broker's remote retention is its -retention, for every tiered topic", errInvalidConfig)
	}
	return nil
}

// wholeLogStart returns the log start offset of p's whole log, as a Kafka
// broker with tiered storage reports it (UnifiedLog.logStartOffset): the
// start of the remote copies (Stats().Remote.LogStartOffset: the oldest
// copy's first offset, or where DeleteRecordsBefore moved the start inside
// it) when that lies below the local log start, else the local log start
// (Partition.LogStartOffset, Kafka's localLogStartOffset).
func wholeLogStart(p *plog.Partition) int64 {
	local := p.LogStartOffset()
	if r := p.Stats().Remote; r.Enabled && r.LogStartOffset >= 0 && r.LogStartOffset < local {
		return r.LogStartOffset
	}
	return local
}
