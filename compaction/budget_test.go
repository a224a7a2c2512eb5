package compaction

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
)

// TestCompactionUnderSegmentBudget: key compaction and retention work on
// a partition whose sealed segments a budget of one keeps closed: the
// scans, the grouping (index entry counts of closed segments), the
// renames of the swap and the deletions reopen what they need, and the
// records read back are the same.
func TestCompactionUnderSegmentBudget(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := "/p/topic-3"
			if name == "os" {
				fsys, dir = vfs.Default, t.TempDir()+"/topic-3"
			}
			pcfg := plog.Config{FS: fsys, SegmentBytes: 700, SegmentIndexBytes: 4096, IndexIntervalBytes: 64, MaxOpenSegments: 1}
			p, err := plog.Open(dir, pcfg)
			require.NoError(t, err)
			now := time.UnixMilli(1_700_000_000_000)
			appendPartition(t, p, 30, 4, now.UnixMilli())
			// A roll's background flush holds the segments it syncs open
			// (they are in use, which the budget allows); Sync waits for a
			// flush under way and leaves the later ones nothing to do, so
			// what follows sees the partition at rest.
			require.NoError(t, p.Sync())
			require.LessOrEqual(t, p.Stats().SegmentBudget.Open, 1)
			before := readPartition(t, p)
			cfg := compactCfg(&now)
			cfg.CleanupPolicy = "compact,delete"
			cfg.Retention = -1
			ps, err := Policies(cfg)
			require.NoError(t, err)
			for _, pol := range ps {
				_, err := pol.Apply(context.Background(), p)
				require.NoError(t, err, "%s", pol.Name())
			}
			after := readPartition(t, p)
			require.True(t, maps.Equal(fold(before), fold(after)), "%d -> %d records", len(before), len(after))
			require.Less(t, len(after), len(before))
			st := p.Stats().SegmentBudget
			require.LessOrEqual(t, st.Open, 1, "%+v", st)
			require.Positive(t, st.Reopens, "%+v", st)
			require.NoError(t, p.Close())
			p, err = plog.Open(dir, pcfg)
			require.NoError(t, err)
			got := readPartition(t, p)
			require.Equal(t, fmt.Sprint(after), fmt.Sprint(got))
			r, err := NewRetention(Config{Retention: -1, RetentionBytes: 1})
			require.NoError(t, err)
			_, err = r.Apply(context.Background(), p)
			require.NoError(t, err)
			require.Len(t, p.SegmentInfos(), 1, "retention by size keeps the active segment")
			require.NoError(t, p.Close())
		})
	}
}
