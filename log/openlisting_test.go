package log_test

import (
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/partlog/partlog/internal/vfs"
	plog "github.com/partlog/partlog/log"
	"github.com/partlog/partlog/log/logtest"
)

// TestCleanOpenListsPartitionDirOnce: a clean OpenDir reads each
// partition directory's listing once (the directory check's), and takes
// the producer snapshots from it rather than listing the directory again
// (for the snapshots past the log end, their removal, the newest). After a
// crash the recovery may change the directory, and the listings are the
// directory's own; either way every partition reads back as written,
// producer state included.
func TestCleanOpenListsPartitionDirOnce(t *testing.T) {
	const parts = 4
	mem := vfs.NewMem()
	inj := vfs.NewInjector(mem)
	var mu sync.Mutex
	lists := map[string]int{}
	inj.SetHook(func(op vfs.Op) error {
		if op.Kind == vfs.OpList {
			mu.Lock()
			lists[op.Path]++
			mu.Unlock()
		}
		return nil
	})
	cfg := plog.DirConfig{Config: plog.Config{FS: inj, SegmentIndexBytes: 1024}, MaxOpenSegments: 2}
	d, err := plog.OpenDir("/logs", cfg)
	require.NoError(t, err)
	models := make([]*logtest.Model, parts)
	for i := range parts {
		p, err := d.CreatePartition("t", int32(i))
		require.NoError(t, err)
		models[i] = logtest.NewModel(0, false)
		for j := range 3 {
			bt := pb{pid: int64(100 + i), seq: int32(2 * j), n: 2}.bytes(t)
			base, err := p.AppendBatch(append([]byte(nil), bt...))
			require.NoError(t, err)
			require.NoError(t, models[i].AppendBatch(bt, base))
		}
	}
	require.NoError(t, d.Close())

	check := func(step string, wantLists int) {
		t.Helper()
		for _, m := range models {
			m.Reopen()
		}
		mu.Lock()
		clear(lists)
		mu.Unlock()
		d, err := plog.OpenDir("/logs", cfg)
		require.NoError(t, err)
		mu.Lock()
		for i := range parts {
			dir := path.Join("/logs", plog.TopicPartition{Topic: "t", Partition: int32(i)}.String())
			if wantLists > 0 {
				require.Equal(t, wantLists, lists[dir], "%s: listings of %s", step, dir)
			} else {
				require.Greater(t, lists[dir], 1, "%s: listings of %s", step, dir)
			}
		}
		mu.Unlock()
		for i := range parts {
			require.NoError(t, logtest.Check(d.Partition("t", int32(i)), models[i]), "%s: partition %d", step, i)
		}
		require.NoError(t, d.Close())
	}
	check("clean open", 1)
	require.NoError(t, mem.Remove("/logs/.kafka_cleanshutdown"))
	check("open after a crash", 0)
}
