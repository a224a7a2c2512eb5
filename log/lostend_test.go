package log_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// lostEndDir is the directory the lost-end tests write.
const lostEndDir = "/kafka/lost-0"

// appendOnes appends n one-record batches to p.
func appendOnes(t *testing.T, p *plog.Partition, n int) {
	t.Helper()
	for i := range n {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 20, 1_700_000_000_000+int64(i), byte(i)))
		require.NoError(t, err)
	}
}

// removeLastSegments removes the files of the k newest segments of dir in
// fs (what a lost disk write or a careless hand does) and makes that
// durable; it returns the base of the oldest one removed.
func removeLastSegments(t *testing.T, fs *vfs.MemFS, k int) int64 {
	t.Helper()
	names, err := fs.List(lostEndDir)
	require.NoError(t, err)
	var bases []int64
	for _, n := range names {
		if base, ok := strings.CutSuffix(n, segment.LogSuffix); ok && len(base) == 20 {
			off, kind, ok := segment.ParseFileName(n)
			require.True(t, ok && kind == segment.LogSuffix, n)
			bases = append(bases, off)
		}
	}
	require.Greater(t, len(bases), k)
	for _, b := range bases[len(bases)-k:] {
		for _, kind := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
			_ = fs.Remove(filepath.Join(lostEndDir, segment.FileName(b, kind)))
		}
	}
	fs.SyncAll()
	return bases[len(bases)-k]
}

// reopenLost opens the crashed copy twice: under StrictRecovery, which
// must refuse, and under DefaultRecovery, which must open at end and log
// an error naming what is past the log end.
func reopenLost(t *testing.T, fs *vfs.MemFS, cfg plog.Config, end int64, names string) {
	t.Helper()
	cfg.FS = fs
	cfg.Recovery = plog.StrictRecovery{}
	_, err := plog.Open(lostEndDir, cfg)
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)
	assert.Contains(t, err.Error(), names)

	var logs bytes.Buffer
	cfg.Recovery = plog.DefaultRecovery{}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p, err := plog.Open(lostEndDir, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	assert.Equal(t, end, p.LogEndOffset())
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), "past the log end")
	assert.Contains(t, logs.String(), names)
}

// TestLostActiveSegmentWithEpochAboveEnd (issue 28, case 6): under
// per-append durability (FlushMessages 1) with leader epochs, a crash
// after which the active segment's files are gone loses acknowledged,
// synced records; the leader epoch entry written after them survives
// above the recovered end. Open used to succeed silently, under
// StrictRecovery too. The partition now makes the log below a new epoch
// entry durable and raises the recovery point to it first, so the loss
// shows as a recovery point past the log end: StrictRecovery refuses,
// DefaultRecovery opens at the end and logs an error.
func TestLostActiveSegmentWithEpochAboveEnd(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, FlushMessages: 1, SegmentBytes: 2048, SegmentIndexBytes: 1024, StampLeaderEpoch: true}
	p, err := plog.Open(lostEndDir, cfg)
	require.NoError(t, err)
	appendOnes(t, p, 290)
	require.NoError(t, p.SetLeaderEpoch(5))
	appendOnes(t, p, 10)
	require.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 0}, {Epoch: 5, StartOffset: 290}}, p.LeaderEpochs())
	clone := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())

	base := removeLastSegments(t, clone, 1)
	require.Less(t, base, int64(290))
	reopenLost(t, clone, cfg, base, "recovery point")
}

// TestLostSegmentsWithSnapshotAboveEnd (issue 28, case 6): a producer
// snapshot is written only once the batches below it are durable, so a
// snapshot past the recovered end means synced batches are missing, even
// without a recovery point to say so (a directory that has none, as a
// partition of Kafka's layout). Open used to remove such a snapshot
// without a word.
func TestLostSegmentsWithSnapshotAboveEnd(t *testing.T) {
	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, FlushMessages: 1, SegmentBytes: 2048, SegmentIndexBytes: 1024}
	p, err := plog.Open(lostEndDir, cfg)
	require.NoError(t, err)
	appendOnes(t, p, 300)
	require.NoError(t, p.Sync())
	clone := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())

	base := removeLastSegments(t, clone, 2)
	require.NoError(t, clone.Remove(filepath.Join(lostEndDir, plog.RecoveryPointCheckpointFile)))
	clone.SyncAll()
	reopenLost(t, clone, cfg, base, "producer snapshot")
}

// TestEpochAboveEndAfterCrashIsNormal (issue 28, case 6): under the
// default flush policy a leader epoch entry is durable before the batches
// of its epoch, which need not be: a crash that loses them leaves the
// entry past the log end, which is normal. Open drops it and says
// nothing, under StrictRecovery too (allowing the torn tails a crash
// leaves: the segment the last batches went to is one, empty).
func TestEpochAboveEndAfterCrashIsNormal(t *testing.T) {
	mem := vfs.NewMem()
	// The rolls' flushes wait for explicit steps: Sync is the only one.
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 2048, SegmentIndexBytes: 1024, StampLeaderEpoch: true})
	p, err := plog.Open(lostEndDir, cfg)
	require.NoError(t, err)
	appendOnes(t, p, 100)
	require.NoError(t, p.Sync())
	appendOnes(t, p, 30)
	require.NoError(t, p.SetLeaderEpoch(5))
	appendOnes(t, p, 10)
	clone := mem.CrashClone(vfs.CrashOptions{}) // the synced state: 100 records
	require.NoError(t, p.Close())

	var logs bytes.Buffer
	cfg.FS = clone
	cfg.Recovery = plog.StrictRecovery{AllowTornTail: true}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p, err = plog.Open(lostEndDir, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	assert.Equal(t, int64(100), p.LogEndOffset())
	assert.Equal(t, []plog.EpochStart{{Epoch: 0, StartOffset: 0}}, p.LeaderEpochs())
	assert.NotContains(t, logs.String(), "level=ERROR")
}
