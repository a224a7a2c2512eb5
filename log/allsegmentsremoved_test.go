package log_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/base"
	"github.com/partlog/partlog/internal/checkpoint"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// removeLogFiles removes every .log file of dir.
func removeLogFiles(t *testing.T, dir string) {
	t.Helper()
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".log") {
			require.NoError(t, os.Remove(filepath.Join(dir, n.Name())))
		}
	}
}

// TestOpenEverySegmentRemoved: a directory whose segment files are all
// gone, while its recovery point or a producer snapshot still names
// synced offsets, is a lost log end like one whose active segment alone
// was removed ("Directory checks", "A lost log end"): refused after a
// clean shutdown, the policy's after a crash, and a refusal changes no
// file. Open used to take such a directory for a new partition under
// every policy: it created an empty log at offset 0, wrote the recovery
// point back to 0 and removed the snapshot, the last files saying that
// records were missing.
func TestOpenEverySegmentRemoved(t *testing.T) {
	// partlog's own directory: 10 synced offsets, the recovery point and
	// the producer snapshot at 10.
	own := func(t *testing.T, clean bool) string {
		dir := filepath.Join(t.TempDir(), "p-0")
		p, err := plog.Open(dir, plog.Config{})
		require.NoError(t, err)
		for range 5 {
			_, err := p.AppendBatch(logtest.MakeBatch(2, 10, 1700000000000, 0))
			require.NoError(t, err)
		}
		require.NoError(t, p.Close())
		removeLogFiles(t, dir)
		if !clean {
			require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
		}
		return dir
	}
	refused := func(t *testing.T, dir string, cfg plog.Config, names string) {
		t.Helper()
		// The first Open of a directory may leave its empty lock file.
		lock, err := os.OpenFile(filepath.Join(dir, ".partlog.lock"), os.O_CREATE|os.O_RDONLY, 0o644)
		require.NoError(t, err)
		require.NoError(t, lock.Close())
		before := snapshotDir(t, dir)
		p, err := plog.Open(dir, cfg)
		if err == nil {
			_ = p.Close()
		}
		require.ErrorIs(t, err, base.ErrCorrupt)
		require.Contains(t, err.Error(), names)
		require.Equal(t, before, snapshotDir(t, dir), "a refused Open changed a file")
	}
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "crash"}[clean]
		t.Run("own/"+name+"/strict", func(t *testing.T) {
			refused(t, own(t, clean), plog.Config{Recovery: plog.StrictRecovery{}}, plog.RecoveryPointCheckpointFile)
		})
		t.Run("own/"+name+"/allowTornTail", func(t *testing.T) {
			dir := own(t, clean)
			cfg := plog.Config{Recovery: plog.StrictRecovery{AllowTornTail: true}}
			if clean {
				refused(t, dir, cfg, plog.RecoveryPointCheckpointFile)
				return
			}
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err, "after a crash a recovery point past the end is a torn tail")
			require.NoError(t, p.Close())
		})
	}
	t.Run("own/clean/default", func(t *testing.T) {
		dir := own(t, true)
		refused(t, dir, plog.Config{}, plog.RecoveryPointCheckpointFile)
	})
	t.Run("own/crash/default", func(t *testing.T) {
		dir := own(t, false)
		var logs bytes.Buffer
		p, err := plog.Open(dir, plog.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		require.Equal(t, int64(0), p.LogEndOffset())
		require.NoError(t, p.Close())
		require.Contains(t, logs.String(), "level=ERROR")
		require.Contains(t, logs.String(), "recovery point is past the log end")
	})
	// A Kafka partition (no recovery point of its own) whose one segment
	// is gone: its producer snapshot at offset 3 names the missing
	// batches. Kafka's clean-shutdown marker is there.
	t.Run("kafka/clean/strict", func(t *testing.T) {
		dir := copyFixture(t, "__consumer_offsets-33")
		removeLogFiles(t, dir)
		require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.CleanShutdownFile), nil, 0o644))
		refused(t, dir, plog.Config{Recovery: plog.StrictRecovery{}}, "00000000000000000003.snapshot")
	})
}
