package log_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestEpochOfBatchBelowLogStartAfterTruncateAndCrash is a TestStateMachine
// history (rapid seed 17622019715672729009, not replayable: whether the
// crash kept a roll's segment decided it) made deterministic. Every record
// deleted (DeleteRecordsBefore up to the log end) leaves the leader epoch
// cache with its first entry moved up to the log start, which is the log
// end; a batch appended after it and cut again by TruncateTo takes that
// entry with it (it starts at the new end, Kafka's truncateFromEnd). A
// crash then reopens through recovery, which reads the segment holding the
// recovery point from its base: the batch below the log start is read
// again and its epoch moved up to the log start, an entry at the log end.
// docs/crash-safety.md ("Leader epochs") allows exactly that: after a
// crash the cache is the one the surviving batches imply, plus at most one
// entry at the log end; the model took only an entry it had itself.
func TestEpochOfBatchBelowLogStartAfterTruncateAndCrash(t *testing.T) {
	mem := vfs.NewMem()
	dir := "/data/epochs-0"
	cfg := plog.Config{FS: mem, SegmentIndexBytes: 1024}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	m := logtest.NewModel(0, false)

	b := batch.Batch(logtest.MakeBatch(1, 5, 1, 1))
	b.SetPartitionLeaderEpoch(0)
	_, err = p.AppendAssigned(b)
	require.NoError(t, err)
	require.NoError(t, m.Append(b))
	require.NoError(t, p.DeleteRecordsBefore(1))
	require.NoError(t, m.DeleteRecordsBefore(1))
	require.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 1}}, p.LeaderEpochs())

	next := logtest.MakeBatch(4, 0, 2, 2)
	base, err := p.AppendBatch(next)
	require.NoError(t, err)
	require.NoError(t, m.AppendBatch(next, base))
	require.NoError(t, p.TruncateTo(3))
	require.NoError(t, m.TruncateTo(3))
	require.NoError(t, logtest.Check(p, m))

	clone := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())
	cfg.FS = clone
	p, err = plog.Open(dir, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
	require.NoError(t, logtest.Check(p, m))
}
