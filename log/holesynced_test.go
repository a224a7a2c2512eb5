package log_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestDamageBelowRecoveryPointRefused: a sealed segment below the recovery
// point (every batch of it synced) whose first batch reads as zeros, its
// later batches and indexes intact, found by an Open after a crash. That is
// corruption, not a torn write (law 12): Open must refuse it. Since the fix
// for a hole above the recovery point (TestRecoveryCutsHoleBelowLastIndexEntry),
// the unclean load ended the segment at the damage for recovery to decide,
// but recovery never looks below the recovery point: Open succeeded with
// the synced offsets of the segment gone (law 4) and reads skipped them.
func TestDamageBelowRecoveryPointRefused(t *testing.T) {
	const dir = "/kafka/damage-below-rp-0"
	mem := vfs.NewMem()
	cfg := plog.Config{FS: mem, SegmentIndexBytes: memIndexBytes, IndexIntervalBytes: 1}
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	var second int64
	var firstLen int
	for s := range 3 {
		if s == 1 {
			second = p.LogEndOffset()
		}
		for i := range 3 {
			b := logtest.MakeBatch(2, 40, int64(1000*s+i), byte(10*s+i))
			if s == 1 && i == 0 {
				firstLen = len(b)
			}
			_, err := p.AppendBatch(b)
			require.NoError(t, err)
		}
		require.NoError(t, p.Roll())
	}
	require.NoError(t, p.Sync())
	state := mem.CrashClone(vfs.CrashOptions{})
	require.NoError(t, p.Close())
	f, err := state.OpenReadWrite(filepath.Join(dir, segment.FileName(second, segment.LogSuffix)))
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, firstLen), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	cfg.FS = state
	q, err := plog.Open(dir, cfg)
	if err == nil {
		_ = q.Close()
	}
	require.ErrorIs(t, err, batch.ErrCorrupt, "the synced segment %d is damaged", second)
}
