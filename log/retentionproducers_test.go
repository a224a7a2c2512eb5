package log_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// retentionWithSnapshotHook builds the partition of
// TestDeletedSegmentsProducersSurviveCrash (producer 7's batch at 0-1,
// producer 9's open transaction at 2, synced, rolled with the roll's
// snapshot at 3 still pending) on an Injector and runs retention over the
// first segment; hook sees every operation from the deletion on.
func retentionWithSnapshotHook(t *testing.T, dir string, mem *vfs.MemFS, hook func(op vfs.Op) error) (*plog.Partition, plog.Config, error) {
	t.Helper()
	in := vfs.NewInjector(mem)
	var mu sync.Mutex
	armed := false
	in.SetHook(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if !armed {
			return nil
		}
		return hook(op)
	})
	cfg := plog.WithManualRollFlush(plog.Config{FS: in})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	_, err = p.AppendBatch(pb{pid: 7, seq: 0, n: 2}.bytes(t)) // offsets 0-1
	require.NoError(t, err)
	_, err = p.AppendBatch(pb{pid: 9, seq: 0, n: 1, txn: true}.bytes(t)) // offset 2
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	require.NoError(t, p.Roll()) // snapshot at 3, pending
	segs, err := p.Segments()
	require.NoError(t, err)
	mu.Lock()
	armed = true
	mu.Unlock()
	err = p.DeleteSegments(segs[:1])
	for _, s := range segs {
		require.NoError(t, s.Unref())
	}
	mu.Lock()
	armed = false
	mu.Unlock()
	return p, cfg, err
}

// TestRetentionCrashBeforeProducerSnapshot: retention over a segment
// holding the only durable record of its producers writes the producer
// snapshot at the first segment kept before it deletes anything. A crash
// while that snapshot is written must find the log as it was, the
// producers known. Before, the log start checkpoint moved first: the Open
// after the crash finished the deletion (the segment lay wholly below the
// log start) with no snapshot at or above it, and forgot producer 9's open
// transaction and producer 7's batch (laws 4, 10 and 11).
func TestRetentionCrashBeforeProducerSnapshot(t *testing.T) {
	const dir = "/kafka/retention-crash-producers-0"
	mem := vfs.NewMem()
	var crashed *vfs.MemFS
	_, cfg, err := retentionWithSnapshotHook(t, dir, mem, func(op vfs.Op) error {
		if crashed == nil && op.Kind == vfs.OpCreate && strings.Contains(op.Path, ".snapshot") {
			crashed = mem.CrashClone(vfs.CrashOptions{})
		}
		return nil
	})
	require.NoError(t, err)
	require.NotNil(t, crashed, "the deletion wrote a producer snapshot")

	cfg.FS = crashed
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	open, err := p.OpenTransactions()
	require.NoError(t, err)
	require.Len(t, open, 1, "producer 9's transaction is open")
	assert.Equal(t, int64(9), open[0].ProducerID)
	assert.Equal(t, int64(2), open[0].FirstOffset)
	info, err := p.AppendBatchInfo(pb{pid: 7, seq: 0, n: 2}.bytes(t))
	require.NoError(t, err)
	assert.True(t, info.Duplicate, "producer 7's retry is known")
	assert.Equal(t, int64(0), info.Base)
}

// TestRetentionSnapshotFailureChangesNothing: when the producer snapshot
// retention writes before deleting a segment fails, DeleteSegments returns
// the error and the partition is as it was (law 8): the log start offset
// and the segments stay, and a later retention succeeds. Before, the log
// start checkpoint had already moved past the segment it kept.
func TestRetentionSnapshotFailureChangesNothing(t *testing.T) {
	const dir = "/kafka/retention-snapshot-fails-0"
	mem := vfs.NewMem()
	p, _, err := retentionWithSnapshotHook(t, dir, mem, func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate && strings.Contains(op.Path, ".snapshot") {
			return vfs.ErrInjected
		}
		return nil
	})
	require.ErrorIs(t, err, vfs.ErrInjected)
	assert.Equal(t, int64(0), p.LogStartOffset())
	segs, err := p.Segments()
	require.NoError(t, err)
	bases := make([]int64, len(segs))
	for i, s := range segs {
		bases[i] = s.BaseOffset()
		require.NoError(t, s.Unref())
	}
	assert.Equal(t, []int64{0, 3}, bases)
}
