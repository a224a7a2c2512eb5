package compaction

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/vfs"
	"github.com/partlog/partlog/segment"
)

// TestKafkaConsumerOffsetsFixtures reads partition directories a Kafka
// broker compacted and compacts them further.
func TestKafkaConsumerOffsetsFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/kafka-*/__consumer_offsets-*")
	if len(dirs) < 6 {
		t.Fatalf("fixtures missing: %v", dirs)
	}
	for _, src := range dirs {
		t.Run(src, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			files, _ := os.ReadDir(src)
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(src, f.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l, err := openTestLog(vfs.Default, dir, segment.Config{MaxIndexBytes: 1 << 16, MaxSegmentBytes: 1 << 20}, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer l.close()
			before := l.readAll(t)
			if len(before) == 0 {
				t.Fatal("no records")
			}
			if err := l.roll(); err != nil { // make every fixture segment cleanable
				t.Fatal(err)
			}
			now := time.Now()
			c, _ := NewCompactor(compactCfg(&now))
			if _, err := c.Apply(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			after := l.readAll(t)
			if !maps.Equal(fold(before), fold(after)) {
				t.Fatalf("table changed:\n%v\n%v", fold(before), fold(after))
			}
			byOff := map[int64]rec{}
			for _, r := range before {
				byOff[r.Offset] = r
			}
			for _, r := range after {
				if byOff[r.Offset] != r {
					t.Fatalf("record at %d changed", r.Offset)
				}
			}
			// Past every horizon, the tombstones go as well.
			now = now.Add(48 * time.Hour)
			l.roll()
			if _, err := c.Apply(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			if got := l.readAll(t); !maps.Equal(fold(before), fold(got)) {
				t.Fatalf("table changed after the horizon")
			}
			t.Logf("%d records -> %d -> %d", len(before), len(after), len(l.readAll(t)))
		})
	}
}
