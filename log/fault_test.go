package log_test

import (
	"github.com/stretchr/testify/require"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestAppendWriteFailure checks that a failed write publishes nothing and
// the next good append gets the same base (law 2, law 8's "partition
// stays usable").
func TestAppendWriteFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		rule vfs.Rule
		// manual leaves the spare segment to the test (none here), so
		// that the roll creates its segment and no background creation
		// takes the rule's one failure.
		manual bool
	}{
		{"log write fails", vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite, vfs.OpWriteAt), Match: isLog}, false},
		{"log write is short", vfs.Rule{Kinds: vfs.Kinds(vfs.OpWrite, vfs.OpWriteAt), Match: isLog, ShortWrite: 100}, false},
		{"roll cannot create the next segment", vfs.Rule{Kinds: vfs.Kinds(vfs.OpCreate), Match: isLog}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := vfs.NewInjector(vfs.Default)
			cfg := plog.Config{FS: in, SegmentBytes: 4096}
			if c.manual {
				cfg = plog.WithManualRollFlush(cfg)
			}
			dir := filepath.Join(t.TempDir(), "t-0")
			p, err := plog.Open(dir, cfg)
			require.NoError(t, err)
			defer func() { _ = p.Close() }()
			m := logtest.NewModel(0, false)
			for i := 0; i < 10; i++ {
				b := logtest.MakeBatch(3, 100, int64(i), 1)
				base, err := p.AppendBatch(b)
				require.NoError(t, err)
				require.NoError(t, m.AppendBatch(b, base))
			}
			in.Add(c.rule)
			var failed bool
			for i := 0; i < 20 && !failed; i++ {
				end := p.LogEndOffset()
				b := logtest.MakeBatch(3, 100, int64(100+i), 2)
				base, err := p.AppendBatch(b)
				if err != nil {
					require.ErrorIs(t, err, vfs.ErrInjected)
					require.Equal(t, end, p.LogEndOffset())
					failed = true
					continue
				}
				require.Equal(t, end, base)
				require.NoError(t, m.AppendBatch(b, base))
			}
			require.True(t, failed, "the rule never fired")
			require.NoError(t, logtest.Check(p, m))
			b := logtest.MakeBatch(2, 10, 500, 3)
			base, err := p.AppendBatch(b)
			require.NoError(t, err)
			require.Equal(t, m.LogEndOffset(), base)
			require.NoError(t, m.AppendBatch(b, base))
			require.NoError(t, logtest.Check(p, m))
			require.NoError(t, p.Close())
			p, err = plog.Open(dir, cfg)
			require.NoError(t, err)
			m.Reopen()
			require.NoError(t, logtest.Check(p, m))
		})
	}
}

// isLog matches an operation on a .log, under a temporary suffix too: a
// spare segment's (*.log.spare.deleted), whose descriptor keeps that name
// in the operations the Injector sees after a roll renamed it.
func isLog(op vfs.Op) bool {
	name := filepath.Base(op.Path)
	return strings.HasSuffix(name, ".log") || strings.Contains(name, ".log.")
}

// TestTimeRoll checks segment.ms with a fake clock and batch timestamps.
func TestTimeRoll(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	// The batches run ahead of the frozen clock: no after-limit here.
	p, _ := openT(t, plog.Config{SegmentTime: time.Hour, Now: func() time.Time { return now }, MessageTimestampAfterMax: plog.NoTimestampLimit})
	ms := now.UnixMilli()
	for _, ts := range []int64{ms, ms + 10*60_000, ms + 59*60_000} {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, ts, 0))
		require.NoError(t, err)
	}
	require.Equal(t, 1, len(p.SegmentInfos()))
	_, err := p.AppendBatch(logtest.MakeBatch(1, 10, ms+61*60_000, 0)) // an hour after the first batch
	require.NoError(t, err)
	segs := p.SegmentInfos()
	require.Equal(t, 2, len(segs))
	require.Equal(t, int64(3), segs[1].BaseOffset)

	// Without timestamps the wall clock since the segment was created
	// counts.
	_, err = p.AppendBatch(logtest.MakeBatch(1, 10, -1, 0))
	require.NoError(t, err)

	// A negative SegmentTime never rolls by time.
	q, _ := openT(t, plog.Config{SegmentTime: -1})
	for _, ts := range []int64{0, 1 << 40} {
		_, err := q.AppendBatch(logtest.MakeBatch(1, 10, ts, 0))
		require.NoError(t, err)
	}
	require.Equal(t, 1, len(q.SegmentInfos()))
}
