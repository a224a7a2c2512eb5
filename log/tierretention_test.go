package log_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestTierRetentionBytesCountsCopiesOnce: total retention counts the bytes
// of the whole log, copies still held locally once (Kafka's rule: the
// remote-only bytes plus the local bytes). A log smaller than
// RetentionBytes loses nothing; one past it loses its oldest copies
// until it is not.
func TestTierRetentionBytesCountsCopiesOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention int64
		deletes   bool
	}{
		{"under", 12000, false}, // the log is 11,520 bytes
		{"over", 8000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			st := plog.NewDirRemoteStorage("/remote", mem)
			cfg := tierDirConfig(mem, st)
			cfg.Remote.LocalRetentionBytes = 5000
			cfg.Remote.RetentionBytes = tc.retention
			d, err := plog.OpenDir("/data", cfg)
			require.NoError(t, err)
			defer d.Close()
			p, err := d.CreatePartition("t", 0)
			require.NoError(t, err)
			appendN(t, p, 120)
			d.RunTierPass()
			d.RunTierPass()
			s := p.Stats()
			require.Positive(t, s.LogStartOffset, "local retention deleted copied segments")
			var remoteOnly int64 // the copies below the local start
			for off := s.Remote.LogStartOffset; off < s.LogStartOffset; {
				r, err := p.ReadFrom(off, 1)
				require.NoError(t, err)
				remoteOnly += int64(len(r.Bytes()))
				off = r.NextOffset()
				require.NoError(t, r.Close())
			}
			whole := remoteOnly + s.Size
			if !tc.deletes {
				assert.Zero(t, s.Remote.Deletes, "total retention deleted copies of a log of %d bytes", whole)
				assert.Equal(t, int64(0), s.Remote.LogStartOffset)
				return
			}
			assert.Positive(t, s.Remote.Deletes)
			// Deleting one more copy (at most a segment, 1,024 bytes)
			// would have taken the whole log under RetentionBytes.
			assert.Less(t, whole-1024, tc.retention, "the whole log after the pass")
		})
	}
}

// TestTierRetentionUsesConfigNow: local and total retention by time read
// Config.Now, the clock of every time-based rule.
func TestTierRetentionUsesConfigNow(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var now time.Time
	mem := vfs.NewMem()
	st := plog.NewDirRemoteStorage("/remote", mem)
	cfg := tierDirConfig(mem, st)
	cfg.Config.Now = func() time.Time { return now }
	cfg.Remote.LocalRetentionBytes = 0
	cfg.Remote.LocalRetentionMs = 60_000
	cfg.Remote.RetentionMs = 120_000
	d, err := plog.OpenDir("/data", cfg)
	require.NoError(t, err)
	defer d.Close()
	p, err := d.CreatePartition("t", 0)
	require.NoError(t, err)
	now = t0.Add(10 * time.Second)
	for i := range 120 {
		_, err := p.AppendBatch(logtest.MakeBatch(1, 10, t0.UnixMilli()+int64(i), byte(i)))
		require.NoError(t, err)
	}
	d.RunTierPass()
	s := p.Stats()
	require.Positive(t, s.Remote.Segments)
	require.Zero(t, s.Remote.LocalSegmentsDeleted, "records 10 s old by Config.Now, local retention 60 s")

	now = t0.Add(90 * time.Second)
	d.RunTierPass()
	s = p.Stats()
	require.Positive(t, s.Remote.LocalSegmentsDeleted, "records 90 s old by Config.Now, local retention 60 s")
	require.Zero(t, s.Remote.Deletes, "records 90 s old by Config.Now, total retention 120 s")

	now = t0.Add(200 * time.Second)
	d.RunTierPass()
	require.Positive(t, p.Stats().Remote.Deletes, "records 200 s old by Config.Now, total retention 120 s")
}
