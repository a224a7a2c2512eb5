package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/s3remote"
)

// The tiering flags name one store or none; combinations the broker
// cannot honour stop it before it opens anything.
func TestTieringFlags(t *testing.T) {
	st, err := remoteFlags{}.storage()
	require.NoError(t, err)
	assert.Nil(t, st, "no flag: no store")
	st, err = remoteFlags{dir: t.TempDir()}.storage()
	require.NoError(t, err)
	assert.IsType(t, &plog.DirRemoteStorage{}, st)
	st, err = remoteFlags{s3Endpoint: "127.0.0.1:8333", s3Bucket: "partlog"}.storage()
	require.NoError(t, err)
	assert.IsType(t, &s3remote.Store{}, st)
	_, err = remoteFlags{dir: t.TempDir(), s3Endpoint: "127.0.0.1:8333", s3Bucket: "partlog"}.storage()
	require.ErrorIs(t, err, errTieringConfig, "both stores")
	_, err = remoteFlags{s3Endpoint: "127.0.0.1:8333", s3Bucket: "No_Such Bucket"}.storage()
	require.ErrorIs(t, err, errTieringConfig, "bad bucket name")

	store := plog.NewDirRemoteStorage(t.TempDir(), nil)
	for _, tc := range []struct {
		name string
		cfg  config
	}{
		{"cluster mode", config{RemoteStorage: store, Cluster: []clusterNode{{}}}},
		{"compacting policy", config{RemoteStorage: store, CleanupPolicy: "compact,delete"}},
		{"negative local retention", config{RemoteStorage: store, LocalRetentionBytes: -1}},
		{"negative interval", config{RemoteStorage: store, RemoteInterval: -time.Second}},
		{"local retention above retention", config{RemoteStorage: store, Retention: time.Hour, LocalRetentionMs: 2 * time.Hour.Milliseconds()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := remoteConfig(tc.cfg)
			require.ErrorIs(t, err, errTieringConfig)
			cfg := tc.cfg
			cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
			err = run(t.Context(), cfg)
			require.ErrorIs(t, err, errTieringConfig, "run refuses it")
		})
	}
	rc, err := remoteConfig(config{RemoteStorage: store, Retention: -1, LocalRetentionMs: 1000, LocalRetentionBytes: 1 << 20, RemoteInterval: time.Second})
	require.NoError(t, err)
	assert.Equal(t, plog.RemoteConfig{Storage: store, LocalRetentionMs: 1000, LocalRetentionBytes: 1 << 20, Interval: time.Second}, *rc,
		"unlimited -retention: no remote retention")
	rc, err = remoteConfig(config{RemoteStorage: store})
	require.NoError(t, err)
	assert.Equal(t, (7 * 24 * time.Hour).Milliseconds(), rc.RetentionMs, "the default -retention bounds the copies")
	rc, err = remoteConfig(config{})
	require.NoError(t, err)
	assert.Nil(t, rc, "no store: no tiering")
}

// remote.storage.enable per topic: refused where Kafka refuses it (no
// store, a compacted topic) and with the topic's own retention; false, or
// the topic's own retention, keeps a topic local; the others are tiered,
// the internal topics never.
func TestTopicTieringConfig(t *testing.T) {
	var srv *server
	dir, remoteDir := t.TempDir(), t.TempDir()
	adjust := func(c *config) {
		c.RemoteStorage = plog.NewDirRemoteStorage(remoteDir, nil)
		c.onServer = func(s *server) { srv = s }
	}
	b := startBrokerWith(t, dir, 1, adjust)
	rc := dialRaw(t, b.addr)
	got := createTopics(t, rc, 7, false,
		newTopic("tiered", 1, 1),
		newTopic("tiered-explicit", 1, 1, remoteStorageEnable, "TRUE"),
		newTopic("local", 1, 1, remoteStorageEnable, "false"),
		newTopic("own-retention", 1, 1, "retention.ms", "60000"),
		newTopic("bad-bool", 1, 1, remoteStorageEnable, "yes"),
		newTopic("compacted", 1, 1, remoteStorageEnable, "true", "cleanup.policy", "compact"),
		newTopic("retention-and-tiered", 1, 1, remoteStorageEnable, "true", "retention.bytes", "1000"),
		newTopic("local-retention", 1, 1, "local.retention.ms", "1000"),
	)
	for name, want := range map[string]struct {
		code   int16
		tiered bool
	}{
		"tiered":               {0, true},
		"tiered-explicit":      {0, true},
		"local":                {0, false},
		"own-retention":        {0, false},
		"bad-bool":             {kerr.InvalidConfig.Code, false},
		"compacted":            {kerr.InvalidConfig.Code, false},
		"retention-and-tiered": {kerr.InvalidConfig.Code, false},
		"local-retention":      {kerr.InvalidConfig.Code, false},
	} {
		require.Equal(t, want.code, got[name].ErrorCode, "%s: %v", name, kerr.ErrorForCode(got[name].ErrorCode))
		if want.code != 0 {
			continue
		}
		var reported string
		for _, c := range got[name].Configs {
			if c.Name == remoteStorageEnable && c.Value != nil {
				reported = *c.Value
			}
		}
		require.NotEmpty(t, reported, "%s: remote.storage.enable in the CreateTopics answer", name)
		assert.Equal(t, want.tiered, parseKafkaBool(reported), "%s: remote.storage.enable %q in the CreateTopics answer", name, reported)
		ps, err := srv.store.topic(name, false)
		require.NoError(t, err)
		assert.Equal(t, want.tiered, ps[0].Stats().Remote.Enabled, "%s: tiered", name)
	}
	ps, err := srv.store.topic(offsetsTopic, false)
	require.NoError(t, err)
	assert.False(t, ps[0].Stats().Remote.Enabled, "%s is never tiered", offsetsTopic)

	// After a restart (OpenDir asks before the store is shared) the same.
	b.stop(t)
	startBrokerWith(t, dir, 1, adjust)
	for name, tiered := range map[string]bool{"tiered": true, "local": false, "own-retention": false} {
		ps, err := srv.store.topic(name, false)
		require.NoError(t, err)
		assert.Equal(t, tiered, ps[0].Stats().Remote.Enabled, "%s after a restart: tiered", name)
	}

	// Without a store, remote.storage.enable=true is refused.
	plain := startBroker(t, t.TempDir(), 1)
	got = createTopics(t, dialRaw(t, plain.addr), 7, false, newTopic("wants-tiering", 1, 1, remoteStorageEnable, "true"))
	assert.Equal(t, kerr.InvalidConfig.Code, got["wants-tiering"].ErrorCode, "remote.storage.enable=true without a store")
}
