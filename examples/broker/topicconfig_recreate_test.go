package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/index/vfs"
)

// A topic created again after a deletion whose save of the topic configs
// failed does not inherit the deleted topic's overrides, not even after a
// restart: the creation saves the configs first, and fails while it cannot.
func TestRecreatedTopicDoesNotInheritConfigs(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	s, err := openStore(dir, 1, storeConfig{}, logger)
	require.NoError(t, err)
	require.NoError(t, s.createTopic("orders", 1, topicConfig{"retention.ms": "1000"}))

	// A directory where WriteFileAtomic writes its temporary file makes
	// every save of the configs fail, leaving the file as it is.
	block := filepath.Join(dir, topicConfigsFile+vfs.AtomicTmpSuffix)
	require.NoError(t, os.MkdirAll(filepath.Join(block, "x"), 0o755))
	require.Error(t, s.deleteTopic("orders"), "the configs could not be saved")
	assert.Nil(t, s.topicConfigOf("orders"))
	_, err = s.topic("orders", false)
	require.ErrorIs(t, err, errUnknownTopic, "the partitions are gone")

	require.Error(t, s.createTopic("orders", 1, nil), "the stale configs cannot be dropped yet")
	_, err = s.topic("orders", false)
	require.ErrorIs(t, err, errUnknownTopic, "a refused creation makes no partition")

	require.NoError(t, os.RemoveAll(block))
	require.NoError(t, s.createTopic("orders", 1, nil))
	assert.Nil(t, s.topicConfigOf("orders"))
	require.NoError(t, s.close())

	s, err = openStore(dir, 1, storeConfig{}, logger)
	require.NoError(t, err)
	defer s.close()
	_, err = s.topic("orders", false)
	require.NoError(t, err)
	assert.Nil(t, s.topicConfigOf("orders"), "the new topic inherited the deleted one's overrides")
}
