package log_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
	"github.com/partlog/partlog/segment"
)

// TestRecoveryCutsHoleBelowLastIndexEntry: a crash reached the disk out of
// order (docs/crash-safety.md, assumption 4: unsynced writes may be
// reordered): in a sealed segment above the recovery point the first
// batch's write was lost (zeros) while the later batches and the offset
// index entries for them landed, and the time index's entries were lost.
// Open found the log's end from the last offset index entries, past the
// hole, then read the segment's largest timestamp (and its first batch's)
// from the start, met the zeros and failed with a corruption error,
// before recovery could look at the segment: the partition could not be
// opened after an ordinary power loss. Now load takes where the batches
// stop framing from the start, and DefaultRecovery cuts the log at the
// hole, keeping every synced batch (DESIGN law 4); StrictRecovery refuses
// it as damage with valid batches after it.
func TestRecoveryCutsHoleBelowLastIndexEntry(t *testing.T) {
	const dir = "/kafka/hole-0"
	mem := vfs.NewMem()
	cfg := func(fs vfs.FS, rp plog.RecoveryPolicy) plog.Config {
		return plog.WithManualRollFlush(plog.Config{FS: fs, SegmentIndexBytes: memIndexBytes, IndexIntervalBytes: 1, Recovery: rp})
	}
	p, err := plog.Open(dir, cfg(mem, nil))
	require.NoError(t, err)
	m := logtest.NewModel(0, false)
	for i := range 2 {
		b := logtest.MakeBatch(2, 40, int64(1000+i), byte(i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	require.NoError(t, p.Sync())
	m.Sync()
	require.NoError(t, p.Roll())
	second := p.LogEndOffset()
	for i := range 4 {
		b := logtest.MakeBatch(2, 40, int64(2000+i), byte(10+i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	require.NoError(t, p.Roll())
	for i := range 2 {
		b := logtest.MakeBatch(1, 40, int64(3000+i), byte(20+i))
		base, err := p.AppendBatch(b)
		require.NoError(t, err)
		require.NoError(t, m.AppendBatch(b, base))
	}
	// Everything unsynced reached the disk but the second segment's
	// first batch (zeros where it was) and its time index entries.
	state := mem.CrashClone(vfs.CrashOptions{UnsyncedDataPercent: 100})
	require.NoError(t, p.Close())
	zero := func(name string, n int64) {
		f, err := state.OpenReadWrite(filepath.Join(dir, name))
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		if n < 0 {
			n = st.Size()
		}
		_, err = f.WriteAt(make([]byte, n), 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	first := m.Batches()[2]
	require.Equal(t, second, first.BaseOffset)
	zero(segment.FileName(second, segment.LogSuffix), int64(len(first.Bytes)))
	trim := func(name string, size int64) {
		f, err := state.OpenReadWrite(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	// The roll's flush trims the sealed indexes before it syncs the .log:
	// the trims reached the disk, the offset entries (one for each batch
	// but the first) too, the time entries did not.
	trim(segment.FileName(second, segment.IndexSuffix), 3*8)
	trim(segment.FileName(second, segment.TimeIndexSuffix), 3*12)
	zero(segment.FileName(second, segment.TimeIndexSuffix), -1)

	strict := state.CrashClone(vfs.CrashOptions{})
	_, err = plog.Open(dir, cfg(strict, plog.StrictRecovery{}))
	require.ErrorIs(t, err, plog.ErrRecoveryRefused)

	q, err := plog.Open(dir, cfg(state, nil))
	require.NoError(t, err)
	require.Equal(t, second, q.LogEndOffset(), "the log is cut at the hole")
	require.NoError(t, m.Crash(q.LogEndOffset(), q.HighWatermark()))
	require.NoError(t, logtest.Check(q, m))
	require.NoError(t, q.Verify())
	require.NoError(t, q.Close())
}
