package log_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestRecoveryCutsZeroedEntryAfterTornSegment: after a crash, two sealed
// segments above the recovery point lost data: the first kept only part of
// its batch (a torn tail), the second kept its batch's first 13 bytes and
// zeros after them (the file was extended but the data never written).
// The zeros have magic byte 0, and recovery took them for a legacy message
// that fails its CRC, which it may never cut: Open refused the partition
// under every policy (found by TestTxnCrash). They are no legacy message
// (legacy.Is), so recovery cuts the log at the torn tail as for any other
// crash. A real legacy message there is still never cut
// (TestRecoveryNeverRemovesLaterLegacySegments).
func TestRecoveryCutsZeroedEntryAfterTornSegment(t *testing.T) {
	const dir = "/kafka/zeroed-0"
	mem := vfs.NewMem()
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem, SegmentIndexBytes: memIndexBytes})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	var bases []int64
	for i := range 3 {
		base, err := p.AppendBatch(logtest.MakeBatch(2, 40, int64(1000+i), byte(i)))
		require.NoError(t, err)
		bases = append(bases, base)
		if i == 0 {
			require.NoError(t, p.Sync()) // the recovery point: batch 0
		}
		require.NoError(t, p.Roll())
	}
	// Everything reaches the disk (the rolls' flush never ran), then the
	// damage: segment 1 torn inside its batch, segment 2 zeroed after its
	// batch's first 13 bytes (the offset, the length and one byte of the
	// leader epoch).
	crashed := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())
	logPath := func(base int64) string { return filepath.Join(dir, segment.FileName(base, segment.LogSuffix)) }
	f, err := crashed.OpenReadWrite(logPath(bases[1]))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(30))
	require.NoError(t, f.Close())
	f, err = crashed.OpenReadWrite(logPath(bases[2]))
	require.NoError(t, err)
	st, err := f.Stat()
	require.NoError(t, err)
	head := make([]byte, batch.LogOverhead)
	_, err = f.ReadAt(head, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(bases[2]), binary.BigEndian.Uint64(head))
	_, err = f.WriteAt(make([]byte, st.Size()-batch.LogOverhead-1), batch.LogOverhead+1)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	for _, policy := range []plog.RecoveryPolicy{plog.DefaultRecovery{}, checkedPolicy{t}} {
		clone := crashed.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
		cfg.FS, cfg.Recovery = clone, policy
		p, err := plog.Open(dir, cfg)
		require.NoError(t, err, "%T", policy)
		require.Equal(t, bases[1], p.LogEndOffset(), "%T: the log ends after the last whole batch", policy)
		require.NoError(t, p.Verify())
		require.NoError(t, p.Close())
	}
}
