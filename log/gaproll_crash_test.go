package log_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestGapRollThenRollCrash: a follower's append across a 2^31-offset gap
// rolls to a new segment above the log end (persisting the recovery point
// at its base), then an append past that segment's 32-bit relative offsets
// rolls again before the rolls' flush ran. A crash loses the gap
// segment's batch: the segment is empty, no longer the last one, and the
// gap before it lies below the recovery point, explained by nothing left
// in either segment. TestStateMachine found Open refusing such a log
// ("offsets [...] are missing ... no compaction explains the gap").
func TestGapRollThenRollCrash(t *testing.T) {
	const dir = "/kafka/gap-roll-roll-0"
	mem := vfs.NewMem()
	cfg := plog.WithManualRollFlush(plog.Config{FS: mem, SegmentBytes: 1500, SegmentIndexBytes: memIndexBytes})
	p, err := plog.Open(dir, cfg)
	require.NoError(t, err)
	_, err = p.AppendAssigned(recordSet(t, 0, assigned{base: 0, n: 3}))
	require.NoError(t, err)
	// Last offset 3+2^31-1+20: the roll's segment starts at 24, above the
	// log end 3; the batch lies 2^31-1 offsets above it.
	gapBase := int64(3) + math.MaxInt32
	end, err := p.AppendAssigned(recordSet(t, 0, assigned{base: gapBase, n: 21}))
	require.NoError(t, err)
	require.Equal(t, gapBase+21, end)
	// The next offset is past the gap segment's relative offsets: the
	// append rolls again.
	b := logtest.MakeBatch(2, 10, 1_700_000_000_500, 7)
	base, err := p.AppendBatch(b)
	require.NoError(t, err)
	require.Equal(t, end, base)
	require.Len(t, p.SegmentInfos(), 3)

	// The crash keeps the directory entries and the last batch but not
	// the gap segment's unsynced data: its .log is empty.
	segs := p.SegmentInfos()
	clone := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())
	f, err := clone.OpenReadWrite(filepath.Join(dir, segment.FileName(segs[1].BaseOffset, segment.LogSuffix)))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(0))
	require.NoError(t, f.Close())
	// Every policy that accepts a torn tail opens it; the strict one
	// refuses the cut (nothing after the recovery point was promised).
	crashed := clone
	for _, policy := range []plog.RecoveryPolicy{plog.DefaultRecovery{}, plog.StrictRecovery{AllowTornTail: true}, checkedPolicy{t}} {
		clone := crashed.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
		cfg.FS, cfg.Recovery = clone, policy
		p, err = plog.Open(dir, cfg)
		require.NoError(t, err, "%T", policy)
		m := logtest.NewModel(0, false)
		require.NoError(t, m.Append(recordSet(t, 0, assigned{base: 0, n: 3})))
		require.NoError(t, m.Append(recordSet(t, 0, assigned{base: gapBase, n: 21})))
		require.NoError(t, m.AppendBatch(b, base))
		require.NoError(t, m.Crash(p.LogEndOffset(), p.HighWatermark()))
		require.NoError(t, logtest.Check(p, m))
		require.NoError(t, p.Close())
		p, err = plog.Open(dir, cfg)
		require.NoError(t, err, "%T: clean reopen", policy)
		m.Reopen()
		require.NoError(t, logtest.Check(p, m))
		require.NoError(t, p.Close())
	}
	cfg.FS, cfg.Recovery = crashed.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100}), plog.StrictRecovery{}
	_, err = plog.Open(dir, cfg)
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)
	require.NotContains(t, err.Error(), "no compaction explains the gap")
}
