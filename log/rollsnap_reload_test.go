package log_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/producer"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestTruncateReloadKnowsRollSnapshots: a TruncateTo reloads the producer
// state from the newest snapshot at or below its new end, as Kafka's
// truncateAndReload does. A roll's snapshot there that the roll's
// background flush has not written yet is one of them: whether the flush
// ran first must not change what the partition knows. Producer 7's last
// batch lies in a segment the log start then passed; its retry after the
// truncation is a duplicate either way.
func TestTruncateReloadKnowsRollSnapshots(t *testing.T) {
	for _, flushed := range []bool{true, false} {
		name := map[bool]string{true: "rollFlushed", false: "rollNotFlushed"}[flushed]
		t.Run(name, func(t *testing.T) {
			p, err := plog.Open("/kafka/reload-0", plog.WithManualRollFlush(plog.Config{FS: vfs.NewMem()}))
			require.NoError(t, err)
			defer func() { _ = p.Close() }()
			_, err = p.AppendBatch(pb{pid: 7, seq: 0, n: 5}.bytes(t)) // offsets 0-4
			require.NoError(t, err)
			require.NoError(t, p.Roll())                              // snapshot at 5
			_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 5}.bytes(t)) // offsets 5-9
			require.NoError(t, err)
			require.NoError(t, p.Roll())                              // snapshot at 10
			_, err = p.AppendBatch(pb{pid: 9, seq: 5, n: 2}.bytes(t)) // offsets 10-11
			require.NoError(t, err)
			if flushed {
				require.NoError(t, p.FlushRolled())
			}
			require.NoError(t, p.DeleteRecordsBefore(7)) // segment 0 goes
			require.NoError(t, p.TruncateTo(10))         // producer 9's last batch goes

			info, err := p.AppendBatchInfo(pb{pid: 7, seq: 0, n: 5}.bytes(t))
			require.NoError(t, err)
			assert.True(t, info.Duplicate, "a retry of producer 7's batch below the log start, after the truncation")
			assert.Equal(t, int64(0), info.Base)
			info, err = p.AppendBatchInfo(pb{pid: 9, seq: 5, n: 2}.bytes(t))
			require.NoError(t, err)
			assert.False(t, info.Duplicate, "producer 9's batch the truncation cut is new again")
		})
	}
}

// TestTruncateKeepsRollSnapshotsOfRunningFlush: the roll snapshots a roll's
// background flush took and had not written yet when a TruncateTo came
// (the flush was still syncing the segments below them) are at or below
// the truncation's new end: they describe batches the log still holds, as
// the snapshots still pending do, and are kept as those are. Before, the
// flush found the truncation count changed and dropped them, so the
// truncation's reload forgot producer 7, whose last batch lies in a
// segment the log start then passed, and so did an Open after a crash.
func TestTruncateKeepsRollSnapshotsOfRunningFlush(t *testing.T) {
	const dir = "/kafka/reload-running-0"
	mem := vfs.NewMem()
	inj := vfs.NewInjector(mem)
	p, err := plog.Open(dir, plog.WithManualRollFlush(plog.Config{FS: inj}))
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	_, err = p.AppendBatch(pb{pid: 7, seq: 0, n: 5}.bytes(t)) // offsets 0-4
	require.NoError(t, err)
	require.NoError(t, p.Roll())                              // snapshot at 5
	_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 5}.bytes(t)) // offsets 5-9
	require.NoError(t, err)
	require.NoError(t, p.Roll())                              // snapshot at 10
	_, err = p.AppendBatch(pb{pid: 9, seq: 5, n: 2}.bytes(t)) // offsets 10-11
	require.NoError(t, err)

	// The roll's background flush stops at its first fsync, after it took
	// the snapshots.
	var blocked atomic.Bool
	stopped, release := make(chan struct{}), make(chan struct{})
	inj.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && blocked.CompareAndSwap(false, true) {
			close(stopped)
			<-release
		}
		return nil
	})
	flushed := make(chan error, 1)
	go func() { flushed <- p.FlushRolled() }()
	<-stopped
	truncated := make(chan error, 1)
	go func() { truncated <- p.TruncateTo(10) }() // producer 9's last batch goes
	select {
	case err := <-truncated:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("TruncateTo waited for the roll's background flush")
	}
	close(release)
	require.NoError(t, <-flushed)
	inj.SetHook(nil)

	require.NoError(t, p.Sync())
	snaps, err := producer.ListSnapshots(mem, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 10}, snaps, "the roll snapshots at or below the new end")

	require.NoError(t, p.DeleteRecordsBefore(7)) // segment 0 goes
	crashed, err := plog.Open(dir, plog.Config{FS: mem.CrashClone(vfs.CrashOptions{})})
	require.NoError(t, err)
	defer func() { _ = crashed.Close() }()
	info, err := crashed.AppendBatchInfo(pb{pid: 7, seq: 0, n: 5}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "a retry of producer 7's batch below the log start, after a crash")
	assert.Equal(t, int64(0), info.Base)
	info, err = p.AppendBatchInfo(pb{pid: 7, seq: 0, n: 5}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "a retry of producer 7's batch below the log start, without a crash")
	assert.Equal(t, int64(0), info.Base)
}
