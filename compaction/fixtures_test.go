package compaction

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// TestKafkaConsumerOffsetsFixtures reads partition directories a Kafka
// broker compacted and compacts them further.
func TestKafkaConsumerOffsetsFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/kafka-*/__consumer_offsets-*")
	require.GreaterOrEqual(t, len(dirs), 6, "fixtures missing: %v", dirs)
	for _, src := range dirs {
		t.Run(src, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(src))
			require.NoError(t, os.MkdirAll(dir, 0o755))
			files, _ := os.ReadDir(src)
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(src, f.Name()))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644))
			}
			l, err := openTestLog(vfs.Default, dir, segment.Config{MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}, 1<<20)
			require.NoError(t, err)
			defer l.close()
			before := l.readAll(t)
			require.NotEmpty(t, before, "no records")
			// make every fixture segment cleanable
			require.NoError(t, l.roll())
			now := time.Now()
			c, _ := NewCompactor(compactCfg(&now))
			_, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			after := l.readAll(t)
			require.True(t, maps.Equal(fold(before), fold(after)), "table changed:\n%v\n%v", fold(before), fold(after))
			byOff := map[int64]rec{}
			for _, r := range before {
				byOff[r.Offset] = r
			}
			for _, r := range after {
				require.Equal(t, r, byOff[r.Offset], "record at %d changed", r.Offset)
			}
			// Past every horizon, the tombstones go as well.
			now = now.Add(48 * time.Hour)
			l.roll()
			_, err = c.Apply(context.Background(), l)
			require.NoError(t, err)
			got := l.readAll(t)
			require.True(t, maps.Equal(fold(before), fold(got)), "table changed after the horizon")
			t.Logf("%d records -> %d -> %d", len(before), len(after), len(l.readAll(t)))
		})
	}
}
