package log_test

import (
	"slices"
	"sync/atomic"
	"testing"

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
			// Offsets 0-4, 5-9 and 10-11; snapshots at 5 and 10.
			appendRolled(t, p, []pb{{pid: 7, seq: 0, n: 5}, {pid: 9, seq: 0, n: 5}, {pid: 9, seq: 5, n: 2}}, 5, 10)
			if flushed {
				require.NoError(t, p.FlushRolled())
			}
			require.NoError(t, p.DeleteRecordsBefore(7)) // segment 0 goes
			require.NoError(t, p.TruncateTo(10))         // producer 9's last batch goes

			requireRetryKnown(t, p, "after the truncation")
			info, err := p.AppendBatchInfo(pb{pid: 9, seq: 5, n: 2}.bytes(t))
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
	// Offsets 0-4, 5-9 and 10-11; snapshots at 5 and 10.
	appendRolled(t, p, []pb{{pid: 7, seq: 0, n: 5}, {pid: 9, seq: 0, n: 5}, {pid: 9, seq: 5, n: 2}}, 5, 10)

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
	// Producer 9's last batch goes. The flush holds no lock while it
	// syncs: a TruncateTo that waited for it would hang here (the test's
	// deadline reports it).
	require.NoError(t, p.TruncateTo(10))
	close(release)
	require.NoError(t, <-flushed)
	inj.SetHook(nil)

	require.NoError(t, p.Sync())
	snaps, err := producer.ListSnapshots(mem, dir)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 10}, snaps, "the roll snapshots at or below the new end")

	require.NoError(t, p.DeleteRecordsBefore(7)) // segment 0 goes
	requireRetryKnownAfterCrash(t, mem, dir)
	requireRetryKnown(t, p, "without a crash")
}

// appendRolled appends each batch of bs, rolling after the one that ends
// at an offset of rollAt: the rolls' producer snapshots stay pending until
// a flush (the partition is opened with WithManualRollFlush).
func appendRolled(t *testing.T, p *plog.Partition, bs []pb, rollAt ...int64) {
	t.Helper()
	for _, b := range bs {
		_, err := p.AppendBatch(b.bytes(t))
		require.NoError(t, err)
		if slices.Contains(rollAt, p.LogEndOffset()) {
			require.NoError(t, p.Roll())
		}
	}
}

// requireRetryKnown appends producer 7's first batch (offsets 0-4) again:
// p must know it as a duplicate at its original offset (when says in
// which state p is).
func requireRetryKnown(t *testing.T, p *plog.Partition, when string) {
	t.Helper()
	info, err := p.AppendBatchInfo(pb{pid: 7, seq: 0, n: 5}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "a retry of producer 7's batch below the log start, %s", when)
	assert.Equal(t, int64(0), info.Base)
}

// requireRetryKnownAfterCrash opens a crash clone of mem's dir and
// requires it know producer 7's first batch (requireRetryKnown).
func requireRetryKnownAfterCrash(t *testing.T, mem *vfs.MemFS, dir string) *plog.Partition {
	t.Helper()
	crashed, err := plog.Open(dir, plog.Config{FS: mem.CrashClone(vfs.CrashOptions{})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = crashed.Close() })
	requireRetryKnown(t, crashed, "after a crash")
	return crashed
}
